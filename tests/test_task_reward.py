"""Tests for lifestack.task_reward: components, named penalties, clipping, reasoning coherence."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lifestack import task_reward as R
from lifestack.actions import LifeStackAction, parse_action
from lifestack.metrics import METRIC_PATHS
from lifestack.task_reward import (
    VOCABULARY,
    StepOutcome,
    clip,
    completion_score,
    local_outcome,
    milestone_score,
    reasoning_coherence,
    replan_score,
    task_reward,
)

BASE = dict.fromkeys(METRIC_PATHS, 70.0)
STRESS = "mental_wellbeing.stress_level"


def action(**kw) -> LifeStackAction:
    fields = dict(action_type="rest", target_domain="mental_wellbeing", route=None,
                  metric_changes={STRESS: -5.0}, resource_cost={"time": 2.0, "money": 0.0, "energy": 0.0},
                  reasoning="")
    fields.update(kw)
    return LifeStackAction(**fields)


def outcome(after_changes=None, before=None, **kw) -> StepOutcome:
    before = dict(before or BASE)
    after = dict(before)
    for p, d in (after_changes or {}).items():
        after[p] += d
    kw.setdefault("action", action())
    return StepOutcome(before=before, after=after, **kw)


def test_weights_sum_to_one_and_penalties_negative():
    assert R.W_OUTCOME + R.W_MILESTONE + R.W_COMPLETION + R.W_REPLAN + R.W_REASONING == pytest.approx(1.0)
    assert sum(R.OUTCOME_MIX.values()) == pytest.approx(1.0)
    for name in dir(R):
        if name.startswith("P_"):
            assert getattr(R, name) < 0, name


def test_clip():
    assert clip(5) == 1.0 and clip(-5) == -1.0 and clip(0.3) == 0.3
    assert clip(float("nan")) == 0.0
    assert clip(float("inf")) == 1.0 and clip(-float("inf")) == -1.0
    assert clip(2, 0, 1) == 1


# --- components -----------------------------------------------------------------------


def test_local_outcome_honours_inversion():
    better = local_outcome(outcome({STRESS: -5.0}))
    worse = local_outcome(outcome({STRESS: +5.0}))
    assert better["gain"] > 0 > worse["gain"]
    assert R.outcome_score(better) > R.outcome_score(worse)


def test_local_outcome_relationships_subscore():
    assert local_outcome(outcome({"relationships.family": 3.0}))["relationships"] == 1.0
    assert local_outcome(outcome({"relationships.family": -2.5}))["relationships"] == pytest.approx(0.5)


def test_containment_rewards_fixing_damaged_metrics():
    before = dict(BASE, **{STRESS: 90.0})  # goodness 10: damaged
    fix = local_outcome(outcome({STRESS: -4.0}, before=before))
    elsewhere = local_outcome(outcome({"career.satisfaction": 4.0}, before=before))
    assert fix["containment"] > elsewhere["containment"]


def test_milestone_completion_replan_scores():
    assert milestone_score(outcome(milestone_gain=0.0)) == 0.0
    assert milestone_score(outcome(milestone_gain=0.5, best_step_reward=0.5)) == 1.0
    assert milestone_score(outcome(milestone_gain=0.25, best_step_reward=0.5)) == 0.5
    assert completion_score(outcome(success=True, route_value=0.8)) == 0.8
    assert completion_score(outcome(success=True, route_value=0.1)) == 0.5
    assert completion_score(outcome(route_status="advanced", route_fraction=0.5, route_value=0.8)) == pytest.approx(0.4)
    assert completion_score(outcome(route_status="closed", route_fraction=0.5, route_value=0.8)) == 0.0
    assert replan_score(outcome(route_status="advanced")) == 1.0
    assert replan_score(outcome(route_status="closed")) == -1.0
    assert replan_score(outcome(route_status="none")) == 0.0


def test_replanning_component_only_when_applicable():
    assert "component.replanning" not in task_reward(outcome()).breakdown()
    assert "component.replanning" in task_reward(outcome(replan_applicable=True)).breakdown()


def test_breakdown_names_every_component():
    bd = task_reward(outcome({STRESS: -5.0})).breakdown()
    for name in ("outcome", "milestone", "completion", "reasoning"):
        assert f"component.{name}" in bd
    for sub in R.OUTCOME_MIX:
        assert f"component.outcome.{sub}" in bd
    assert "total" in bd


def test_total_is_weighted_sum_plus_penalties():
    o = outcome({STRESS: -5.0}, milestone_gain=0.5, best_step_reward=0.5, route_status="advanced",
                route_fraction=0.5, route_value=1.0, reasoning_score=0.6, replan_applicable=True)
    res = task_reward(o)
    c = res.components
    weighted = (R.W_OUTCOME * c["outcome"] + R.W_MILESTONE * c["milestone"] + R.W_COMPLETION * c["completion"]
                + R.W_REASONING * c["reasoning"] + R.W_REPLAN * c["replanning"])
    assert res.total == pytest.approx(clip(weighted + sum(res.penalties.values())))


# --- named penalties ------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, penalty",
    [
        ({"affordable": False, "overspend": 0.1}, "unaffordable"),
        ({"route_status": "closed"}, "dead_end"),
        ({"route_status": "unknown"}, "dead_end"),
        ({"route_status": "precondition"}, "dead_end"),
        ({"claimed_gain": 100.0, "plausibility": 0.1}, "implausible"),
        ({"cascade_harm": 3.0}, "cascade_collapse"),
        ({"stuffing": True}, "keyword_stuffing"),
        ({"timeout": True}, "timeout"),
        ({"failure": True}, "failure"),
        ({"action": action(notes=("negative_cost:money",))}, "negative_cost"),
    ],
)
def test_named_penalties(kwargs, penalty):
    res = task_reward(outcome({STRESS: -5.0}, **kwargs))
    bd = res.breakdown()
    assert f"penalty.{penalty}" in bd and bd[f"penalty.{penalty}"] < 0
    clean = task_reward(outcome({STRESS: -5.0})).breakdown()
    assert f"penalty.{penalty}" not in clean
    assert res.total < task_reward(outcome({STRESS: -5.0})).total


def test_inaction_penalty():
    assert "penalty.inaction" in task_reward(outcome({})).breakdown()
    assert "penalty.inaction" not in task_reward(outcome({}, route_status="advanced")).breakdown()
    assert "penalty.inaction" not in task_reward(outcome({STRESS: -5.0})).breakdown()


def test_critical_floor_penalty():
    before = dict(BASE, **{STRESS: 85.0})
    bd = task_reward(outcome({STRESS: 10.0}, before=before)).breakdown()  # goodness 15 -> 5
    assert "penalty.critical_floor" in bd
    # already below the floor but improving: no penalty
    before = dict(BASE, **{STRESS: 97.0})
    assert "penalty.critical_floor" not in task_reward(outcome({STRESS: -1.0}, before=before)).breakdown()


def test_implausible_penalty_scales_with_unpaid_share():
    a = task_reward(outcome({STRESS: -5.0}, claimed_gain=50, plausibility=0.8)).penalties["implausible"]
    b = task_reward(outcome({STRESS: -5.0}, claimed_gain=50, plausibility=0.1)).penalties["implausible"]
    assert b < a < 0
    assert "implausible" not in task_reward(outcome({STRESS: -5.0}, claimed_gain=50, plausibility=1.0)).penalties


def test_everything_bad_squashed_to_the_valid_floor():
    res = task_reward(outcome({p: (10.0 if p == STRESS else -10.0) for p in METRIC_PATHS},
                              affordable=False, overspend=2.0, route_status="closed", claimed_gain=100,
                              plausibility=0.0, cascade_harm=50.0, stuffing=True, timeout=True, failure=True,
                              action=action(notes=("negative_cost:time",))))
    # the worst valid action still scores above an unparseable one (P_INVALID_ACTION)
    assert res.total == pytest.approx(R.soft_floor(-1.0))
    assert R.P_INVALID_ACTION < res.total < R.VALID_FLOOR + 0.02
    assert len(res.penalties) >= 8


def test_everything_good_at_most_one():
    res = task_reward(outcome({STRESS: -20.0, "career.satisfaction": 20.0}, milestone_gain=1.0, best_step_reward=0.5,
                              success=True, route_status="completed", route_fraction=1.0, route_value=1.0,
                              reasoning_score=1.0, replan_applicable=True, budget_fraction_spent=0.1))
    assert 0.9 < res.total <= 1.0


finite = st.floats(-1e6, 1e6)


@settings(max_examples=150, deadline=None)
@given(
    before=st.fixed_dictionaries({p: st.floats(0, 100) for p in METRIC_PATHS}),
    after=st.fixed_dictionaries({p: st.floats(0, 100) for p in METRIC_PATHS}),
    spent=st.floats(0, 3), affordable=st.booleans(), claimed=st.floats(0, 1e4), plaus=st.floats(0, 1),
    status=st.sampled_from(["none", "advanced", "completed", "closed", "unknown", "precondition", "wrong_type"]),
    frac=st.floats(0, 1), value=st.floats(0, 1), mgain=st.floats(0, 2), best=st.floats(0.01, 1),
    flags=st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans(), st.booleans()),
    worsened=st.integers(0, 23), rscore=st.floats(0, 1),
)
def test_task_reward_always_bounded(before, after, spent, affordable, claimed, plaus, status, frac, value, mgain, best,
                                    flags, worsened, rscore):
    success, failure, timeout, replan, stuffing = flags
    res = task_reward(StepOutcome(
        action=action(), before=before, after=after, budget_fraction_spent=spent, affordable=affordable,
        claimed_gain=claimed, plausibility=plaus, route_status=status, route_fraction=frac, route_value=value,
        milestone_gain=mgain, best_step_reward=best, success=success, failure=failure, timeout=timeout,
        replan_applicable=replan, cascade_harm=float(worsened), reasoning_score=rscore, stuffing=stuffing,
    ))
    assert math.isfinite(res.total) and -1.0 <= res.total <= 1.0
    bd = res.breakdown()
    assert all(math.isfinite(v) for v in bd.values())
    assert bd["total"] == pytest.approx(res.total, abs=1e-6)
    for k in res.penalties:
        assert f"penalty.{k}" in bd


def reference_local_outcome(o: StepOutcome) -> dict[str, float]:
    """local_outcome written the slow, obvious way (a sum or min per sub-score)."""
    changes = o.goodness_changes()
    gain = sum(changes.values())
    damaged = o.damaged_before()
    gain_score = math.tanh(gain / R.GAIN_SCALE)
    if damaged:
        containment = sum(clip(d / 4.0) for p, d in changes.items() if p in damaged) / len(damaged)
        containment = clip(containment * min(3.0, len(damaged)))
    else:
        containment = gain_score
    efficiency = clip(gain / max(3.0, R.EFFICIENCY_POINTS_PER_BUDGET * o.budget_fraction_spent))
    rel_min = min([0.0] + [d for p, d in changes.items() if p in R.RELATIONSHIP_METRICS])
    relationships = 1.0 if rel_min >= 0 else clip(1.0 + rel_min / 5.0)
    return {"gain": gain_score, "containment": containment, "efficiency": efficiency, "relationships": relationships}


def reference_task_reward(o: StepOutcome) -> tuple[float, dict[str, float], dict[str, float]]:
    """task_reward written the slow, obvious way from the component definitions."""
    sub = reference_local_outcome(o)
    components = {"outcome": sum(R.OUTCOME_MIX[k] * sub[k] for k in R.OUTCOME_MIX), "milestone": milestone_score(o), "completion": completion_score(o),
                  "reasoning": o.reasoning_score}
    weights = {"outcome": R.W_OUTCOME, "milestone": R.W_MILESTONE, "completion": R.W_COMPLETION, "reasoning": R.W_REASONING}
    if o.replan_applicable:
        components["replanning"] = replan_score(o)
        weights["replanning"] = R.W_REPLAN
    weighted = sum(weights[k] * components[k] for k in components) / sum(weights.values())
    penalties = {}
    share = lambda x, full: min(1.0, max(0.0, x / full))  # noqa: E731
    if not o.affordable:
        penalties["unaffordable"] = R.P_UNAFFORDABLE * share(o.overspend, R.UNAFFORDABLE_FULL_AT)
    if o.route_status in ("closed", "unknown", "precondition"):
        penalties["dead_end"] = R.P_DEAD_END
    net = sum(o.goodness_changes().values())
    if o.route_status not in ("advanced", "completed") and net < R.INACTION_RAMP:
        penalties["inaction"] = R.P_INACTION * (1.0 - share(net, R.INACTION_RAMP))
    if o.claimed_gain > 0 and o.claimed_gain * (1.0 - o.plausibility) > 0:
        penalties["implausible"] = R.P_IMPLAUSIBLE * share(o.claimed_gain * (1.0 - o.plausibility), R.UNPAID_FULL_AT)
    if any(n.startswith("negative_cost") for n in o.action.notes):
        penalties["negative_cost"] = R.P_NEGATIVE_COST
    below = max([min(-d, R.CRITICAL_GOODNESS - R.goodness(p, o.after[p])) for p, d in o.goodness_changes().items()
                 if d < 0 and R.goodness(p, o.after[p]) < R.CRITICAL_GOODNESS] or [0.0])
    if below > 0:
        penalties["critical_floor"] = R.P_CRITICAL_FLOOR * share(below, R.CRITICAL_RAMP)
    if o.cascade_harm > 0:
        penalties["cascade_collapse"] = R.P_CASCADE_COLLAPSE * share(o.cascade_harm, R.COLLAPSE_HARM)
    if o.stuffing:
        penalties["keyword_stuffing"] = R.P_KEYWORD_STUFFING
    if o.timeout and not o.success:
        penalties["timeout"] = R.P_TIMEOUT
    if o.failure:
        penalties["failure"] = R.P_FAILURE
    components.update({f"outcome.{k}": v for k, v in sub.items()})
    return R.soft_floor(clip(weighted + sum(penalties.values()))), components, penalties


@settings(max_examples=200, deadline=None)
@given(
    moved=st.dictionaries(st.sampled_from(METRIC_PATHS), st.floats(-40, 40), max_size=8),
    before=st.fixed_dictionaries({p: st.floats(0, 100) for p in METRIC_PATHS}),
    spent=st.floats(0, 3), affordable=st.booleans(), claimed=st.floats(0, 50), plaus=st.floats(0, 1),
    status=st.sampled_from(["none", "advanced", "completed", "closed", "unknown", "precondition", "wrong_type"]),
    frac=st.floats(0, 1), value=st.floats(0, 1), mgain=st.floats(0, 2), best=st.floats(0.01, 1),
    flags=st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans(), st.booleans()),
    worsened=st.integers(0, 5), rscore=st.floats(0, 1), negative_cost=st.booleans(),
)
def test_task_reward_is_exactly_the_component_functions(moved, before, spent, affordable, claimed, plaus, status, frac,
                                                         value, mgain, best, flags, worsened, rscore, negative_cost):
    # local_outcome is one pass and task_reward sums its weights in a fixed order, for
    # speed; both must agree bit for bit with the obvious formulas (same arithmetic, same
    # order of summation)
    success, failure, timeout, replan, stuffing = flags
    after = dict(before)
    for p, d in moved.items():
        after[p] = min(100.0, max(0.0, after[p] + d))
    act = action(notes=("negative_cost:money",) if negative_cost else ())
    kw = dict(action=act, before=before, after=after, budget_fraction_spent=spent, affordable=affordable,
              claimed_gain=claimed, plausibility=plaus, route_status=status, route_fraction=frac, route_value=value,
              milestone_gain=mgain, best_step_reward=best, success=success, failure=failure, timeout=timeout,
              replan_applicable=replan, cascade_harm=float(worsened), overspend=spent, reasoning_score=rscore,
              stuffing=stuffing)
    got = task_reward(StepOutcome(**kw))
    assert local_outcome(StepOutcome(**kw)) == reference_local_outcome(StepOutcome(**kw))
    total, components, penalties = reference_task_reward(StepOutcome(**kw))
    assert got.total == total
    assert got.components == components and list(got.components) == list(components)
    assert got.penalties == penalties and list(got.penalties) == list(penalties)


# --- reasoning coherence --------------------------------------------------------------

ROUTE_WORDS = {"rebook_premium": frozenset({"rebook", "premium", "fare"}),
               "standby_and_work": frozenset({"standby", "work", "lounge"})}
DAMAGED = [STRESS, "time.free_hours_per_week"]
HONEST = ("My stress level took the biggest hit, so I rest for two hours of time to bring the stress down "
          "and recover some clarity before the meeting.")
IRRELEVANT = "The weather is lovely today and I would like pizza with my friends at the beach later this evening."


def rc(text: str, act: LifeStackAction | None = None, **kw) -> tuple[float, bool]:
    kw.setdefault("damaged", DAMAGED)
    kw.setdefault("route_words", ROUTE_WORDS)
    return reasoning_coherence(text, act or action(), **kw)


def test_empty_reasoning_scores_zero():
    assert rc("") == (0.0, False)
    assert rc("   !!! 123 ...") == (0.0, False)


def test_relevant_beats_irrelevant():
    honest, s1 = rc(HONEST)
    irrelevant, s2 = rc(IRRELEVANT)
    assert honest > irrelevant
    assert honest >= 0.5
    assert not s1 and not s2


def test_route_and_event_evidence_count():
    act = action(route="rebook_premium", action_type="negotiate")
    with_route, _ = rc("I negotiate the premium fare rebook; stress is high and it costs two hours of time.", act)
    without, _ = rc("I negotiate; stress is high and it costs two hours of time and some money.", act)
    assert with_route > without
    ev = frozenset({"price", "surge"})
    adapted, _ = rc("After the price surge I rest: stress is high and it costs two hours of time.", event_words=ev)
    ignored, _ = rc("I rest because stress is high and it costs two hours of my time today.", event_words=ev)
    assert adapted > ignored


def test_keyword_stuffing_flagged_and_scores_lower():
    stuffed_text = " ".join(sorted(VOCABULARY))
    stuffed, flag = rc(stuffed_text)
    honest, honest_flag = rc(HONEST)
    assert flag is True and honest_flag is False
    assert stuffed < honest
    # stuffing with extra resource words and route names is still flagged
    more = stuffed_text + " time money energy budget cost rebook premium standby work"
    score, flag = rc(more)
    assert flag and score < honest


def test_repetition_flagged():
    score, flag = rc("stress " * 40)
    assert flag and score < rc(HONEST)[0]


def test_length_matters():
    short, _ = rc("stress time")
    assert short < rc(HONEST)[0]


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=400))
def test_reasoning_coherence_bounded(text):
    score, flag = rc(text)
    assert 0.0 <= score <= 1.0 and isinstance(flag, bool)


def test_parsed_action_flows_into_reward():
    a, _ = parse_action('{"action_type": "spend", "target_domain": "finances", "resource_cost": {"money": -5}}')
    assert "negative_cost:money" in a.notes
    assert "penalty.negative_cost" in task_reward(outcome({STRESS: -5.0}, action=a)).breakdown()
