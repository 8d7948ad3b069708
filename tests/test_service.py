"""lifestack.service: request validation, sessions (limit, idle expiry, exclusive use)
and results equal to the in-process episode. No network, no extra needed."""

from __future__ import annotations

import json
import threading
import time

import pytest

from lifestack.episodes import Episode
from lifestack.policies import heuristic
from lifestack.scenarios import sample_scenario
from lifestack.service import (
    MAX_SEED, CapacityReached, EpisodeOver, InvalidJSON, InvalidRequest, LifeStackService, NotReset, SessionStore,
    UnknownSession, answer_text, parse_json, reset_params, step_action,
)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.mark.parametrize("body", [{"seed": -1}, {"seed": "7"}, {"seed": 1.5}, {"seed": True}, {"seed": MAX_SEED + 1},
                                  {"seed": 1, "difficulty": 0}, {"seed": 1, "difficulty": 6},
                                  {"seed": 1, "difficulty": "3"}, {"seed": 1, "task_family": "cooking"},
                                  {"seed": 1, "task_family": "flight_crisis", "domain": "code_merge_crisis"},
                                  {"seed": 1, "horizon": 0}, {"seed": 1, "dificulty": 2}, [1, 2], "seed=1"])
def test_invalid_reset_requests_are_refused_with_a_reason(body):
    with pytest.raises(InvalidRequest) as e:
        reset_params(body)
    assert e.value.status == 422 and e.value.message


def test_reset_defaults_and_aliases():
    p = reset_params({"seed": 5, "domain": "code_merge_crisis"}, default_horizon=3)
    assert (p.seed, p.difficulty, p.domain, p.horizon) == (5, 1, "code_merge_crisis", 3)
    assert reset_params({"seed": 5, "task_family": "flight_crisis", "horizon": 2}).domain == "flight_crisis"
    drawn = reset_params({})  # no seed: one is drawn and reported, as OpenEnv allows
    assert isinstance(drawn.seed, int) and 0 <= drawn.seed


def test_actions_in_every_accepted_form_become_the_answer_text():
    text = '{"action_type": "rest"} because I am tired'
    assert answer_text(text) == text
    assert answer_text({"text": text}) == text
    assert answer_text({"text": text, "metadata": {}}) == text  # OpenEnv's Action adds metadata
    assert json.loads(answer_text({"action_type": "rest", "metadata": {"x": 1}})) == {"action_type": "rest"}
    for bad in (None, 3, [1], {"text": 5}):
        with pytest.raises(InvalidRequest):
            answer_text(bad)
    with pytest.raises(InvalidRequest):
        step_action({"acton": "x"})
    with pytest.raises(InvalidJSON):
        parse_json(b"{not json")
    with pytest.raises(InvalidJSON):
        parse_json(b"[" * 100_000)  # nesting past the recursion limit is bad JSON, not a crash


def test_session_limit_and_idle_expiry_with_a_fake_clock():
    clock = Clock()
    store = SessionStore(max_sessions=2, idle_timeout=10, clock=clock)
    a, ws = store.open("http"), store.open("ws")
    with pytest.raises(CapacityReached) as e:
        store.open()
    assert e.value.status == 503 and e.value.extra == {"active_sessions": 2, "max_sessions": 2}
    clock.t = 9
    store.get(a.id)  # use restarts the idle clock
    clock.t = 18
    assert store.reap() == []
    clock.t = 19.5
    assert store.reap() == [a.id]  # the WebSocket session lives as long as its connection
    with pytest.raises(UnknownSession):
        store.get(a.id)
    c = store.open()  # the expired one's slot is free again
    clock.t = 100  # c has expired, but nothing reaped it yet: it still holds its slot
    assert len(store) == 2
    d = store.open()  # opening at the limit reaps expired sessions first
    assert len(store) == 2 and {ws.id, d.id} == {s.id for s in store._sessions.values()} and c.closed
    assert store.close(ws.id) and not store.close(ws.id)


def test_a_session_is_used_by_one_request_at_a_time():
    store = SessionStore(4, 60)
    s = store.open()
    inside, overlaps = [], []

    def work():
        with store.use(s.id):
            inside.append(1)
            overlaps.append(len(inside))
            time.sleep(0.01)
            inside.pop()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == [1] * 8


def test_service_episode_equals_the_in_process_episode_and_refuses_misuse():
    svc = LifeStackService(max_sessions=4, idle_timeout=60, horizon=4)
    ref = Episode.from_scenario(sample_scenario(11, 3), 4)
    first = svc.reset({"seed": 11, "difficulty": 3})
    sid = first["metadata"]["session_id"]
    assert first["observation"]["messages"] == ref.messages and first["reward"] is None
    while not ref.done:
        answer = heuristic(ref.env)
        turn = ref.step(answer)
        got = svc.step(sid, {"text": answer})
        assert (got["observation"]["text"], got["reward"], got["observation"]["reward_components"], got["done"]) == \
            (turn.observation, turn.reward, turn.breakdown, ref.done)
    with pytest.raises(EpisodeOver) as e:
        svc.step(sid, "x")
    assert e.value.status == 409
    assert svc.state(sid)["step_count"] == len(ref.turns) and svc.state(sid)["outcome"] == ref.outcome()
    ws = svc.sessions.open("ws")
    with pytest.raises(NotReset):
        svc.step(ws.id, "x")
    with pytest.raises(UnknownSession):
        svc.step("nope", "x")
    with pytest.raises(InvalidRequest):
        svc.step(None, "x")


def test_a_scenario_reset_starts_at_exactly_the_prompts_state():
    """What a trainer needs: its prompt's metadata as the reset's scenario gives the same
    conversation and the same turns as Episode.from_prompt in-process (sample_scenario with
    a named family draws a different scenario than without one, so seed+family is not enough)."""
    from lifestack.prompts import build_prompt, read_metadata

    svc = LifeStackService(max_sessions=4, horizon=3)
    for seed in range(6):
        sc = sample_scenario(seed, 1 + seed % 5)  # drawn without a family, as generate_dataset does
        prompt = build_prompt(sc.task, sc.conflict, sc.state, sc.difficulty, sc.seed)
        meta = read_metadata(prompt[1]["content"])
        first = svc.reset({"scenario": meta, "horizon": 3})
        assert first["observation"]["messages"] == prompt
        local = Episode.from_prompt(prompt, 3)
        sid = first["metadata"]["session_id"]
        while not local.done:
            answer = heuristic(local.env)
            turn = local.step(answer)
            result = svc.step(sid, answer)
            assert result["reward"] == turn.reward and result["observation"]["text"] == turn.observation
        svc.close(sid)


@pytest.mark.parametrize("body", [{"scenario": [1]}, {"scenario": {"v": 1}}, {"scenario": {"v": 9, "seed": 1}},
                                  {"scenario": {}, "seed": 3}])
def test_a_bad_scenario_is_refused_with_a_reason(body):
    svc = LifeStackService(max_sessions=2)
    with pytest.raises(InvalidRequest) as e:
        svc.reset(body)
    assert e.value.status == 422 and "scenario" in e.value.message + str(e.value.extra.get("field"))
    assert len(svc.sessions) == 0  # refused before a slot was taken


def test_an_action_nested_past_the_json_writer_is_a_clear_validation_error():
    """A request body parses deeper than json.dumps recurses: that was a 500 (issue #28)."""
    from lifestack.service import InvalidRequest, answer_text

    deep: object = 0
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(InvalidRequest, match="nested too deeply"):
        answer_text({"x": deep})
    with pytest.raises(InvalidRequest):
        answer_text({"x": {1, 2}})  # not JSON at all
