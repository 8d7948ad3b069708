"""Tests for lifestack.actions: the action schema and the one parser every caller uses."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lifestack.actions import (
    ACTION_FIELDS,
    ACTION_TYPES,
    MAX_COST,
    MAX_METRIC_DELTA,
    MAX_REASONING_CHARS,
    MAX_REST_RECOVERY,
    LifeStackAction,
    find_json_object,
    parse_action,
)
from lifestack.metrics import DOMAIN_NAMES, METRIC_PATHS, RESOURCE_NAMES

VALID = {
    "action_type": "negotiate",
    "target_domain": "finances",
    "route": "rebook_premium",
    "metric_changes": {"finances.liquidity": 5.0, "mental_wellbeing.stress_level": -3.0},
    "resource_cost": {"time": 2.0, "money": 100.0, "energy": 5.0},
    "reasoning": "Liquidity took the hit; I negotiate a refund with two hours of time.",
}


def text(**overrides) -> str:
    return json.dumps({**VALID, **overrides})


def ok(completion) -> LifeStackAction:
    action, reason = parse_action(completion)
    assert reason is None, reason
    assert isinstance(action, LifeStackAction)
    return action


def rejected(completion) -> str:
    action, reason = parse_action(completion)
    assert action is None
    assert isinstance(reason, str) and reason
    return reason


def check_invariants(result) -> None:
    """What every parse_action result must satisfy."""
    assert isinstance(result, tuple) and len(result) == 2
    action, reason = result
    assert (action is None) != (reason is None)
    if action is None:
        assert isinstance(reason, str) and reason
        return
    assert isinstance(action, LifeStackAction)
    assert action.action_type in ACTION_TYPES
    assert action.target_domain in DOMAIN_NAMES
    assert action.route is None or (isinstance(action.route, str) and action.route)
    for path, delta in action.metric_changes.items():
        assert path in METRIC_PATHS
        assert isinstance(delta, float) and math.isfinite(delta) and 0 < abs(delta) <= MAX_METRIC_DELTA
    assert set(action.resource_cost) == set(RESOURCE_NAMES)
    for key, value in action.resource_cost.items():
        assert isinstance(value, float) and math.isfinite(value)
        assert value <= MAX_COST[key]
        if action.action_type == "rest" and key == "energy":
            assert value >= -MAX_REST_RECOVERY
        else:
            assert value >= 0.0
    assert isinstance(action.reasoning, str) and len(action.reasoning) <= MAX_REASONING_CHARS
    assert all(isinstance(n, str) for n in action.notes)


# --- the happy path -------------------------------------------------------------------


def test_valid_json_parses_cleanly():
    a = ok(text())
    assert a.action_type == "negotiate"
    assert a.target_domain == "finances"
    assert a.route == "rebook_premium"
    assert dict(a.metric_changes) == VALID["metric_changes"]
    assert dict(a.resource_cost) == VALID["resource_cost"]
    assert a.reasoning == VALID["reasoning"]
    assert a.notes == ()


def test_fields_and_types_constants():
    assert ACTION_FIELDS == ("action_type", "target_domain", "route", "metric_changes", "resource_cost", "reasoning")
    assert set(ACTION_TYPES) >= {"negotiate", "communicate", "delegate", "spend", "reschedule", "rest", "deprioritize"}


def test_to_dict_to_json_roundtrip():
    a = ok(text())
    assert json.loads(a.to_json()) == a.to_dict()
    b = ok(a.to_json())
    assert b == a


def test_dict_input_accepted():
    a = ok(dict(VALID))
    assert a == ok(text())


@pytest.mark.parametrize("fence", ["```json\n{}\n```", "```\n{}\n```", "```JSON\n{}```"])
def test_code_fences(fence):
    a = ok(fence.replace("{}", text()))
    assert "trailing_text" not in a.notes
    assert a.action_type == "negotiate"


def test_leading_prose_and_stray_braces():
    a = ok("Let me think {step by step}. My answer: " + text())
    assert a.action_type == "negotiate"
    assert "trailing_text" not in a.notes


@pytest.mark.parametrize("suffix", [" Hope this helps!", "\n```\nThat is my plan.", "\n{\"another\": 1}"])
def test_trailing_text_noted(suffix):
    a = ok(text() + suffix)
    assert "trailing_text" in a.notes
    assert a.action_type == "negotiate"


def test_first_object_wins():
    a = ok(text() + "\n" + text(action_type="rest"))
    assert a.action_type == "negotiate"


def test_normalises_case_and_whitespace():
    a = ok(text(action_type="  REST ", target_domain=" Physical_Health", route="  r1  "))
    assert (a.action_type, a.target_domain, a.route) == ("rest", "physical_health", "r1")


def test_empty_route_is_none():
    assert ok(text(route="   ")).route is None
    assert ok(text(route=None)).route is None


def test_missing_optional_fields_noted():
    a = ok('{"action_type": "rest", "target_domain": "mental_wellbeing"}')
    assert {"missing:route", "missing:metric_changes", "missing:resource_cost", "missing:reasoning"} <= set(a.notes)
    assert dict(a.metric_changes) == {}
    assert dict(a.resource_cost) == {"time": 0.0, "money": 0.0, "energy": 0.0}
    assert a.reasoning == "" and a.route is None


def test_null_optional_objects_accepted():
    a = ok(text(metric_changes=None, resource_cost=None))
    assert dict(a.metric_changes) == {} and dict(a.resource_cost) == {"time": 0.0, "money": 0.0, "energy": 0.0}


# --- rejections -----------------------------------------------------------------------


@pytest.mark.parametrize("value", ["dance", "", "negotiate_hard", 5, None, ["rest"]])
def test_unknown_or_bad_action_type_rejected(value):
    rejected(text(action_type=value))


def test_missing_action_type_rejected():
    d = dict(VALID)
    del d["action_type"]
    assert "action_type" in rejected(json.dumps(d))


@pytest.mark.parametrize("value", ["work", "", "career.workload", 3, None])
def test_unknown_target_domain_rejected(value):
    assert "target_domain" in rejected(text(target_domain=value))


@pytest.mark.parametrize("completion, word", [
    ("", "empty"),
    ("   \n ", "empty"),
    ("I would negotiate with my boss.", "no JSON"),
    ("[1, 2, 3]", "no JSON"),
    ('{"action_type": "rest", ', "invalid JSON"),
    ("{not json}", "invalid"),
])
def test_no_or_broken_json_rejected(completion, word):
    assert word in rejected(completion)


@pytest.mark.parametrize("value", [None, 12, b"{}", ["a"], 1.5])
def test_non_text_rejected(value):
    rejected(value)


@pytest.mark.parametrize("field, value", [
    ("route", 5), ("route", ["a"]), ("metric_changes", [1, 2]), ("metric_changes", "lots"),
    ("resource_cost", 5), ("resource_cost", ["time"]),
])
def test_bad_field_types_rejected(field, value):
    assert field in rejected(text(**{field: value}))


# --- metric changes -------------------------------------------------------------------


def test_unknown_metric_dropped_with_note():
    a = ok(text(metric_changes={"life.happiness": 20, "career.salary": 5, "career.satisfaction": 4}))
    assert dict(a.metric_changes) == {"career.satisfaction": 4.0}
    assert "dropped_unknown_metric:life.happiness" in a.notes
    assert "dropped_unknown_metric:career.salary" in a.notes


@pytest.mark.parametrize("claimed, applied", [(50, MAX_METRIC_DELTA), (-1e9, -MAX_METRIC_DELTA), (20.5, 20.0)])
def test_deltas_clamped_with_note(claimed, applied):
    a = ok(text(metric_changes={"career.workload": claimed}))
    assert a.metric_changes["career.workload"] == applied
    assert "clamped:career.workload" in a.notes


def test_delta_within_envelope_not_noted():
    a = ok(text(metric_changes={"career.workload": -MAX_METRIC_DELTA}))
    assert a.metric_changes["career.workload"] == -MAX_METRIC_DELTA
    assert not any(n.startswith("clamped") for n in a.notes)


def test_zero_delta_dropped():
    assert dict(ok(text(metric_changes={"career.workload": 0})).metric_changes) == {}


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999", "-1e400"])
def test_non_finite_delta_rejected(literal):
    completion = text(metric_changes={"career.workload": "__X__"}).replace('"__X__"', literal)
    reason = rejected(completion)
    assert "not finite" in reason and "career.workload" in reason


@pytest.mark.parametrize("value", ["five", True, False, None, [5], {"v": 5}])
def test_non_number_delta_rejected(value):
    assert "not a number" in rejected(text(metric_changes={"career.workload": value}))


@pytest.mark.parametrize("value", ["NaN", "1e999", "-inf"])
def test_non_finite_string_number_rejected(value):
    assert "not finite" in rejected(text(metric_changes={"career.workload": value}))


def test_python_nan_in_dict_rejected():
    rejected({**VALID, "metric_changes": {"career.workload": float("nan")}})
    rejected({**VALID, "resource_cost": {"time": float("inf")}})


# --- resource costs -------------------------------------------------------------------


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_cost_rejected(literal):
    completion = text(resource_cost={"time": 1, "money": "__X__", "energy": 0}).replace('"__X__"', literal)
    assert "not finite" in rejected(completion)


@pytest.mark.parametrize("value", ["a hundred", True, None, [1]])
def test_non_number_cost_rejected(value):
    assert "not a number" in rejected(text(resource_cost={"time": 1, "money": value, "energy": 0}))


@pytest.mark.parametrize("action_type", [t for t in ACTION_TYPES if t != "rest"])
def test_negative_costs_zeroed_with_note(action_type):
    a = ok(text(action_type=action_type, resource_cost={"time": -5, "money": -1000, "energy": -20}))
    assert dict(a.resource_cost) == {"time": 0.0, "money": 0.0, "energy": 0.0}
    for k in RESOURCE_NAMES:
        assert f"negative_cost:{k}" in a.notes


def test_rest_may_recover_bounded_energy():
    a = ok(text(action_type="rest", resource_cost={"time": 3, "money": 0, "energy": -10}))
    assert a.resource_cost["energy"] == -10.0
    assert not any(n.startswith("negative_cost") for n in a.notes)
    a = ok(text(action_type="rest", resource_cost={"time": 3, "money": 0, "energy": -500}))
    assert a.resource_cost["energy"] == -MAX_REST_RECOVERY
    # ...but rest cannot book negative time or money
    a = ok(text(action_type="rest", resource_cost={"time": -3, "money": -50, "energy": 0}))
    assert a.resource_cost["time"] == 0.0 and a.resource_cost["money"] == 0.0
    assert "negative_cost:time" in a.notes and "negative_cost:money" in a.notes


def test_cost_ceiling_and_unknown_cost_key():
    a = ok(text(resource_cost={"time": 1e9, "money": 1e12, "energy": 1e6, "karma": 5}))
    assert dict(a.resource_cost) == MAX_COST
    assert "ignored_cost:karma" in a.notes


def test_missing_cost_keys_default_to_zero():
    a = ok(text(resource_cost={"time": 1}))
    assert dict(a.resource_cost) == {"time": 1.0, "money": 0.0, "energy": 0.0}


# --- reasoning ------------------------------------------------------------------------


def test_reasoning_truncated_and_non_string_noted():
    assert len(ok(text(reasoning="a" * 10_000)).reasoning) == MAX_REASONING_CHARS
    a = ok(text(reasoning=["not", "text"]))
    assert a.reasoning == "" and "non_string_reasoning" in a.notes


# --- hostile inputs -------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion",
    [
        "[" * 100_000,
        "{" * 100_000,
        '{"a": ' * 100_000,
        '{"action_type": "rest", "target_domain": "time", "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
        "x" * 1_000_000,
        text(reasoning="a" * 1_000_000),
        "\x00" * 1000 + text(),
        text(metric_changes={"career.workload": "__X__"}).replace('"__X__"', "9" * 5000),
        text(resource_cost={"time": "__X__"}).replace('"__X__"', "1" + "0" * 400),
        "\ud800{}",
    ],
    ids=["brackets", "braces", "nested_objects", "nested_in_action", "1MB_text", "1MB_reasoning", "nul_prefix",
         "5000_digit_int", "huge_int_cost", "lone_surrogate"],
)
def test_hostile_inputs_never_raise(completion):
    check_invariants(parse_action(completion))


def test_nul_prefixed_action_still_parses():
    assert ok("\x00" * 1000 + text()).action_type == "negotiate"


def test_find_json_object_reports_trailing():
    obj, err, trailing = find_json_object('x {"action_type": 1} ``` tail')
    assert obj == {"action_type": 1} and err is None and trailing == "tail"


def test_find_json_object_without_an_action_returns_the_first_object_and_no_trailing():
    obj, err, trailing = find_json_object('x {"a": 1} ``` tail')
    assert obj == {"a": 1} and err is None and trailing == ""


# --- fuzzing --------------------------------------------------------------------------

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20),
    st.sampled_from(list(METRIC_PATHS) + list(ACTION_TYPES) + list(DOMAIN_NAMES)),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=15), children, max_size=5),
    max_leaves=25,
)
tricky_numbers = st.one_of(
    st.floats(), st.integers(-10**30, 10**30), st.sampled_from([float("nan"), float("inf"), -float("inf"), -0.0, 1e308]),
    st.text(max_size=5), st.booleans(), st.none(),
)
field_values = {
    "action_type": st.one_of(st.sampled_from(ACTION_TYPES), json_values),
    "target_domain": st.one_of(st.sampled_from(DOMAIN_NAMES), json_values),
    "route": st.one_of(st.none(), st.text(max_size=100), json_values),
    "metric_changes": st.one_of(
        st.dictionaries(st.one_of(st.sampled_from(METRIC_PATHS), st.text(max_size=30)), tricky_numbers, max_size=6),
        json_values,
    ),
    "resource_cost": st.one_of(
        st.dictionaries(st.one_of(st.sampled_from(RESOURCE_NAMES), st.text(max_size=8)), tricky_numbers, max_size=4),
        json_values,
    ),
    "reasoning": st.one_of(st.text(max_size=200), json_values),
}


@st.composite
def mutated_actions(draw):
    d = dict(VALID)
    for name in draw(st.lists(st.sampled_from(ACTION_FIELDS), unique=True, max_size=6)):
        if draw(st.booleans()):
            d[name] = draw(field_values[name])
        else:
            d.pop(name, None)
    extra = draw(st.dictionaries(st.text(max_size=10), json_values, max_size=2))
    d.update({k: v for k, v in extra.items() if k not in ACTION_FIELDS})
    body = json.dumps(d)  # allow_nan: NaN / Infinity literals appear, as a model could write them
    wrap = draw(st.sampled_from(["{}", "```json\n{}\n```", "Answer: {} done", "{}```", "{}{}"]))
    if draw(st.booleans()):
        # truncate or corrupt a little
        cut = draw(st.integers(0, len(body)))
        body = body[:cut] + draw(st.text(max_size=5)) + body[cut:]
    return wrap.replace("{}", body)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text())
def test_fuzz_arbitrary_text(s):
    check_invariants(parse_action(s))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_fuzz_arbitrary_json_values(value):
    check_invariants(parse_action(json.dumps(value)))
    if isinstance(value, dict):
        check_invariants(parse_action(value))
    else:
        assert parse_action(value)[0] is None or isinstance(value, str)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_actions())
def test_fuzz_mutated_valid_actions(completion):
    result = parse_action(completion)
    check_invariants(result)
    action = result[0]
    if action is not None:
        # a parsed action re-serialises to a clean completion that parses to the same fields
        again = ok(action.to_json())
        assert again.action_type == action.action_type and again.target_domain == action.target_domain
        assert dict(again.metric_changes) == dict(action.metric_changes)
        assert dict(again.resource_cost) == dict(action.resource_cost)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(METRIC_PATHS), st.floats(-1e6, 1e6), max_size=23))
def test_fuzz_metric_changes_bounded(changes):
    a = ok(text(metric_changes=changes))
    for path, delta in changes.items():
        expected = max(-MAX_METRIC_DELTA, min(MAX_METRIC_DELTA, delta))
        if expected == 0:
            assert path not in a.metric_changes
        else:
            assert a.metric_changes[path] == expected
        assert (f"clamped:{path}" in a.notes) == (abs(delta) > MAX_METRIC_DELTA)


def test_decoder_value_error_handled_like_invalid_json():
    huge = '{"n": ' + "9" * 5000 + "} "
    action, reason = parse_action(huge + text())
    assert reason is None and action is not None and action.action_type == "negotiate"


def test_the_json_scan_stays_linear_on_nesting_built_to_be_reread(monkeypatch):
    """'{"a":' repeated makes every '{' re-read the rest of the text: the square of its
    length (about 0.45 s at the 20,000-character cut). The failed candidates' reading is
    bounded (MAX_SCAN_FACTOR x the text), so it stops early and says why."""
    import lifestack.actions as A
    from decoder_reads import count_decoder_reads

    nested = '{"a":' * (A.MAX_TEXT_CHARS // 5)
    with monkeypatch.context() as mp:
        counter = count_decoder_reads(mp)
        action, reason = parse_action(nested)
    assert action is None and "nested" in reason
    # re-reading from every '{' would read about len(nested)**2 / 10 characters (40 million)
    assert counter.read <= (A.MAX_SCAN_FACTOR + 1) * len(nested), counter.read
    # prose with many braces before a real answer is still read
    honest = '{"action_type": "rest", "target_domain": "physical_health", "reasoning": "I rest."}'
    action, reason = parse_action("{ x } " * 300 + honest)
    assert action is not None, reason


def test_a_scan_budget_stops_text_built_to_be_reread_from_every_brace():
    # 200 unclosed objects: each '{' decodes to the end of the text, so the failed candidates
    # read ~100x the text; the scan stops at MAX_SCAN_FACTOR x and says so
    action, reason = parse_action('{"a":' * 200)
    assert action is None and reason == "JSON scan stopped: too many nested candidates"
    action, reason = parse_action('{"a":' * 10)  # a few candidates read less: the decoder's own error
    assert action is None and reason.startswith("invalid JSON")
