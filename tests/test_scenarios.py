"""Tests for lifestack.scenarios: seeded pre-action states and their metadata round trip."""

from __future__ import annotations

import copy
import json
from collections import Counter

import pytest

from lifestack.env import LifeStackEnv
from lifestack.generator import DOMAINS, TaskGenerator
from lifestack.metrics import METRIC_PATHS
from lifestack.policies import heuristic
from lifestack.scenarios import (
    MAX_ROLL_FORWARD,
    conflict_from_metadata,
    rebuild_state,
    sample_scenario,
    scenario_metadata,
    task_from_metadata,
)

CASES = [(seed, d) for d in range(1, 6) for seed in (11, 12, 13, 14)]


@pytest.mark.parametrize("seed, difficulty", CASES[:6])
def test_sample_scenario_deterministic(seed, difficulty):
    a = sample_scenario(seed, difficulty)
    b = sample_scenario(seed, difficulty, generator=TaskGenerator(cache=False))
    assert a.task == b.task and a.conflict == b.conflict and a.roll_forward == b.roll_forward
    assert a.state.to_dict() == b.state.to_dict()
    assert scenario_metadata(a) == scenario_metadata(b)


def test_scenario_shape():
    for seed, d in CASES:
        sc = sample_scenario(seed, d)
        assert sc.difficulty == d == sc.task.difficulty and sc.conflict.difficulty == d
        assert sc.domain in DOMAINS
        assert 0 <= sc.roll_forward <= MAX_ROLL_FORWARD
        assert sc.state.step == sc.roll_forward
        assert not sc.state.done and sc.state.outcome == "running"
        # rounded once so the prompt, the metadata and the rebuilt state agree
        assert all(round(v, 2) == v for v in sc.state.metrics.values())
        assert all(round(v, 2) == v for v in sc.state.resources.values())


def test_domain_argument_respected():
    assert sample_scenario(3, 2, "code_merge_crisis").domain == "code_merge_crisis"
    assert sample_scenario(3, 2, "flight_crisis").domain == "flight_crisis"


def test_states_vary_across_seeds():
    scs = [sample_scenario(seed, 3) for seed in range(50)]
    assert len(Counter(sc.roll_forward for sc in scs)) >= 2
    assert {sc.roll_forward for sc in scs} == set(range(MAX_ROLL_FORWARD + 1))
    assert len({sc.domain for sc in scs}) == 2
    assert len({sc.conflict.id for sc in scs}) >= 2
    assert len({tuple(sc.state.metrics.values()) for sc in scs}) >= 40


def _hidden_leaks(meta_json: str, sc) -> list[str]:
    leaks = [k for k in sc.task.hidden_state if k in meta_json]
    leaks += [v for v in sc.task.hidden_state.values() if isinstance(v, str) and v in meta_json]
    return leaks


@pytest.mark.parametrize("seed, difficulty", CASES)
def test_metadata_json_safe_and_without_hidden_state(seed, difficulty):
    sc = sample_scenario(seed, difficulty)
    meta = scenario_metadata(sc)
    text = json.dumps(meta, allow_nan=False)
    assert json.loads(text) == meta
    assert "hidden" not in text
    assert not _hidden_leaks(text, sc)
    assert len(meta["state"]["metrics"]) == len(METRIC_PATHS)


@pytest.mark.parametrize("seed, difficulty", CASES)
def test_rebuild_state_equals_scenario_state(seed, difficulty):
    sc = sample_scenario(seed, difficulty)
    meta = json.loads(json.dumps(scenario_metadata(sc)))  # as it travels in a prompt
    task = task_from_metadata(meta)
    assert task == sc.task
    state = rebuild_state(meta, task)
    assert state.to_dict() == sc.state.to_dict()  # the hidden part, recomputed, equals too
    assert state.hidden == sc.state.hidden
    assert conflict_from_metadata(meta) == sc.conflict
    # stepping the rebuilt state equals stepping the scenario's own state
    a, b = LifeStackEnv(), LifeStackEnv()
    a.restore(sc.task, sc.state)
    b.restore(task, state)
    text = heuristic(a)
    assert a.step(text) == b.step(text)


def test_hidden_state_recomputed_from_events():
    # find a scenario where an event with a hidden mutation fired before the prompt
    for seed in range(300):
        sc = sample_scenario(seed, 3, "flight_crisis")
        if "price_surge" in sc.state.events_fired:
            break
    else:
        pytest.skip("no scenario with price_surge")
    assert sc.state.hidden != dict(sc.task.hidden_state)
    meta = json.loads(json.dumps(scenario_metadata(sc)))
    assert rebuild_state(meta, sc.task).hidden == sc.state.hidden


def _meta():
    return json.loads(json.dumps(scenario_metadata(sample_scenario(21, 4))))


def _mutate(meta, how):
    st = meta["state"]
    if how == "no_state":
        del meta["state"]
    elif how == "state_not_object":
        meta["state"] = [1, 2]
    elif how == "short_metrics":
        st["metrics"] = st["metrics"][:-1]
    elif how == "long_resources":
        st["resources"] = st["resources"] + [1.0]
    elif how == "budget_not_list":
        st["budget"] = {"time": 1}
    elif how == "nan_metric":
        st["metrics"][3] = float("nan")
    elif how == "inf_resource":
        st["resources"][0] = float("inf")
    elif how == "string_metric":
        st["metrics"][0] = "70"
    elif how == "bool_metric":
        st["metrics"][0] = True
    elif how == "unknown_event":
        st["events_fired"] = ["alien_invasion"]
    elif how == "events_not_list":
        st["events_fired"] = "price_surge"
    elif how == "world_not_object":
        st["world"] = []
    elif how == "negative_step":
        st["step"] = -1
    elif how == "bool_step":
        st["step"] = True
    elif how == "huge_int_metric":  # too large for a float
        st["metrics"][5] = 10 ** 400
    elif how == "none_metric":
        st["metrics"][7] = None
    elif how == "neg_inf_budget":
        st["budget"][2] = float("-inf")
    return meta


MALFORMED = ["no_state", "state_not_object", "short_metrics", "long_resources", "budget_not_list", "nan_metric",
             "inf_resource", "string_metric", "bool_metric", "unknown_event", "events_not_list", "world_not_object",
             "negative_step", "bool_step", "huge_int_metric", "none_metric", "neg_inf_budget"]


@pytest.mark.parametrize("how", MALFORMED)
def test_malformed_metadata_raises_value_error(how):
    meta = _meta()
    task = task_from_metadata(meta)
    with pytest.raises(ValueError):
        rebuild_state(_mutate(meta, how), task)


@pytest.mark.parametrize("how", ["missing_seed", "seed_none", "closed_routes_int", "route_progress_value_int"])
def test_malformed_metadata_raises_value_error_unvalidated_fields(how):
    meta = _meta()
    task = task_from_metadata(meta)
    if how == "missing_seed":
        del meta["seed"]
    elif how == "seed_none":
        meta["seed"] = None
    elif how == "closed_routes_int":
        meta["state"]["closed_routes"] = 5
    elif how == "route_progress_value_int":
        meta["state"]["route_progress"] = {"rebook_premium": 5}
    with pytest.raises(ValueError):
        rebuild_state(meta, task)


@pytest.mark.parametrize("change", [{"v": 2}, {"domain": "moving_house"}, {"difficulty": 9}, {"seed": "x"}])
def test_task_from_bad_metadata_raises_value_error(change):
    meta = _meta()
    meta.update(change)
    with pytest.raises(ValueError):
        task_from_metadata(meta)


def test_metadata_is_not_mutated_by_rebuild():
    meta = _meta()
    frozen = copy.deepcopy(meta)
    state = rebuild_state(meta, task_from_metadata(meta))
    state.world["goal_met"] = True
    state.route_progress.setdefault("x", []).append("rest")
    assert meta == frozen


class _Float(float):
    """A float subclass (numpy's float64 is one): accepted like a float."""


def test_rebuild_accepts_int_and_float_subclass_numbers():
    meta = _meta()
    task = task_from_metadata(meta)
    expected = rebuild_state(meta, task)
    st = meta["state"]
    st["metrics"] = [_Float(v) for v in st["metrics"]]
    st["resources"] = [int(v) if float(v).is_integer() else v for v in st["resources"]]
    got = rebuild_state(meta, task)
    assert got.metrics == expected.metrics and got.resources == expected.resources
    assert all(type(v) is float for v in list(got.metrics.values()) + list(got.resources.values()))


def test_at_crisis_is_the_same_task_before_any_step():
    from lifestack.env import LifeStackEnv
    from lifestack.scenarios import at_crisis

    for seed in range(20):
        sc = sample_scenario(seed, 1 + seed % 5)
        start = at_crisis(sc)
        env = LifeStackEnv()
        env.reset(seed=sc.seed, task=sc.task, conflict=sc.conflict)
        assert start.state == env.state and start.roll_forward == 0
        assert (start.seed, start.difficulty, start.task, start.conflict) == (sc.seed, sc.difficulty, sc.task, sc.conflict)
        if sc.roll_forward == 0:  # nothing rolled forward: only the rounding of sample_scenario differs
            assert start.state.step == sc.state.step == 0
