"""Tests for lifestack.graph: the edge table and the bounded, pure cascade."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lifestack.graph import (
    CASCADE_FLOOR,
    DEFAULT_DAMPENING,
    DEFAULT_GRAPH,
    DEFAULT_MAX_AFFECTED,
    DEFAULT_THRESHOLD,
    EDGES,
    DependencyGraph,
)
from lifestack.metrics import METRIC_MAX, METRIC_MIN, METRIC_PATHS, LifeMetrics, default_metrics

WORKLOAD = "career.workload"
STRESS = "mental_wellbeing.stress_level"
SLEEP = "physical_health.sleep_quality"
CLARITY = "mental_wellbeing.clarity"
ENERGY = "physical_health.energy"
FITNESS = "physical_health.fitness"


def base(value: float = 70.0) -> dict[str, float]:
    return dict.fromkeys(METRIC_PATHS, value)


# --- the edge table -------------------------------------------------------------------


def test_edge_table_shape():
    assert 25 <= len(EDGES) <= 40
    for src, dst, w in EDGES:
        assert src in METRIC_PATHS and dst in METRIC_PATHS and src != dst
        assert -1.0 <= w <= 1.0 and w != 0


def test_design_edges_present():
    table = {(s, d): w for s, d, w in EDGES}
    assert table[(WORKLOAD, STRESS)] == 0.7
    assert table[(WORKLOAD, "time.free_hours_per_week")] == -0.8
    assert table[("finances.liquidity", "finances.monthly_runway")] == 0.9
    assert table[(STRESS, SLEEP)] == -0.55
    assert table[(SLEEP, CLARITY)] == 0.6
    assert table[("finances.debt_pressure", STRESS)] == 0.65
    assert table[("relationships.professional_network", "career.stability")] == 0.35
    # the energy <-> fitness cycle exists
    assert (ENERGY, FITNESS) in table and (FITNESS, ENERGY) in table


def test_defaults():
    assert DEFAULT_DAMPENING == 0.6
    assert DEFAULT_MAX_AFFECTED == 3
    assert CASCADE_FLOOR == 10.0
    g = DependencyGraph()
    assert (g.dampening, g.max_affected, g.threshold) == (DEFAULT_DAMPENING, DEFAULT_MAX_AFFECTED, DEFAULT_THRESHOLD)


def test_neighbours():
    assert (STRESS, 0.7) in DEFAULT_GRAPH.neighbours(WORKLOAD)
    assert DEFAULT_GRAPH.neighbours("relationships.social") == (("mental_wellbeing.motivation", 0.3),)
    assert DEFAULT_GRAPH.neighbours("finances.long_term_health") == ()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"edges": (("career.salary", STRESS, 0.5),)},
        {"edges": ((WORKLOAD, "mood.happy", 0.5),)},
        {"edges": ((WORKLOAD, STRESS, 1.5),)},
        {"dampening": 0.0},
        {"dampening": 1.0},
        {"dampening": 1.2},
    ],
)
def test_bad_graph_raises(kwargs):
    with pytest.raises(ValueError):
        DependencyGraph(**kwargs)


# --- cascade --------------------------------------------------------------------------


def test_primary_applied_exactly():
    g = DependencyGraph(edges=())
    res = g.cascade(base(), {STRESS: 12.5, "finances.liquidity": -30})
    assert res.values[STRESS] == 82.5
    assert res.values["finances.liquidity"] == 40.0
    assert res.primary == {STRESS: 12.5, "finances.liquidity": -30.0}
    assert res.spread == {}
    others = set(METRIC_PATHS) - {STRESS, "finances.liquidity"}
    assert all(res.values[p] == 70.0 for p in others)


def test_primary_clamped_and_applied_delta_reported():
    res = DependencyGraph(edges=()).cascade(base(90), {STRESS: 50})
    assert res.values[STRESS] == 100.0
    assert res.primary[STRESS] == pytest.approx(10.0)


def test_spread_is_delta_times_weight_times_dampening():
    g = DependencyGraph(edges=((WORKLOAD, STRESS, 0.5), (STRESS, SLEEP, -0.5)), dampening=0.6, threshold=0.1)
    res = g.cascade(base(), {WORKLOAD: 10})
    # hop 1: 10 * 0.5 * 0.6 = 3; hop 2: 3 * -0.5 * 0.6 = -0.9
    assert res.values[STRESS] == pytest.approx(73.0)
    assert res.values[SLEEP] == pytest.approx(69.1)
    assert res.spread == pytest.approx({STRESS: 3.0, SLEEP: -0.9})


def test_default_graph_first_hop():
    res = DEFAULT_GRAPH.cascade(base(), {"relationships.social": 10})
    # social -> motivation +0.3: 10 * 0.3 * 0.6 = 1.8
    assert res.spread["mental_wellbeing.motivation"] == pytest.approx(1.8)
    assert res.values["mental_wellbeing.motivation"] == pytest.approx(71.8)


def test_threshold_drops_small_impacts():
    g = DependencyGraph(edges=((WORKLOAD, STRESS, 0.5),), dampening=0.6, threshold=0.5)
    # 1 * 0.5 * 0.6 = 0.3 < 0.5: dropped
    res = g.cascade(base(), {WORKLOAD: 1})
    assert res.values[STRESS] == 70.0
    assert res.spread == {}
    # 2 * 0.5 * 0.6 = 0.6 >= 0.5: applied
    res = g.cascade(base(), {WORKLOAD: 2})
    assert res.values[STRESS] == pytest.approx(70.6)


def test_max_affected_caps_distinct_spread_metrics():
    targets = ["career.satisfaction", "career.stability", "finances.liquidity", "relationships.family", "time.free_hours_per_week"]
    edges = tuple((WORKLOAD, t, 0.5) for t in targets)
    for cap in (0, 1, 3, 5):
        res = DependencyGraph(edges=edges, max_affected=cap).cascade(base(), {WORKLOAD: 20})
        changed = [p for p in METRIC_PATHS if p != WORKLOAD and res.values[p] != 70.0]
        assert len(changed) == cap
        assert len(res.spread) == cap
        assert set(changed) == set(targets[:cap])  # in edge order


def test_default_cap_three_on_big_disruption():
    res = DEFAULT_GRAPH.cascade(base(), {WORKLOAD: 40, "finances.debt_pressure": 40, ENERGY: -40})
    changed = [p for p in METRIC_PATHS if p not in res.primary and res.values[p] != 70.0]
    assert 1 <= len(changed) <= 3
    assert len(res.spread) <= 3


def test_floor_for_cascade_only_values():
    g = DependencyGraph(edges=((WORKLOAD, SLEEP, -1.0),), dampening=0.9, threshold=0.1)
    start = base()
    start[SLEEP] = 12.0
    res = g.cascade(start, {WORKLOAD: 30})  # impact -27 would take sleep to 0
    assert res.values[SLEEP] == CASCADE_FLOOR
    # an already-low value is not pushed lower, nor raised to the floor
    start[SLEEP] = 5.0
    res = g.cascade(start, {WORKLOAD: 30})
    assert res.values[SLEEP] == 5.0


def test_floor_does_not_apply_to_primaries():
    res = DEFAULT_GRAPH.cascade(base(), {SLEEP: -65})
    assert res.values[SLEEP] == 5.0


def test_cascade_does_not_revisit_primaries():
    # stress -> sleep and sleep is a primary: the cascade must not modify sleep again
    res = DEFAULT_GRAPH.cascade(base(), {STRESS: 20, SLEEP: -5})
    assert res.values[SLEEP] == 65.0
    assert SLEEP not in res.spread


def test_input_not_mutated_dict_and_lifemetrics():
    start = base()
    start[STRESS] = 55.0
    snapshot = copy.deepcopy(start)
    disruption = {WORKLOAD: 30.0}
    DEFAULT_GRAPH.cascade(start, disruption)
    assert start == snapshot
    assert disruption == {WORKLOAD: 30.0}
    lm = LifeMetrics(start)
    res = DEFAULT_GRAPH.cascade(lm, disruption)
    assert lm.flatten() == snapshot
    assert res.values[WORKLOAD] == 100.0


def test_deterministic():
    d = {WORKLOAD: 25, "finances.liquidity": -30, ENERGY: -15}
    a = DEFAULT_GRAPH.cascade(base(), d)
    b = DEFAULT_GRAPH.cascade(base(), d)
    assert a == b
    assert list(a.spread) == list(b.spread)


def test_unknown_path_raises():
    with pytest.raises(ValueError, match="unknown metric"):
        DEFAULT_GRAPH.cascade(base(), {"career.salary": 5})


def test_terminates_on_pure_cycle_without_threshold():
    # energy <-> fitness with weight 1 and no threshold would ping-pong forever without a hop bound
    g = DependencyGraph(
        edges=((WORKLOAD, ENERGY, 1.0), (ENERGY, FITNESS, 1.0), (FITNESS, ENERGY, 1.0)), dampening=0.99, threshold=0.0
    )
    res = g.cascade(base(50), {WORKLOAD: 10})
    assert 59.9 <= res.values[ENERGY] <= 100
    assert 50 < res.values[FITNESS] <= 100
    assert set(res.spread) == {ENERGY, FITNESS}


metric_values = st.floats(METRIC_MIN, METRIC_MAX, allow_nan=False)
deltas = st.one_of(
    st.floats(-200, 200, allow_nan=False),
    st.sampled_from([1e308, -1e308, 1e12, -1e12, 0.0]),  # infinities are rejected (see below)
)


@settings(max_examples=200, deadline=None)
@given(
    start=st.fixed_dictionaries({p: metric_values for p in METRIC_PATHS}),
    disruption=st.dictionaries(st.sampled_from(METRIC_PATHS), deltas, max_size=8),
    dampening=st.floats(0.01, 0.99),
    threshold=st.floats(0.0, 5.0),
    max_affected=st.integers(0, 23),
)
def test_cascade_properties_on_cyclic_graph(start, disruption, dampening, threshold, max_affected):
    g = DependencyGraph(dampening=dampening, threshold=threshold, max_affected=max_affected)
    before = dict(start)
    res = g.cascade(start, disruption)
    assert start == before  # pure
    assert set(res.values) == set(METRIC_PATHS)
    for p, v in res.values.items():
        assert METRIC_MIN <= v <= METRIC_MAX
    assert set(res.primary) == set(disruption)
    assert not set(res.spread) & set(res.primary)
    assert len(res.spread) <= max_affected
    for p in METRIC_PATHS:
        if p in res.primary:
            assert res.values[p] == pytest.approx(start[p] + res.primary[p], abs=1e-9)
        elif p in res.spread:
            assert res.values[p] == pytest.approx(start[p] + res.spread[p], abs=1e-9)
            if res.values[p] < start[p]:
                # the floor: a cascade never pushes a value below min(old, 10)
                assert res.values[p] >= min(start[p], CASCADE_FLOOR) - 1e-9
        else:
            assert res.values[p] == start[p]
    assert res == g.cascade(start, disruption)  # deterministic


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_cascade_rejects_non_finite_disruption(bad):
    with pytest.raises(ValueError, match="not finite"):
        DependencyGraph().cascade(default_metrics(), {"career.satisfaction": bad})


# --- spread_from: the continuous cascade of an action's changes -------------------------
def test_spread_from_leaves_sources_alone_and_subtracts_the_threshold():
    values = base()
    spread = DEFAULT_GRAPH.spread_from(values, {"career.workload": 4.0})
    assert "career.workload" not in spread and values["career.workload"] == 70.0
    # workload -> stress +0.7: impact 4 x 0.7 x 0.6 = 1.68, less the 0.5 threshold
    assert spread["mental_wellbeing.stress_level"] == pytest.approx(4.0 * 0.7 * DEFAULT_DAMPENING - DEFAULT_THRESHOLD)


def test_spread_from_has_no_cap_on_metrics_reached():
    spread = DEFAULT_GRAPH.spread_from(base(), {"career.workload": 20.0, "finances.debt_pressure": 20.0})
    assert len(spread) > DEFAULT_MAX_AFFECTED


@settings(max_examples=200, deadline=None)
@given(path=st.sampled_from(METRIC_PATHS), delta=st.floats(-20, 20), eps=st.floats(-0.01, 0.01))
def test_spread_from_is_continuous_in_the_source(path, delta, eps):
    a = DEFAULT_GRAPH.spread_from(base(), {path: delta})
    b = DEFAULT_GRAPH.spread_from(base(), {path: delta + eps})
    for p in set(a) | set(b):
        # each hop scales by |weight| x dampening < 1, so a source change of eps moves
        # every spread metric by at most eps x (number of paths reaching it)
        assert abs(a.get(p, 0.0) - b.get(p, 0.0)) <= abs(eps) * 8 + 1e-9
