"""Calibration: does the 0.6 curriculum threshold separate good play from bad?

``python -m lifestack.calibrate [--states N] [--seed S] [--json PATH]`` scores every
reference policy (oracle, heuristic, random, lazy, each reward hack) for one action on N
seeded states per difficulty (the same kind of states the trainer prompts with) and
prints the mean task reward. It exits 1 when the ordering the design contract asks for
fails (docs/rewards.md, "Calibration"):

* oracle above ``THRESHOLD + MARGIN`` at every difficulty;
* random, lazy and every hack below ``THRESHOLD`` and below the heuristic.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from statistics import mean

from .env import LifeStackEnv
from .policies import HACKS, POLICIES
from .scenarios import sample_scenario

THRESHOLD = 0.6
MARGIN = 0.05
DIFFICULTIES = (1, 2, 3, 4, 5)


def calibrate(n_states: int = 40, seed: int = 1000) -> dict[int, dict[str, float]]:
    """Mean task reward per difficulty and policy over ``n_states`` seeded states."""
    table: dict[int, dict[str, float]] = {}
    env = LifeStackEnv()
    for difficulty in DIFFICULTIES:
        rewards: dict[str, list[float]] = {name: [] for name in POLICIES}
        for i in range(n_states):
            sc = sample_scenario(seed + 100_000 * difficulty + i, difficulty)
            for name, policy in POLICIES.items():
                env.restore(sc.task, sc.state)
                text = policy(env, random.Random(seed + i))
                env.restore(sc.task, sc.state)
                rewards[name].append(env.step(text).reward)
        table[difficulty] = {name: mean(v) for name, v in rewards.items()}
    return table


def check_ordering(table: dict[int, dict[str, float]]) -> list[str]:
    """Human-readable violations of the calibration ordering (empty when it holds)."""
    problems = []
    for d, row in table.items():
        if row["oracle"] <= THRESHOLD + MARGIN:
            problems.append(f"d{d}: oracle {row['oracle']:.3f} not above {THRESHOLD + MARGIN}")
        for name in ["random", "lazy", *HACKS]:
            if row[name] >= THRESHOLD:
                problems.append(f"d{d}: {name} {row[name]:.3f} not below {THRESHOLD}")
            if row[name] >= row["heuristic"]:
                problems.append(f"d{d}: {name} {row[name]:.3f} not below heuristic {row['heuristic']:.3f}")
    return problems


def format_table(table: dict[int, dict[str, float]]) -> str:
    names = list(POLICIES)
    head = "| difficulty | " + " | ".join(names) + " |"
    sep = "|---|" + "---:|" * len(names)
    rows = [f"| {d} | " + " | ".join(f"{row[n]:+.3f}" for n in names) + " |" for d, row in table.items()]
    return "\n".join([head, sep, *rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lifestack.calibrate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--states", type=int, default=40, help="seeded states per difficulty (default 40)")
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--json", help="also write the table as JSON to this path")
    args = parser.parse_args(argv)
    if args.states < 1:
        parser.error("--states must be at least 1")
    table = calibrate(args.states, args.seed)
    print(f"mean task reward, {args.states} states per difficulty, seed {args.seed}")
    print(format_table(table))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({str(k): v for k, v in table.items()}, fh, indent=2)
    problems = check_ordering(table)
    for p in problems:
        print(f"CALIBRATION FAILED: {p}", file=sys.stderr)
    if not problems:
        print(f"ordering holds: oracle > {THRESHOLD + MARGIN} everywhere; random, lazy and hacks < {THRESHOLD} and < heuristic")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
