"""lifestack.onpolicy: scenarios moved on by the policy's own answers."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from lifestack.env import LifeStackEnv
from lifestack.scoring import Evaluator
from lifestack.onpolicy import advance_by_policy, policy_steps
from lifestack.policies import heuristic, random_valid
from lifestack.prompts import prompt_text
from lifestack.scenarios import round_state, sample_scenario, scenario_metadata


def scenarios(n: int, seed: int = 500) -> list:
    return [sample_scenario(seed + i, 1 + i % 5) for i in range(n)]


def policy_answer(policy):
    """A batch answer function playing ``policy`` on the state each prompt describes."""
    ev = Evaluator()
    env = LifeStackEnv()

    def answer(prompts):
        out = []
        for p in prompts:
            task, state, _ = ev.context(prompt_text(p))
            env.restore(task, state, observe=False)
            out.append(policy(env, random.Random(state.step)))
        return out

    return answer


def test_share_zero_leaves_every_scenario_as_drawn():
    scs = scenarios(12)
    calls = []
    out = advance_by_policy(scs, lambda ps: calls.append(ps) or ["{}"] * len(ps), 0.0)
    assert out == scs and calls == []


def test_moved_states_are_the_states_the_answers_reach_and_never_finished():
    scs = scenarios(20)
    out = advance_by_policy(scs, policy_answer(heuristic), 1.0)
    moved = 0
    for before, after in zip(scs, out):
        k = policy_steps(before, 1.0)
        assert after.seed == before.seed and after.task is before.task and after.difficulty == before.difficulty
        assert not after.state.done and after.state.step < after.task.horizon
        assert after.state.step - before.state.step == after.roll_forward - before.roll_forward <= k
        # replay: the same answers from the drawn state reach the same state
        env = LifeStackEnv()
        env.restore(before.task, before.state, observe=False)
        for _ in range(after.state.step - before.state.step):
            env.step(heuristic(env, random.Random(env.state.step)))
            round_state(env.state)
        assert env.state.route_progress == after.state.route_progress
        moved += after.state.step > before.state.step
    assert moved >= 10  # share 1: every scenario with room moves unless its next step would end it


def test_a_moved_state_round_trips_through_its_prompt():
    """The reward functions rebuild the state from the prompt's metadata: it must be exact."""
    from lifestack.prompts import build_prompt

    out = advance_by_policy(scenarios(15, seed=900), policy_answer(random_valid), 1.0)
    ev = Evaluator()
    for sc in out:
        task, state, _ = ev.context(prompt_text(build_prompt(sc.task, sc.conflict, sc.state, sc.difficulty, sc.seed)))
        assert scenario_metadata(sc)["state"] == scenario_metadata(sc.__class__(sc.seed, sc.difficulty, task, sc.conflict,
                                                                               state, 0))["state"]
        assert state.route_progress == sc.state.route_progress and state.step == sc.state.step


def test_unparseable_answers_change_nothing():
    scs = scenarios(10)
    out = advance_by_policy(scs, lambda ps: ["not json"] * len(ps), 1.0)
    assert [o.state.to_dict() for o in out] == [s.state.to_dict() for s in scs]
    assert [o.roll_forward for o in out] == [s.roll_forward for s in scs]


def test_a_wrong_number_of_answers_is_a_clear_error():
    with pytest.raises(ValueError, match="answers for"):
        advance_by_policy(scenarios(6), lambda ps: ["{}"], 1.0)


def test_same_scenarios_and_answers_give_the_same_states():
    a = advance_by_policy(scenarios(12, seed=77), policy_answer(heuristic), 0.5)
    b = advance_by_policy(scenarios(12, seed=77), policy_answer(heuristic), 0.5)
    assert [x.state.to_dict() for x in a] == [y.state.to_dict() for y in b]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**9), difficulty=st.integers(1, 5), share=st.floats(0.0, 1.0))
def test_policy_steps_stay_inside_the_task(seed, difficulty, share):
    sc = sample_scenario(seed, difficulty)
    k = policy_steps(sc, share)
    assert 0 <= k <= max(0, sc.task.horizon - 1 - sc.state.step)
    if share == 0.0:
        assert k == 0


def test_the_share_is_about_the_share():
    scs = scenarios(400, seed=3)
    chosen = sum(policy_steps(sc, 0.5) > 0 for sc in scs)
    roomy = sum(sc.task.horizon - 1 - sc.state.step >= 1 for sc in scs)
    assert 0.4 * roomy <= chosen <= 0.6 * roomy
