"""Tests for lifestack.metrics: paths, inversion, goodness, LifeMetrics, ResourceBudget."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lifestack.metrics import (
    default_metrics,
    pressured_domain,
    DOMAIN_NAMES,
    DOMAINS,
    INVERTED_METRICS,
    METRIC_INDEX,
    METRIC_MAX,
    METRIC_MIN,
    METRIC_PATHS,
    RESOURCE_NAMES,
    LifeMetrics,
    ResourceBudget,
    canonical_order,
    clamp_metric,
    domain_of,
    goodness,
    goodness_delta,
)

EXPECTED_INVERTED = {
    "career.workload",
    "finances.debt_pressure",
    "mental_wellbeing.stress_level",
    "time.commute_burden",
    "time.admin_overhead",
}

# --- paths and domains ----------------------------------------------------------------


def test_twenty_three_paths_in_six_domains():
    assert len(METRIC_PATHS) == 23
    assert len(set(METRIC_PATHS)) == 23
    assert DOMAIN_NAMES == (
        "career", "finances", "relationships", "physical_health", "mental_wellbeing", "time",
    )
    assert {domain_of(p) for p in METRIC_PATHS} == set(DOMAIN_NAMES)
    assert [len(DOMAINS[d]) for d in DOMAIN_NAMES] == [4, 4, 4, 4, 4, 3]


def test_paths_are_domain_dot_metric_and_indexed_in_order():
    for i, path in enumerate(METRIC_PATHS):
        domain, metric = path.split(".")
        assert metric in DOMAINS[domain]
        assert METRIC_INDEX[path] == i


def test_design_metric_names_present():
    for path in (
        "career.growth_trajectory", "finances.monthly_runway", "relationships.professional_network",
        "physical_health.sleep_quality", "mental_wellbeing.emotional_stability", "time.free_hours_per_week",
    ):
        assert path in METRIC_INDEX


def test_exactly_five_inverted_metrics():
    assert set(INVERTED_METRICS) == EXPECTED_INVERTED
    assert set(INVERTED_METRICS) <= set(METRIC_PATHS)


def test_canonical_order_sorts_by_index():
    shuffled = list(reversed(METRIC_PATHS))
    assert canonical_order(shuffled) == list(METRIC_PATHS)


# --- goodness -------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(EXPECTED_INVERTED))
def test_goodness_inverted(path):
    assert goodness(path, 0.0) == 100.0
    assert goodness(path, 100.0) == 0.0
    assert goodness(path, 30.0) == 70.0
    # A falling raw value is an improvement.
    assert goodness_delta(path, -5.0) == 5.0
    assert goodness_delta(path, 5.0) == -5.0


@pytest.mark.parametrize("path", sorted(set(METRIC_PATHS) - EXPECTED_INVERTED))
def test_goodness_plain(path):
    assert goodness(path, 30.0) == 30.0
    assert goodness_delta(path, -5.0) == -5.0
    assert goodness_delta(path, 5.0) == 5.0


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(METRIC_PATHS), st.floats(0, 100), st.floats(-50, 50))
def test_goodness_delta_agrees_with_goodness(path, value, delta):
    # the change in goodness caused by a raw change equals goodness_delta of that change
    assert goodness(path, value + delta) - goodness(path, value) == pytest.approx(goodness_delta(path, delta), abs=1e-9)


def test_clamp_metric():
    assert clamp_metric(-5) == METRIC_MIN
    assert clamp_metric(150) == METRIC_MAX
    assert clamp_metric(42.5) == 42.5


# --- LifeMetrics ----------------------------------------------------------------------


def test_lifemetrics_defaults_to_goodness_70_everywhere():
    m = LifeMetrics()
    flat = m.flatten()
    assert list(flat) == list(METRIC_PATHS)
    assert all(m.goodness(p) == 70.0 for p in METRIC_PATHS)
    # raw 70, or 30 for an inverted metric
    assert all(flat[p] == (30.0 if p in EXPECTED_INVERTED else 70.0) for p in METRIC_PATHS)


def test_lifemetrics_partial_input_filled_and_ordered():
    m = LifeMetrics({"time.admin_overhead": 12, "career.satisfaction": 33.5})
    flat = m.flatten()
    assert list(flat) == list(METRIC_PATHS)
    assert flat["time.admin_overhead"] == 12.0
    assert isinstance(flat["time.admin_overhead"], float)
    assert flat["career.satisfaction"] == 33.5
    assert flat["career.satisfaction"] == 33.5
    assert goodness("career.workload", flat["career.workload"]) == 70.0  # filled with the default
    assert flat["finances.liquidity"] == 70.0


def test_lifemetrics_flatten_is_a_copy():
    m = LifeMetrics()
    flat = m.flatten()
    flat["career.satisfaction"] = 1.0
    assert m.get("career.satisfaction") == 70.0


def test_lifemetrics_clamps():
    m = LifeMetrics({"career.satisfaction": 150, "finances.liquidity": -20})
    assert m.get("career.satisfaction") == 100.0
    assert m.get("finances.liquidity") == 0.0


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_lifemetrics_rejects_non_finite(bad):
    with pytest.raises(ValueError):
        LifeMetrics({"career.satisfaction": bad})


def test_lifemetrics_rejects_unknown_path():
    with pytest.raises(ValueError, match="unknown"):
        LifeMetrics({"career.salary": 50})
    with pytest.raises(ValueError):
        LifeMetrics.from_flat({"satisfaction": 50})


def test_lifemetrics_from_flat_roundtrip():
    values = {p: float(i * 4) for i, p in enumerate(METRIC_PATHS)}
    assert LifeMetrics.from_flat(values).flatten() == values


def test_lifemetrics_goodness_and_domain_goodness_honour_inversion():
    m = LifeMetrics({"mental_wellbeing.stress_level": 90, "mental_wellbeing.clarity": 90})
    assert m.goodness("mental_wellbeing.stress_level") == 10.0
    assert m.goodness("mental_wellbeing.clarity") == 90.0
    # (10 + 90 + 70 + 70) / 4: unset metrics default to goodness 70
    assert m.domain_goodness("mental_wellbeing") == pytest.approx(60.0)


def test_lifemetrics_worst_uses_goodness():
    m = LifeMetrics({"career.workload": 95, "finances.liquidity": 20, "time.admin_overhead": 5})
    worst = m.worst(2)
    assert worst == ["career.workload", "finances.liquidity"]
    assert "time.admin_overhead" not in m.worst(3)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(METRIC_PATHS), st.floats(-1e6, 1e6), max_size=23))
def test_lifemetrics_always_in_range(values):
    flat = LifeMetrics(values).flatten()
    assert len(flat) == 23
    assert all(METRIC_MIN <= v <= METRIC_MAX for v in flat.values())


# --- ResourceBudget -------------------------------------------------------------------


def test_resource_budget_can_afford():
    b = ResourceBudget(time=5, money=100, energy=10)
    assert b.can_afford({"time": 5, "money": 100, "energy": 10})
    assert b.can_afford({"time": 1})  # missing keys cost nothing
    assert b.can_afford({})
    assert not b.can_afford({"time": 5.01})
    assert not b.can_afford({"money": 100.5, "time": 0})
    assert not b.can_afford({"energy": 11})


def test_resource_budget_dict_roundtrip_and_scaled():
    b = ResourceBudget.from_dict({"time": 2, "money": 300})
    assert b == ResourceBudget(2.0, 300.0, 0.0)
    assert b.to_dict() == {"time": 2.0, "money": 300.0, "energy": 0.0}
    assert tuple(b.to_dict()) == RESOURCE_NAMES
    assert b.scaled(0.5) == ResourceBudget(1.0, 150.0, 0.0)
    assert math.isclose(ResourceBudget(3, 3, 3).scaled(0.7).energy, 2.1)


def test_resource_budget_is_frozen():
    b = ResourceBudget(1, 2, 3)
    with pytest.raises(Exception):
        b.time = 10  # type: ignore[misc]


def test_pressured_domain_is_the_domain_with_the_lowest_mean_goodness():
    values = default_metrics()
    assert pressured_domain(values) == DOMAIN_NAMES[0]  # all equal: the first domain
    values["mental_wellbeing.stress_level"] = 95.0  # inverted: goodness 5
    assert pressured_domain(values) == "mental_wellbeing"
    values["finances.liquidity"] = 0.0
    values["finances.monthly_runway"] = 0.0
    assert pressured_domain(values) == "finances"
