#!/usr/bin/env python
"""Where a CPU-profile GRPO step's time goes: generation, scoring, forward/backward, overhead.

    python scripts/bench_cpu_step.py                    # 8 steps, single decisions
    python scripts/bench_cpu_step.py --horizon 3        # episode mode (3-turn episodes)
    python scripts/bench_cpu_step.py --repeats 3 --json bench.json
    python scripts/bench_cpu_step.py --init-from lifestack_model/stage_0 --warm-steps 40  # GRPO from a saved
                                                        # warm start; the warm start timed on 40 steps of a copy
    python scripts/bench_cpu_step.py --steps 4 -- --TEMPERATURE=1.0  # train_trl.py overrides (they win)

Each repeat builds the CPU profile as ``scripts/train_trl.py`` runs it (its tiny model,
the warm start, timed, a stage's prompts with their on-policy states, the stage's
``GRPOTrainer`` from ``train_trl.stage_trainer``) and trains one stage of ``--steps``
optimizer steps with a profiler attached. Each step's wall time is split into
generation (inside ``generate``), scoring (inside the reward functions),
forward/backward (the loss, the backward pass, clipping, the optimizer step) and
overhead (the remainder: TRL's batch preparation, in episode mode the environment's
turns, logging, step checkpoints). The warm start's time per step is split into writing
the demonstrations, tokenizing and the model. Printed: medians per step, each part's share of the
total wall time (the shares sum to 1) and steps per minute (60 / the median step), over
the steps of all repeats after the first ``--skip-first`` of each. The plumbing is
``lifestack.training.step_profile``. Timings depend on the machine and whatever else
runs on it: compare two versions with interleaved runs on one machine.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import train_trl as T  # noqa: E402  (the trainer itself: its constants, rewards and stage_trainer)
from lifestack.training.step_profile import (  # noqa: E402
    bench_config, breakdown_lines, profile_run, summarize, warm_start_line,
)


def _finite(x):
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return None if isinstance(x, float) and not math.isfinite(x) else x


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=8, help="optimizer steps per repeat (default 8)")
    ap.add_argument("--horizon", type=int, default=1, help="HORIZON: 1 = single decisions, > 1 = episodes")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=42, help="SEED of the first repeat (repeat r uses seed + r)")
    ap.add_argument("--warm-steps", type=int, default=None,
                    help="WARM_START_SFT_STEPS (default: the CPU profile's)")
    ap.add_argument("--skip-first", type=int, default=1, help="steps of each repeat left out as warm-up (default 1)")
    ap.add_argument("--init-from", default=None, metavar="DIR",
                    help="start GRPO from this saved model (e.g. a run's stage_0) and time the warm start on a copy")
    ap.add_argument("--base-dir", default=None, help="where the tiny model is built (default: a temporary folder)")
    ap.add_argument("--json", default=None, metavar="PATH", help="also write the figures and every step here")
    ap.add_argument("overrides", nargs="*", help="extra --KEY=value overrides for train_trl.py")
    args, unknown = ap.parse_known_args(argv)
    overrides = [*args.overrides, *unknown]
    if args.warm_steps is not None:
        overrides.insert(0, f"--WARM_START_SFT_STEPS={args.warm_steps}")
    if args.steps <= args.skip_first:
        ap.error("--steps must exceed --skip-first")
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(args.base_dir) if args.base_dir else Path(tmp) / "base"
        for r in range(args.repeats):
            cfg = bench_config(T, Path(tmp) / f"r{r}", steps=args.steps, horizon=args.horizon, seed=args.seed + r,
                               base_dir=base, overrides=overrides)
            print(f"[bench] repeat {r + 1}/{args.repeats}: HORIZON={args.horizon}, {args.steps} steps, seed {cfg['SEED']}",
                  flush=True)
            run = profile_run(T, cfg, init_from=args.init_from, skip_first=args.skip_first)
            print("\n".join(breakdown_lines(run["summary"], f"[bench] repeat {r + 1}")), flush=True)
            runs.append(run)
    pooled = summarize([s for run in runs for s in run["steps"][args.skip_first:]])
    warm = [run["warm_start"]["seconds_per_step"] for run in runs]
    print()
    print("\n".join(breakdown_lines(pooled, f"HORIZON={args.horizon}, {args.repeats} repeat(s)")))
    print(f"warm start: {statistics.median(warm):.3f} s/step (median over repeats of each warm start's mean over "
          f"{runs[0]['warm_start']['steps']} steps); repeat 1: {warm_start_line(runs[0]['warm_start'])}")
    if args.json:
        out = {"settings": {"steps": args.steps, "horizon": args.horizon, "repeats": args.repeats, "seed": args.seed,
                            "skip_first": args.skip_first, "init_from": args.init_from, "overrides": overrides},
               "summary": pooled, "warm_start_seconds_per_step": warm, "runs": runs}
        Path(args.json).write_text(json.dumps(_finite(out), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
