"""Fabricated learning-check seeds, as ``lifestack.training.learning_check.run_seed``
records them, for the tests of the rule (test_training_learning_rule.py) and of the
command's saved-run modes (test_learning_check.py)."""

from __future__ import annotations

from lifestack.training.learning_check import METRICS


def fake(seed: int, before: float, after: float, per_prompt=None, control=None) -> dict:
    """A seed's result; ``per_prompt`` gives each held-out prompt's (before, after) task
    reward (an answer at -0.5 is unparseable), ``control`` the control arm's per prompt."""
    row = dict.fromkeys(METRICS, 0.0)
    per_prompt = per_prompt or [(before, after)] * 5
    answers = lambda xs: [[{"task": x, "valid": x > -0.5, "key": ["a", "d", None] if x > -0.5 else None}] * 2  # noqa: E731
                          for x in xs]
    return {"seed": seed, "before": {**row, "reward_task_success_fn": before},
            "after": {**row, "reward_task_success_fn": after}, "frac_reward_zero_std": [0.0, 0.5],
            "answers_before": answers([pa[0] for pa in per_prompt]), "answers_after": answers([pa[1] for pa in per_prompt]),
            "answers_control": answers(control) if control else None}


def episodes(rewards, statuses=("advanced", "completed"), outcome="timeout") -> list[dict]:
    """Closed-loop rows as ``episode_scores`` keeps them: a first decision at 0.5, then one
    later decision making each episode's reward the given mean."""
    return [{"reward": r, "turn_rewards": [0.5, 2 * r - 0.5], "route_statuses": list(statuses), "outcome": outcome}
            for r in rewards]
