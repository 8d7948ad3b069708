"""lifestack/diversity.py: distinct answers per task family, route fit, collapse."""

from __future__ import annotations

from lifestack.actions import LifeStackAction
from lifestack.diversity import COLLAPSE_MIN_ANSWERS, answer_diversity, answer_key

FLIGHT = ("rebook_premium", "wait_in_lounge")
CODE = ("revert_merge", "patch_forward")


def act(kind="negotiate", domain="career", route=None) -> LifeStackAction:
    return LifeStackAction(kind, domain, route)


def test_counts_distinct_answers_and_route_fit_per_family():
    report = answer_diversity([
        ("flight_crisis", act(route="rebook_premium"), FLIGHT),
        ("flight_crisis", act(route="rebook_premium"), FLIGHT),
        ("flight_crisis", act("rest", "physical_health"), FLIGHT),
        ("code_merge_crisis", act(route="rebook_premium"), CODE),  # a flight route on a code task
        ("code_merge_crisis", None, CODE),
    ])
    f, c = report["flight_crisis"], report["code_merge_crisis"]
    assert (f["answers"], f["distinct"], f["route_fits"], f["collapsed"]) == (3, 2, 1.0, False)
    assert f["route_named"] == round(2 / 3, 4)
    assert (c["answers"], c["distinct"], c["route_fits"]) == (1, 1, 0.0)


def test_collapse_needs_enough_answers_all_the_same():
    same = [("flight_crisis", act(route="rebook_premium"), FLIGHT)] * COLLAPSE_MIN_ANSWERS
    assert answer_diversity(same)["flight_crisis"]["collapsed"]
    assert not answer_diversity(same[:-1])["flight_crisis"]["collapsed"]
    varied = same + [("flight_crisis", act("rest"), FLIGHT)]
    assert not answer_diversity(varied)["flight_crisis"]["collapsed"]


def test_no_parsed_answer_gives_an_empty_report():
    assert answer_diversity([("flight_crisis", None, FLIGHT)]) == {}


def test_answer_key_is_what_makes_two_answers_the_same():
    """Amounts and costs do not count: the key is action type, domain and route."""
    a = act(route="rebook_premium")
    assert answer_key(a) == ("negotiate", "career", "rebook_premium")
    assert answer_key(a) != answer_key(act(route="wait_in_lounge")) != answer_key(act("rest", route="wait_in_lounge"))
