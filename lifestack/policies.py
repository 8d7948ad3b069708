"""Reference policies: oracle, heuristic, random, lazy and the reward-hacking patterns.

They are used to calibrate the reward (``python -m lifestack.calibrate``), to roll
episodes forward when the trainer builds varied prompts, and to write demonstrations
for the warm start. Each returns the *completion text* a model would write, so it goes
through exactly the same parser as a model's answer.
"""

from __future__ import annotations

import json
import math
import random
from typing import Callable

from .actions import ACTION_TYPES
from .env import FREE_EFFECT, POINTS_PER_DOLLAR, POINTS_PER_ENERGY, POINTS_PER_HOUR, LifeStackEnv
from .metrics import DOMAIN_NAMES, INVERTED_METRICS, METRIC_PATHS, domain_of, goodness

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


def oracle(env: LifeStackEnv, rng: random.Random | None = None) -> str:
    """Best of a broad candidate search by the single decision's task reward (its step
    reward blended with the episode it starts, ``lifestack.value``): the reward's greedy
    maximiser."""
    from .value import reference_value

    candidates = candidate_actions(env)
    reference = reference_value(env.task, env.state)
    best, best_reward = candidates[0], -2.0
    for text in candidates:
        reward = score_on_copy(env, text, reference)
        if reward > best_reward:
            best, best_reward = text, reward
    return best


def rollout(env: LifeStackEnv, rng: random.Random | None = None) -> str:
    """One step of policy improvement over the heuristic: every candidate action is
    stepped and the heuristic plays the task to its end from there; the candidate whose
    episode scores best (``lifestack.value``: the episode value) is chosen."""
    from .value import episode_value  # value imports this module lazily

    best, best_value = None, -math.inf
    probe = LifeStackEnv(env.graph)
    for text in candidate_actions(env):
        value = episode_value(env.task, env.state, text, probe)[1]
        if value is not None and value > best_value:
            best, best_value = text, value
    return best


def candidate_actions(env: LifeStackEnv) -> list[str]:
    routes: list[str | None] = list(env.open_routes()) + [None]
    out = []
    for route in routes:
        types = env.next_action_types(route) if route else list(ACTION_TYPES)
        for action_type in types:
            for n in (1, 2, 3):
                for points in (3.0, 5.0, 8.0):
                    for share in (0.2, 0.35):
                        out.append(planned_action(env, route, action_type, worst_metrics(env, n), points, share))
    return out


def score_on_copy(env: LifeStackEnv, text: str, reference: tuple[float, int] | None = None) -> float:
    """The single decision's task reward of ``text`` at the env's state (``lifestack.value``:
    its step reward blended with the episode it starts), without touching ``env``;
    ``reference`` is ``reference_value`` of the state when the caller has it."""
    from .value import score_decision

    return score_decision(env.task, env.state, text, reference, LifeStackEnv(env.graph))["reward"]


def random_valid(env: LifeStackEnv, rng: random.Random) -> str:
    """A uniformly random action that parses: random type, domain, route, changes, cost."""
    res = env.state.resources
    routes = [None] + list(env.task.route_ids)
    changes = {p: round(rng.uniform(-10, 10), 1) for p in rng.sample(METRIC_PATHS, rng.randint(0, 3))}
    cost = {k: round(rng.uniform(0, 0.5) * res[k], 1) for k in ("time", "money", "energy")}
    return completion(rng.choice(ACTION_TYPES), rng.choice(DOMAIN_NAMES), rng.choice(routes), changes, cost,
                      "Trying something.")


def random_honest(env: LifeStackEnv, rng: random.Random) -> str:
    """A random decision in the right form: what an instruction-tuned model brings before
    training (the answer format, honest costs, a reasoning true of its action) without
    what the task needs (which route, which step, which metrics). The route is drawn from
    the open ones and none, the action type from all seven, one to three metrics from all
    23, 2-8 points each, paid with 10-40 % of what is left (``planned_action``)."""
    route = rng.choice([None, *env.open_routes()])
    action_type = rng.choice(ACTION_TYPES)
    metrics = rng.sample(METRIC_PATHS, rng.randint(1, 3))
    return planned_action(env, route, action_type, metrics, rng.uniform(2.0, 8.0), rng.uniform(0.1, 0.4))


def mixed(rng: random.Random, garbage_below: float, random_below: float, garbage: str) -> Callable[[LifeStackEnv], str]:
    """A seeded mix of play for tests and benches: per answer one draw ``r`` from ``rng``;
    ``garbage`` (unparseable text) when ``r < garbage_below``, a random valid action when
    ``r < random_below``, else the heuristic (both drawing from the same ``rng``)."""

    def act(env: LifeStackEnv) -> str:
        r = rng.random()
        if r < garbage_below:
            return garbage
        return random_valid(env, rng) if r < random_below else heuristic(env, rng)

    return act


def lazy(env: LifeStackEnv, rng: random.Random | None = None) -> str:
    return completion("rest", "mental_wellbeing", None, {}, {"time": 0, "money": 0, "energy": 0}, "I will wait.")


Policy = Callable[[LifeStackEnv, random.Random], str]
HONEST: dict[str, Policy] = {"oracle": oracle, "rollout": rollout, "heuristic": heuristic,
                             "random_honest": random_honest, "random": random_valid, "lazy": lazy}
# What a warm start may imitate (WARM_START_POLICY): the decisions, or only the form.
DEMONSTRATORS: dict[str, Policy] = {"heuristic": heuristic, "format": random_honest}
# The reward hacks are lifestack.hacks.HACKS (one catalog); hacks.HACK_POLICIES plays some as policies.
