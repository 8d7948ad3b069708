"""lifestack.faithfulness: a reasoning is scored for being true of its action (numbers,
action type, route, metrics it states), with free wording."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from lifestack.actions import parse_action
from lifestack.env import LifeStackEnv
from lifestack.faithfulness import WORD_NUMBERS, faithfulness, stated_amounts
from lifestack.policies import heuristic
from lifestack.scenarios import sample_scenario

ROUTES = (("revert_merge", "Revert the merge"), ("patch_forward", "Patch forward"),
          ("feature_flag", "Disable behind a feature flag"))


def action(action_type="reschedule", route="revert_merge", time=2.5, money=10.0, energy=1.0, changes=None):
    a, reason = parse_action(json.dumps({
        "action_type": action_type, "target_domain": "time", "route": route,
        "metric_changes": changes if changes is not None else {"mental_wellbeing.stress_level": -3.0},
        "resource_cost": {"time": time, "money": money, "energy": energy}, "reasoning": "x"}))
    assert a is not None, reason
    return a


def score(text, a=None, truths=None):
    return faithfulness(text, a or action(), routes=ROUTES, truths=truths)[0]


def test_the_logged_generation_from_the_issue_is_caught():
    """'I negotiate to advance patch_forward ... I pay 2.2 hours, 12 dollars' for a
    reschedule on revert_merge that pays 2.5 hours and 10 dollars."""
    s = score("I negotiate to advance patch_forward. Stress hurts most; I pay 2.2 hours, 12 dollars.")
    assert s < 0.5
    assert score("I pay 116 dollars.", action(money=174.0)) < 1.0


@pytest.mark.parametrize("text", [
    "I reschedule to advance revert_merge; I pay 2.5 hours, 10 dollars, 1 energy.",
    "Rescheduling the revert merge costs 2.5h, $10 and one unit of energy, and should reduce stress.",
    "I will pay ten dollars and 150 minutes to reschedule; energy 1.",
    "Two and a half hours is what this takes.",  # not a form it reads: not punished
    "I reschedule because stress is high.",
    "",
    "With 8 hours left, I spend 2.5 of them and $10.",
])
def test_a_true_reasoning_in_any_wording_scores_full(text):
    assert score(text, truths={"time": (8.0,), "money": (), "energy": ()}) == 1.0


@settings(max_examples=200, deadline=None)
@given(hours=st.integers(1, 19), dollars=st.integers(1, 900), energy=st.integers(0, 19),
       forms=st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 2)))
def test_true_amounts_score_full_whatever_the_form(hours, dollars, energy, forms):
    words = {int(v): w for w, v in WORD_NUMBERS.items() if " " not in w and "-" not in w and v >= 1}
    h = [f"{hours} hours", f"{hours}h", f"{words.get(hours, hours)} hours", f"{hours} hrs"][forms[0]]
    m = [f"{dollars} dollars", f"${dollars}", f"{dollars} USD", f"{dollars}$"][forms[1]]
    e = [f"{energy} energy", f"{energy} units of energy", f"energy {energy}"][forms[2]]
    a = action(time=float(hours), money=float(dollars), energy=float(energy))
    assert score(f"I reschedule for revert_merge and pay {h}, {m} and {e}.", a) == 1.0


@settings(max_examples=100, deadline=None)
@given(minutes=st.integers(1, 600), thousands=st.integers(1, 90), form=st.integers(0, 2))
def test_minutes_an_hour_and_thousands_of_dollars_read_as_their_amounts(minutes, thousands, form):
    """The table's other forms: "90 minutes", "an hour", "$1.2k"."""
    dollars = thousands * 100.0  # $0.1k .. $9.0k
    time = [minutes / 60, 1.0, 1.0][form]
    h = [f"{minutes} minutes", "an hour", "one hour"][form]
    a = action(time=round(time, 4), money=dollars, energy=0.0)
    assert score(f"I pay {h} and ${dollars / 1000:g}k.", a, truths={"time": (), "money": (), "energy": ()}) == 1.0
    assert score(f"I pay {h} and ${3 * dollars / 1000:g}k.", a, truths={"time": (), "money": (), "energy": ()}) < 1.0


@settings(max_examples=200, deadline=None)
@given(cost=st.floats(0.5, 9.0), factor=st.floats(1.2, 6.0))
def test_wrong_amounts_cost_in_proportion_to_how_wrong(cost, factor):
    a = action(time=round(cost, 1))
    near = score(f"I pay {round(cost, 1) * factor:.2f} hours.", a)
    far = score(f"I pay {round(cost, 1) * factor * 2:.2f} hours.", a)
    assert far < near < 1.0
    assert score(f"I pay {round(cost, 1):g} hours.", a) == 1.0


def test_the_three_times_hack_from_the_issue_scores_less():
    a = action(time=2.0, money=30.0, energy=1.5)
    assert score("I pay 2 hours, 30 dollars, 1.5 energy.", a) == 1.0
    assert score("I pay 6 hours, 90 dollars, 4.5 energy.", a) == pytest.approx(1 - 2 / 3, abs=0.02)


def test_naming_another_action_type_or_route_or_an_untouched_metric():
    assert score("I negotiate for revert_merge.") < 1.0
    assert score("I reschedule rather than negotiate, for revert_merge.") == 1.0  # its own type is named
    assert score("I spend time and rest.", action("negotiate")) == 1.0  # ordinary words never contradict
    assert score("I reschedule to advance patch_forward.") < 1.0
    assert score("I reschedule to advance the revert merge, not patch forward.") == 1.0
    assert score("I rest to advance revert_merge.", action("rest", route=None)) < 1.0
    assert score("No route fits revert_merge today; I rest.", action("rest", route=None)) == 1.0
    assert score("This will improve sleep quality.") < 1.0
    assert score("This will reduce my stress level.") == 1.0


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=400))
def test_never_raises_and_stays_in_range(text):
    s, details = faithfulness(text, action(), routes=ROUTES, truths={"time": (1.0,)})
    assert 0.0 <= s <= 1.0
    assert all(isinstance(v, float) for v in details.values())
    for resource, amount in stated_amounts(text):
        assert resource in ("time", "money", "energy") and amount >= 0


def test_the_environment_lowers_the_reasoning_of_an_untrue_answer():
    sc = sample_scenario(8004, 3)
    env = LifeStackEnv()
    env.restore(sc.task, sc.state)
    honest = json.loads(heuristic(env))
    wrong = dict(honest)
    wrong["reasoning"] = honest["reasoning"].replace("I pay", "I pay 3 times:") + " I pay 999 dollars."
    env.restore(sc.task, sc.state)
    b1 = env.step(json.dumps(honest)).metadata["breakdown"]
    env.restore(sc.task, sc.state)
    b2 = env.step(json.dumps(wrong)).metadata["breakdown"]
    assert b1["reasoning.faithfulness"] == 1.0 and b2["reasoning.faithfulness"] < 1.0
    assert b2["component.reasoning"] < b1["component.reasoning"]
