"""Tests for lifestack.tasks: dataclasses and the world-condition language."""

from __future__ import annotations

import dataclasses

import pytest

from lifestack.tasks import (
    ExoEvent,
    Milestone,
    Route,
    Task,
    all_hold,
    any_holds,
    condition_holds,
    missing_task_fields,
    read_world,
)


def make_task(**overrides) -> Task:
    fields = dict(
        id="t1", domain="flight_crisis", goal="get there", constraints={"budget": {"time": 1, "money": 1, "energy": 1}},
        hidden_state={"seats_left": 2}, mutable_world={"goal_met": False}, visible_world={"origin": "Austin"},
        success_conditions={"goal_met": True}, failure_conditions={"stranded": True}, event_schedule=(),
        viable_routes=(Route("a", "A", "route a", ("negotiate", "spend")), Route("b", "B", "route b", ("rest",))),
        milestones=(), horizon=4, difficulty=1,
    )
    fields.update(overrides)
    return Task(**fields)


WORLD = {"flag": True, "name": "x", "count": 3, "ratio": 0.5, "off": False}
HIDDEN = {"seats_left": 2, "cause": "race"}


@pytest.mark.parametrize(
    "key, expected, result",
    [
        ("flag", True, True),
        ("flag", False, False),
        ("off", False, True),
        ("name", "x", True),
        ("name", "y", False),
        ("count", 3, True),  # a number means "at least"
        ("count", 2, True),
        ("count", 4, False),
        ("ratio", 0.5, True),
        ("flag", 1, False),  # a bool is not a number
        ("name", 1, False),
        ("missing", 1, False),
        ("missing", None, True),
        ("missing", True, False),
        ("hidden.seats_left", 2, True),
        ("hidden.seats_left", 3, False),
        ("hidden.cause", "race", True),
        ("hidden.nothing", True, False),
        ("seats_left", 2, False),  # hidden state is not in the visible world
    ],
)
def test_condition_holds(key, expected, result):
    assert condition_holds(WORLD, HIDDEN, key, expected) is result


def test_read_world_hidden_prefix():
    assert read_world(WORLD, HIDDEN, "hidden.seats_left") == 2
    assert read_world(WORLD, HIDDEN, "count") == 3
    assert read_world(WORLD, HIDDEN, "nope") is None


def test_all_and_any():
    assert all_hold(WORLD, HIDDEN, {"flag": True, "count": 1})
    assert not all_hold(WORLD, HIDDEN, {"flag": True, "count": 10})
    assert all_hold(WORLD, HIDDEN, {})
    assert any_holds(WORLD, HIDDEN, {"flag": False, "count": 1})
    assert not any_holds(WORLD, HIDDEN, {"flag": False, "count": 10})
    assert not any_holds(WORLD, HIDDEN, {})


def test_route_helpers():
    t = make_task()
    assert t.route_ids == ("a", "b")
    assert t.route("b").required_action_types == ("rest",)
    assert t.route("zzz") is None
    assert t.route("a").progress_key == "progress.a"


def test_missing_task_fields():
    assert missing_task_fields(make_task()) == []
    assert missing_task_fields(make_task(goal="", visible_world={})) == ["goal", "visible_world"]
    assert missing_task_fields(make_task(constraints=None)) == ["constraints"]


def test_dataclasses_are_frozen():
    t = make_task()
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.horizon = 9  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.viable_routes[0].final_reward = 3  # type: ignore[misc]
    m = Milestone("m", "d", "progress.a", 1, 0.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.reward = 1  # type: ignore[misc]
    e = ExoEvent(2, 0.5, "ev", "desc")
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.step = 1  # type: ignore[misc]


def test_route_defaults():
    r = Route("r", "R", "desc", ("rest",))
    assert r.closes_routes == () and r.milestones_unlocked == () and r.final_reward == 1.0
    assert dict(r.preconditions) == {} and dict(r.consequences) == {}
