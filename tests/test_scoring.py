"""lifestack.scoring: an answer is scored against the state its prompt renders, and
nothing else; the caches are bounded and never change a result."""

from __future__ import annotations

import random

from lifestack.env import LifeStackEnv
from lifestack.scoring import FALLBACK_REWARD, Evaluator, cache_put, parse_completion
from lifestack.policies import heuristic, random_valid
from lifestack.prompts import METADATA_CLOSE, METADATA_OPEN, build_prompt
from lifestack.scenarios import sample_scenario
from lifestack.value import score_decision


def prompt_of(seed: int, difficulty: int = 2) -> tuple[str, object]:
    sc = sample_scenario(seed, difficulty)
    return build_prompt(sc.task, sc.conflict, sc.state, difficulty, sc.seed)[1]["content"], sc


def test_evaluation_equals_a_fresh_env_step_and_is_cached():
    ev = Evaluator()
    rng = random.Random(0)
    for seed in range(30):
        text, sc = prompt_of(seed, 1 + seed % 5)
        env = LifeStackEnv()
        env.restore(sc.task, sc.state)
        answer = heuristic(env, rng) if seed % 2 else random_valid(env, rng)
        expected = env.step(answer).reward
        first = ev.evaluate(text, answer)
        assert first["step_reward"] == expected and first["action"] is not None
        # the decision's reward: its step reward blended with the episode it starts
        assert first["reward"] == score_decision(sc.task, sc.state, answer)["reward"]
        assert first["breakdown"]["total"] == first["reward"]
        assert first["breakdown"]["decision.step_reward"] == expected
        assert ev.evaluate(text, answer) is first  # the six rewards share one evaluation
    assert len(ev.prompts) == 30


def test_unscorable_inputs_fall_back_with_a_reason():
    ev = Evaluator()
    text, _sc = prompt_of(3)
    assert ev.evaluate("no metadata here", "{}") == {"reward": FALLBACK_REWARD, "action": None,
                                                     "breakdown": {"error": "prompt has no <SYSTEM_METADATA> block"}}
    bad_task = f'{METADATA_OPEN}{{"v": 1, "domain": "nowhere", "difficulty": 1, "seed": 1}}{METADATA_CLOSE}'
    assert ev.evaluate(bad_task, "{}")["reward"] == FALLBACK_REWARD
    garbage = ev.evaluate(text, "I would wait.")
    assert garbage["action"] is None and garbage["breakdown"]["error"]


def test_a_metadata_block_in_the_answer_is_removed_and_noted():
    text, sc = prompt_of(8)
    env = LifeStackEnv()
    env.restore(sc.task, sc.state)
    answer = heuristic(env)
    fake = f'{METADATA_OPEN}{{"v": 1, "seed": 999}}{METADATA_CLOSE}'
    action, _ = parse_completion(fake + answer)
    assert action is not None and "injected_metadata" in action.notes
    assert "injected_metadata" not in parse_completion(answer)[0].notes


def test_caches_stay_bounded_and_keep_the_newest():
    cache: dict = {}
    for i in range(1000):
        cache_put(cache, i, str(i), 64)
        assert len(cache) <= 64
        assert cache[i] == str(i)  # the entry just put is always there
    assert 999 in cache and 0 not in cache
    assert list(cache) == sorted(cache) and max(cache) == 999  # oldest out first, order kept
    assert len(cache) >= 48  # evictions sweep a quarter at a time, never the whole cache
    ev = Evaluator(prompt_cache_size=8, eval_cache_size=8)
    for seed in range(20):
        text, _ = prompt_of(seed)
        ev.evaluate(text, "x")
    assert len(ev.prompts) <= 8 and len(ev.evaluations) <= 8
    ev.clear()
    assert not ev.prompts and not ev.evaluations


def test_on_fresh_sees_each_computed_evaluation_once_and_never_a_cached_one():
    from lifestack.scoring import Evaluator
    from lifestack.policies import heuristic
    from lifestack.prompts import build_prompt, prompt_text
    from lifestack.env import LifeStackEnv
    from lifestack.scenarios import sample_scenario

    sc = sample_scenario(3, 2)
    ptext = prompt_text(build_prompt(sc.task, sc.conflict, sc.state, sc.difficulty, sc.seed))
    env = LifeStackEnv()
    env.restore(sc.task, sc.state)
    seen = []
    ev = Evaluator()
    good = ev.evaluate(ptext, heuristic(env), on_fresh=lambda p, c, r: seen.append(r))
    again = ev.evaluate(ptext, heuristic(env), on_fresh=lambda p, c, r: seen.append(r))
    bad = ev.evaluate(ptext, "no JSON here", on_fresh=lambda p, c, r: seen.append(r))
    assert again is good and seen == [good, bad] and bad["action"] is None
