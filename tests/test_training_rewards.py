"""lifestack.training.rewards: the wrapper every reward function wears keeps its rewards
finite and in [-1, 1]. The six reward functions themselves are the training script's
(test_train_trl.py)."""

from __future__ import annotations

import lifestack.training.rewards as RW
from lifestack.training.context import RunContext


def test_reward_function_wrapper_keeps_rewards_finite_and_in_range():
    wrapped = RW.reward_function(RunContext())(lambda completions, **kw: [float("inf"), float("-inf"), 3.0, -3.0, 0.25])
    out = wrapped(["a"] * 5)
    assert out == [1.0, -1.0, 1.0, -1.0, 0.25]


def test_reward_function_wrapper_maps_nan_to_zero():
    wrapped = RW.reward_function(RunContext())(lambda completions, **kw: [float("nan")])
    assert wrapped(["a"]) == [0.0]
