"""Tests for lifestack.conflicts: template data, generation, escalation, (de)serialisation."""

from __future__ import annotations

import json
import math
import random
from statistics import mean

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lifestack.conflicts import (
    ConflictEvent,
    escalate_conflict,
    generate_conflict,
    get_conflict,
    load_templates,
    templates_for,
)
from lifestack.metrics import METRIC_PATHS, ResourceBudget, goodness_delta

TEMPLATES = load_templates()
DIFFICULTIES = range(1, 6)


def total_abs(event: ConflictEvent) -> float:
    return sum(abs(d) for d in event.primary_disruption.values())


def valid_record() -> dict:
    return get_conflict("forgotten_bill").to_dict()


# --- data ---------------------------------------------------------------------------


def test_fifteen_templates_three_per_difficulty():
    assert len(TEMPLATES) == 15
    for d in DIFFICULTIES:
        assert len(templates_for(d)) == 3


def test_unique_ids_and_valid_paths():
    ids = [e.id for e in TEMPLATES]
    assert len(set(ids)) == len(ids)
    for e in TEMPLATES:
        assert set(e.primary_disruption) <= set(METRIC_PATHS)
        assert 2 <= len(e.decisions_required) <= 4
        assert len(e.story) < 400
        assert all(abs(v) <= 30 for v in e.primary_disruption.values())


@pytest.mark.parametrize("event", TEMPLATES, ids=lambda e: e.id)
def test_disruption_is_harmful(event):
    harms = [goodness_delta(p, d) for p, d in event.primary_disruption.items()]
    assert sum(harms) < 0
    assert all(h < 0 for h in harms), "every primary delta should hurt, not help"


def test_magnitude_grows_with_difficulty():
    means = [mean(total_abs(e) for e in templates_for(d)) for d in DIFFICULTIES]
    assert means == sorted(means)
    assert 10 <= means[0] <= 20 and 60 <= means[-1] <= 90


def test_load_is_cached_and_read_only():
    assert load_templates() is load_templates()
    with pytest.raises(TypeError):
        TEMPLATES[0].primary_disruption["physical_health.fitness"] = 0  # type: ignore[index]


def test_load_templates_custom_path(tmp_path):
    path = tmp_path / "c.json"
    records = [e.to_dict() for e in TEMPLATES]
    path.write_text(json.dumps(records))
    assert load_templates(path) == TEMPLATES
    path.write_text(json.dumps(records + [records[0]]))
    with pytest.raises(ValueError, match="duplicate"):
        load_templates(path)
    path.write_text(json.dumps([r for r in records if r["difficulty"] != 4]))
    with pytest.raises(ValueError, match=r"difficulty \[4\]"):
        load_templates(path)


# --- lookup and generation ------------------------------------------------------------


def test_get_conflict():
    assert get_conflict("friday_6pm").difficulty == 5
    with pytest.raises(KeyError, match="known ids: .*missed_gym_week"):
        get_conflict("nope")
    assert get_conflict("friday_6pm+escalated") == escalate_conflict(get_conflict("friday_6pm"))


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_generate_deterministic_and_covering(difficulty):
    picks = [generate_conflict(difficulty, random.Random(seed)) for seed in range(60)]
    again = [generate_conflict(difficulty, random.Random(seed)) for seed in range(60)]
    assert picks == again
    assert {e.id for e in picks} == {e.id for e in templates_for(difficulty)}
    assert all(e.difficulty == difficulty for e in picks)


def test_generate_does_not_touch_global_rng():
    random.seed(123)
    expected = random.random()
    random.seed(123)
    generate_conflict(3, random.Random(7))
    assert random.random() == expected


@pytest.mark.parametrize("bad", [0, 6, -1, 2.0, "3", None, True])
def test_bad_difficulty_raises(bad):
    with pytest.raises(ValueError, match="difficulty"):
        generate_conflict(bad, random.Random(0))
    with pytest.raises(ValueError):
        templates_for(bad)


# --- escalation -----------------------------------------------------------------------


@pytest.mark.parametrize("event", TEMPLATES, ids=lambda e: e.id)
def test_escalate(event):
    esc = escalate_conflict(event)
    assert esc.id == event.id + "+escalated"
    assert esc.title == "Escalated: " + event.title
    assert esc.difficulty == min(5, event.difficulty + 1)
    assert set(esc.primary_disruption) == set(event.primary_disruption)
    for path, delta in event.primary_disruption.items():
        expected = max(-40.0, min(40.0, delta * 1.4))
        assert esc.primary_disruption[path] == pytest.approx(expected)
    for k in ("time", "money", "energy"):
        assert getattr(esc.resource_budget, k) == pytest.approx(getattr(event.resource_budget, k) * 0.7)


def test_escalate_caps_delta_and_difficulty():
    esc = get_conflict("friday_6pm")
    for _ in range(4):
        esc = escalate_conflict(esc)
    assert esc.difficulty == 5
    assert all(abs(d) <= 40 for d in esc.primary_disruption.values())
    assert esc.primary_disruption["mental_wellbeing.stress_level"] == 40


# --- serialisation and validation -------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(TEMPLATES), st.integers(0, 2))
def test_round_trip(event, escalations):
    for _ in range(escalations):
        event = escalate_conflict(event)
    data = event.to_dict()
    assert json.loads(json.dumps(data, allow_nan=False)) == data
    back = ConflictEvent.from_dict(data)
    assert back == event and hash(back) == hash(event)


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda r: r.pop("story"), "story"),
        (lambda r: r.pop("resource_budget"), "resource_budget"),
        (lambda r: r.update(difficulty=0), "difficulty"),
        (lambda r: r.update(difficulty=6), "difficulty"),
        (lambda r: r.update(difficulty="2"), "difficulty"),
        (lambda r: r["primary_disruption"].update({"finances.vibes": -3}), "primary_disruption"),
        (lambda r: r["primary_disruption"].update({"finances.liquidity": math.nan}), "primary_disruption"),
        (lambda r: r["primary_disruption"].update({"finances.liquidity": math.inf}), "primary_disruption"),
        (lambda r: r.update(primary_disruption={}), "primary_disruption"),
        (lambda r: r.update(decisions_required=[]), "decisions_required"),
        (lambda r: r.update(decisions_required="pay it"), "decisions_required"),
        (lambda r: r["resource_budget"].update(money=math.inf), "resource_budget.money"),
        (lambda r: r["resource_budget"].update(time=-1), "resource_budget.time"),
        (lambda r: r["resource_budget"].pop("energy"), "resource_budget"),
        (lambda r: r.update(title=""), "title"),
        (lambda r: r.update(extra=1), "extra"),
    ],
)
def test_from_dict_rejects_bad_records(mutate, field):
    record = valid_record()
    mutate(record)
    with pytest.raises(ValueError) as info:
        ConflictEvent.from_dict(record)
    msg = str(info.value)
    assert "forgotten_bill" in msg and field in msg


def test_from_dict_rejects_bad_id():
    record = valid_record()
    record["id"] = ""
    with pytest.raises(ValueError, match="'id'"):
        ConflictEvent.from_dict(record)


def test_resource_budget_type():
    assert isinstance(TEMPLATES[0].resource_budget, ResourceBudget)
    assert templates_for(1)[0].resource_budget.time >= templates_for(5)[0].resource_budget.time
