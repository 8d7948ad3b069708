#!/usr/bin/env python
"""What single-step training cannot learn that episodes can, measured on the environment.

    python scripts/episode_credit.py                  # 60 training-like scenarios, horizon 3
    python scripts/episode_credit.py --scenarios 100 --horizon 3 --seed 500

For each scenario (``sample_scenario(seed + i, 1 + i % 5)``, the states the trainer's
prompts show) it compares two plans over the same candidate actions
(``lifestack.lookahead``): the greedy plan, the best a single-step learner can reach,
and the plan with the best episode reward, found by exhaustive search. It prints how
often and by how much they differ, and the scenario where the best plan's first action earns less
now than the greedy one and the most more over the episode. No model involved.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from lifestack.lookahead import best_plan, greedy_plan  # noqa: E402
from lifestack.scenarios import sample_scenario  # noqa: E402


def describe(text: str) -> str:
    a = json.loads(text)
    return f"{a['action_type']} on {a['route'] or 'no route'}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", type=int, default=60)
    ap.add_argument("--horizon", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rows, example = [], None
    for i in range(args.scenarios):
        sc = sample_scenario(args.seed + i, 1 + i % 5)
        g = greedy_plan(sc.task, sc.state, args.horizon)
        b = best_plan(sc.task, sc.state, args.horizon)
        later = describe(b.first) != describe(g.first) and b.turn_rewards[0] < g.turn_rewards[0] and b.value > g.value
        rows.append((g, b, later))
        if later and (example is None or b.value - g.value > example[2].value - example[1].value):
            example = (sc, g, b)  # the clearest case: the largest gain
    n = len(rows)
    gain = [b.value - g.value for g, b, _ in rows]
    print(f"{n} scenarios (seeds {args.seed}..{args.seed + n - 1}, difficulties 1-5), horizon {args.horizon}")
    print(f"episode reward, greedy plan (the single-step optimum): {sum(g.value for g, _, _ in rows) / n:+.3f}")
    print(f"episode reward, best plan (what episodes can learn):   {sum(b.value for _, b, _ in rows) / n:+.3f}")
    print(f"best beats greedy on {sum(x > 1e-9 for x in gain)} of {n} scenarios (mean gain {sum(gain) / n:+.3f}, "
          f"largest {max(gain):+.3f})")
    print(f"first actions differ on {sum(describe(b.first) != describe(g.first) for g, b, _ in rows)} of {n}; "
          f"the best first action earns less now and more later on {sum(x for _, _, x in rows)} of {n}")
    if example:
        sc, g, b = example
        print(f"\nexample: seed {sc.seed}, {sc.task.id} ({sc.task.goal})")
        for name, p in (("greedy", g), ("best", b)):
            steps = ", ".join(f"{describe(a)} ({r:+.3f})" for a, r in zip(p.actions, p.turn_rewards))
            print(f"  {name:6} {steps}; outcome {p.outcome:+.3f}; episode reward {p.value:+.3f}")
        print("  (each step: the action and its immediate task reward; the outcome scores the end state)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
