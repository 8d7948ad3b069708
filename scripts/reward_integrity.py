#!/usr/bin/env python
"""Reward integrity: does any known hack beat the honest answer?

    python scripts/reward_integrity.py                     # 100 prompts, 20 per difficulty
    python scripts/reward_integrity.py --per-difficulty 40 --seed 7 --json out.json
    python scripts/reward_integrity.py --continuity 3000 --seed 100000   # the continuity sweep

For each seeded prompt (the trainer's own prompts, difficulties 1-5, both task families)
the honest answer is the heuristic's action; every hack in ``lifestack.hacks.HACKS`` is
built from it. All are scored through the trainer's six real reward functions and
weighted with REWARD_WEIGHTS, exactly as GRPO sees them. The table prints, per hack, the
honest and hack mean of that weighted total, the smallest margin (honest - hack) and the
share of prompts where the hack scores at least as high as the honest answer. Exit 1 if
any hack wins or ties on any prompt.

``--continuity N`` instead draws N random actions on N seeded prompts (random type,
domain, route, 1-4 claims in [-25, 25] with values on the cascade trigger and the claim
envelope mixed in, costs up to 110 % of what is left), changes each number they write by
+1 % and -1 % in turn, and prints the largest and the median change of the weighted total.
Pairs where the change crosses the budget (the prompt's rule "an action you cannot afford
fails") are left out and counted.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from lifestack.env import LifeStackEnv  # noqa: E402
from lifestack.prompts import build_prompt  # noqa: E402
from lifestack.hacks import HACKS  # noqa: E402
from lifestack.scenarios import sample_scenario  # noqa: E402


def integrity_rows(per_difficulty: int = 20, seed: int = 5000, weights=None) -> tuple[list[dict], list[dict]]:
    """Per-prompt scores of the honest answer and every hack: ``(rows, table)``."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import train_trl as T  # the six reward functions
    from lifestack.training.watch import score_battery

    weights = dict(weights or T.REWARD_WEIGHTS)
    rows = []
    for d in range(1, 6):
        for i in range(per_difficulty):
            sc = sample_scenario(seed + 1000 * d + i, d)
            scored = {name: {"total": total, "rewards": vec} for name, (total, vec) in score_battery(sc, weights, T.RUN).items()}
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


def continuity_sweep(n: int, seed: int) -> dict:
    """Largest and median change of the weighted total for a 1 % change of one number."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import train_trl as T

    from lifestack.actions import ACTION_TYPES
    from lifestack.metrics import DOMAIN_NAMES, METRIC_PATHS

    rng = random.Random(seed)
    env = LifeStackEnv()
    diffs, crossings, worst = [], 0, None
    for k in range(n):
        d = 1 + k % 5
        sc = sample_scenario(seed + k, d)
        prompt = build_prompt(sc.task, sc.conflict, sc.state, d, sc.seed)
        env.restore(sc.task, sc.state)
        res = env.state.resources
        a = {"action_type": rng.choice(ACTION_TYPES), "target_domain": rng.choice(DOMAIN_NAMES),
             "route": rng.choice([None, *sc.task.route_ids]),
             "metric_changes": {p: rng.choice([rng.uniform(-25, 25), 6.0, -6.0, 20.0, rng.uniform(-8, 8)])
                                for p in rng.sample(METRIC_PATHS, rng.randint(1, 4))},
             "resource_cost": {r: rng.choice([0.0, rng.uniform(0, res[r] * 1.1)]) for r in ("time", "money", "energy")},
             "reasoning": "I pay two hours and some money to fix stress and workload after the delay."}
        over_a = "penalty.unaffordable" in T.get_lifestack_evaluation(json.dumps(a), prompt)["breakdown"]
        total_a = T.RUN.weighted(T.RUN.vector(json.dumps(a), prompt))
        for field in ("metric_changes", "resource_cost"):
            for key, value in a[field].items():
                if not value:
                    continue
                for factor in (1.01, 0.99):
                    b = json.loads(json.dumps(a))
                    b[field][key] = value * factor
                    if ("penalty.unaffordable" in T.get_lifestack_evaluation(json.dumps(b), prompt)["breakdown"]) != over_a:
                        crossings += 1
                        continue
                    diff = abs(T.RUN.weighted(T.RUN.vector(json.dumps(b), prompt)) - total_a)
                    diffs.append(diff)
                    if worst is None or diff > worst["change"]:
                        worst = {"change": diff, "seed": sc.seed, "field": f"{field}.{key}", "value": value, "factor": factor}
    return {"pairs": len(diffs), "budget_crossings_left_out": crossings, "max": max(diffs),
            "median": statistics.median(diffs), "worst": worst}


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
    parser.add_argument("--continuity", type=int, default=0, metavar="N",
                        help="run the continuity sweep on N prompts instead of the hack table")
    args = parser.parse_args(argv)
    if args.continuity:
        out = continuity_sweep(args.continuity, args.seed)
        print(f"1 % change of one number, {out['pairs']} pairs on {args.continuity} prompts (seed {args.seed}; "
              f"{out['budget_crossings_left_out']} budget crossings left out): weighted total moved by "
              f"max {out['max']:.4f}, median {out['median']:.6f}")
        print(f"worst: {out['worst']}")
        return 0
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
