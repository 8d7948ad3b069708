"""Scenarios: the seeded pre-action states the trainer prompts with, and their rebuild.

``sample_scenario(seed, difficulty)`` draws a task (flight_crisis or code_merge_crisis),
merges a conflict of the same difficulty, cascades both disruptions, then rolls the
episode forward 0-2 steps with a mix of sensible and clumsy actions so the states vary.
The family, the conflict and the roll-forward are drawn from ``random.Random(seed)``; the
task from the generator's own ``Random(f"{domain}:{difficulty}:{seed}")`` and each event's
firing from ``Random(f"{seed}:{event_id}")``, so every draw is seeded.

The state travels as a small JSON description (:func:`scenario_metadata`) that holds no
hidden state: hidden state is recomputed from the task and the events that fired.
:func:`rebuild_state` turns it back into the exact :class:`EpisodeState`.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from typing import Any, Mapping

from .conflicts import ConflictEvent, generate_conflict, get_conflict
from .env import EpisodeState, LifeStackEnv, round_state
from .heuristic import heuristic
from .task_index import task_index
from .generator import DOMAINS, TaskGenerator
from .metrics import METRIC_PATHS, RESOURCE_NAMES
from .policies import random_valid
from .tasks import Task

METADATA_VERSION = 1
MAX_ROLL_FORWARD = 2


@dataclass(frozen=True)
class Scenario:
    seed: int
    difficulty: int
    task: Task
    conflict: ConflictEvent
    state: EpisodeState
    roll_forward: int

    @property
    def domain(self) -> str:
        return self.task.domain


def sample_scenario(seed: int, difficulty: int, domain: str | None = None, *, generator: TaskGenerator | None = None) -> Scenario:
    """A seeded, varied pre-action state at ``difficulty``."""
    rng = random.Random(seed)
    domain = domain or DOMAINS[rng.randrange(len(DOMAINS))]
    task = (generator or TaskGenerator()).generate(domain, difficulty, seed)
    conflict = generate_conflict(difficulty, rng)
    env = LifeStackEnv()
    env.reset(seed=seed, task=task, conflict=conflict)
    steps = rng.randint(0, min(MAX_ROLL_FORWARD, task.horizon - 2))
    taken = 0
    for _ in range(steps):
        policy = heuristic if rng.random() < 0.7 else random_valid
        snapshot = env.state.clone()
        env.step(policy(env, rng))
        if env.state.done:  # never hand the model a finished episode
            env.state = snapshot
            break
        taken += 1
    round_state(env.state)
    return Scenario(seed, difficulty, task, conflict, env.state, taken)


def at_crisis(sc: Scenario) -> Scenario:
    """``sc`` at the crisis itself: the state ``LifeStackEnv.reset`` builds from its task and
    conflict, before any roll-forward, so an episode played from it is the whole task."""
    env = LifeStackEnv()
    env.reset(seed=sc.seed, task=sc.task, conflict=sc.conflict)
    return replace(sc, state=env.state, roll_forward=0)


def sample_scenarios(n: int, difficulty: int | None, seed: int) -> list[Scenario]:
    """``n`` scenarios, item ``i`` from ``sample_scenario(seed + i, ...)`` (reasoning-gym's
    ``Random(seed + index)``); ``difficulty=None`` cycles 1..5."""
    return [sample_scenario(seed + i, difficulty if difficulty is not None else 1 + i % 5) for i in range(n)]


def scenario_metadata(sc: Scenario) -> dict[str, Any]:
    """The JSON description embedded in the prompt (no hidden state)."""
    s = sc.state
    return {
        "v": METADATA_VERSION,
        "domain": sc.task.domain,
        "difficulty": sc.difficulty,
        "seed": sc.seed,
        "conflict_id": sc.conflict.id,
        "task_id": sc.task.id,
        "state": {
            "step": s.step,
            "metrics": [s.metrics[p] for p in METRIC_PATHS],
            "resources": [s.resources[k] for k in RESOURCE_NAMES],
            "budget": [s.budget[k] for k in RESOURCE_NAMES],
            "world": dict(s.world),
            "route_progress": {k: list(v) for k, v in s.route_progress.items()},
            "closed_routes": list(s.closed_routes),
            "milestones": list(s.milestones),
            "events_fired": list(s.events_fired),
        },
    }


def _numbers(values: Any, n: int, what: str) -> list[float]:
    if not isinstance(values, list) or len(values) != n:
        raise ValueError(f"{what} must be a list of {n} numbers")
    # Fast path (what json.loads produces): plain floats and ints, all finite.
    try:
        out = [float(v) for v in values if type(v) is float or type(v) is int]
    except OverflowError:  # an int too large for a float: the checks below name it
        out = []
    if len(out) == n and all(map(math.isfinite, out)):
        return out
    out = []
    for v in values:  # int/float subclasses are accepted too (bool is not)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"{what} holds a non-finite or non-numeric value")
        try:
            v = float(v)
        except OverflowError:
            raise ValueError(f"{what} holds a non-finite or non-numeric value") from None
        if not math.isfinite(v):
            raise ValueError(f"{what} holds a non-finite or non-numeric value")
        out.append(v)
    return out


def task_from_metadata(meta: Mapping[str, Any], generator: TaskGenerator | None = None) -> Task:
    if meta.get("v") != METADATA_VERSION:
        raise ValueError(f"unsupported metadata version {meta.get('v')!r}")
    return (generator or TaskGenerator()).generate(meta.get("domain"), meta.get("difficulty"), meta.get("seed"))


def _strings(values: Any, what: str) -> list[str]:
    if not isinstance(values, list) or (values and not all(isinstance(v, str) for v in values)):
        raise ValueError(f"{what} must be a list of strings")
    return list(values)


def rebuild_state(meta: Mapping[str, Any], task: Task) -> EpisodeState:
    """The exact pre-action state described by ``meta`` (raises ValueError when malformed)."""
    seed = meta.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError("metadata seed must be an int")
    st = meta.get("state")
    if not isinstance(st, Mapping):
        raise ValueError("metadata has no state")
    metrics = dict(zip(METRIC_PATHS, _numbers(st.get("metrics"), len(METRIC_PATHS), "state.metrics")))
    resources = dict(zip(RESOURCE_NAMES, _numbers(st.get("resources"), 3, "state.resources")))
    budget = dict(zip(RESOURCE_NAMES, _numbers(st.get("budget"), 3, "state.budget")))
    events = _strings(st.get("events_fired", []), "state.events_fired")
    hidden = dict(task.hidden_state)
    if events:
        known = task_index(task).events_by_id
        if any(e not in known for e in events):
            raise ValueError("state.events_fired names an unknown event")
        for e in events:
            hidden.update(known[e].hidden_state_mutation)
    world, progress = st.get("world"), st.get("route_progress", {})
    if not isinstance(world, dict) or not isinstance(progress, dict):
        raise ValueError("state.world and state.route_progress must be objects")
    step = st.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError("state.step must be a non-negative int")
    return EpisodeState(
        seed=seed, metrics=metrics, resources=resources, budget=budget, world=dict(world), hidden=hidden,
        step=step, route_progress={str(k): _strings(v, "state.route_progress values") for k, v in progress.items()},
        closed_routes=_strings(st.get("closed_routes", []), "state.closed_routes"),
        milestones=_strings(st.get("milestones", []), "state.milestones"),
        events_fired=list(events),
    )


def conflict_from_metadata(meta: Mapping[str, Any]) -> ConflictEvent:
    try:
        return get_conflict(str(meta.get("conflict_id")))
    except KeyError as exc:
        raise ValueError(f"unknown conflict id in metadata: {exc}") from None
