"""Tests for lifestack/training/evaluation.py that need no model: the final evaluation's
starts played through the one episode engine (``model_eval.play_episodes``) that the
model, the reference policies, evaluate.py and play.py share, and the reference policies'
rows. The model's side of the evaluation is tested in test_train_model.py."""

from __future__ import annotations

import random

import pytest

from lifestack.env import LifeStackEnv
from lifestack.policies import HONEST
from lifestack.training.context import RunContext
from lifestack.training.evaluation import evaluation_starts, reference_episodes
from lifestack.training.model_eval import play_episodes

GARBAGE = "not an action"


def test_the_engine_asks_only_for_live_episodes_and_stops_at_each_task_horizon():
    starts = evaluation_starts(10, seed=3)
    asked: list[list[int]] = []

    def answer(live):
        asked.append([ep.played.start for ep in live])
        return [GARBAGE] * len(live)  # a rejected answer never ends a task: only the horizon stops it

    played = play_episodes(answer, starts, horizon=1, regret=False)
    for sc, p in zip(starts, played):
        assert len(p.rewards) == sc.task.horizon and p.route_statuses == ["invalid"] * sc.task.horizon
        assert p.regret == []  # regret=False scores no oracle
    assert len(asked) == max(sc.task.horizon for sc in starts)
    for r, live in enumerate(asked):
        assert live == [i for i, sc in enumerate(starts) if sc.task.horizon > r]


def test_the_engine_leaves_an_episode_once_its_task_is_done():
    starts = evaluation_starts(10, seed=11)
    rngs = [random.Random(i) for i in range(len(starts))]
    steps: dict[int, list] = {}
    played = play_episodes(lambda live: [HONEST["oracle"](ep.env, rngs[ep.played.start]) for ep in live], starts, 1,
                           regret=False, on_turn=lambda ep, text, obs: steps.setdefault(ep.played.start, []).append(obs))
    assert any(p.outcome != "running" for p in played)
    for i, (sc, p) in enumerate(zip(starts, played)):
        assert 1 <= len(p.rewards) == len(steps[i]) <= sc.task.horizon
        assert all(not obs.done for obs in steps[i][:-1])  # nothing stepped after the task ended
        if len(p.rewards) < sc.task.horizon:
            assert steps[i][-1].done


def test_the_engine_matches_playing_each_episode_alone():
    """Batching rounds across episodes changes nothing: each env and its rng are its own."""
    n, seed = 12, 40
    starts = evaluation_starts(n, seed)
    rngs = [random.Random(seed + i) for i in range(n)]
    policy = HONEST["heuristic"]
    batched = play_episodes(lambda live: [policy(ep.env, rngs[ep.played.start]) for ep in live], starts, 1, regret=False)
    for i, sc in enumerate(evaluation_starts(n, seed)):
        env = LifeStackEnv()
        env.reset(seed=sc.seed, task=sc.task, conflict=sc.conflict)  # the crisis itself, as the starts are
        rng, rewards = random.Random(seed + i), []
        while not env.state.done and len(rewards) < env.task.horizon:
            rewards.append(env.step(policy(env, rng)).reward)
        assert rewards == batched[i].rewards
        assert env.state.outcome == batched[i].outcome


def test_an_empty_list_plays_nothing_and_a_none_answer_stops_an_episode():
    assert play_episodes(lambda live: pytest.fail("asked for no episode"), [], 1) == []
    played = play_episodes(lambda live: [None] * len(live), evaluation_starts(3, 5), 1, regret=False)
    assert all(p.rewards == [] and p.outcome == "running" for p in played)


def run_context(horizon: int) -> RunContext:
    """HORIZON > 1 scores a played episode with the six reward functions: the script's."""
    if horizon == 1:
        return RunContext()
    from script_run import T  # the script, imported as the other reward-path tests import it

    return RunContext(reward_weights=list(T.REWARD_WEIGHTS), reward_funcs=T.REWARD_FUNCS)


@pytest.mark.parametrize("horizon", [1, 2])
def test_reference_rows_are_seeded_and_the_oracle_beats_random(horizon):
    cfg = {"HORIZON": horizon}
    first = reference_episodes(cfg, 20, 7, run_context(horizon))
    again = reference_episodes(cfg, 20, 7, run_context(horizon))
    assert first == again
    assert set(first) == {"random", "heuristic", "oracle"}
    assert [r["difficulty"] for r in first["oracle"]] == [sc.difficulty for sc in evaluation_starts(20, 7)]
    mean = {name: sum(r["reward"] for r in rows) / len(rows) for name, rows in first.items()}
    assert mean["oracle"] > mean["random"]
