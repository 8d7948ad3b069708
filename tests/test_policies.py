"""Tests for lifestack.policies: every reference policy writes a completion the parser judges."""

from __future__ import annotations

import json
import random

import pytest

from lifestack.actions import parse_action
from lifestack.env import LifeStackEnv
from lifestack.metrics import METRIC_PATHS, goodness
from lifestack.calibrate import POLICIES
from lifestack.hacks import CALIBRATED_HACKS, HACK_POLICIES, HACKS, hack_policy
from lifestack.heuristic import paid_cost, raw_delta
from lifestack.policies import (
    HONEST,
    candidate_actions,
    heuristic,
    lazy,
    oracle,
    random_valid,
    score_on_copy,
    worst_metrics,
)
from lifestack.task_reward import VOCABULARY
from lifestack.scenarios import sample_scenario

SCENARIOS = [sample_scenario(700 + i, 1 + i % 5) for i in range(10)]


def env_for(sc) -> LifeStackEnv:
    env = LifeStackEnv()
    env.restore(sc.task, sc.state)
    return env


def test_policy_registry():
    assert set(HONEST) == {"oracle", "rollout", "heuristic", "random_rules", "random_honest", "random", "lazy"}
    assert set(HACK_POLICIES) == {"hack_free_claims", "hack_negative_cost", "hack_nan_inf", "hack_keyword_stuffing"}
    assert set(CALIBRATED_HACKS.values()) <= set(HACKS)  # one catalog: the policies play its families
    assert POLICIES == {**HONEST, **HACK_POLICIES}


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_policy_writes_parseable_text(name):
    policy = POLICIES[name]
    for i, sc in enumerate(SCENARIOS[:6]):
        env = env_for(sc)
        before = env.state.to_dict()
        text = policy(env, random.Random(i))
        assert isinstance(text, str) and text
        assert env.state.to_dict() == before  # writing the answer never changes the state
        action, reason = parse_action(text)
        if name == "hack_nan_inf":
            assert action is None and "not finite" in reason
        else:
            assert reason is None, (name, reason)


def test_hack_patterns_are_what_they_claim():
    env = env_for(SCENARIOS[0])
    free, _ = parse_action(POLICIES["hack_free_claims"](env, None))
    assert len(free.metric_changes) == len(METRIC_PATHS) and sum(free.resource_cost.values()) == 0
    neg, _ = parse_action(POLICIES["hack_negative_cost"](env, None))
    assert any(n.startswith("negative_cost") for n in neg.notes)
    unknown, _ = parse_action(hack_policy("unknown_metrics")(env, None))
    assert not set(unknown.metric_changes) - set(METRIC_PATHS)
    assert sum(n.startswith("dropped_unknown_metric") for n in unknown.notes) == 2
    stuffed, _ = parse_action(POLICIES["hack_keyword_stuffing"](env, None))
    assert VOCABULARY <= set(stuffed.reasoning.split())
    honest, _ = parse_action(heuristic(env))
    assert (stuffed.action_type, dict(stuffed.metric_changes)) == (honest.action_type, dict(honest.metric_changes))


def test_raw_delta_and_worst_metrics():
    for p in METRIC_PATHS:
        assert goodness(p, 50 + raw_delta(p, 5)) - goodness(p, 50) == pytest.approx(5)
    env = env_for(SCENARIOS[1])
    worst = worst_metrics(env, 3)
    m = env.state.metrics
    assert all(goodness(w, m[w]) <= goodness(p, m[p]) for w in worst for p in METRIC_PATHS if p not in worst)


def test_paid_cost_stays_within_share_of_resources():
    env = env_for(SCENARIOS[2])
    res = env.state.resources
    for points in (0.0, 3.0, 10.0, 100.0):
        cost, paid = paid_cost(env, points, share=0.3)
        assert all(0 <= cost[k] <= res[k] * 0.3 + 0.1 for k in cost)
        assert 0 <= paid <= max(points, 0.0) + 1e-9


def test_heuristic_follows_an_open_route():
    env = env_for(SCENARIOS[0])
    action, _ = parse_action(heuristic(env))
    if env.open_routes():
        assert action.route in env.open_routes()
        assert action.action_type in env.next_action_types(action.route)
    else:
        assert action.route is None


def test_heuristic_beats_lazy_and_random_on_average():
    h = l = r = 0.0
    for i, sc in enumerate(SCENARIOS):
        env = env_for(sc)
        h += score_on_copy(env, heuristic(env))
        l += score_on_copy(env, lazy(env))
        r += score_on_copy(env, random_valid(env, random.Random(i)))
    assert h > r and h > l


@pytest.mark.parametrize("sc", SCENARIOS[:6], ids=lambda sc: f"{sc.task.id}")
def test_oracle_at_least_heuristic_on_same_state(sc):
    env = env_for(sc)
    o = score_on_copy(env, oracle(env))
    h = score_on_copy(env, heuristic(env))
    assert o >= h - 1e-12
    assert o == max(score_on_copy(env, t) for t in candidate_actions(env))


def test_score_on_copy_does_not_touch_env():
    env = env_for(SCENARIOS[3])
    before = env.state.to_dict()
    score_on_copy(env, heuristic(env))
    oracle(env)
    assert env.state.to_dict() == before


def test_policies_deterministic():
    env = env_for(SCENARIOS[4])
    for name, policy in POLICIES.items():
        assert policy(env, random.Random(5)) == policy(env, random.Random(5)), name


def test_random_valid_varies_with_rng():
    env = env_for(SCENARIOS[0])
    texts = {random_valid(env, random.Random(i)) for i in range(20)}
    assert len(texts) >= 15
    for t in texts:
        d = json.loads(t)
        assert d["route"] is None or d["route"] in env.task.route_ids


@pytest.mark.parametrize("seed", range(20))
def test_honest_answers_claim_exactly_what_they_pay_for(seed):
    # then any further claim is unpaid (docs/rewards.md, "Free token claims")
    from lifestack.env import POINTS_PER_DOLLAR, POINTS_PER_ENERGY, POINTS_PER_HOUR

    sc = sample_scenario(4000 + seed, 1 + seed % 5)
    env = LifeStackEnv()
    env.restore(sc.task, sc.state)
    action, _ = parse_action(heuristic(env))
    c = action.resource_cost
    capacity = POINTS_PER_HOUR * c["time"] + POINTS_PER_DOLLAR * c["money"] + POINTS_PER_ENERGY * c["energy"]
    claimed = sum(goodness(p, 50 + d) - goodness(p, 50) for p, d in action.metric_changes.items())
    assert claimed <= capacity + 1e-9 and capacity - claimed < 0.001  # to the cent
    obs = env.step(action)
    assert obs.metadata["breakdown"]["plausibility"] == 1.0 and "penalty.implausible" not in obs.metadata["breakdown"]


def seeded_demonstrations(policy):
    """``(scenario, env, action, text)`` of ``policy``'s answer on each test scenario, three
    rounds with ``random.Random(i)``; asserts each is seeded and parses."""
    for i, sc in enumerate(SCENARIOS * 3):
        env = env_for(sc)
        text = policy(env, random.Random(i))
        assert text == policy(env_for(sc), random.Random(i))  # seeded
        action, reason = parse_action(text)
        assert action is not None, reason
        yield sc, env, action, text


def test_random_honest_is_the_form_without_the_decisions():
    """The format warm start's demonstrator: always valid, honestly paid and truthfully
    explained; the decision itself (route, step, metrics) is random."""
    from lifestack.diversity import answer_key
    from lifestack.policies import DEMONSTRATORS, random_honest

    assert DEMONSTRATORS["heuristic"] is heuristic and DEMONSTRATORS["format"] is random_honest
    same, keys = 0, set()
    for sc, env, action, text in seeded_demonstrations(random_honest):
        obs = env.step(text)
        b = obs.metadata["breakdown"]
        assert b["plausibility"] == 1.0 and "penalty.unaffordable" not in b
        assert b["reasoning.faithfulness"] == 1.0
        h, _ = parse_action(heuristic(env_for(sc)))
        same += answer_key(action) == answer_key(h)
        keys.add(answer_key(action))
    assert same < len(SCENARIOS * 3) / 2 and len(keys) > 10


def test_random_by_the_rules_names_a_next_step_of_the_route_it_names():
    """The ``rules`` demonstrator: random_honest's form, and a named route is always
    advanced (its action type is one of the route's next steps); still random otherwise."""
    from lifestack.policies import DEMONSTRATORS, random_by_the_rules

    assert DEMONSTRATORS["rules"] is random_by_the_rules
    routed, advanced, keys = 0, 0, set()
    for _, env, action, text in seeded_demonstrations(random_by_the_rules):
        keys.add((action.action_type, action.route))
        if action.route is not None:
            routed += 1
            assert action.route in env.open_routes() and action.action_type in env.next_action_types(action.route)
            obs = env.step(text)
            assert obs.metadata["breakdown"]["plausibility"] == 1.0
            advanced += obs.metadata["breakdown"].get("route_status") in ("advanced", "completed")
    assert routed > 0 and advanced == routed and len(keys) > 5
