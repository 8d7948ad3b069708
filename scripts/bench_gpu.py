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
imported). The tokenizer is Qwen2.5's own, rebuilt offline (``lifestack.qwen_tokens``), when the
``qwen`` extra is installed, else the trainer's offline one
(``lifestack.training.tiny_model.build_tiny_tokenizer``, about 2,000 ids); ``--tokenizer``
chooses; by default the model keeps the real 151,936-row embedding so memory
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

This file is the command and the measurement (``run_bench``); the model shape, the
builders, the step clock and the report lines are ``lifestack.training.bench``'s.
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
import shutil  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Sequence  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = Path(__file__).resolve().parent
for _p in (ROOT, SCRIPTS):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from lifestack.training.bench import (  # noqa: E402  (torch and transformers load inside its functions)
    MODEL_NAME, build_tokenizer, changed_probes, finite, grpo_args, length_probe_reward, load_model_config, load_policy,
    make_step_clock, model_config, package_version, quiet_trainer, qwen2_config_kwargs, qwen2_param_count,
    qwen_tokenizer_available, report_lines, round_up, skip_reason, time_generation, trainable_probes,
)

INSTALL_HINT = "pip install 'trl==1.14.0' 'datasets>=4.8,<4.9'   (or: pip install -r requirements.txt)"
MODES = ("peft", "full", "unsloth", "vllm")

# GPU default: one prompt x 8 completions per step (per-device batch 8 = num_generations 8), the
# trainer's MAX_COMPLETION_LENGTH (256): a reference answer is 102-156 Qwen2.5 tokens, so 128 cut
# some (scripts/sequence_lengths.py); prompts are the trainer's own, about 890-1,000 tokens.
GPU_RUN = dict(steps=6, num_generations=8, batch=8, max_completion_length=256)
# CPU: the same architecture family, scaled down (lifestack.training.bench.CPU_MODEL) so it runs in seconds.
CPU_RUN = dict(steps=2, num_generations=2, batch=2, max_completion_length=16)


def require_training_packages() -> None:
    """trl and datasets may arrive as wheels after torch/transformers: say how to get them."""
    missing = [m for m in ("trl", "datasets") if importlib.util.find_spec(m) is None]
    if missing:
        raise SystemExit(f"bench_gpu: {', '.join(missing)} not installed; install with: {INSTALL_HINT}")


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
        "versions": {k: package_version(k) for k in ("torch", "transformers", "trl", "peft", "accelerate", "datasets")},
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
        model, trainable = load_policy(train_trl, args.mode, kwargs, tok, device, dtype, args.seed, work)
        model_seconds = time.perf_counter() - t
        counts = qwen2_param_count(kwargs)
        real_counts = qwen2_param_count(qwen2_config_kwargs(load_model_config()))

        reward_funcs = list(train_trl.REWARD_FUNCS) + ([length_probe_reward] if args.probe_reward else [])
        trainer = GRPOTrainer(model=model, reward_funcs=reward_funcs,
                              args=grpo_args(train_trl, run, work / "grpo", cuda, bf16, args.mode, max_model_len,
                                             probe=args.probe_reward),
                              train_dataset=dataset, processing_class=tok)
        quiet_trainer(trainer)
        clock = make_step_clock(train_trl.RUN, sync)
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
    p.add_argument("--steps", type=int, default=None, help="GRPO steps (default 6 for the real shape, 2 for the tiny one; the first is warm-up)")
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


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = run_bench(args)
    for line in report_lines(result):
        print(line, flush=True)
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(finite(result), indent=2) + "\n", encoding="utf-8")
        print(f"[bench] wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
