"""Controlled state probes: does a policy's answer change as it should when one thing
about the state changes?

A closed-loop episode asks for a different decision at every step because the state has
moved on: a route's first step is done, the budget is spent. A policy that answers the
same thing whatever the state finishes no task. Each probe pairs a sampled state with a
copy in which exactly one thing changed, and compares what the policy answers at both
with what the reward's greedy maximiser (``lifestack.policies.oracle``) answers there:

- ``route_progress``: an open route with at least two steps left has its next step
  marked done. The oracle now names another step; an answer that still names the done
  one is *stale* (the env would call it ``wrong_type``).
- ``budget``: time, money and energy cut to a quarter of what is left. Costs that were
  affordable may no longer be.

A decision is ``(action_type, route)``, what the env reads to advance a task. A player
is any function from scenarios to answer texts (:func:`model_player`,
:func:`policy_player`), so a model, a reference policy and a test double are probed the
same way (``scripts/state_probe.py``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from lifestack.env import LifeStackEnv
from lifestack.policies import oracle
from lifestack.prompts import prompt_text, scenario_prompt
from lifestack.scenarios import Scenario, sample_scenarios
from lifestack.scoring import Evaluator

PROBES = ("route_progress", "budget")
BUDGET_SHARE = 0.25  # the budget probe leaves this share of each resource

Player = Callable[[list[Scenario]], list[str]]


@dataclass(frozen=True)
class ProbePair:
    """One probe: a state and its copy with one thing changed (``done_step``: the step the
    route-progress probe marked done, on ``route``)."""

    probe: str
    before: Scenario
    after: Scenario
    route: str | None = None
    done_step: str | None = None


def _env(sc: Scenario) -> LifeStackEnv:
    env = LifeStackEnv()
    env.restore(sc.task, sc.state, observe=False)
    return env


def probe_pairs(n: int, seed: int, difficulty: int | None = None) -> list[ProbePair]:
    """Up to one pair per probe for each of ``n`` seeded scenarios (``sample_scenarios``).
    A scenario without an open route of two or more steps left gives no route pair."""
    pairs = []
    for sc in sample_scenarios(n, difficulty, seed):
        env = _env(sc)
        for route in env.open_routes():
            left = env.next_action_types(route)
            if len(left) >= 2:
                state = sc.state.clone()
                state.route_progress[route] = [*state.route_progress.get(route, []), left[0]]
                pairs.append(ProbePair("route_progress", sc, replace(sc, state=state), route, left[0]))
                break
        state = sc.state.clone()
        for k in state.resources:
            state.resources[k] = round(state.resources[k] * BUDGET_SHARE, 1)
        pairs.append(ProbePair("budget", sc, replace(sc, state=state)))
    return pairs


def decision(action) -> tuple[str, str | None] | None:
    """``(action_type, route)`` of a parsed answer, None for one that did not parse."""
    return None if action is None else (action.action_type, action.route)


def affordable(action, sc: Scenario) -> bool:
    """Whether a parsed answer's stated costs fit the resources left at ``sc`` (False for
    one that did not parse)."""
    return action is not None and all(float(action.resource_cost.get(k, 0.0)) <= v + 1e-9
                                      for k, v in sc.state.resources.items())


def _side(evaluator: Evaluator, ptext: str, text: str, best: str, sc: Scenario) -> dict[str, Any]:
    """One state of a pair: the player's answer and the oracle's, each parsed once (by the
    evaluation, which scores the metadata-stripped text as training does)."""
    ev, ref = evaluator.evaluate(ptext, text), evaluator.evaluate(ptext, best)
    return {"decision": decision(ev["action"]), "oracle": decision(ref["action"]),
            "affordable": affordable(ev["action"], sc), "oracle_affordable": affordable(ref["action"], sc),
            "reward": float(ev["reward"]), "oracle_reward": float(ref["reward"])}


def oracle_answer(sc: Scenario) -> str:
    return oracle(_env(sc), random.Random(sc.seed))


def policy_player(policy: Callable[[LifeStackEnv, random.Random], str]) -> Player:
    """A reference policy (``lifestack.policies``) answering at each scenario's state."""
    # seeded by the state's prompt: the same state, the same answer; another state, another draw
    return lambda scenarios: [policy(_env(sc), random.Random(prompt_text(scenario_prompt(sc)))) for sc in scenarios]


def model_player(model, tokenizer, max_new_tokens: int, batch_size: int = 16) -> Player:
    """A causal LM answering each scenario's prompt, greedy (as the final evaluation plays)."""
    from lifestack.training.generation import generate_completions

    return lambda scenarios: generate_completions(model, tokenizer, [scenario_prompt(sc) for sc in scenarios],
                                                  max_new_tokens, batch_size=batch_size)


def run_probes(player: Player, pairs: Sequence[ProbePair], evaluator: Evaluator | None = None) -> list[dict[str, Any]]:
    """Each pair answered by ``player`` and by the oracle at both states: one row per pair
    with the decisions, the task rewards, and the flags :func:`summarise` counts."""
    evaluator = evaluator or Evaluator()
    scenarios = [sc for p in pairs for sc in (p.before, p.after)]
    texts = player(scenarios)
    if len(texts) != len(scenarios):
        raise ValueError(f"the player returned {len(texts)} answers for {len(scenarios)} states")
    known: dict[int, tuple[str, str]] = {}  # id(scenario) -> (prompt text, oracle answer): a probe's states share one
    rows = []
    for i, p in enumerate(pairs):
        row: dict[str, Any] = {"probe": p.probe, "seed": p.before.seed, "difficulty": p.before.difficulty}
        for j, (side, sc) in enumerate((("before", p.before), ("after", p.after))):
            if id(sc) not in known:
                known[id(sc)] = (prompt_text(scenario_prompt(sc)), oracle_answer(sc))
            ptext, best = known[id(sc)]
            row[side] = _side(evaluator, ptext, texts[2 * i + j], best, sc)
        b, a = row["before"], row["after"]
        row["changed"] = b["decision"] != a["decision"]
        row["oracle_changed"] = b["oracle"] != a["oracle"]
        row["stale"] = p.probe == "route_progress" and a["decision"] == (p.done_step, p.route)
        rows.append(row)
    return rows


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per probe: how often the answer changed (and the oracle's did), how often it matched
    the oracle's decision before and after, the stale share (route probe) and the mean
    task reward after the change against the oracle's. Shares of the pairs."""
    out = {}
    for probe in PROBES:
        rs = [r for r in rows if r["probe"] == probe]
        if not rs:
            continue
        n = len(rs)

        def share(flag: Callable[[dict], bool]) -> float:
            return sum(1 for r in rs if flag(r)) / n

        out[probe] = {
            "pairs": n,
            "changed": share(lambda r: r["changed"]),
            "oracle_changed": share(lambda r: r["oracle_changed"]),
            "changed_when_oracle_did": (sum(1 for r in rs if r["changed"] and r["oracle_changed"])
                                        / max(1, sum(1 for r in rs if r["oracle_changed"]))),
            "matches_oracle_before": share(lambda r: r["before"]["decision"] == r["before"]["oracle"]),
            "matches_oracle_after": share(lambda r: r["after"]["decision"] == r["after"]["oracle"]),
            "stale": share(lambda r: r["stale"]),
            "affordable_after": share(lambda r: r["after"]["affordable"]),
            "oracle_affordable_after": share(lambda r: r["after"]["oracle_affordable"]),
            "unparseable": sum(1 for r in rs for s in ("before", "after") if r[s]["decision"] is None) / (2 * n),
            "reward_after": sum(r["after"]["reward"] for r in rs) / n,
            "oracle_reward_after": sum(r["after"]["oracle_reward"] for r in rs) / n,
        }
    return out


def report(header: str, rows: dict[str, list[dict[str, Any]]], summarise: Callable, format_table: Callable,
           json_path: str = "", args: dict[str, Any] | None = None) -> int:
    """A probe script's output: ``header``, the table of each player's summary, and with
    ``json_path`` a JSON file of the arguments, the summaries and every row. Exit status 0."""
    summary = {name: summarise(r) for name, r in rows.items()}
    print(header)
    print(format_table(summary))
    if json_path:
        import json
        from pathlib import Path

        Path(json_path).write_text(json.dumps({"args": args or {}, "summary": summary, "rows": rows}, indent=1))
    return 0


def player_table(results: dict[str, dict[str, dict[str, float]]], group: str,
                 columns: Sequence[tuple[str, str, str]]) -> str:
    """One line per player and group (a probe, a difficulty): ``columns`` are
    ``(header, key, format spec)``, each right-aligned under its header."""
    w = max([12, *(len(p) for p in results)])
    g = max([len(group), *(len(k) for by in results.values() for k in by)])
    widths = [max(7, len(h)) for h, _, _ in columns]
    lines = [" ".join([f"{'player':<{w}}", f"{group:<{g}}", *(f"{h:>{n}}" for (h, _, _), n in zip(columns, widths))])]
    for player, by_group in results.items():
        for key, m in by_group.items():
            cells = (f"{format(m[k], spec):>{n}}" for (_, k, spec), n in zip(columns, widths))
            lines.append(" ".join([f"{player:<{w}}", f"{key:<{g}}", *cells]))
    return "\n".join(lines)


def format_table(results: dict[str, dict[str, dict[str, float]]]) -> str:
    """One line per player and probe."""
    return player_table(results, "probe", [
        ("pairs", "pairs", "d"), ("changed", "changed", ".0%"), ("oracle ch.", "oracle_changed", ".0%"),
        ("ch. w/ oracle", "changed_when_oracle_did", ".0%"), ("=oracle bef.", "matches_oracle_before", ".0%"),
        ("=oracle aft.", "matches_oracle_after", ".0%"), ("stale", "stale", ".0%"), ("unparse.", "unparseable", ".0%"),
        ("afford. aft.", "affordable_after", ".0%"), ("reward aft.", "reward_after", "+.3f"),
        ("oracle", "oracle_reward_after", "+.3f")])
