"""The action schema and the one parser every caller uses.

A completion is untrusted text. :func:`parse_action` finds the first JSON object in it
(code fences allowed), validates every field and returns ``(action, None)`` or
``(None, reason)``. It never raises. What it forgives is written down in
``action.notes`` (trailing text, dropped unknown metrics, clamped deltas, negative costs
zeroed, missing optional fields), so the format and plausibility rewards can grade it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from .metrics import DOMAIN_NAMES, METRIC_INDEX, RESOURCE_NAMES

ACTION_TYPES: tuple[str, ...] = (
    "negotiate",
    "communicate",
    "delegate",
    "spend",
    "reschedule",
    "rest",
    "deprioritize",
)
ACTION_FIELDS: tuple[str, ...] = (
    "action_type",
    "target_domain",
    "route",
    "metric_changes",
    "resource_cost",
    "reasoning",
)
OPTIONAL_FIELDS: tuple[str, ...] = ("route", "metric_changes", "resource_cost", "reasoning")

MAX_METRIC_DELTA = 20.0  # per-metric envelope for a claimed change (raw points)
MAX_COST = {"time": 48.0, "money": 100_000.0, "energy": 100.0}  # sane ceilings
MAX_REST_RECOVERY = 20.0  # rest may recover at most this much energy (negative cost)
MAX_REASONING_CHARS = 2000
MAX_FENCE_SCAN = 8  # at most this many '{' starts are tried (no quadratic scans)
MAX_TEXT_CHARS = 200_000  # longer completions are judged on this prefix only


@dataclass(frozen=True, slots=True)
class LifeStackAction:
    action_type: str
    target_domain: str
    route: str | None = None
    metric_changes: Mapping[str, float] = field(default_factory=dict)
    resource_cost: Mapping[str, float] = field(default_factory=lambda: dict.fromkeys(RESOURCE_NAMES, 0.0))
    reasoning: str = ""
    notes: tuple[str, ...] = ()  # what the parser forgave; empty for a clean answer
    # Set only by parse_action (not a constructor argument): the env re-validates every
    # action built by hand.
    validated: bool = field(default=False, init=False, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "action_type": self.action_type,
            "target_domain": self.target_domain,
            "route": self.route,
            "metric_changes": dict(self.metric_changes),
            "resource_cost": dict(self.resource_cost),
            "reasoning": self.reasoning,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict())


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite(value: Any, what: str) -> tuple[float, str | None]:
    """``(float(value), None)``, or ``(0.0, reason)`` for a non-number, NaN or infinity."""
    if not _is_number(value):
        return 0.0, f"{what} is not a number"
    try:
        value = float(value)
    except OverflowError:  # an int too large for a float
        return 0.0, f"{what} is not finite"
    if not math.isfinite(value):
        return 0.0, f"{what} is not finite"
    return value, None


_DECODER = json.JSONDecoder()  # stateless; built once (its constructor is not free)


def find_json_object(text: str) -> tuple[Any, str | None, str]:
    """Decode the first JSON object in ``text``.

    Returns ``(obj, error, trailing)``: ``trailing`` is the non-blank text after the
    object once a closing code fence is removed.
    """
    decoder = _DECODER
    start = text.find("{")
    tries = 0
    last_error = "no JSON object found"
    while start != -1 and tries < MAX_FENCE_SCAN:
        tries += 1
        try:
            obj, end = decoder.raw_decode(text, start)
        except RecursionError:
            return None, "JSON nested too deeply", ""
        except ValueError as exc:
            last_error = f"invalid JSON: {getattr(exc, 'msg', str(exc))}"
            start = text.find("{", start + 1)
            continue
        trailing = text[end:].strip()
        if trailing.startswith("```"):
            trailing = trailing[3:].strip()
        return obj, None, trailing
    return None, last_error, ""


def _parse_fields(obj: Mapping[str, Any]) -> tuple[LifeStackAction | None, str | None]:
    notes: list[str] = []
    action_type = obj.get("action_type")
    if not isinstance(action_type, str):
        return None, "missing or non-string action_type"
    action_type = action_type.strip().lower()
    if action_type not in ACTION_TYPES:
        return None, f"unknown action_type {action_type[:40]!r}; expected one of {', '.join(ACTION_TYPES)}"
    target = obj.get("target_domain")
    if not isinstance(target, str) or target.strip().lower() not in DOMAIN_NAMES:
        return None, f"target_domain must be one of {', '.join(DOMAIN_NAMES)}"
    target = target.strip().lower()

    route = obj.get("route")
    if route is not None and not isinstance(route, str):
        return None, "route must be a string or null"
    if isinstance(route, str):
        route = route.strip()[:80] or None

    changes_in = obj.get("metric_changes", {})
    if changes_in is None:
        changes_in = {}
    if not isinstance(changes_in, dict):
        return None, "metric_changes must be an object"
    changes: dict[str, float] = {}
    for path, delta in changes_in.items():
        if path not in METRIC_INDEX:
            notes.append(f"dropped_unknown_metric:{str(path)[:40]}")
            continue
        if type(delta) is not float or delta - delta != 0.0:  # fast path: a finite float
            delta, error = _finite(delta, f"metric_changes[{path}]")
            if error:
                return None, error
        if abs(delta) > MAX_METRIC_DELTA:
            notes.append(f"clamped:{path}")
            delta = math.copysign(MAX_METRIC_DELTA, delta)
        if delta:
            changes[path] = delta

    cost_in = obj.get("resource_cost", {})
    if cost_in is None:
        cost_in = {}
    if not isinstance(cost_in, dict):
        return None, "resource_cost must be an object"
    cost = dict.fromkeys(RESOURCE_NAMES, 0.0)
    for key, value in cost_in.items():
        if key not in cost:
            notes.append(f"ignored_cost:{str(key)[:20]}")
            continue
        if type(value) is not float or value - value != 0.0:
            value, error = _finite(value, f"resource_cost[{key}]")
            if error:
                return None, error
        if value < 0:
            # Negative costs never add resources, except rest recovering energy (bounded).
            if action_type == "rest" and key == "energy":
                value = max(value, -MAX_REST_RECOVERY)
            else:
                notes.append(f"negative_cost:{key}")
                value = 0.0
        cost[key] = min(value, MAX_COST[key])

    reasoning = obj.get("reasoning", "")
    if not isinstance(reasoning, str):
        notes.append("non_string_reasoning")
        reasoning = ""
    reasoning = reasoning.strip()[:MAX_REASONING_CHARS]

    for name in OPTIONAL_FIELDS:
        if name not in obj:
            notes.append(f"missing:{name}")
    action = LifeStackAction(action_type, target, route, changes, cost, reasoning, tuple(notes))
    object.__setattr__(action, "validated", True)
    return action, None


def _with_notes(action: LifeStackAction, notes: tuple[str, ...]) -> LifeStackAction:
    """A copy of a parsed action with other notes (it stays validated)."""
    out = LifeStackAction(action.action_type, action.target_domain, action.route, action.metric_changes,
                          action.resource_cost, action.reasoning, notes)
    object.__setattr__(out, "validated", action.validated)
    return out


def parse_action(text: Any) -> tuple[LifeStackAction | None, str | None]:
    """Parse a completion (text, or an already-decoded dict) into a validated action.

    Returns ``(action, None)`` on success and ``(None, reason)`` otherwise; never raises.
    """
    try:
        if isinstance(text, dict):
            obj, trailing = text, ""
        else:
            if not isinstance(text, str):
                return None, "completion is not text"
            if not text.strip():
                return None, "empty completion"
            obj, error, trailing = find_json_object(text[:MAX_TEXT_CHARS])
            if error is not None:
                return None, error
            if not isinstance(obj, dict):
                return None, "JSON value is not an object"
        action, error = _parse_fields(obj)
        if action is None:
            return None, error
        if trailing:
            action = _with_notes(action, action.notes + ("trailing_text",))
        return action, None
    except Exception as exc:  # untrusted input: report, never raise
        return None, f"unparseable completion ({type(exc).__name__})"
