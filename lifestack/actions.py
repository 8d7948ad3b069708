"""The action schema and the one parser every caller uses.

A completion is untrusted text. :func:`parse_action` finds the first JSON object in it
that is an action (has ``action_type``), wherever it sits among prose, code fences or
``<think>`` blocks, validates every field and returns ``(action, None)`` or
``(None, reason)``. It never raises. What it forgives is written down in
``action.notes`` (trailing text, near-JSON repaired, duplicated or extra keys, casing
normalised, numbers written as strings, dropped unknown metrics, clamped deltas, negative
costs zeroed, missing optional fields), so the format and plausibility rewards can grade
it. docs/rewards.md ("What the parser accepts") lists every rule.
"""

from __future__ import annotations

import json
import math
import re
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
MAX_TEXT_CHARS = 20_000  # the parser reads this prefix of a completion; every '{' in it is a candidate
MAX_NOTES_PER_KIND = 4  # beyond this many extra keys / unknown metrics, one summary note
# The failed candidates of one scan may read at most this many times the text in all: an
# answer of '{"a":' repeated re-reads the rest of the text from every '{' (the square of
# its length); no honest answer comes near the bound.
MAX_SCAN_FACTOR = 50


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


# The schema writes "route id or null"; a model that quotes the placeholder claims no route.
ROUTE_PLACEHOLDERS = frozenset({"", "null", "none", "n/a", "na", "nil", "-", "no route", "<route id or null>"})
# Near-JSON the parser repairs (with the note "near_json", which costs format score):
# a trailing comma before } or ], and a leading + on a number.
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_PLUS_NUMBER = re.compile(r"([:\[,]\s*)\+(?=\.?[0-9])")


class _DuplicateKeys(dict):
    """A decoded JSON object in which some key appeared twice (the last value kept)."""


def _pairs_hook(pairs: list) -> dict:
    obj = dict(pairs)
    return obj if len(obj) == len(pairs) else _DuplicateKeys(obj)


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs_hook)  # stateless; built once


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


def _number(value: Any, what: str, notes: list[str]) -> tuple[float, str | None]:
    """A finite float from a JSON number, or from a string that holds one (noted)."""
    if isinstance(value, str):
        try:
            parsed = float(value.strip())
        except ValueError:
            return 0.0, f"{what} is not a number"
        if not math.isfinite(parsed):
            return 0.0, f"{what} is not finite"
        notes.append(f"string_number:{what}")
        return parsed, None
    return _finite(value, what)


def _scan(text: str) -> tuple[Any, str | None, int, Any]:
    """Try every '{' in ``text``: ``(action object, error, end, first other object)``.

    The action object is the first decoded JSON object with an ``action_type`` key; the
    first decoded object without one is returned too (the format reward grades it).
    """
    decoder = _DECODER
    start = text.find("{")
    first_other: Any = None
    last_error = "no JSON object found"
    budget = MAX_SCAN_FACTOR * max(len(text), 1000)  # characters the failed candidates may read in all
    while start != -1:
        try:
            obj, end = decoder.raw_decode(text, start)
        except RecursionError:
            last_error = "JSON nested too deeply"
            budget -= len(text) - start
        except ValueError as exc:
            last_error = f"invalid JSON: {getattr(exc, 'msg', str(exc))}"
            budget -= max(getattr(exc, "pos", len(text)) - start, 1)
        else:
            if "action_type" in obj:  # raw_decode at a '{' only ever returns an object
                return obj, None, end, first_other
            if first_other is None:
                first_other = obj
        if budget <= 0:  # only nesting built to be re-read from every '{' gets here
            return None, "JSON scan stopped: too many nested candidates", 0, first_other
        start = text.find("{", start + 1)
    return None, last_error, 0, first_other


def _trailing(text: str, end: int) -> str:
    trailing = text[end:].strip()
    if trailing.startswith("```"):
        trailing = trailing[3:].strip()
    return trailing


def find_json_object(text: str) -> tuple[Any, str | None, str]:
    """Decode the JSON object in ``text`` that is an action.

    Every '{' in the first ``MAX_TEXT_CHARS`` characters is a candidate, so prose,
    ``<think>`` blocks and small objects before the answer do not hide it. The first
    object with an ``action_type`` key wins; failing that, the same scan runs on the
    near-JSON repair of the text (trailing commas, ``+5``), and the object comes back
    with ``"__near_json__": True``. With no action at all, the first other object is
    returned (it is not an action; the caller rejects it). Returns ``(obj, error,
    trailing)``: ``trailing`` is the non-blank text after the object once a closing code
    fence is removed.
    """
    text = text[:MAX_TEXT_CHARS]
    obj, error, end, other = _scan(text)
    if obj is not None:
        return obj, None, _trailing(text, end)
    repaired = _PLUS_NUMBER.sub(r"\1", _TRAILING_COMMA.sub(r"\1", text))
    if repaired != text:
        fixed, _, end, _ = _scan(repaired)
        if fixed is not None:
            fixed = type(fixed)(fixed)
            fixed["__near_json__"] = True
            return fixed, None, _trailing(repaired, end)
    if other is not None:
        return other, None, ""
    return None, error, ""


def _capped_note(notes: list[str], counts: dict[str, int], kind: str, detail: str) -> None:
    """Note ``kind:detail``, at most MAX_NOTES_PER_KIND times per kind (then ``kind:+more``)."""
    n = counts.get(kind, 0) + 1
    counts[kind] = n
    if n <= MAX_NOTES_PER_KIND:
        notes.append(f"{kind}:{detail}")
    elif n == MAX_NOTES_PER_KIND + 1:
        notes.append(f"{kind}:+more")


def _parse_fields(obj: Mapping[str, Any]) -> tuple[LifeStackAction | None, str | None]:
    notes: list[str] = []
    counts: dict[str, int] = {}
    if obj.get("__near_json__") is True:
        notes.append("near_json")
    if type(obj) is _DuplicateKeys:
        notes.append("duplicate_key")
    for key in obj:
        if key not in ACTION_FIELDS and key != "__near_json__":
            _capped_note(notes, counts, "extra_key", str(key)[:20])
    action_type = obj.get("action_type")
    if not isinstance(action_type, str):
        return None, "missing or non-string action_type"
    clean = action_type.strip().lower()
    if clean not in ACTION_TYPES:
        return None, f"unknown action_type {clean[:40]!r}; expected one of {', '.join(ACTION_TYPES)}"
    if clean != action_type:
        notes.append("normalized:action_type")
    action_type = clean
    target = obj.get("target_domain")
    if not isinstance(target, str) or target.strip().lower() not in DOMAIN_NAMES:
        return None, f"target_domain must be one of {', '.join(DOMAIN_NAMES)}"
    if target.strip().lower() != target:
        notes.append("normalized:target_domain")
    target = target.strip().lower()

    route = obj.get("route")
    if route is not None and not isinstance(route, str):
        return None, "route must be a string or null"
    if isinstance(route, str):
        route = route.strip()[:80]
        if route.lower() in ROUTE_PLACEHOLDERS:
            route = None  # the schema's own placeholder: no route claimed

    changes_in = obj.get("metric_changes", {})
    if changes_in is None:
        changes_in = {}
    if not isinstance(changes_in, dict):
        return None, "metric_changes must be an object"
    if type(changes_in) is _DuplicateKeys and "duplicate_key" not in notes:
        notes.append("duplicate_key")
    changes: dict[str, float] = {}
    for path, delta in changes_in.items():
        if path not in METRIC_INDEX:
            _capped_note(notes, counts, "dropped_unknown_metric", str(path)[:40])
            continue
        if type(delta) is not float or delta - delta != 0.0:  # fast path: a finite float
            delta, error = _number(delta, f"metric_changes[{path}]", notes)
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
    if type(cost_in) is _DuplicateKeys and "duplicate_key" not in notes:
        notes.append("duplicate_key")
    cost = dict.fromkeys(RESOURCE_NAMES, 0.0)
    for key, value in cost_in.items():
        if key not in cost:
            _capped_note(notes, counts, "ignored_cost", str(key)[:20])
            continue
        if type(value) is not float or value - value != 0.0:
            value, error = _number(value, f"resource_cost[{key}]", notes)
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
    reasoning = reasoning.strip()
    if len(reasoning) > MAX_REASONING_CHARS:
        notes.append("truncated_reasoning")
        reasoning = reasoning[:MAX_REASONING_CHARS]

    for name in OPTIONAL_FIELDS:
        if name not in obj:
            notes.append(f"missing:{name}")
    action = LifeStackAction(action_type, target, route, changes, cost, reasoning, tuple(notes))
    object.__setattr__(action, "validated", True)
    return action, None


def with_notes(action: LifeStackAction, notes: tuple[str, ...]) -> LifeStackAction:
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
            obj, error, trailing = find_json_object(text)
            if error is not None:
                return None, error
            if "action_type" not in obj:
                return None, "no JSON object with an action_type"
        action, error = _parse_fields(obj)
        if action is None:
            return None, error
        if trailing:
            action = with_notes(action, action.notes + ("trailing_text",))
        return action, None
    except Exception as exc:  # untrusted input: report, never raise
        return None, f"unparseable completion ({type(exc).__name__})"
