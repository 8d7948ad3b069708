"""Conflict events: the life disruptions an episode starts from.

The 15 templates (three per difficulty 1-5) live in ``data/conflicts.json`` so they can be
read and edited without touching code. A template's ``primary_disruption`` holds *raw*
metric deltas: for inverted metrics (e.g. stress) a positive delta is the harm, so any
"how bad is it" question must go through :func:`lifestack.metrics.goodness_delta`.

Standard library only (plus :mod:`lifestack.metrics`) so it imports without torch.
"""

from __future__ import annotations

import functools
import json
import math
import numbers
import random
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from lifestack.metrics import METRIC_INDEX, RESOURCE_NAMES, ResourceBudget

MIN_DIFFICULTY = 1
MAX_DIFFICULTY = 5
ESCALATION_FACTOR = 1.4
ESCALATION_BUDGET_FACTOR = 0.7
ESCALATION_DELTA_CAP = 40.0
ESCALATED_SUFFIX = "+escalated"
ESCALATED_PREFIX = "Escalated: "
DEFAULT_TEMPLATES_PATH = Path(__file__).parent / "data" / "conflicts.json"

_FIELDS = (
    "id",
    "title",
    "story",
    "primary_disruption",
    "decisions_required",
    "resource_budget",
    "difficulty",
)


def _is_int(value: Any) -> bool:
    # bool is an int subclass, but True is not a difficulty.
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _finite_number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{where} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{where} is not finite: {value!r}")
    return value


def _check_difficulty(difficulty: Any, where: str = "difficulty") -> int:
    if not _is_int(difficulty) or not MIN_DIFFICULTY <= difficulty <= MAX_DIFFICULTY:
        raise ValueError(
            f"{where} must be an int in {MIN_DIFFICULTY}..{MAX_DIFFICULTY}, got {difficulty!r}"
        )
    return int(difficulty)


@dataclass(frozen=True)
class ConflictEvent:
    """One life conflict: a story, the raw metric deltas it causes and the budget to fix it."""

    id: str
    title: str
    story: str
    primary_disruption: Mapping[str, float]
    decisions_required: tuple[str, ...]
    resource_budget: ResourceBudget
    difficulty: int

    def __post_init__(self) -> None:
        # Validate here (not only in from_dict) so escalated or hand-built events are checked too.
        tag = f"conflict {self.id!r}"
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"conflict field 'id' must be a non-empty string, got {self.id!r}")
        for name in ("title", "story"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise ValueError(f"{tag}: field '{name}' must be a non-empty string")
        if not isinstance(self.primary_disruption, Mapping) or not self.primary_disruption:
            raise ValueError(f"{tag}: field 'primary_disruption' must be a non-empty mapping")
        disruption: dict[str, float] = {}
        for path, delta in self.primary_disruption.items():
            if path not in METRIC_INDEX:
                raise ValueError(f"{tag}: field 'primary_disruption' has unknown metric path {path!r}")
            disruption[path] = _finite_number(delta, f"{tag}: field 'primary_disruption[{path}]'")
        decisions = self.decisions_required
        if isinstance(decisions, str) or not isinstance(decisions, (list, tuple)) or not decisions:
            raise ValueError(f"{tag}: field 'decisions_required' must be a non-empty list of strings")
        if not all(isinstance(d, str) and d.strip() for d in decisions):
            raise ValueError(f"{tag}: field 'decisions_required' must contain non-empty strings")
        if not isinstance(self.resource_budget, ResourceBudget):
            raise ValueError(f"{tag}: field 'resource_budget' must be a ResourceBudget")
        for name in RESOURCE_NAMES:
            amount = _finite_number(getattr(self.resource_budget, name), f"{tag}: field 'resource_budget.{name}'")
            if amount < 0:
                raise ValueError(f"{tag}: field 'resource_budget.{name}' must be >= 0, got {amount}")
        _check_difficulty(self.difficulty, f"{tag}: field 'difficulty'")
        # Read-only views keep a frozen event actually immutable (templates are shared via the cache).
        object.__setattr__(self, "primary_disruption", MappingProxyType(disruption))
        object.__setattr__(self, "decisions_required", tuple(decisions))

    def __hash__(self) -> int:
        # The generated hash would fail on the mapping proxy; hash its items instead.
        return hash((self.id, self.title, self.story, tuple(self.primary_disruption.items()),
                     self.decisions_required, self.resource_budget, self.difficulty))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict, accepted back by :meth:`from_dict`."""
        return {
            "id": self.id,
            "title": self.title,
            "story": self.story,
            "primary_disruption": dict(self.primary_disruption),
            "decisions_required": list(self.decisions_required),
            "resource_budget": self.resource_budget.to_dict(),
            "difficulty": self.difficulty,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ConflictEvent":
        """Build and validate an event; any problem is a ``ValueError`` naming id and field."""
        if not isinstance(data, Mapping):
            raise ValueError(f"conflict record must be a mapping, got {type(data).__name__}")
        tag = f"conflict {data.get('id', '<no id>')!r}"
        missing = [f for f in _FIELDS if f not in data]
        if missing:
            raise ValueError(f"{tag}: missing field(s) {missing}")
        extra = sorted(set(data) - set(_FIELDS))
        if extra:
            raise ValueError(f"{tag}: unknown field(s) {extra}")
        budget = data["resource_budget"]
        if not isinstance(budget, Mapping):
            raise ValueError(f"{tag}: field 'resource_budget' must be a mapping")
        unknown = sorted(set(budget) - set(RESOURCE_NAMES))
        if unknown or set(budget) != set(RESOURCE_NAMES):
            raise ValueError(
                f"{tag}: field 'resource_budget' needs exactly {list(RESOURCE_NAMES)}, got {sorted(budget)}"
            )
        amounts = {k: _finite_number(budget[k], f"{tag}: field 'resource_budget.{k}'") for k in RESOURCE_NAMES}
        return cls(
            id=data["id"],
            title=data["title"],
            story=data["story"],
            primary_disruption=data["primary_disruption"],
            decisions_required=data["decisions_required"],
            resource_budget=ResourceBudget(**amounts),
            difficulty=data["difficulty"],
        )


def _parse_templates(raw: Any, source: str) -> tuple[ConflictEvent, ...]:
    if not isinstance(raw, list):
        raise ValueError(f"{source}: expected a JSON list of conflict records")
    events = tuple(ConflictEvent.from_dict(r) for r in raw)
    ids = [e.id for e in events]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ValueError(f"{source}: duplicate conflict ids {dupes}")
    missing = sorted(set(range(MIN_DIFFICULTY, MAX_DIFFICULTY + 1)) - {e.difficulty for e in events})
    if missing:
        raise ValueError(f"{source}: no conflict template for difficulty {missing}")
    return events


def _read(path: Path) -> tuple[ConflictEvent, ...]:
    with open(path, encoding="utf-8") as fh:
        return _parse_templates(json.load(fh), str(path))


@functools.lru_cache(maxsize=1)
def _default_templates() -> tuple[ConflictEvent, ...]:
    return _read(DEFAULT_TEMPLATES_PATH)


def load_templates(path: str | Path | None = None) -> tuple[ConflictEvent, ...]:
    """All templates from ``path`` (default: the packaged file, read once per process)."""
    return _default_templates() if path is None else _read(Path(path))


def templates_for(difficulty: int) -> tuple[ConflictEvent, ...]:
    """The packaged templates of one difficulty, in file order."""
    difficulty = _check_difficulty(difficulty)
    return tuple(e for e in load_templates() if e.difficulty == difficulty)


def get_conflict(conflict_id: str) -> ConflictEvent:
    """A packaged template by id; ``"<id>+escalated"`` rebuilds the escalated variant."""
    if isinstance(conflict_id, str) and conflict_id.endswith(ESCALATED_SUFFIX):
        # Escalated ids appear in feedback records, so make them resolvable too.
        return escalate_conflict(get_conflict(conflict_id[: -len(ESCALATED_SUFFIX)]))
    for event in load_templates():
        if event.id == conflict_id:
            return event
    known = ", ".join(e.id for e in load_templates())
    raise KeyError(f"unknown conflict id {conflict_id!r}; known ids: {known}")


def generate_conflict(difficulty: int, rng: random.Random) -> ConflictEvent:
    """Pick one template of ``difficulty`` using ``rng`` (never the global RNG, for reproducibility)."""
    return rng.choice(templates_for(difficulty))


def escalate_conflict(conflict: ConflictEvent) -> ConflictEvent:
    """A harsher copy: deltas x1.4 (|delta| <= 40), budget x0.7, difficulty + 1 (max 5)."""
    cap = ESCALATION_DELTA_CAP
    # Round away float noise (12 * 1.4 = 16.799999...) so ids/deltas stay readable and stable.
    deltas = {
        path: round(max(-cap, min(cap, delta * ESCALATION_FACTOR)), 6)
        for path, delta in conflict.primary_disruption.items()
    }
    budget = ResourceBudget(
        *(round(getattr(conflict.resource_budget, k) * ESCALATION_BUDGET_FACTOR, 6) for k in RESOURCE_NAMES)
    )
    return ConflictEvent(
        id=conflict.id + ESCALATED_SUFFIX,
        title=ESCALATED_PREFIX + conflict.title,
        story=conflict.story,
        primary_disruption=deltas,
        decisions_required=conflict.decisions_required,
        resource_budget=budget,
        difficulty=min(MAX_DIFFICULTY, conflict.difficulty + 1),
    )


__all__ = [
    "ConflictEvent",
    "DEFAULT_TEMPLATES_PATH",
    "escalate_conflict",
    "generate_conflict",
    "get_conflict",
    "load_templates",
    "templates_for",
]
