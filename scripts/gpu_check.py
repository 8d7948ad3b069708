#!/usr/bin/env python
"""GPU check: one short GRPO stage for every training profile installed here.

    python scripts/gpu_check.py --json gpu_check.json     # on a CUDA machine (no hub access needed)
    python scripts/gpu_check.py --dry-run                  # anywhere: the plan + the same path on CPU

On a CUDA machine it runs ``scripts/bench_gpu.py``'s measurement once per profile —
``peft`` (transformers + PEFT LoRA), ``full`` (all weights, fp32 master weights with
autocast) and ``unsloth`` (4-bit QLoRA) when Unsloth imports — on the real
Qwen2.5-1.5B architecture with random weights (nothing is downloaded), and prints one
table: the compute precision the trainer's rule chose for this GPU
(``choose_precision``: bf16 only on compute capability 8.0+, so a T4 gets
fp16), the weights' dtype, peak GPU memory, seconds per step, generated tokens per second,
the reward code's share of step time, and how many trainable tensors the training
changed (every one must, or the run would silently learn nothing). A random model's
answers all tie on the six rewards, so every GRPO advantage would be 0 and nothing could
move: the check adds ``lifestack.training.bench.length_probe_reward`` (weight 1e-3) to
give the optimizer a signal.

``--dry-run`` needs no GPU: it prints which profiles would run or be skipped and why, the
precision the rule picks for this device and for reference GPUs (T4 7.5, A100 8.0, H100
9.0), and runs each runnable profile on the scaled-down CPU shape (2 steps), so the
whole path is checked in CI. Exit status 1 if a profile ran but left a trainable tensor
unchanged, or failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

import bench_gpu  # noqa: E402  (sets HF_HUB_OFFLINE before anything imports transformers)
from lifestack.training.bench import finite, human_bytes, report_lines, skip_reason  # noqa: E402

PROFILES = ("peft", "full", "unsloth")
REFERENCE_GPUS = {"T4": (7, 5), "A100": (8, 0), "H100": (9, 0)}


def plan(cuda: bool) -> list[dict]:
    """Which profiles run here, and why the others are skipped."""
    return [{"profile": p, "skipped": skip_reason(p, cuda)} for p in PROFILES]


def precision_table() -> dict[str, str]:
    from lifestack.training.models import choose_precision

    return {name: choose_precision(cap) for name, cap in REFERENCE_GPUS.items()}


def check_profile(profile: str, cpu: bool, steps: int | None) -> dict:
    argv = ["--mode", profile, "--probe-reward"] + (["--cpu"] if cpu else []) + (["--steps", str(steps)] if steps else [])
    return bench_gpu.run_bench(bench_gpu.parse_args(argv))


def summary_lines(results: list[dict]) -> list[str]:
    lines = ["| profile | precision | weights | peak memory | s/step | tokens/s | reward share | trainable changed |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in results:
        if r.get("skipped"):
            lines.append(f"| {r['mode']} | skipped: {r['skipped']} | | | | | | |")
        elif r.get("error"):
            lines.append(f"| {r['mode']} | FAILED: {r['error']} | | | | | | |")
        else:
            lines.append(f"| {r['mode']} | {r['precision']} | {r['weights_dtype']} | {human_bytes(r['peak_memory_bytes'])} "
                         f"({'GPU' if r['peak_memory_kind'] == 'cuda_allocated' else 'CPU RSS'}) | {r['step_time_s']:.3f} | "
                         f"{r['tokens_per_s']:.1f} | {r['reward_share']:.2%} | "
                         f"{r['trainable_tensors_changed']} of {r['trainable_tensors']} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="no GPU needed: the plan, then each profile on CPU")
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps per profile (default: bench_gpu's)")
    parser.add_argument("--json", default="", help="write every profile's figures here")
    args = parser.parse_args(argv)

    import torch

    cuda = torch.cuda.is_available() and not args.dry_run
    device = torch.cuda.get_device_name(0) if cuda else "cpu"
    capability = tuple(torch.cuda.get_device_capability()) if cuda else None
    from lifestack.training.models import choose_precision

    print(f"[gpu check] device {device}" + (f" (compute capability {capability[0]}.{capability[1]})" if capability else "")
          + f" -> precision {choose_precision(capability)}", flush=True)
    print("[gpu check] the rule on reference GPUs: "
          + ", ".join(f"{k} {v}" for k, v in precision_table().items()), flush=True)
    steps = plan(cuda)  # --dry-run: the CPU shape even on a GPU machine, so what runs here
    for row in steps:
        print(f"[gpu check] {row['profile']}: " + (f"skipped ({row['skipped']})" if row["skipped"] else
                                                  ("run on the CPU shape" if not cuda else "run")), flush=True)
    results = []
    for row in steps:
        if row["skipped"]:
            results.append({"mode": row["profile"], "skipped": row["skipped"]})
            continue
        try:
            r = check_profile(row["profile"], cpu=not cuda, steps=args.steps)
        except Exception as exc:  # report and go on: one broken profile must not hide the others
            r = {"mode": row["profile"], "error": f"{type(exc).__name__}: {exc}"[:300]}
        results.append(r)
        for line in ([] if r.get("error") or r.get("skipped") else report_lines(r)):
            print(line, flush=True)
    for line in summary_lines(results):
        print(line, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(finite({"device": device, "results": results}), indent=2) + "\n")
    bad = [r["mode"] for r in results if r.get("error")
           or (not r.get("skipped") and r["trainable_tensors_changed"] < r["trainable_tensors"])]
    if bad:
        print(f"[gpu check] FAIL: {', '.join(bad)} (failed, or left trainable tensors unchanged)", flush=True)
        return 1
    print("[gpu check] every profile that ran changed all its trainable tensors", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
