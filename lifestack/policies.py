"""Reference policies: oracle, rollout, heuristic, random (by the rules, honest, valid), lazy, and their catalogs
(``HONEST``, the warm start's ``DEMONSTRATORS``).

They are used to calibrate the reward (``python -m lifestack.calibrate``), to roll
episodes forward when the trainer builds varied prompts, and to write demonstrations
for the warm start. Each returns the *completion text* a model would write, so it goes
through exactly the same parser as a model's answer.

The heuristic and the honest answer it writes are :mod:`lifestack.heuristic`'s: the value
plays the heuristic as its reference continuation. The oracle and the rollout policy
search by that value (:mod:`lifestack.value`), so this module sits above it.
"""

from __future__ import annotations

import math
import random
from typing import Callable

from .actions import ACTION_TYPES
from .env import LifeStackEnv
from .heuristic import completion, heuristic, planned_action, worst_metrics
from .metrics import DOMAIN_NAMES, METRIC_PATHS
from .value import episode_value, reference_value, score_decision


def oracle(env: LifeStackEnv, rng: random.Random | None = None) -> str:
    """Best of a broad candidate search by the single decision's task reward (its step
    reward blended with the episode it starts, ``lifestack.value``): the reward's greedy
    maximiser."""
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
    return _random_planned(env, rng, follow_routes=False)


def _random_planned(env: LifeStackEnv, rng: random.Random, follow_routes: bool) -> str:
    """A random honest decision: a route from the open ones and none, an action type from
    all seven (``follow_routes``: from the named route's next steps), one to three metrics,
    2-8 points each, paid with 10-40 % of what is left. One draw order for both callers."""
    route = rng.choice([None, *env.open_routes()])
    action_type = rng.choice(env.next_action_types(route) if follow_routes and route else ACTION_TYPES)
    metrics = rng.sample(METRIC_PATHS, rng.randint(1, 3))
    return planned_action(env, route, action_type, metrics, rng.uniform(2.0, 8.0), rng.uniform(0.1, 0.4))


def random_by_the_rules(env: LifeStackEnv, rng: random.Random) -> str:
    """:func:`random_honest` that also follows the prompt's routing rule ("name one [route]
    in "route" with one of its next steps as action_type"): when it names a route, the
    action type is one of that route's next steps, drawn at random. What an instruction
    model that reads the prompt brings; which route, which of its steps, which metrics
    and how much stay random."""
    return _random_planned(env, rng, follow_routes=True)


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
                             "random_rules": random_by_the_rules, "random_honest": random_honest,
                             "random": random_valid, "lazy": lazy}
# What a warm start may imitate (WARM_START_POLICY): the decisions, or only the form.
DEMONSTRATORS: dict[str, Policy] = {"heuristic": heuristic, "format": random_honest, "rules": random_by_the_rules}
# The reward hacks are lifestack.hacks.HACKS (one catalog); hacks.HACK_POLICIES plays some as policies.
