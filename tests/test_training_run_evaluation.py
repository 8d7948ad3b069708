"""Tests for lifestack/training/run_evaluation.py that need no model: the final evaluation's
starts played through the one episode engine (``episode_play.play_episodes``) that the
model, the reference policies, evaluate.py and play.py share, the reference policies'
rows, and the on-policy advance (policy_advance, with a stand-in for the model's greedy
answers). The model's side of the evaluation is tested in test_train_model.py."""

from __future__ import annotations

import random

import pytest

from lifestack.env import LifeStackEnv
from lifestack.policies import HONEST
from lifestack.training.context import RunContext
import lifestack.training.run_evaluation as EV
from lifestack.training.run_evaluation import evaluation_starts, reference_episodes
from lifestack.training.episode_play import play_episodes
from script_run import T, heuristic_answers  # the script: its dataset and config take the on-policy advance

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

    return RunContext(reward_weights=dict(T.REWARD_WEIGHTS), reward_funcs=T.REWARD_FUNCS)


@pytest.mark.parametrize("horizon", [1, 2])
def test_reference_rows_are_seeded_and_the_oracle_beats_random(horizon):
    first = reference_episodes(horizon, 20, 7, run_context(horizon))
    again = reference_episodes(horizon, 20, 7, run_context(horizon))
    assert first == again
    assert set(first) == {"random", "heuristic", "oracle"}
    assert [r["difficulty"] for r in first["oracle"]] == [sc.difficulty for sc in evaluation_starts(20, 7)]
    mean = {name: sum(r["reward"] for r in rows) / len(rows) for name, rows in first.items()}
    assert mean["oracle"] > mean["random"]


def test_policy_advance_plays_the_stage_model_greedily_and_says_so(monkeypatch, capsys):
    calls = []

    def fake_generate(model, tokenizer, prompts, max_new_tokens, **kw):  # the model's greedy answers
        calls.append((model, kw))
        return heuristic_answers(prompts)

    monkeypatch.setattr(EV, "generate_completions", fake_generate)
    model = type("Wrapped", (), {"module": "core"})()
    advance = EV.policy_advance(model, "tok", T.build_config(["--ON_POLICY_STATES=1.0"], profile="cpu"))
    ds = T.generate_dataset(10, 2, seed=21, advance=advance)
    assert calls and all(m == "core" and kw == {} for m, kw in calls)  # unwrapped, greedy (no temperature)
    assert len(ds) == 10 and "[on-policy]" in capsys.readouterr().out


def test_policy_advance_gives_every_rank_rank_0s_states_by_replaying_its_answers(monkeypatch):
    """Under torchrun rank 0 plays and sends only its answers (a Scenario holds mappingproxy
    tables, which do not pickle); another rank replays them and must build the same dataset."""
    import pickle

    sent = []
    monkeypatch.setattr(EV, "generate_completions", lambda model, tok, prompts, n, **kw: heuristic_answers(prompts))
    monkeypatch.setattr(EV, "broadcast_object", lambda obj: sent.append(pickle.loads(pickle.dumps(obj))) or sent[-1])
    cfg = T.build_config(["--ON_POLICY_STATES=1.0"], profile="cpu")
    ds0 = T.generate_dataset(12, 3, seed=5, advance=EV.policy_advance(object(), "tok", cfg))
    assert sent and all(isinstance(t, str) for batch in sent[0] for t in batch)

    def must_not_generate(*a, **k):
        raise AssertionError("only rank 0 generates")

    monkeypatch.setattr(EV, "generate_completions", must_not_generate)
    monkeypatch.setattr(EV, "is_main_process", lambda: False)
    monkeypatch.setattr(EV, "broadcast_object", lambda obj: sent[0])
    ds1 = T.generate_dataset(12, 3, seed=5, advance=EV.policy_advance(object(), "tok", cfg))
    plain = T.generate_dataset(12, 3, seed=5)
    assert ds1["prompt"] == ds0["prompt"]
    assert ds0["prompt"] != plain["prompt"]  # the answers did move some states on
