#!/usr/bin/env python
"""Proof of learning on CPU: does the GRPO curriculum improve a (warm-started) policy?

    python scripts/learning_check.py                  # 3 seeds (10 min 10 s on 2 cores: docs/learning.md)
    python scripts/learning_check.py --seeds 1 --quick  # the reduced version CI runs

For each seed: build the CPU profile's tiny Qwen2 model, warm-start it with a short
supervised pass on heuristic demonstrations (so it writes parseable JSON some of the
time), then measure on a fixed held-out prompt set — the same prompts for every seed —
the mean of each of the six rewards and the valid-JSON rate (a) before GRPO and (b)
after the GRPO curriculum. Each held-out prompt is answered 4 times, sampled at the
training temperature with a fixed torch seed: that is the policy GRPO optimises (greedy
decoding of a tiny model hides most of the change). Prints a table of mean ± spread over
seeds, writes it as JSON, and exits 1 unless the task-success reward rose by more than
the seed spread.

Spread is the sample standard deviation over seeds (0 with one seed). "Rose by more
than the spread" means: mean(after - before) > max(spread(before), spread(after)), and
every seed individually improved.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

HELD_OUT_SEED = 31_000_000  # fixed: every seed is measured on the same prompts
METRICS = ("reward_format_fn", "reward_plausibility_fn", "reward_task_success_fn", "reward_milestone_fn",
           "reward_reasoning_fn", "reward_human_feedback_fn", "valid_json_rate")


def settings(quick: bool) -> dict:
    """Training sizes; --quick is the CI version (fewer steps, still asserts improvement)."""
    if quick:
        return {"warm_steps": 300, "stages": 3, "prompts": 16, "held_out": 8, "samples": 4, "lr": 2e-4, "batch": 16,
                "held_out_difficulty": 1}
    return {"warm_steps": 300, "stages": 5, "prompts": 16, "held_out": 16, "samples": 4, "lr": 2e-4, "batch": 16,
            "held_out_difficulty": None}


def run_seed(seed: int, out_dir: Path, s: dict, extra: list[str]) -> dict:
    import train_trl as T
    from transformers import set_seed

    run_dir = out_dir / f"seed_{seed}"
    argv = [
        "--DEVICE_PROFILE=cpu", f"--SEED={seed}", f"--OUTPUT_DIR={run_dir / 'model'}", f"--LOG_DIR={run_dir / 'logs'}",
        f"--CPU_BASE_DIR={run_dir / 'base'}", f"--WARM_START_SFT_STEPS={s['warm_steps']}",
        f"--N_STAGES={s['stages']}", f"--N_PROMPTS_PER_STAGE={s['prompts']}", "--RESUME=False",
        f"--LEARNING_RATES=[{s['lr']}]", f"--PER_DEVICE_BATCH_SIZE={s['batch']}",
        f"--FEEDBACK_DB={out_dir / 'feedback.sqlite3'}", *extra,
    ]
    cfg = T.build_config(argv, profile="cpu")
    T.configure_feedback(cfg["FEEDBACK_DB"])
    T.RUN_CONTEXT.update(log_dir=cfg["LOG_DIR"], log_interval=cfg["LOG_INTERVAL"])
    set_seed(seed)
    t0 = time.perf_counter()
    model, tok = T.load_model(cfg, banner=False)
    T.warm_start(model, tok, cfg)
    prompts = T.held_out_prompts(s["held_out"], s["held_out_difficulty"], HELD_OUT_SEED)
    before = T.evaluate_policy(model, tok, prompts, cfg, samples=s["samples"])
    model, state = T.train_curriculum(model, tok, cfg)
    after = T.evaluate_policy(model, tok, prompts, cfg, samples=s["samples"])

    def row(r: dict) -> dict:
        return {**r["reward_means"], "valid_json_rate": r["valid_json_rate"]}

    history = [json.loads(x) for x in (Path(cfg["LOG_DIR"]) / "train_history.jsonl").read_text().splitlines() if x]
    return {
        "seed": seed, "before": row(before), "after": row(after), "seconds": round(time.perf_counter() - t0, 1),
        "stages": state["stages"],
        "frac_reward_zero_std": [h.get("frac_reward_zero_std") for h in history],
        "train_reward_means": {m: [h.get(f"rewards/{m}/mean") for h in history] for m in METRICS[:-1]},
    }


def spread(xs: list[float]) -> float:
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def summarise(results: list[dict]) -> dict:
    table = {}
    for m in METRICS:
        b = [r["before"][m] for r in results]
        a = [r["after"][m] for r in results]
        table[m] = {"before_mean": statistics.mean(b), "before_spread": spread(b),
                    "after_mean": statistics.mean(a), "after_spread": spread(a)}
    task = "reward_task_success_fn"
    deltas = [r["after"][task] - r["before"][task] for r in results]
    margin = max(table[task]["before_spread"], table[task]["after_spread"])
    passed = statistics.mean(deltas) > margin and all(d > 0 for d in deltas)
    zero_std = [z for r in results for z in r["frac_reward_zero_std"] if z is not None]
    return {"table": table, "task_deltas": deltas, "margin": margin, "passed": passed,
            "mean_frac_reward_zero_std": statistics.mean(zero_std) if zero_std else None}


def format_table(summary: dict, n_seeds: int) -> str:
    lines = [f"| metric (mean ± spread over {n_seeds} seed{'s' if n_seeds > 1 else ''}) | before GRPO | after GRPO | change |",
             "|---|---:|---:|---:|"]
    for m, t in summary["table"].items():
        lines.append(f"| {m} | {t['before_mean']:+.3f} ± {t['before_spread']:.3f} | {t['after_mean']:+.3f} ± "
                     f"{t['after_spread']:.3f} | {t['after_mean'] - t['before_mean']:+.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="how many seeds (default 3)")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="the reduced CI version")
    parser.add_argument("--out", default="training_logs/learning_check", help="working directory for the runs")
    parser.add_argument("--json", default=None, help="where to write the results (default: OUT/learning_check.json)")
    parser.add_argument("overrides", nargs="*", help="extra --KEY=value overrides for train_trl.py")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    s = settings(args.quick)
    results = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        print(f"[learning check] seed {seed}: warm start {s['warm_steps']} steps, {s['stages']} GRPO stages "
              f"x {s['prompts']} prompts, {s['held_out']} held-out prompts", flush=True)
        r = run_seed(seed, out, s, args.overrides)
        print(f"[learning check] seed {seed}: task reward {r['before']['reward_task_success_fn']:+.3f} -> "
              f"{r['after']['reward_task_success_fn']:+.3f}, valid JSON {r['before']['valid_json_rate']:.0%} -> "
              f"{r['after']['valid_json_rate']:.0%} ({r['seconds']:.0f}s)", flush=True)
        results.append(r)
    summary = summarise(results)
    print(format_table(summary, len(results)))
    if summary["mean_frac_reward_zero_std"] is not None:
        print(f"mean frac_reward_zero_std over training: {summary['mean_frac_reward_zero_std']:.3f}")
    verdict = "PASS" if summary["passed"] else "FAIL"
    print(f"{verdict}: task-success change per seed {[round(d, 3) for d in summary['task_deltas']]}, "
          f"must exceed the seed spread {summary['margin']:.3f} on average and be positive for every seed")
    path = Path(args.json) if args.json else out / "learning_check.json"
    path.write_text(json.dumps({"settings": s, "seeds": results, "summary": summary}, indent=2, default=str))
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
