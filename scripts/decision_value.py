#!/usr/bin/env python
"""Does the per-decision reward value what a decision leaves behind?

    python scripts/decision_value.py                       # seeds 20000.., 14 states per difficulty
    python scripts/decision_value.py --first-seed 50000 --states 14 --episodes 24 --json out.json

Every figure is computed through the trainer's six real reward functions, weighted with
REWARD_WEIGHTS (what GRPO optimises), on seeded states at difficulties 3-5 (the trainer's
own prompts). The *episode value* of an action is the yardstick: take it, then play the
reference continuation (``lifestack.policies.heuristic``) to the task's end, scored with
``lifestack.value.episode_reward`` and ``episode_outcome`` (what episode mode scores).

1. **Spend everything**: the heuristic's action, but paying everything that is left and
   claiming goodness in proportion (spread over the 2 or 3 worst metrics, or over as many
   as the envelope needs). Share of states where it scores above the heuristic's answer
   (the target: at most 10 %).
2. **Overpaying**: the heuristic's action with the same claims but paying everything that
   is left. Share of states, among those whose continuation has turns left, where paying
   more for the same scores at least as high (the target: none).
3. **Ranking**: over ``lifestack.policies.candidate_actions`` at each state, the Spearman
   correlation between the weighted reward and the episode value (mean and lowest; the
   target: mean at least 0.9), and the regret of the reward's top choice (episode value
   left on the table; the target: mean at most 0.015).
4. **Greedy closed loop**: play seeded episodes at difficulties 4-5, each turn the
   candidate with the highest weighted reward; share of tasks resolved (the target: at
   least 90 %), beside the heuristic's and the rollout policy's.

Exit 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from lifestack.env import LifeStackEnv  # noqa: E402
from lifestack.episodes import Episode, play  # noqa: E402
from lifestack.hacks import HackContext, spend_everything as hack_spend_everything  # noqa: E402
from lifestack.policies import candidate_actions, heuristic, rollout  # noqa: E402
from lifestack.prompts import scenario_prompt  # noqa: E402
from lifestack.scenarios import sample_scenario  # noqa: E402
from lifestack.value import episode_value as value_of, reference_value  # noqa: E402

TARGETS = {"spend_win_rate": 0.10, "overpay_win_rate": 0.0, "spearman_mean": 0.9, "regret_mean": 0.015,
           "greedy_success": 0.9}


def episode_value(sc, text: str) -> float:
    return value_of(sc.task, sc.state, text)[1]


def spend_everything(env: LifeStackEnv, n_metrics: int | None) -> str:
    """The heuristic's action paying all that is left, claiming what that pays for
    (``lifestack.hacks.spend_everything``, the integrity battery's family)."""
    return hack_spend_everything(json.loads(heuristic(env)), HackContext(env), n_metrics)


def overpay(env: LifeStackEnv) -> str:
    """The heuristic's action with the same claims, paying all that is left."""
    a = json.loads(heuristic(env))
    res = env.state.resources
    a["resource_cost"] = {k: round(max(res[k], 0.0), 2) for k in ("time", "money", "energy")}
    a["reasoning"] = (a["reasoning"].split(" I pay")[0] + " I pay {time:g} hours, {money:g} dollars, {energy:g} energy."
                      .format(**a["resource_cost"]))
    return json.dumps(a)


def _ranks(xs: list[float]) -> list[float]:
    order = sorted(range(len(xs)), key=xs.__getitem__)
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation (ties take their mean rank); 1.0 when either is constant."""
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    num = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    den = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
    return num / den if den else 1.0


def measure(first_seed: int, states: int, episodes: int) -> dict:
    sys.path.insert(0, str(ROOT / "scripts"))
    import train_trl as T  # the six reward functions
    from lifestack.training.grpo_rewards import reward_vector, weighted_reward

    weights = T.REWARD_WEIGHTS

    def total(text: str, prompt) -> float:
        return weighted_reward(reward_vector(T.REWARD_FUNCS, text, prompt), weights)

    spend_wins = {"2 metrics": 0, "3 metrics": 0, "as many as needed": 0}
    overpay_wins = overpay_n = n = 0
    rhos, regrets = [], []
    for d in (3, 4, 5):
        for i in range(states):
            sc = sample_scenario(first_seed + 1000 * d + i, d)
            prompt = scenario_prompt(sc)
            env = LifeStackEnv()
            env.restore(sc.task, sc.state)
            honest = total(heuristic(env), prompt)
            for (name, k) in zip(spend_wins, (2, 3, None)):
                spend_wins[name] += total(spend_everything(env, k), prompt) > honest
            if reference_value(sc.task, sc.state)[1] > 0:  # the heuristic's continuation has turns left
                overpay_n += 1
                overpay_wins += total(overpay(env), prompt) >= honest
            n += 1
            cands = candidate_actions(env)
            rewards = [total(c, prompt) for c in cands]
            values = [episode_value(sc, c) for c in cands]
            rhos.append(spearman(rewards, values))
            regrets.append(max(values) - values[max(range(len(cands)), key=rewards.__getitem__)])

    def greedy(ep: Episode) -> str:
        env = ep.env
        cands = candidate_actions(env)
        scores = [total(c, ep.messages) for c in cands]
        return cands[max(range(len(cands)), key=scores.__getitem__)]

    closed: dict[str, dict[int, int]] = {"greedy": {}, "heuristic": {}, "rollout": {}}
    for d in (4, 5):
        for i in range(episodes):
            sc = sample_scenario(first_seed + 500 + 1000 * d + i, d)
            for name, policy in (("greedy", greedy), ("heuristic", lambda ep: heuristic(ep.env)),
                                 ("rollout", lambda ep: rollout(ep.env))):
                ep = play(Episode.from_scenario(sc, horizon=8), policy)
                closed[name][d] = closed[name].get(d, 0) + (ep.env.state.outcome == "success")
    m = 2 * episodes
    return {
        "first_seed": first_seed, "states": n, "episodes_per_difficulty": episodes,
        "spend_wins": {k: v / n for k, v in spend_wins.items()},
        "spend_win_rate": max(spend_wins.values()) / n,
        "overpay_win_rate": overpay_wins / overpay_n if overpay_n else 0.0, "overpay_states": overpay_n,
        "spearman_mean": statistics.fmean(rhos), "spearman_min": min(rhos),
        "regret_mean": statistics.fmean(regrets), "regret_max": max(regrets),
        "closed_loop": {name: {str(d): f"{v}/{episodes}" for d, v in row.items()} for name, row in closed.items()},
        "greedy_success": sum(closed["greedy"].values()) / m,
        "heuristic_success": sum(closed["heuristic"].values()) / m,
        "rollout_success": sum(closed["rollout"].values()) / m,
    }


def misses(r: dict) -> list[str]:
    out = []
    if r["spend_win_rate"] > TARGETS["spend_win_rate"]:
        out.append(f"spend-everything beats the heuristic on {r['spend_win_rate']:.0%} of states (> 10 %)")
    if r["overpay_win_rate"] > TARGETS["overpay_win_rate"]:
        out.append(f"overpaying ties or wins on {r['overpay_win_rate']:.0%} of states")
    if r["spearman_mean"] < TARGETS["spearman_mean"]:
        out.append(f"mean Spearman {r['spearman_mean']:.3f} < 0.9")
    if r["regret_mean"] > TARGETS["regret_mean"]:
        out.append(f"mean regret {r['regret_mean']:.4f} > 0.015")
    if r["greedy_success"] < TARGETS["greedy_success"]:
        out.append(f"greedy resolves {r['greedy_success']:.0%} of d4-5 tasks (< 90 %)")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--first-seed", type=int, default=20000)
    parser.add_argument("--states", type=int, default=14, help="seeded states per difficulty 3-5 (default 14)")
    parser.add_argument("--episodes", type=int, default=24, help="closed-loop episodes per difficulty 4-5 (default 24)")
    parser.add_argument("--json", help="also write the figures as JSON to this path")
    args = parser.parse_args(argv)
    r = measure(args.first_seed, args.states, args.episodes)
    print(f"seeds from {args.first_seed}: {r['states']} states at d3-5, {args.episodes} episodes per d4-5")
    print("spend everything beats the heuristic: " + ", ".join(f"{k} {v:.0%}" for k, v in r["spend_wins"].items()))
    print(f"overpaying for the same claims ties or wins: {r['overpay_win_rate']:.0%} of {r['overpay_states']} states "
          "with turns left")
    print(f"ranking vs episode value: Spearman mean {r['spearman_mean']:.3f} (lowest {r['spearman_min']:.3f}); "
          f"regret of the top choice mean {r['regret_mean']:.4f} (worst {r['regret_max']:.3f})")
    for name in ("greedy", "heuristic", "rollout"):
        row = r["closed_loop"][name]
        print(f"closed loop, {name:9s}: resolved d4 {row.get('4')}, d5 {row.get('5')}")
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=2) + "\n", encoding="utf-8")
    problems = misses(r)
    for p in problems:
        print(f"MISSED: {p}", file=sys.stderr)
    if not problems:
        print("all targets met")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
