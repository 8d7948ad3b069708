#!/usr/bin/env python
"""What a GRPO step costs in episode mode against single-step, on the CPU profile.

    python scripts/bench_episodes.py                       # HORIZON 1 vs 3, 3 repeats
    python scripts/bench_episodes.py --horizon 3 --repeats 5 --warm-steps 200

One tiny CPU-profile model is warm-started once (single-step heuristic demonstrations,
so it writes JSON-like answers of a realistic length); then, alternating, a copy of it
trains one GRPO stage (16 prompts x 4 completions: 4 optimizer steps of 16 samples) at
HORIZON = 1 and at HORIZON = H. Reported per mode: the median over repeats of TRL's
median ``step_time`` (generation + rewards + loss per optimizer step), the model's own
tokens per sample (TRL's ``completions/mean_length``, which in episode mode counts the
model's turns, not the environment's) and the ratio of the step times. Numbers vary with
the machine; the ratio is the figure to compare.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import train_trl as T  # noqa: E402  (the trainer itself: build_config, train_curriculum)
from lifestack.training.models import load_model  # noqa: E402
from lifestack.training.run_state import fresh_state  # noqa: E402
from lifestack.training.warm_start import warm_start  # noqa: E402


def one_stage(model, tok, horizon: int, work: Path, seed: int) -> dict[str, float]:
    cfg = T.build_config([f"--OUTPUT_DIR={work / 'out'}", f"--LOG_DIR={work / 'logs'}", f"--HORIZON={horizon}",
                          "--N_STAGES=1", "--N_PROMPTS_PER_STAGE=16", "--N_EVAL_PROMPTS=2", "--INTEGRITY_PROMPTS=0",
                          f"--SEED={seed}", "--REPORT_TO=none", "--LOG_INTERVAL=1000000"], profile="cpu")
    T.train_curriculum(model, tok, cfg, fresh_state(cfg))
    history = [json.loads(x) for x in (work / "logs" / "train_history.jsonl").read_text().splitlines()]
    steps = [h for h in history if "step_time" in h]
    return {"step_time": statistics.median(h["step_time"] for h in steps),
            "model_tokens": statistics.mean(h["completions/mean_length"] for h in steps)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--horizon", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warm-steps", type=int, default=150)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cfg = T.build_config([f"--OUTPUT_DIR={tmp / 'base_out'}", f"--CPU_BASE_DIR={tmp / 'base'}",
                              f"--WARM_START_SFT_STEPS={args.warm_steps}", f"--SEED={args.seed}"], profile="cpu")
        model, tok = load_model(cfg, banner=False)
        warm_start(model, tok, cfg)
        results: dict[int, list[dict]] = {1: [], args.horizon: []}
        for r in range(args.repeats):
            for h in (1, args.horizon) if r % 2 == 0 else (args.horizon, 1):  # alternate: drift hits both
                work = tmp / f"h{h}_r{r}"
                results[h].append(one_stage(copy.deepcopy(model), tok, h, work, args.seed + r))
                print(f"[bench] repeat {r + 1}/{args.repeats} HORIZON={h}: median step "
                      f"{results[h][-1]['step_time']:.2f} s", flush=True)
    print("\n| HORIZON | median step time (s) | model tokens / sample |")
    print("|---:|---:|---:|")
    med = {}
    for h, rows in results.items():
        med[h] = statistics.median(x["step_time"] for x in rows)
        print(f"| {h} | {med[h]:.2f} | {statistics.median(x['model_tokens'] for x in rows):.0f} |")
    print(f"\nstep time ratio HORIZON={args.horizon} / HORIZON=1: {med[args.horizon] / med[1]:.2f} "
          f"({args.repeats} repeats, alternating; medians)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
