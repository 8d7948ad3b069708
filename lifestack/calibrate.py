"""Calibration: does the 0.6 curriculum threshold separate good play from bad?

``python -m lifestack.calibrate [--states N] [--seed S] [--episodes E] [--json PATH]``
scores every reference policy (oracle, rollout, heuristic, random, random_rules,
random_honest, lazy, each reward hack) for one decision on N seeded states per difficulty (the same kind of states the
trainer prompts with) and prints the mean task reward of a single decision (its step
reward blended with the episode it starts, ``lifestack.value``). It exits 1 when the
ordering the design contract asks for fails (docs/rewards.md, "Calibration"):

* oracle above ``THRESHOLD + MARGIN`` at every difficulty;
* random, lazy and every hack below ``THRESHOLD`` and below the heuristic.

With ``--episodes E`` it also plays E seeded closed-loop episodes of up to
``episodes.MAX_HORIZON`` turns per difficulty with each honest policy and prints the share
that end in success and the mean episode task reward (``lifestack.value.episode_reward``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from statistics import mean

from .env import LifeStackEnv
from .episodes import MAX_HORIZON, Episode, play
from .hacks import HACK_POLICIES
from .policies import HONEST
from .scenarios import sample_scenario
from .value import CURRICULUM_THRESHOLD, episode_reward, reference_value, score_decision

POLICIES = {**HONEST, **HACK_POLICIES}  # what the calibration ranks

THRESHOLD = CURRICULUM_THRESHOLD  # the decision reward the curriculum asks for before raising difficulty
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
            reference = reference_value(sc.task, sc.state)
            for name, policy in POLICIES.items():
                env.restore(sc.task, sc.state)
                text = policy(env, random.Random(seed + i))
                rewards[name].append(score_decision(sc.task, sc.state, text, reference, env)["reward"])
        table[difficulty] = {name: mean(v) for name, v in rewards.items()}
    return table


def closed_loop(n_episodes: int = 24, seed: int = 2000, horizon: int | None = None) -> dict[int, dict[str, dict]]:
    """Per difficulty and honest policy: ``{"success": share of episodes that end in
    success, "episode_reward": mean episode task reward}`` over ``n_episodes`` seeded
    closed-loop episodes (the same starts for every policy)."""
    horizon = horizon or MAX_HORIZON  # every task ends by itself before it

    table: dict[int, dict[str, dict]] = {}
    for difficulty in DIFFICULTIES:
        row: dict[str, dict] = {}
        starts = [sample_scenario(seed + 100_000 * difficulty + i, difficulty) for i in range(n_episodes)]
        for name, policy in HONEST.items():
            wins, rewards = 0, []
            for i, sc in enumerate(starts):
                rng = random.Random(seed + i)
                ep = play(Episode.from_scenario(sc, horizon), lambda e: policy(e.env, rng))
                wins += ep.env.state.outcome == "success"
                rewards.append(episode_reward([t.reward for t in ep.turns], ep.outcome()["score"]))
            row[name] = {"success": wins / n_episodes, "episode_reward": mean(rewards)}
        table[difficulty] = row
    return table


def format_closed_loop(table: dict[int, dict[str, dict]], n_episodes: int) -> str:
    names = list(HONEST)
    head = "| difficulty | " + " | ".join(names) + " |"
    sep = "|---|" + "---:|" * len(names)
    rows = [f"| {d} | " + " | ".join(f"{round(row[n]['success'] * n_episodes)}/{n_episodes}, {row[n]['episode_reward']:+.3f}"
                                    for n in names) + " |" for d, row in table.items()]
    return "\n".join([head, sep, *rows])


def check_ordering(table: dict[int, dict[str, float]]) -> list[str]:
    """Human-readable violations of the calibration ordering (empty when it holds)."""
    problems = []
    for d, row in table.items():
        if row["oracle"] <= THRESHOLD + MARGIN:
            problems.append(f"d{d}: oracle {row['oracle']:.3f} not above {THRESHOLD + MARGIN}")
        for name in ["random", "lazy", *HACK_POLICIES]:
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
    parser.add_argument("--episodes", type=int, default=0,
                        help="also play this many closed-loop episodes per difficulty with each honest policy (default 0)")
    parser.add_argument("--json", help="also write the table as JSON to this path")
    args = parser.parse_args(argv)
    if args.states < 1:
        parser.error("--states must be at least 1")
    if args.episodes < 0:
        parser.error("--episodes must be at least 0")
    table = calibrate(args.states, args.seed)
    print(f"mean task reward of one decision, {args.states} states per difficulty, seed {args.seed}")
    print(format_table(table))
    loop = None
    if args.episodes:
        loop = closed_loop(args.episodes, args.seed)
        print(f"\nclosed loop: episodes that end in success, mean episode task reward "
              f"({args.episodes} episodes per difficulty, each played to the task's end)")
        print(format_closed_loop(loop, args.episodes))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            out = {str(k): v for k, v in table.items()}
            if loop is not None:
                out["closed_loop"] = {str(k): v for k, v in loop.items()}
            json.dump(out, fh, indent=2)
    problems = check_ordering(table)
    for p in problems:
        print(f"CALIBRATION FAILED: {p}", file=sys.stderr)
    if not problems:
        print(f"ordering holds: oracle > {THRESHOLD + MARGIN} everywhere; random, lazy and hacks < {THRESHOLD} and < heuristic")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
