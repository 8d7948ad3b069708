"""lifestack.task_index: the lookups a task's step reads, built once per task object."""

from __future__ import annotations

import dataclasses

import pytest

from lifestack.generator import DOMAINS, TaskGenerator
from lifestack.task_index import TaskIndex, task_index

GEN = TaskGenerator()


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("difficulty", [1, 3, 5])
def test_task_index_agrees_with_the_task(domain, difficulty):
    task = GEN.generate(domain, difficulty, 4)
    index = task_index(task)
    assert task_index(task) is index  # built once per task object
    assert set(index.routes) == set(task.route_ids)
    for r in task.viable_routes:
        assert index.routes[r.id] is task.route(r.id)
        keys = {r.progress_key, *r.consequences}
        assert index.milestones_by_route[r.id] == tuple(m for m in task.milestones if m.condition_key in keys)
        assert index.other_route_words[r.id] == index.all_route_words - index.route_words[r.id]
    assert index.other_route_words[""] == index.all_route_words
    assert sorted(e.id for evs in index.events_by_step.values() for e in evs) == sorted(e.id for e in task.event_schedule)
    for m in task.milestones:
        assert index.milestones_by_id[m.id] is m


def test_task_index_of_a_replaced_task_is_its_own():
    task = GEN.generate("flight_crisis", 2, 0)
    routes = tuple(dataclasses.replace(r, id=r.id + "_v2") if i == 0 else r for i, r in enumerate(task.viable_routes))
    other = dataclasses.replace(task, viable_routes=routes)
    assert "rebook_premium_v2" in task_index(other).routes and "rebook_premium_v2" not in task_index(task).routes
    assert isinstance(TaskIndex.build(task), TaskIndex)


