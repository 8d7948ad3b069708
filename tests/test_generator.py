"""Tests for lifestack.generator: seeded, immutable flight_crisis and code_merge_crisis tasks."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from statistics import mean

import pytest

from lifestack.actions import ACTION_TYPES
from lifestack.generator import DOMAINS, EVENT_COUNT, TaskGenerator
from lifestack.metrics import METRIC_PATHS, RESOURCE_NAMES
from lifestack.tasks import Task

GEN = TaskGenerator()
ALL = [(d, k) for d in DOMAINS for k in range(1, 6)]


def budget(task: Task) -> dict[str, float]:
    return dict(task.constraints["budget"])


def test_domains():
    assert DOMAINS == ("flight_crisis", "code_merge_crisis")
    assert TaskGenerator.domains == DOMAINS


@pytest.mark.parametrize("domain, difficulty", ALL)
def test_same_arguments_equal_task(domain, difficulty):
    a = GEN.generate(domain, difficulty, 17)
    b = TaskGenerator(cache=False).generate(domain, difficulty, 17)
    c = TaskGenerator(cache=False).generate(domain, difficulty, 17)
    assert a is GEN.generate(domain, difficulty, 17)  # cached
    assert b is not c
    assert a == b == c
    assert repr(a) == repr(b)


def test_stable_across_processes():
    code = "from lifestack.generator import TaskGenerator as G; print(repr(G().generate('code_merge_crisis', 4, 99)))"
    outs = set()
    for hashseed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hashseed}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                             cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        outs.add(out.stdout.strip())
    assert outs == {repr(GEN.generate("code_merge_crisis", 4, 99))}


@pytest.mark.parametrize("domain", DOMAINS)
def test_different_seeds_differ(domain):
    tasks = [GEN.generate(domain, 3, s) for s in range(20)]
    assert len({t.id for t in tasks}) == 20
    budgets = {tuple(budget(t).values()) for t in tasks}
    assert len(budgets) >= 15
    worlds = {repr(dict(t.visible_world)) + repr(dict(t.mutable_world)) for t in tasks}
    assert len(worlds) >= 10
    disruptions = {tuple(t.domain_metadata["disruption"].values()) for t in tasks}
    assert len(disruptions) >= 15


@pytest.mark.parametrize("domain, difficulty", ALL)
def test_task_shape(domain, difficulty):
    t = GEN.generate(domain, difficulty, 5)
    assert t.id == f"{domain}-d{difficulty}-s5"
    assert t.domain == domain and t.difficulty == difficulty
    assert t.goal and t.visible_world
    assert t.constraints["horizon_steps"] == t.horizon
    assert set(budget(t)) == set(RESOURCE_NAMES) and all(v > 0 for v in budget(t).values())
    assert len(t.viable_routes) == 3
    for r in t.viable_routes:
        assert set(r.required_action_types) <= set(ACTION_TYPES)
        assert len(set(r.required_action_types)) == len(r.required_action_types)
        assert t.horizon > len(r.required_action_types)  # every route fits in the horizon
        for rid in r.closes_routes:
            assert t.route(rid) is not None
        ms = [m for m in t.milestones if m.condition_key == r.progress_key]
        assert len(ms) == len(r.required_action_types)
        assert sum(m.reward for m in ms) == pytest.approx(r.final_reward, abs=0.01)
        assert set(r.milestones_unlocked) <= {m.id for m in ms}
    assert dict(t.success_conditions) == {"goal_met": True}
    assert set(t.failure_conditions) <= set(t.mutable_world)
    assert set(t.domain_metadata["disruption"]) <= set(METRIC_PATHS)
    route_ids = set(t.route_ids)
    for ev in t.event_schedule:
        assert 1 <= ev.step <= t.horizon
        assert 0 < ev.probability <= 0.95
        assert set(ev.closes_routes) <= route_ids
    assert len({ev.id for ev in t.event_schedule}) == len(t.event_schedule)


@pytest.mark.parametrize("domain", DOMAINS)
def test_difficulty_scaling(domain):
    seeds = range(30)
    for k in RESOURCE_NAMES:
        means = [mean(budget(GEN.generate(domain, d, s))[k] for s in seeds) for d in range(1, 6)]
        assert all(a > b for a, b in zip(means, means[1:])), (k, means)
    for s in seeds:
        # per seed the budget at d5 is tighter than at d1 on every resource
        b1, b5 = budget(GEN.generate(domain, 1, s)), budget(GEN.generate(domain, 5, s))
        assert all(b5[k] < b1[k] for k in RESOURCE_NAMES)
    # events appear from difficulty 2 and grow in number
    counts = [len(GEN.generate(domain, d, 0).event_schedule) for d in range(1, 6)]
    assert counts == [EVENT_COUNT[d] for d in range(1, 6)]
    assert counts[0] == 0 and counts[1] >= 1 and counts[4] >= counts[2] >= counts[1]
    # 3-step routes from difficulty 3
    for d in range(1, 6):
        longest = max(len(r.required_action_types) for r in GEN.generate(domain, d, 0).viable_routes)
        assert longest == (3 if d >= 3 else 2)
    # fewer spare steps, bigger disruptions, likelier events
    spare = [GEN.generate(domain, d, 0).horizon - (3 if d >= 3 else 2) for d in range(1, 6)]
    assert all(a >= b for a, b in zip(spare, spare[1:])) and spare[0] > spare[-1]
    size = [mean(sum(abs(v) for v in GEN.generate(domain, d, s).domain_metadata["disruption"].values()) for s in seeds)
            for d in range(1, 6)]
    assert all(a < b for a, b in zip(size, size[1:]))
    probs = [mean(e.probability for s in seeds for e in GEN.generate(domain, d, s).event_schedule) for d in range(2, 6)]
    assert all(a < b for a, b in zip(probs, probs[1:]))


@pytest.mark.parametrize(
    "domain, difficulty, seed",
    [
        ("moving_house", 1, 0),
        ("", 1, 0),
        (None, 1, 0),
        ("flight_crisis", 0, 0),
        ("flight_crisis", 6, 0),
        ("flight_crisis", True, 0),
        ("flight_crisis", 2.0, 0),
        ("flight_crisis", "3", 0),
        ("flight_crisis", 1, "7"),
        ("flight_crisis", 1, 1.5),
        ("flight_crisis", 1, None),
        ("flight_crisis", 1, True),
    ],
)
def test_bad_arguments_raise_value_error(domain, difficulty, seed):
    with pytest.raises(ValueError):
        GEN.generate(domain, difficulty, seed)
    with pytest.raises(ValueError):
        TaskGenerator(cache=False).generate(domain, difficulty, seed)


def _task_mappings(t: Task) -> list[tuple[str, Mapping]]:
    out = [
        ("constraints", t.constraints), ("constraints.budget", t.constraints["budget"]), ("hidden_state", t.hidden_state),
        ("mutable_world", t.mutable_world), ("visible_world", t.visible_world),
        ("success_conditions", t.success_conditions), ("failure_conditions", t.failure_conditions),
        ("domain_metadata", t.domain_metadata), ("domain_metadata.disruption", t.domain_metadata["disruption"]),
    ]
    for ev in t.event_schedule:
        out += [(f"{ev.id}.world_mutation", ev.world_mutation), (f"{ev.id}.hidden_state_mutation", ev.hidden_state_mutation)]
    return out


def _assert_read_only(name: str, mapping: Mapping) -> None:
    try:
        mapping["__probe__"] = 1  # type: ignore[index]
    except TypeError:
        return
    del mapping["__probe__"]  # type: ignore[attr-defined]  # leave no trace, then fail
    pytest.fail(f"{name} is writable")


@pytest.mark.parametrize("domain", DOMAINS)
def test_task_dicts_are_read_only(domain):
    t = GEN.generate(domain, 5, 3)
    for name, mapping in _task_mappings(t):
        _assert_read_only(name, mapping)
    # the cache is not poisoned
    assert "__probe__" not in GEN.generate(domain, 5, 3).mutable_world


@pytest.mark.parametrize("domain", DOMAINS)
def test_route_dicts_are_read_only(domain):
    t = TaskGenerator(cache=False).generate(domain, 5, 3)  # never probe the shared cached task
    for r in t.viable_routes:
        _assert_read_only(f"{r.id}.preconditions", r.preconditions)
        _assert_read_only(f"{r.id}.consequences", r.consequences)
