"""lifestack.training.grpo_rewards: the wrapper every reward function wears (finite, in [-1, 1],
timed once) and the helper of the rewards that are one component of the task reward. The
six reward functions themselves are the training script's (test_train_trl.py)."""

from __future__ import annotations

import itertools

import lifestack.training.grpo_rewards as RW
from lifestack.training.context import RunContext


class Timer:
    reward_seconds = 0.0


def test_reward_time_is_counted_once_when_a_reward_call_scores_with_the_rewards_again(monkeypatch):
    """A logged line is scored by calling the rewards inside a reward call: that inner time
    is already inside the outer call's and must not be added twice."""
    ticks = itertools.count()
    monkeypatch.setattr(RW.time, "perf_counter", lambda: float(next(ticks)))  # a clock that ticks once per read
    timer = Timer()

    @RW.reward_function(timer)
    def inner(completions, **kwargs):
        return [0.5] * len(completions)

    @RW.reward_function(timer)
    def outer(completions, **kwargs):
        inner(completions)  # reads the clock once (its start) inside the outer call, adds nothing
        return [2.0, float("nan")]

    assert outer(["a", "b"]) == [1.0, 0.0]  # clipped; NaN is 0, never the best reward
    assert timer.reward_seconds == 2.0  # the outer call's span, 0 -> 2, which holds the inner call's
    inner(["a"])
    assert timer.reward_seconds == 3.0  # a call of its own is counted: 3 -> 4


def test_a_component_reward_is_its_component_or_the_penalty_value():
    score = RW.component_reward("component.milestone", "penalty.dead_end", -0.4)
    assert score({"breakdown": {"component.milestone": 0.75}}) == 0.75
    assert score({"breakdown": {"component.milestone": 0.75, "penalty.dead_end": -0.3}}) == -0.4
    assert score({"breakdown": {}}) == 0.0


def test_reward_function_wrapper_keeps_rewards_finite_and_in_range():
    wrapped = RW.reward_function(RunContext())(lambda completions, **kw: [float("inf"), float("-inf"), 3.0, -3.0, 0.25])
    out = wrapped(["a"] * 5)
    assert out == [1.0, -1.0, 1.0, -1.0, 0.25]


def test_reward_function_wrapper_maps_nan_to_zero():
    wrapped = RW.reward_function(RunContext())(lambda completions, **kw: [float("nan")])
    assert wrapped(["a"]) == [0.0]
