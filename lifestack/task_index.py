"""Lookups derived from one task (routes by id, the words naming each route, milestones by
route, events by step), built once per task object: tasks are immutable and shared by
every prompt of the same (domain, difficulty, seed), so the environment's step and the
reward read these instead of scanning the task's tuples each time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .task_reward import words_of
from .tasks import ExoEvent, Milestone, Route, Task


@dataclass(frozen=True)
class TaskIndex:
    """Lookups derived from one :class:`Task`, built once per task object.

    Tasks are immutable and shared by every prompt of the same (domain, difficulty,
    seed), so the step reads these instead of scanning the task's tuples each time.
    """

    routes: Mapping[str, Route]
    route_words: Mapping[str, frozenset[str]]  # words naming each route (reasoning coherence)
    route_names: tuple[tuple[str, str], ...]  # (id, name) of each route (reasoning faithfulness)
    # words of every *other* route, keyed by the chosen route id ("" for none)
    other_route_words: Mapping[str, frozenset[str]]
    all_route_words: frozenset[str]
    # milestones whose condition reads a world key the route changes when it advances
    milestones_by_route: Mapping[str, tuple[Milestone, ...]]
    milestones_by_id: Mapping[str, Milestone]
    events_by_step: Mapping[int, tuple[ExoEvent, ...]]
    events_by_id: Mapping[str, ExoEvent]

    @classmethod
    def build(cls, task: Task) -> TaskIndex:
        words = {r.id: frozenset(w for w in words_of(r.id + " " + r.name) if len(w) > 3) for r in task.viable_routes}
        every = frozenset().union(*words.values())
        others = {rid: every - w for rid, w in words.items()}
        others[""] = every
        by_route = {}
        for r in task.viable_routes:
            keys = {r.progress_key, *r.consequences}
            by_route[r.id] = tuple(m for m in task.milestones if m.condition_key in keys)
        by_step: dict[int, list[ExoEvent]] = {}
        for ev in task.event_schedule:
            by_step.setdefault(ev.step, []).append(ev)
        return cls(
            routes={r.id: r for r in reversed(task.viable_routes)},  # the first route of an id wins, as Task.route
            route_words=words, route_names=tuple((r.id, r.name) for r in task.viable_routes), other_route_words=others, all_route_words=every, milestones_by_route=by_route,
            milestones_by_id={m.id: m for m in reversed(task.milestones)},
            events_by_step={k: tuple(v) for k, v in by_step.items()},
            events_by_id={e.id: e for e in task.event_schedule},  # the last of an id wins, as rebuild_state had it
        )


def task_index(task: Task) -> TaskIndex:
    """The :class:`TaskIndex` of ``task``, built on first use and kept on the task itself
    (tasks are frozen; the index is not a field, so equality, hashing and
    ``dataclasses.replace`` ignore it and a replaced task gets its own)."""
    index = getattr(task, "__dict__", {}).get("_lifestack_index")
    if index is None:
        index = TaskIndex.build(task)
        try:
            object.__setattr__(task, "_lifestack_index", index)
        except (AttributeError, TypeError):  # an object without a __dict__: rebuild next time
            pass
    return index
