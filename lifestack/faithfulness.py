"""Is the reasoning true of its action?

The coherence score (:func:`lifestack.task_reward.reasoning_coherence`) reads which words a
reasoning cites. This module reads what it *states* and checks it against the action it
explains, so a reasoning that says "I pay 6 hours" for an action that pays 2, names
another action type or another route, or claims to improve a metric the action does not
touch, scores less, in proportion to how wrong it is.

What counts as a statement (everything else is free wording and never punished):

- **A resource amount**: a number with a unit of time ("2 hours", "2h", "two hours",
  "90 minutes", "an hour"), money ("30 dollars", "$30", "30 USD", "$1.2k") or energy
  ("3 energy", "3 units of energy", "energy 3"). It is true when it matches a quantity
  of this decision: the action's cost, what was left before or after paying, the
  starting budget, or a number the prompt's FACTS line shows (a fare, ...). Its error
  is its relative distance to the cost beyond a rounding tolerance, capped at 1 (three
  times the true cost: 0.67), faded to 0 as it comes near one of the other true
  quantities (``amount_error``; continuous, so a hair's change of a number moves it by
  a hair).
- **The action type**: naming another action type (negotiate, communicate, delegate,
  reschedule, deprioritize) without naming its own is an error of 1. "Spend" and "rest"
  are ordinary words too ("spend 2 hours", "the rest"), so they confirm but never
  contradict.
- **The route**: naming another route of the task and not its own is an error of 1; so
  is claiming to advance a route when the action names none.
- **A metric claim**: "improve / raise / reduce / lower / ease / fix ... <metric>" for a
  metric the action does not change is an error of 1.

``faithfulness`` = 1 - (sum of errors) / (number of statements), in [0, 1]; 1 when the
reasoning states nothing checkable. Pure, never raises.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable, Mapping

from .actions import LifeStackAction
from .metrics import METRIC_PATHS

# --- numbers --------------------------------------------------------------------------
_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
         "sixteen seventeen eighteen nineteen").split()
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
WORD_NUMBERS: dict[str, float] = {w: float(i) for i, w in enumerate(_ONES)}
WORD_NUMBERS.update({w: float(v) for w, v in _TENS.items()})
WORD_NUMBERS.update({"a hundred": 100.0, "one hundred": 100.0, "hundred": 100.0, "a thousand": 1000.0,
                     "one thousand": 1000.0, "an": 1.0, "a": 1.0, "half an": 0.5, "half a": 0.5})
for _t, _v in _TENS.items():
    for _i, _o in enumerate(_ONES[1:10], start=1):
        WORD_NUMBERS[f"{_t}-{_o}"] = WORD_NUMBERS[f"{_t} {_o}"] = float(_v + _i)
_WORD_ALT = "|".join(sorted((re.escape(w) for w in WORD_NUMBERS), key=len, reverse=True))
_DIGITS = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+"
_UNIT = (r"hours?|hrs?|hr|h|minutes?|mins?|dollars?|usd|bucks"
         r"|(?:units?\s+of\s+|points?\s+of\s+)?energy(?:\s+units?|\s+points?)?")
# Units are rare in a text and numbers are not, so a statement is found from its unit
# back: a unit (or a "$"), then the number just before it (or just after a "$").
UNIT_RE = re.compile(rf"(?<![a-z])(?:{_UNIT})(?![a-z])|\$")
DIGITS_BEFORE_RE = re.compile(rf"(?<![\w.])(?P<num>{_DIGITS})\s*(?P<k>k)?$")
NUMBER_AFTER_RE = re.compile(rf"\s*(?P<num>{_DIGITS})(?P<k>k\b)?")
RESOURCE_OF_UNIT = {"h": "time", "hr": "time", "hrs": "time", "hour": "time", "hours": "time", "minute": "time",
                    "minutes": "time", "min": "time", "mins": "time", "dollar": "money", "dollars": "money",
                    "usd": "money", "bucks": "money"}
ABSOLUTE_TOLERANCE = {"time": 0.05, "money": 0.5, "energy": 0.05}  # rounding a model may do
RELATIVE_TOLERANCE = 0.01
NEAR_SHARE = 0.05  # within this share of another true quantity, a stated amount fades to true
_LOOK_BACK = 40  # characters before a unit where its number may start


def _number_before(before: str) -> tuple[float | None, bool, int]:
    """The number that ends ``before`` (digits, or words such as "two", "twenty-five", "an"):
    ``(value or None, written in words, where it starts in before)``."""
    tail = before.rstrip(" \t-")
    m = DIGITS_BEFORE_RE.search(tail)
    if m is not None:
        value = float(m.group("num").replace(",", ""))
        return (value * 1000.0 if m.group("k") else value), False, m.start()
    words = tail.lower().split()
    for n in (2, 1):  # "twenty five", "half an", "a hundred"; then "two", "twenty-five"
        if len(words) >= n:
            phrase = " ".join(words[-n:])
            if phrase in WORD_NUMBERS:
                return WORD_NUMBERS[phrase], True, len(tail) - len(phrase)
    return None, False, 0


def stated_amounts(text: str) -> list[tuple[str, float]]:
    """``(resource, amount)`` for every resource amount the text states, in order."""
    text = text.lower()
    out: list[tuple[str, float]] = []
    for u in UNIT_RE.finditer(text):
        unit = u.group().lower()
        before = text[max(0, u.start() - _LOOK_BACK):u.start()]
        if unit == "$":  # "$30", "$ 1,200", "$1.2k"; or "30$"
            m = NUMBER_AFTER_RE.match(text, u.end())
            if m is not None:
                value = float(m.group("num").replace(",", ""))
                out.append(("money", value * 1000.0 if m.group("k") else value))
            else:
                value, in_words, _ = _number_before(before)
                if value is not None and not in_words:
                    out.append(("money", value))
            continue
        value, in_words, start = _number_before(before)
        if value is None:
            if "energy" in unit:  # "energy 3", as the prompt writes the budget (not "energy 3 hours")
                m = NUMBER_AFTER_RE.match(text, u.end())
                if m is not None and not m.group("k") and UNIT_RE.match(text, m.end() + 1) is None \
                        and UNIT_RE.match(text, m.end()) is None:
                    out.append(("energy", float(m.group("num").replace(",", ""))))
            continue
        if before[:start].rstrip().endswith("$"):
            continue  # "$30 dollars": the "$" already stated it
        if in_words and value == 1.0 and not unit.startswith("h") and before.rstrip().lower().endswith(("a", "an")):
            continue  # "an hour" is an amount; "a dollar" rarely is one a model means
        if "energy" in unit:
            resource = "energy"
        else:
            resource = RESOURCE_OF_UNIT.get(unit.split()[0])
            if resource is None:
                continue
            if unit.startswith("min"):
                value /= 60.0
        out.append((resource, value))
    return out


def _near(value: float, t: float, width: float, resource: str) -> float:
    """0 at ``t`` (within the rounding tolerance), rising to 1 ``width`` further away."""
    t = abs(t)
    gap = abs(value - t) - max(ABSOLUTE_TOLERANCE[resource], RELATIVE_TOLERANCE * t)
    return min(1.0, max(0.0, gap / max(width, ABSOLUTE_TOLERANCE[resource])))


def amount_error(value: float, cost: float, others: Iterable[float], resource: str, scale: float = 0.0,
                 facts: Iterable[float] = ()) -> float:
    """How wrong a stated amount is, in [0, 1]: its relative distance to the cost beyond a
    rounding tolerance, scaled down to 0 as it comes near another true quantity: one of
    ``others`` (what was left before or after paying, the starting budget), near meaning
    within NEAR_SHARE of the larger of that quantity and ``scale`` (the starting budget: a
    width that does not shrink as what is left shrinks with the cost), or one of
    ``facts`` (numbers the situation shows, such as a fare), within NEAR_SHARE of the
    fact itself. Continuous in the stated amount and in the cost: a hair's change moves
    it by a hair."""
    cost = abs(cost)
    gap = abs(value - cost) - max(ABSOLUTE_TOLERANCE[resource], RELATIVE_TOLERANCE * cost)
    error = 0.0 if gap <= 0.0 else min(1.0, gap / max(value, cost))
    if error == 0.0:
        return 0.0
    factor = 1.0
    for t in others:
        factor = min(factor, _near(value, t, NEAR_SHARE * max(abs(t), scale), resource))
    for t in facts:
        factor = min(factor, _near(value, t, NEAR_SHARE * abs(t), resource))
    return error * factor


# --- action types, routes, metrics ----------------------------------------------------
TYPE_RE = re.compile(
    r"\b(?:(?P<negotiate>negotiat)|(?P<communicate>communicat)|(?P<delegate>delegat)|(?P<reschedule>reschedul)"
    r"|(?P<deprioritize>de-?prioriti[sz])|(?P<spend>spen[dt])|(?P<rest>(?:rest|rests|resting|rested)\b(?!\s+of\b)))")
AMBIGUOUS_TYPES = frozenset({"spend", "rest"})  # ordinary words as well: they confirm, never contradict
CLAIM_VERBS = (r"(?:improv\w*|rais(?:e|es|ed|ing)|boost\w*|lift\w*|fix\w*|restor\w*|repair\w*|reduc\w*"
               r"|lower(?:s|ed|ing)?|cut(?:s|ting)?|eas(?:e|es|ed|ing)|reliev\w*|strengthen\w*|rebuild\w*)")


GENERIC_METRIC_WORDS = frozenset("pressure monthly long term health quality level burden overhead free hours per week "
                                 "energy time".split())  # too common to name one metric alone


def _metric_phrases() -> dict[str, tuple[str, ...]]:
    """Words a reasoning uses to name each metric: its name in words ("sleep quality") and
    each of its words that names no other metric and is not a common word ("sleep").
    Energy is left out: the word names the resource an action pays with as well."""
    names = {p: p.split(".")[1].replace("_", " ") for p in METRIC_PATHS}
    owners: dict[str, set[str]] = {}
    for p, name in names.items():
        for w in name.split():
            owners.setdefault(w, set()).add(p)
    out = {}
    for p, name in names.items():
        if name in GENERIC_METRIC_WORDS:
            continue
        phrases = {name} | {w for w in name.split() if len(owners[w]) == 1 and w not in GENERIC_METRIC_WORDS}
        out[p] = tuple(sorted(phrases, key=len, reverse=True))
    return out


METRIC_PHRASES = _metric_phrases()
_METRIC_OF_PHRASE = {ph: p for p, phs in METRIC_PHRASES.items() for ph in phs}
CLAIM_VERB_RE = re.compile(rf"\b{CLAIM_VERBS}\b")  # the cheap test before METRIC_CLAIM_RE
METRIC_CLAIM_RE = re.compile(
    rf"\b{CLAIM_VERBS}\s+(?:[a-z']+\s+){{0,3}}?(?P<m>{'|'.join(sorted(map(re.escape, _METRIC_OF_PHRASE), key=len, reverse=True))})\b")


@lru_cache(maxsize=1024)
def route_pattern(routes: tuple[tuple[str, str], ...]) -> tuple[re.Pattern, dict[str, str]]:
    """One pattern for every way the task's ``(route id, route name)`` pairs are written (the
    id as it is, with spaces, or the name), and the route each written form names."""
    owner: dict[str, str] = {}
    for rid, name in reversed(routes):  # the first route of a phrase wins
        for phrase in (rid.lower(), rid.lower().replace("_", " "), name.lower()):
            if phrase:
                owner[phrase] = rid
    alt = "|".join(sorted((re.escape(p) for p in owner), key=len, reverse=True))
    return re.compile(rf"(?<![\w-])(?:{alt})(?![\w-])"), owner


def faithfulness(reasoning: str, action: LifeStackAction, *, routes: tuple[tuple[str, str], ...] = (),
                 truths: Mapping[str, Iterable[float]] | None = None,
                 scale: Mapping[str, float] | None = None, facts: Iterable[float] = ()) -> tuple[float, dict[str, float]]:
    """``(score in [0, 1], details)`` of how true the reasoning is of ``action``.

    ``routes``: the task's ``(route id, name)`` pairs. ``truths``: per resource, the true
    quantities an amount may state (the cost is always one of them); ``scale``: per
    resource, the starting budget (how near "near" is, ``amount_error``); ``facts``: the
    numbers the situation shows (any resource may state them). ``details`` counts
    the statements and their summed error per kind.
    """
    if not reasoning:
        return 1.0, {}
    reasoning = reasoning.lower()  # every pattern here is lower case
    errors: dict[str, float] = {}
    counts: dict[str, int] = {}

    def note(kind: str, error: float) -> None:
        counts[kind] = counts.get(kind, 0) + 1
        errors[kind] = errors.get(kind, 0.0) + error

    cost = action.resource_cost
    for resource, value in stated_amounts(reasoning):
        note("amounts", amount_error(value, cost.get(resource, 0.0), (truths or {}).get(resource, ()), resource,
                                     (scale or {}).get(resource, 0.0), facts))

    stated = {m.lastgroup for m in TYPE_RE.finditer(reasoning)}
    if stated and action.action_type not in stated:
        note("action_type", 1.0 if stated - AMBIGUOUS_TYPES else 0.0)
    elif stated:
        note("action_type", 0.0)

    if routes:
        pattern, owner = route_pattern(routes)
        named = {owner[m.group().lower()] for m in pattern.finditer(reasoning)}
        own = action.route if action.route in dict(routes) else None
        if own is not None and named:
            note("route", 0.0 if own in named else 1.0)
        elif own is None and named and "advanc" in reasoning:
            note("route", 1.0)  # claims progress on a route the action does not name

    claimed = set()
    for m in (METRIC_CLAIM_RE.finditer(reasoning) if CLAIM_VERB_RE.search(reasoning) else ()):
        path = _METRIC_OF_PHRASE.get(m.group("m").lower())
        if path is not None and path not in claimed:
            claimed.add(path)
            note("metrics", 0.0 if path in action.metric_changes else 1.0)

    n = sum(counts.values())
    if n == 0:
        return 1.0, {}
    score = 1.0 - sum(errors.values()) / n
    details = {f"{k}.statements": float(v) for k, v in counts.items()}
    details.update({f"{k}.error": round(v, 4) for k, v in errors.items()})
    return max(0.0, min(1.0, score)), details
