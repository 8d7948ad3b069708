"""lifestack.episodes: closed-loop episodes are deterministic, every turn can be rescored
alone from its own text, rejected answers waste a turn, and the aggregation is bounded."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from lifestack.episodes import IDLE_ANSWER, Episode, play, play_many
from lifestack.value import OUTCOME_SHARE, episode_outcome, episode_reward
from lifestack.scoring import FALLBACK_REWARD, Evaluator
from lifestack.policies import heuristic, mixed, oracle
from lifestack.prompts import ANSWER_SCHEMA, build_prompt, read_metadata, strip_metadata
from lifestack.scenarios import rebuild_state, sample_scenario


def mixed_policy(seed: int):
    """Heuristic, random valid actions and garbage, from one seeded RNG."""
    act = mixed(random.Random(seed), 0.15, 0.45, "I would rather not say.")
    return lambda ep: act(ep.env)


def played(seed: int, difficulty: int, horizon: int = 4) -> Episode:
    return play(Episode.from_scenario(sample_scenario(seed, difficulty), horizon), mixed_policy(seed))


def test_same_scenario_and_answers_give_the_same_episode():
    for seed in range(20):
        a, b = played(seed, 1 + seed % 5), played(seed, 1 + seed % 5)
        assert a.messages == b.messages
        assert [(t.reward, t.breakdown, t.observation) for t in a.turns] == [(t.reward, t.breakdown, t.observation) for t in b.turns]
        assert a.outcome() == b.outcome()


@settings(max_examples=60, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10**6), difficulty=st.integers(1, 5), horizon=st.integers(1, 6))
def test_every_turn_rescored_from_its_own_text_equals_the_episode(seed, difficulty, horizon):
    """The environment's turn carries the metadata of the state the episode continues
    from: scoring a turn alone (as the reward functions do) gives the episode's step reward."""
    ep = played(seed, difficulty, horizon)
    ev = Evaluator()
    for t in ep.turns:
        assert ev.evaluate(t.prompt, t.completion).get("step_reward", FALLBACK_REWARD) == pytest.approx(t.reward, abs=1e-12)


def test_environment_turn_metadata_rebuilds_the_live_state():
    for seed in range(30):
        ep = Episode.from_scenario(sample_scenario(seed, 3), 4)
        while not ep.done:
            ep.step(heuristic(ep.env))
            if ep.done:
                break
            meta = read_metadata(ep.messages[-1]["content"])
            rebuilt = rebuild_state(meta, ep.task)
            live = ep.env.state
            assert rebuilt.to_dict() == {**live.to_dict(), "done": rebuilt.done, "outcome": rebuilt.outcome}
            assert rebuilt.hidden == live.hidden


def test_a_rejected_answer_wastes_a_turn_while_time_passes():
    """The world does not wait: a rejected answer scores the fallback and the state moves
    on exactly as if the model had answered IDLE_ANSWER (events fire, the step counter
    advances); nonsense cannot stop the clock."""
    for seed in range(20):
        sc = sample_scenario(seed, 1 + seed % 5)
        ep = Episode.from_scenario(sc, 3)
        idle = Episode.from_scenario(sc, 3)
        turn = ep.step("not an action")
        idle.step(IDLE_ANSWER)
        assert turn.action is None and turn.reward == FALLBACK_REWARD and "error" in turn.breakdown
        assert ep.env.state.to_dict() == idle.env.state.to_dict()
        assert ep.env.state.step == sc.state.step + 1
        if not ep.done:
            assert "rejected" in turn.observation and ANSWER_SCHEMA in turn.observation
            assert ep.messages[-1] == {"role": "user", "content": turn.observation}
        assert ep.messages[2] == {"role": "assistant", "content": "not an action"}


@settings(max_examples=40, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10**6), difficulty=st.integers(1, 5), horizon=st.integers(1, 5),
       garbage=st.sampled_from(["", "I would wait.", '{"action_type": 5}', "{not json"]))
def test_garbage_never_beats_doing_nothing_validly(seed, difficulty, horizon, garbage):
    """An episode that answers nonsense scores below the same episode answering the valid
    do-nothing action, turn by turn and as a whole (same states, worse turns)."""
    sc = sample_scenario(seed, difficulty)
    junk = play(Episode.from_scenario(sc, horizon), lambda e: garbage)
    idle = play(Episode.from_scenario(sc, horizon), lambda e: IDLE_ANSWER)
    assert len(junk.turns) == len(idle.turns)
    assert all(j.reward < i.reward for j, i in zip(junk.turns, idle.turns))
    assert junk.outcome() == idle.outcome()
    assert episode_reward([t.reward for t in junk.turns], junk.outcome()["score"]) < \
        episode_reward([t.reward for t in idle.turns], idle.outcome()["score"])


def test_doing_nothing_earns_no_outcome_credit_for_resources_kept():
    for seed in range(20):
        idle = play(Episode.from_scenario(sample_scenario(seed, 1 + seed % 5), 3), lambda e: IDLE_ANSWER)
        out = idle.outcome()
        assert out["result"] != "success" and out["resources_kept"] > 0.9 and out["score"] <= 0.0


def test_horizon_bounds_the_turns_and_the_task_can_end_first():
    lengths = set()
    for seed in range(40):
        ep = play(Episode.from_scenario(sample_scenario(seed, 1 + seed % 5), 8), lambda e: oracle(e.env))
        assert len(ep.turns) <= 8
        assert ep.env.state.done  # the task ends (success, failure or timeout) before 8 turns
        assert ep.turns[-1].observation is None  # no reply after the last turn
        lengths.add(len(ep.turns))
        short = play(Episode.from_scenario(sample_scenario(seed, 1 + seed % 5), 1), lambda e: oracle(e.env))
        assert len(short.turns) == 1
    assert len(lengths) > 1
    with pytest.raises(RuntimeError):
        short.step("{}")
    with pytest.raises(ValueError):
        Episode.from_scenario(sample_scenario(1, 1), 0)


def test_first_prompt_is_the_single_step_prompt_and_from_prompt_rebuilds_it():
    for seed in range(10):
        sc = sample_scenario(seed, 1 + seed % 5)
        prompt = build_prompt(sc.task, sc.conflict, sc.state, sc.difficulty, sc.seed)
        a = Episode.from_scenario(sc, 3)
        b = Episode.from_prompt(prompt, 3)
        assert a.messages == prompt == b.messages
        policy = mixed_policy(seed)
        play(a, policy)
        play(b, mixed_policy(seed))
        assert [t.observation for t in a.turns] == [t.observation for t in b.turns]
    with pytest.raises(ValueError, match="SYSTEM_METADATA"):
        Episode.from_prompt([{"role": "user", "content": "no metadata"}], 2)


def test_observation_reports_the_step_and_never_leaks_hidden_state():
    sc = sample_scenario(11, 4)
    ep = Episode.from_scenario(sc, 3)
    turn = ep.step(heuristic(ep.env))
    text = strip_metadata(turn.observation).strip()
    assert text.startswith("RESULT OF YOUR ACTION:")
    for line in ("METRICS CHANGED:", "RESOURCES USED:", "BUDGET LEFT:", "ROUTES", "STEP "):
        assert line in text
    meta = read_metadata(turn.observation)
    assert "hidden" not in meta["state"]
    for key in sc.task.hidden_state:
        assert key not in text


def test_outcome_score_is_bounded_and_orders_success_above_failure():
    scores = {}
    for seed in range(60):
        ep = play(Episode.from_scenario(sample_scenario(seed, 1 + seed % 5), 6), lambda e: oracle(e.env))
        out = ep.outcome()
        assert -1.0 <= out["score"] <= 1.0
        assert 0.0 <= out["milestone_progress"] <= 1.0 and 0.0 <= out["resources_kept"] <= 1.0
        scores.setdefault(out["result"], []).append(out["score"])
    assert min(scores["success"]) > max(scores.get("failure", [-1.0]))


def test_outcome_of_an_unplayed_episode_is_neutral():
    sc = sample_scenario(3, 2)
    out = episode_outcome(sc.task, sc.state, sc.state)
    assert out["result"] == "running" and out["milestone_progress"] == 0.0 and out["resources_kept"] == 1.0
    assert out["score"] == 0.0  # resources kept count on success only


@settings(max_examples=200, derandomize=True)
@given(values=st.lists(st.floats(-1, 1), min_size=1, max_size=8), outcome=st.none() | st.floats(-1, 1))
def test_episode_reward_is_the_turn_mean_blended_with_the_outcome(values, outcome):
    r = episode_reward(values, outcome)
    mean = sum(values) / len(values)
    assert -1.0 - 1e-12 <= r <= 1.0 + 1e-12
    expected = mean if outcome is None else (1 - OUTCOME_SHARE) * mean + OUTCOME_SHARE * outcome
    assert r == pytest.approx(expected)


def test_episode_reward_needs_a_turn():
    with pytest.raises(ValueError):
        episode_reward([])


def test_play_many_advances_in_lockstep_and_checks_the_answer_count():
    eps = [Episode.from_scenario(sample_scenario(s, 2), 3) for s in range(4)]
    seen = []

    def answer(conversations):
        seen.append(len(conversations))
        return ["garbage" for _ in conversations]

    play_many(eps, answer)
    assert seen[0] == 4 and seen == sorted(seen, reverse=True) and len(seen) <= 3
    assert all(e.done for e in eps) and sum(len(e.turns) for e in eps) == sum(seen)
    with pytest.raises(ValueError, match="returned 0 texts"):
        play_many([Episode.from_scenario(sample_scenario(9, 2), 2)], lambda convs: [])


def test_record_lists_turns_for_logs():
    ep = played(7, 3, 3)
    rec = ep.record()
    assert rec["seed"] == 7 and rec["horizon"] == 3 and len(rec["turns"]) == len(ep.turns)
    for t in rec["turns"]:
        assert set(t) >= {"completion", "action", "task_reward", "task_breakdown", "info", "observation_head"}
        assert t["observation_head"] is None or "SYSTEM_METADATA" not in t["observation_head"]
