"""Answer diversity: has a policy collapsed onto one answer while the tasks vary?

A GRPO policy can stop reading the prompt and write the same action everywhere (every
answer targeting one domain and naming one route, also on tasks where that route does
not exist). :func:`answer_diversity` measures, per task family, how many distinct
``action_type x target_domain x route`` answers a set of parsed actions holds, and how
often the route named is one of the task's own routes. The trainer reports it per stage.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from .actions import LifeStackAction

COLLAPSE_MIN_ANSWERS = 4  # fewer parsed answers in a family say nothing about collapse


def answer_key(action: LifeStackAction) -> tuple[str, str, str | None]:
    """What one decision chose: ``(action_type, target_domain, route)``; two answers with
    the same key are the same answer for diversity and for imitation of a demonstrator."""
    return action.action_type, action.target_domain, action.route


def answer_diversity(records: Iterable[tuple[str, LifeStackAction | None, Sequence[str]]]) -> dict[str, dict]:
    """Per task family: ``answers`` (parsed), ``distinct`` answers, ``distinct_share``,
    ``route_named`` (share naming a route), ``route_fits`` (share of those whose route is
    one of the task's), and ``collapsed`` (at least COLLAPSE_MIN_ANSWERS answers, all one).

    ``records`` holds ``(task family, parsed action or None, the task's route ids)``;
    unparsed answers are left out.
    """
    seen: dict[str, list[tuple[str, str, str | None]]] = {}
    fits: dict[str, list[bool]] = {}
    for family, action, routes in records:
        if action is None:
            continue
        seen.setdefault(family, []).append(answer_key(action))
        if action.route:
            fits.setdefault(family, []).append(action.route in routes)
    out = {}
    for family, answers in sorted(seen.items()):
        n, distinct = len(answers), len(set(answers))
        named = fits.get(family, [])
        out[family] = {
            "answers": n,
            "distinct": distinct,
            "distinct_share": round(distinct / n, 4),
            "route_named": round(len(named) / n, 4),
            "route_fits": round(sum(named) / len(named), 4) if named else None,
            "collapsed": n >= COLLAPSE_MIN_ANSWERS and distinct == 1,
        }
    return out
