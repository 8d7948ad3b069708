"""Tasks: a goal inside a crisis, the routes that reach it, milestones and surprise events.

These are plain immutable data. The environment copies ``mutable_world`` and
``hidden_state`` into its own state, so one ``Task`` can back many episodes (and the
trainer caches tasks by their generator arguments).

World conditions (preconditions, milestones, success and failure) are ``{key: value}``
dicts over the episode's world. A key that starts with ``hidden.`` reads hidden state.
A boolean or string value must match exactly; a number means "at least this much".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping


def _freeze(obj: Any, *names: str) -> None:
    """Make the named dict fields read-only: tasks are cached and shared between episodes."""
    for name in names:
        value = getattr(obj, name)
        if not isinstance(value, MappingProxyType):
            object.__setattr__(obj, name, MappingProxyType(dict(value)))


@dataclass(frozen=True)
class Milestone:
    id: str
    description: str
    condition_key: str
    condition_value: Any
    reward: float


@dataclass(frozen=True)
class Route:
    id: str
    name: str
    description: str
    # Each listed action type is one step of the route; any order, each once.
    required_action_types: tuple[str, ...]
    preconditions: Mapping[str, Any] = field(default_factory=dict)
    # World mutations applied when the route completes.
    consequences: Mapping[str, Any] = field(default_factory=dict)
    closes_routes: tuple[str, ...] = ()
    milestones_unlocked: tuple[str, ...] = ()
    final_reward: float = 1.0

    def __post_init__(self) -> None:
        _freeze(self, "preconditions", "consequences")

    @property
    def progress_key(self) -> str:
        """World key counting the steps done on this route (milestones can watch it)."""
        return f"progress.{self.id}"


@dataclass(frozen=True)
class ExoEvent:
    step: int  # fires after the action of this step number (1-based) ...
    probability: float  # ... when the episode's seeded roll is below this
    id: str
    description: str
    world_mutation: Mapping[str, Any] = field(default_factory=dict)
    hidden_state_mutation: Mapping[str, Any] = field(default_factory=dict)
    closes_routes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _freeze(self, "world_mutation", "hidden_state_mutation")


@dataclass(frozen=True)
class Task:
    id: str
    domain: str
    goal: str
    constraints: Mapping[str, Any]
    hidden_state: Mapping[str, Any]
    mutable_world: Mapping[str, Any]
    visible_world: Mapping[str, Any]
    success_conditions: Mapping[str, Any]
    failure_conditions: Mapping[str, Any]
    event_schedule: tuple[ExoEvent, ...]
    viable_routes: tuple[Route, ...]
    milestones: tuple[Milestone, ...]
    horizon: int
    difficulty: int
    domain_metadata: Mapping[str, Any] = field(default_factory=dict)

    def route(self, route_id: str) -> Route | None:
        for r in self.viable_routes:
            if r.id == route_id:
                return r
        return None

    @property
    def route_ids(self) -> tuple[str, ...]:
        return tuple(r.id for r in self.viable_routes)


REQUIRED_TASK_FIELDS: tuple[str, ...] = ("id", "goal", "constraints", "mutable_world", "visible_world")


def missing_task_fields(task: Task) -> list[str]:
    """Names of the fields the reward code relies on that are empty or absent."""
    missing = []
    for name in REQUIRED_TASK_FIELDS:
        value = getattr(task, name, None)
        if value is None or (isinstance(value, (str, Mapping)) and not value):
            missing.append(name)
    return missing


def read_world(world: Mapping[str, Any], hidden: Mapping[str, Any], key: str) -> Any:
    if key.startswith("hidden."):
        return hidden.get(key[7:])  # len("hidden.")
    return world.get(key)


def condition_holds(world: Mapping[str, Any], hidden: Mapping[str, Any], key: str, expected: Any) -> bool:
    actual = read_world(world, hidden, key)
    if isinstance(expected, (bool, str)) or expected is None:
        return actual == expected
    if isinstance(actual, bool) or not isinstance(actual, (int, float)):
        return False
    return actual >= expected


def all_hold(world: Mapping[str, Any], hidden: Mapping[str, Any], conditions: Mapping[str, Any]) -> bool:
    for key, expected in conditions.items():
        if not condition_holds(world, hidden, key, expected):
            return False
    return True


def any_holds(world: Mapping[str, Any], hidden: Mapping[str, Any], conditions: Mapping[str, Any]) -> bool:
    for key, expected in conditions.items():
        if condition_holds(world, hidden, key, expected):
            return True
    return False
