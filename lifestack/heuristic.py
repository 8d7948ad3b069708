"""The heuristic policy and the honest answer it writes.

:func:`heuristic` keeps going on the best open route and pays for modest fixes of the
worst metrics. It is the reference continuation that :mod:`lifestack.value` plays to a
task's end to value a decision, so it sits below the value, and the policies valued by
it (:mod:`lifestack.policies`) sit above. :func:`planned_action` writes an honest answer
(the cost pays for exactly the gain it claims, ``exact_cost``), as completion text that
goes through the same parser as a model's answer.
"""

from __future__ import annotations

import json
import math
import random

from .env import FREE_EFFECT, POINTS_PER_DOLLAR, POINTS_PER_ENERGY, POINTS_PER_HOUR, LifeStackEnv
from .metrics import INVERTED_METRICS, METRIC_PATHS, domain_of, goodness


# The action type that naturally helps each domain when no route step is due.
DOMAIN_ACTION = {
    "career": "delegate",
    "finances": "negotiate",
    "relationships": "communicate",
    "physical_health": "rest",
    "mental_wellbeing": "rest",
    "time": "reschedule",
}


def worst_metrics(env: LifeStackEnv, n: int = 2) -> list[str]:
    m = env.state.metrics
    return sorted(METRIC_PATHS, key=lambda p: goodness(p, m[p]))[:n]


def raw_delta(path: str, good: float) -> float:
    """The raw change that improves ``path``'s goodness by ``good`` points."""
    return -good if path in INVERTED_METRICS else good


def _words(path: str) -> str:
    return path.split(".")[1].replace("_", " ")


def paid_cost(env: LifeStackEnv, points: float, share: float = 0.3) -> tuple[dict[str, float], float]:
    """A cost that pays for ``points`` of claimed gain, spending at most ``share`` of each resource.

    Returns the cost and the points it actually pays for.
    """
    res = env.state.resources
    need = max(points - FREE_EFFECT, 0.0)
    hours = round(min(need / POINTS_PER_HOUR * 0.5, res["time"] * share), 1)
    need -= hours * POINTS_PER_HOUR
    energy = round(min(max(need, 0.0) * 0.3 / POINTS_PER_ENERGY, res["energy"] * share), 1)
    need -= energy * POINTS_PER_ENERGY
    money = round(min(max(need, 0.0) / POINTS_PER_DOLLAR, res["money"] * share))
    need -= money * POINTS_PER_DOLLAR
    cost = {"time": max(hours, 0.0), "money": float(max(money, 0)), "energy": max(energy, 0.0)}
    return cost, points - max(need, 0.0)


def exact_cost(cost: dict[str, float], claimed: float) -> dict[str, float]:
    """``cost`` trimmed so that it pays for exactly ``claimed`` points (to the cent).

    An honest answer claims what it pays for, no more and no less: then any further claim
    is unpaid, and costs reward (docs/rewards.md, "Free token claims").
    """
    rest = max(claimed - FREE_EFFECT, 0.0)
    hours = min(cost["time"], math.floor(rest / POINTS_PER_HOUR * 10) / 10)
    rest -= hours * POINTS_PER_HOUR
    energy = min(cost["energy"], math.floor(max(rest, 0.0) / POINTS_PER_ENERGY * 10) / 10)
    rest -= energy * POINTS_PER_ENERGY
    money = math.ceil(round(max(rest, 0.0) / POINTS_PER_DOLLAR * 100, 6)) / 100
    return {"time": hours, "money": money, "energy": energy}


def completion(action_type: str, target: str, route: str | None, changes: dict[str, float],
               cost: dict[str, float], reasoning: str) -> str:
    return json.dumps({"action_type": action_type, "target_domain": target, "route": route,
                       "metric_changes": {p: round(d, 2) for p, d in changes.items()},
                       "resource_cost": cost, "reasoning": reasoning})


def _event_phrase(env: LifeStackEnv) -> str:
    if not env.state.events_fired:
        return ""
    last = env.state.events_fired[-1].replace("_", " ")
    return f"After {last}: "


def planned_action(env: LifeStackEnv, route: str | None, action_type: str, metrics: list[str],
                   points_each: float, share: float = 0.3) -> str:
    """An honest action: improve ``metrics`` by what it pays for, optionally on a route."""
    cost, paid = paid_cost(env, points_each * len(metrics), share)
    each = math.floor(paid / max(len(metrics), 1) * 100) / 100  # what the JSON shows (2 decimals)
    cost = exact_cost(cost, each * len(metrics))
    res = env.state.resources
    if any(cost[k] > res[k] for k in cost):
        # rounding asked for more than is left (a few cents, with almost nothing left): pay
        # what is left and claim only what that pays for, so the action stays affordable
        cost = {k: min(v, max(res[k], 0.0)) for k, v in cost.items()}
        capacity = FREE_EFFECT + POINTS_PER_HOUR * cost["time"] + POINTS_PER_DOLLAR * cost["money"] \
            + POINTS_PER_ENERGY * cost["energy"]
        each = math.floor(capacity / max(len(metrics), 1) * 100) / 100
    changes = {p: raw_delta(p, each) for p in metrics}
    target = domain_of(metrics[0]) if metrics else "mental_wellbeing"
    worst = " and ".join(_words(p) for p in metrics) or "my wellbeing"
    # Short on purpose: the warm start teaches small models from these texts.
    why = f"I {action_type} to advance {route}. " if route else f"No route fits; I {action_type} to contain damage. "
    reasoning = (f"{_event_phrase(env)}{why}{worst.capitalize()} hurt most; "
                 f"I pay {cost['time']:g} hours, {cost['money']:g} dollars, {cost['energy']:g} energy.")
    return completion(action_type, target, route, changes, cost, reasoning)


def heuristic(env: LifeStackEnv, rng: random.Random | None = None) -> str:
    """A sensible policy: keep going on the best open route, pay for modest fixes."""
    s, task = env.state, env.task
    opens = env.open_routes()
    started = [r for r in opens if s.route_progress.get(r)]
    ranked = started or sorted(opens, key=lambda r: -task.route(r).final_reward)
    worst = worst_metrics(env, 2)
    if ranked:
        route = ranked[0]
        return planned_action(env, route, env.next_action_types(route)[0], worst, 5.0)
    return planned_action(env, None, DOMAIN_ACTION[domain_of(worst[0])], worst, 5.0)
