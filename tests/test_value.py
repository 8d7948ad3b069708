"""lifestack.value: a single decision is worth what it achieves now plus what it leaves
for the rest of the task (the episode it starts under the reference continuation)."""

from __future__ import annotations

import json
import math
import random

import pytest
from hypothesis import given, settings, strategies as st

from lifestack import value as V
from lifestack.env import LifeStackEnv
from lifestack.episodes import Episode
from lifestack.hacks import HackContext, spend_everything
from lifestack.policies import candidate_actions, heuristic, lazy, random_valid, rollout
from lifestack.task_reward import VALID_FLOOR
from lifestack.scenarios import sample_scenario

STATES = [sample_scenario(31_000 + i, 3 + i % 3) for i in range(18)]


def env_at(sc) -> LifeStackEnv:
    env = LifeStackEnv()
    env.restore(sc.task, sc.state)
    return env


def played_value(sc, first: str) -> tuple[float, int]:
    """The yardstick, computed the long way: an Episode whose first answer is ``first`` and
    whose later answers are the heuristic's, scored as episode mode scores it."""
    ep = Episode.from_scenario(sc, horizon=sc.task.horizon)
    ep.step(first)
    while not ep.done:
        ep.step(heuristic(ep.env))
    return V.episode_reward([t.reward for t in ep.turns], ep.outcome()["score"]), len(ep.turns) - 1


@pytest.mark.parametrize("sc", STATES[:8], ids=lambda sc: f"s{sc.seed}")
def test_continuation_equals_an_episode_played_to_the_end(sc):
    env = env_at(sc)
    for text in (heuristic(env), lazy(env), random_valid(env, random.Random(sc.seed))):
        probe = LifeStackEnv()
        probe.restore(sc.task, sc.state)
        got = V.continue_episode(probe, sc.state, probe.step(text).reward)
        assert got == played_value(sc, text)


def test_the_continuation_cache_never_changes_a_value():
    sc = STATES[2]
    text = heuristic(env_at(sc))
    V._CONTINUATIONS.clear()
    cold = V.score_decision(sc.task, sc.state, text)
    assert V._CONTINUATIONS  # filled
    warm = V.score_decision(sc.task, sc.state, text)
    assert (cold["reward"], cold["value"], cold["turns"]) == (warm["reward"], warm["value"], warm["turns"])
    # answers that differ only in their wording leave the same state and share the entry
    a = json.loads(text)
    a["reasoning"] = a["reasoning"] + " Nothing else."
    n = len(V._CONTINUATIONS)
    V.score_decision(sc.task, sc.state, json.dumps(a))
    assert len(V._CONTINUATIONS) == n


def test_reference_value_is_the_heuristics_episode():
    for sc in STATES[:5]:
        assert V.reference_value(sc.task, sc.state) == played_value(sc, heuristic(env_at(sc)))


@settings(max_examples=300, deadline=None)
@given(step=st.floats(-1, 1), value=st.floats(-1, 1), reference=st.floats(-1, 1), turns=st.integers(0, 8))
def test_decision_reward_is_bounded_finite_and_above_the_fallback(step, value, reference, turns):
    r = V.decision_reward(step, value, reference, turns)
    assert math.isfinite(r) and VALID_FLOOR < r <= 1.0


@settings(max_examples=200, deadline=None)
@given(step=st.floats(-1, 1), value=st.floats(-1, 1), reference=st.floats(-1, 1), turns=st.integers(0, 8),
       more=st.floats(1e-6, 0.5))
def test_decision_reward_never_falls_when_the_episode_value_rises(step, value, reference, turns, more):
    assert V.decision_reward(step, value + more, reference, turns) >= V.decision_reward(step, value, reference, turns)


def test_the_reference_decision_gets_its_blend_of_step_reward_and_episode_value():
    step, ref = 0.8, 0.7
    assert V.decision_reward(step, ref, ref, 3) == pytest.approx((1 - V.VALUE_SHARE) * step + V.VALUE_SHARE * ref)


def test_a_rejected_answer_gets_the_fallback_and_no_value():
    sc = STATES[0]
    out = V.score_decision(sc.task, sc.state, "no json here")
    assert out["reward"] == out["step_reward"] == -0.5 and out["value"] is None


def test_spending_everything_loses_to_the_heuristic_on_almost_every_state():
    """The myopic-spending gap: paying everything that is left for more goodness now."""
    wins = 0
    for sc in STATES:
        env = env_at(sc)
        honest = json.loads(heuristic(env))
        spent = spend_everything(dict(honest), HackContext(env))
        reference = V.reference_value(sc.task, sc.state)
        h = V.score_decision(sc.task, sc.state, json.dumps(honest), reference)["reward"]
        s = V.score_decision(sc.task, sc.state, spent, reference)["reward"]
        wins += s > h
    assert wins <= 0.1 * len(STATES)


def test_paying_more_for_the_same_claims_loses_when_turns_are_left():
    for sc in STATES:
        env = env_at(sc)
        honest = json.loads(heuristic(env))
        reference = V.reference_value(sc.task, sc.state)
        if reference[1] == 0:
            continue
        more = {**honest, "resource_cost": {k: round(env.state.resources[k], 2) for k in ("time", "money", "energy")}}
        assert V.score_decision(sc.task, sc.state, json.dumps(more), reference)["reward"] < \
            V.score_decision(sc.task, sc.state, json.dumps(honest), reference)["reward"]


def test_the_reward_ranks_candidates_like_the_episodes_they_start():
    """A small version of scripts/decision_value.py's ranking figure (task reward alone)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    from decision_value import spearman

    rhos = []
    for sc in STATES[:6]:
        env = env_at(sc)
        reference = V.reference_value(sc.task, sc.state)
        scored = [V.score_decision(sc.task, sc.state, c, reference) for c in candidate_actions(env)[::3]]
        rhos.append(spearman([s["reward"] for s in scored], [s["value"] for s in scored]))
    assert sum(rhos) / len(rhos) > 0.9


def test_rollout_policy_is_at_least_as_good_as_the_heuristic_over_its_episode():
    for sc in STATES[:6]:
        env = env_at(sc)
        r = played_value(sc, rollout(env))[0]
        h = played_value(sc, heuristic(env))[0]
        assert r >= h - 0.01  # the heuristic's own step is not among the candidates, a near one is


def test_outcome_credits_reserves_in_proportion_to_progress_never_after_failure():
    sc = STATES[0]
    start = sc.state
    end = start.clone()
    end.outcome = "timeout"
    assert V.episode_outcome(sc.task, start, end)["score"] == 0.0  # no progress: reserves earn nothing
    end.outcome = "failure"
    assert V.episode_outcome(sc.task, start, end)["score"] == -V.OUTCOME_WEIGHTS["result"]
    end.outcome = "success"
    assert V.episode_outcome(sc.task, start, end)["score"] == pytest.approx(
        V.OUTCOME_WEIGHTS["result"] + V.OUTCOME_WEIGHTS["resources"])
    assert sum(V.OUTCOME_WEIGHTS.values()) == pytest.approx(1.0)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), difficulty=st.integers(1, 5), steps=st.integers(0, 3))
def test_the_heuristic_is_faithful_by_construction(seed, difficulty, steps):
    """The reference continuation skips the faithfulness check: it must change nothing."""
    sc = sample_scenario(seed, difficulty)
    env = env_at(sc)
    for _ in range(steps + 1):
        if env.state.done:
            break
        text = heuristic(env)
        snapshot = env.state.clone()
        checked = env.step(text)
        assert checked.metadata["breakdown"]["reasoning.faithfulness"] == 1.0
        env.restore(sc.task, snapshot)
        trusted = env.step(text, faithful_by_construction=True)
        assert trusted.reward == checked.reward
