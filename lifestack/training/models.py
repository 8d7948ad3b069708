"""Loading and saving the policy: precision per device, Unsloth (4-bit QLoRA),
transformers + PEFT, the CPU profile's tiny model; stage saves, the final save and the
merged copy (SAVE_MERGED). torch, transformers, peft and unsloth are imported inside the
functions that need them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from lifestack.training.distributed import barrier, is_main_process, log
from lifestack.training.fast_cpu import speed_up
from lifestack.training.tiny_model import build_tiny_model, cpu_banner


def is_adapter(path: str | Path) -> bool:
    """A LoRA adapter folder (PEFT's ``adapter_config.json``), loaded on top of its base model."""
    return (Path(path) / "adapter_config.json").is_file()


def is_saved_model(path: str | Path) -> bool:
    """A folder holding a saved policy: full weights (``config.json``) or a LoRA adapter,
    as the trainer writes each stage and the final model (``USE_LORA`` picks which)."""
    return (Path(path) / "config.json").is_file() or is_adapter(path)


def choose_precision(capability: tuple[int, int] | None) -> str:
    """Compute precision for a CUDA device of compute ``capability`` (``(major, minor)``;
    ``None``: no GPU, so fp32).

    bf16 only where the hardware has it (Ampere and later, major >= 8). A T4 (7.5) answers
    True to ``torch.cuda.is_bf16_supported()`` but only emulates bf16, so it gets fp16.
    """
    if capability is None:
        return "fp32"
    return "bf16" if capability[0] >= 8 else "fp16"


def device_precision(cfg: dict[str, Any]) -> str:
    """This run's compute precision: fp32 in the CPU profile, else from the GPU's capability."""
    if cfg["_PROFILE"] == "cpu":
        return "fp32"
    import torch

    if not torch.cuda.is_available():
        return "fp32"
    return choose_precision(tuple(torch.cuda.get_device_capability()))


def weight_precision(precision: str, lora: bool) -> str:
    """The dtype weights are loaded in. Trained weights are always fp32 master weights (the
    half-precision compute comes from autocast, TRL's bf16/fp16 flags): at a learning rate
    of 5e-6 most bf16 weight updates round away. Only a LoRA's frozen base may sit in the
    compute precision; its adapters are fp32 (:func:`_fp32_trainable`)."""
    return precision if lora else "fp32"


def torch_dtype(precision: str):
    import torch

    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def _fp32_trainable(model) -> None:
    """Cast every trainable parameter to fp32 (PEFT usually does so already for adapters)."""
    import torch

    for param in model.parameters():
        if param.requires_grad and param.dtype != torch.float32:
            param.data = param.data.float()


def _apply_lora(model, cfg: dict[str, Any]):
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=cfg["LORA_RANK"], lora_alpha=cfg["LORA_ALPHA"], lora_dropout=0.0, task_type="CAUSAL_LM",
                        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    return get_peft_model(model, config)


def import_unsloth():
    """Import Unsloth, or stop with an install hint. Unsloth patches transformers, trl and
    peft when it is imported, so it must come before them: ``main`` calls this first."""
    try:
        import unsloth
    except ImportError as exc:
        raise SystemExit(f"DEVICE_PROFILE=unsloth but Unsloth is not importable ({exc}); "
                         "install the tested pins with `pip install --no-deps -r requirements-gpu.txt` or use --DEVICE_PROFILE=peft") from None
    return unsloth


def base_model_name(cfg: dict[str, Any]) -> str:
    """Where the profile's fresh base model loads from: the CPU profile's tiny model folder
    (``CPU_BASE_DIR``, by default ``OUTPUT_DIR/cpu_base_model``), else ``MODEL_NAME``."""
    if cfg["_PROFILE"] == "cpu":  # absolute: a LoRA adapter records it as its base, to be found from anywhere
        return str(Path(cfg["CPU_BASE_DIR"] or Path(cfg["OUTPUT_DIR"]) / "cpu_base_model").resolve())
    return cfg["MODEL_NAME"]


def load_model(cfg: dict[str, Any], init_from: str | Path | None = None, banner: bool = True, collective: bool = True):
    """(model, tokenizer) for the configured profile.

    ``init_from`` is a stage directory saved earlier (resume): its weights, or its LoRA
    adapter on top of the base model, are loaded instead of the fresh base.
    ``collective=False`` when only this process loads (rank 0's final evaluation): no
    barrier then, since the other ranks may have finished.
    """
    profile = cfg["_PROFILE"]
    precision = device_precision(cfg)
    if profile == "unsloth":
        FastLanguageModel = import_unsloth().FastLanguageModel
        model, tok = FastLanguageModel.from_pretrained(str(init_from or cfg["MODEL_NAME"]), max_seq_length=cfg["MAX_SEQ_LENGTH"],
                                                       load_in_4bit=cfg["LOAD_IN_4BIT"], dtype=torch_dtype(precision))
        if init_from is None and cfg["USE_LORA"]:
            model = FastLanguageModel.get_peft_model(
                model, r=cfg["LORA_RANK"], lora_alpha=cfg["LORA_ALPHA"], lora_dropout=0.0, random_state=cfg["SEED"],
                target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                use_gradient_checkpointing="unsloth")
        _fp32_trainable(model)
        return model, prepare_tokenizer(tok)

    import torch
    from transformers import AutoTokenizer

    if profile == "cpu":
        base = Path(base_model_name(cfg))
        if is_main_process():
            build_tiny_model(base, cfg["SEED"])
        if collective:
            barrier()  # the other ranks load what rank 0 built
        if banner:
            log(cpu_banner(cfg, base))
        name, device = str(base), "cpu"
    else:
        if not torch.cuda.is_available():
            raise SystemExit("DEVICE_PROFILE=peft needs a CUDA GPU; use --DEVICE_PROFILE=cpu for a pipeline check")
        name, device = cfg["MODEL_NAME"], "cuda"
    tok = AutoTokenizer.from_pretrained(name)
    model = load_transformers_model(name, cfg, precision, device, init_from)
    if profile == "cpu":  # the same computation, less of it (lifestack.training.fast_cpu)
        speed_up(model.get_base_model() if hasattr(model, "get_base_model") else model)
    return model, prepare_tokenizer(tok)


def load_transformers_model(name: str, cfg: dict[str, Any], precision: str, device: str,
                            init_from: str | Path | None = None):
    """The transformers (+ PEFT) model of the peft and cpu profiles, trainable weights fp32.

    ``init_from``: a stage directory (full weights, or a LoRA adapter on top of ``name``).
    """
    from transformers import AutoModelForCausalLM

    adapter = init_from is not None and is_adapter(init_from)
    dtype = torch_dtype(weight_precision(precision, cfg["USE_LORA"] or adapter))
    model = AutoModelForCausalLM.from_pretrained(str(init_from) if init_from and not adapter else name, dtype=dtype)
    model.to(device)
    if adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(init_from), is_trainable=True)
    elif cfg["USE_LORA"]:
        model = _apply_lora(model, cfg)
    _fp32_trainable(model)
    return model


def prepare_tokenizer(tok):
    """The tokenizer as the trainer and every script use it: a pad token (EOS where it has
    none), left padding as its default. Generation does not rely on that default: Unsloth
    flips it (``for_training``), so ``lifestack.training.generation`` pads left itself."""
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok


def unwrap(model):
    return getattr(model, "module", model)


def save_model(model, tokenizer, directory: Path) -> None:
    """The policy and its tokenizer in ``directory``: full weights, or the trained LoRA
    adapter alone (not the KL reference's frozen copy, ``kl_reference``)."""
    directory.mkdir(parents=True, exist_ok=True)
    core = unwrap(model)
    adapters = list(getattr(core, "peft_config", {}) or {})
    if len(adapters) > 1:
        core.save_pretrained(directory, selected_adapters=[core.active_adapter])
    else:
        core.save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def save_final(model, tokenizer, out: Path) -> list[str]:
    """Save the final model and tokenizer into ``out``; returns the file names written."""
    tmp = out / ".final_save"
    shutil.rmtree(tmp, ignore_errors=True)
    save_model(model, tokenizer, tmp)
    names = sorted(p.name for p in tmp.iterdir())
    for name in names:
        os.replace(tmp / name, out / name)
    tmp.rmdir()
    return names


def merge_method(model) -> str | None:
    """How SAVE_MERGED folds a LoRA adapter into its base model.

    - ``"unsloth_merged_16bit"``: an Unsloth model; its own ``save_pretrained_merged(...,
      save_method="merged_16bit")`` dequantises a 4-bit base and writes 16-bit weights.
    - ``"reload_16bit"``: a PEFT model over a quantised (4/8-bit) base: merging into the
      quantised weights would round the adapter's small deltas away, so the base is
      reloaded in 16-bit and the saved adapter merged into that (PEFT's advice).
    - ``"merge"``: a PEFT model over a 16/32-bit base: ``merge_and_unload`` on a copy.
    - ``None``: no adapter (full-weight training); nothing to merge.
    """
    core = unwrap(model)
    if hasattr(core, "save_pretrained_merged"):
        return "unsloth_merged_16bit"
    if not hasattr(core, "merge_and_unload"):
        return None
    base = core.get_base_model() if hasattr(core, "get_base_model") else core
    quantised = (getattr(base, "is_loaded_in_4bit", False) or getattr(base, "is_loaded_in_8bit", False)
                 or getattr(getattr(base, "config", None), "quantization_config", None) is not None)
    return "reload_16bit" if quantised else "merge"


def save_merged(model, tokenizer, directory: Path, cfg: dict[str, Any], adapter_dir: Path) -> str | None:
    """Write a merged copy (adapter folded in) that plain ``from_pretrained`` loads; returns
    the :func:`merge_method` used. ``adapter_dir`` holds the saved adapter (OUTPUT_DIR)."""
    method = merge_method(model)
    core = unwrap(model)
    if method == "unsloth_merged_16bit":
        core.save_pretrained_merged(str(directory), tokenizer, save_method="merged_16bit")
        return method
    if method == "reload_16bit":
        from peft import PeftModel
        from transformers import AutoModelForCausalLM

        half = "bf16" if device_precision(cfg) == "bf16" else "fp16"
        base_name = next(iter(core.peft_config.values())).base_model_name_or_path
        base = AutoModelForCausalLM.from_pretrained(base_name, dtype=torch_dtype(half))
        merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    elif method == "merge":
        import copy

        merged = copy.deepcopy(core).merge_and_unload()
    else:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return method
