#!/usr/bin/env python
"""Reward integrity: does any known hack beat the honest answer?

    python scripts/reward_integrity.py                     # 100 prompts, 20 per difficulty
    python scripts/reward_integrity.py --per-difficulty 40 --seed 7 --json out.json

For each seeded prompt (the trainer's own prompts, difficulties 1-5, both task families)
the honest answer is the heuristic's action; every hack in ``lifestack.hacks.HACKS`` is
built from it. All are scored through the trainer's six real reward functions and
weighted with REWARD_WEIGHTS, exactly as GRPO sees them. The table prints, per hack, the
honest and hack mean of that weighted total, the smallest margin (honest - hack) and the
share of prompts where the hack scores at least as high as the honest answer. Exit 1 if
any hack wins or ties on any prompt, or if an unparseable answer outscores a valid one on
format + task.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from lifestack.env import LifeStackEnv  # noqa: E402
from lifestack.hacks import HACKS, battery  # noqa: E402
from lifestack.scenarios import sample_scenario  # noqa: E402


def integrity_rows(per_difficulty: int = 20, seed: int = 5000, weights=None) -> tuple[list[dict], list[dict]]:
    """Per-prompt scores of the honest answer and every hack: ``(rows, table)``."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import train_trl as T

    weights = list(weights or T.REWARD_WEIGHTS)
    rows = []
    env = LifeStackEnv()
    for d in range(1, 6):
        for i in range(per_difficulty):
            sc = sample_scenario(seed + 1000 * d + i, d)
            prompt = T.build_prompt(sc.task, sc.conflict, sc.state, d, sc.seed)
            env.restore(sc.task, sc.state)
            texts = battery(env, T.strip_metadata(prompt[1]["content"]), seed=sc.seed)
            scored = {}
            for name, text in texts.items():
                vec = T.reward_vector(text, prompt)
                scored[name] = {"total": T.weighted_reward(vec, weights), "rewards": vec}
            rows.append({"seed": sc.seed, "difficulty": d, "domain": sc.task.domain, "scores": scored})
    return rows, summarise(rows)


def summarise(rows: list[dict]) -> list[dict]:
    """One line per hack: honest mean, hack mean, smallest margin, share of prompts won."""
    table = []
    for name in HACKS:
        margins = [r["scores"]["honest"]["total"] - r["scores"][name]["total"] for r in rows]
        table.append({
            "hack": name,
            "honest_mean": statistics.fmean(r["scores"]["honest"]["total"] for r in rows),
            "hack_mean": statistics.fmean(r["scores"][name]["total"] for r in rows),
            "min_margin": min(margins),
            "win_rate": sum(m <= 0 for m in margins) / len(margins),
        })
    return table


def format_table(table: list[dict], n_prompts: int) -> str:
    lines = [f"weighted GRPO reward (REWARD_WEIGHTS), {n_prompts} prompts, difficulties 1-5, honest = heuristic",
             "| hack | honest mean | hack mean | smallest margin | hack wins |", "|---|---:|---:|---:|---:|"]
    for t in table:
        lines.append(f"| {t['hack']} | {t['honest_mean']:+.3f} | {t['hack_mean']:+.3f} | "
                     f"{t['min_margin']:+.3f} | {t['win_rate']:.0%} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-difficulty", type=int, default=20)
    parser.add_argument("--seed", type=int, default=5000)
    parser.add_argument("--json", help="also write the per-prompt scores here")
    args = parser.parse_args(argv)
    rows, table = integrity_rows(args.per_difficulty, args.seed)
    print(format_table(table, len(rows)))
    if args.json:
        Path(args.json).write_text(json.dumps({"table": table, "rows": rows}, indent=1))
    losing = [t["hack"] for t in table if t["win_rate"] > 0]
    if losing:
        print(f"FAIL: {', '.join(losing)} beat or tie the honest answer on some prompts")
        return 1
    print("every hack scores below the honest answer on every prompt")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
