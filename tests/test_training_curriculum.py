"""lifestack.training.curriculum: the decision after a stage, the stage's record, its log
line and the per-step history."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lifestack.training.curriculum as CU

THRESHOLDS = (0.6, 0.3)  # ADVANCE_THRESHOLD, RETREAT_THRESHOLD as the script sets them


@pytest.mark.parametrize("stages, difficulty, mean, expected", [
    ([], 1, 0.7, ("advance", 2)),
    ([], 5, 0.9, ("stay", 5)),  # the top
    ([], 3, 0.45, ("stay", 3)),  # inside the band
    ([], 3, 0.1, ("stay", 3)),  # first stage below: no retreat yet
    ([{"difficulty": 3, "mean_task_reward": 0.2}], 3, 0.1, ("retreat", 2)),  # second stage running
    ([{"difficulty": 2, "mean_task_reward": 0.7}], 3, 0.1, ("stay", 3)),  # just rose: the dip is forgiven
    ([{"difficulty": 3, "mean_task_reward": 0.4}], 3, 0.1, ("stay", 3)),  # the last one was in the band
    ([{"difficulty": 1, "mean_task_reward": 0.0}], 1, -0.2, ("stay", 1)),  # the bottom
    ([{"difficulty": 3, "mean_task_reward": 0.1, "move": "retreat"}], 2, 0.9, ("stay", 2)),  # just fell back
    ([{"difficulty": 2, "mean_task_reward": 0.9, "move": "stay"}], 2, 0.9, ("advance", 3)),
])
def test_curriculum_step(stages, difficulty, mean, expected):
    move, nxt, reason = CU.curriculum_step(stages, difficulty, mean, *THRESHOLDS)
    assert (move, nxt) == expected and reason



def test_curriculum_never_retreats_when_the_threshold_is_off():
    assert CU.curriculum_step([{"difficulty": 4, "mean_task_reward": -0.9}], 4, -0.95, 0.6, -1.0)[:2] == ("stay", 4)



def test_curriculum_does_not_oscillate_on_a_noisy_reward():
    """A reward that hovers around the thresholds, replayed through the rule: no stage
    retreats right after an advance, and difficulty never flips back and forth."""
    import random

    rng = random.Random(3)
    stages, d = [], 2
    for stage in range(1, 41):
        mean = rng.uniform(0.1, 0.75)
        move, nxt, _ = CU.curriculum_step(stages, d, mean, *THRESHOLDS)
        if stages and stages[-1]["move"] == "advance":
            assert move != "retreat"
        if stages and stages[-1]["move"] == "retreat":
            assert move != "advance"
        stages.append({"stage": stage, "difficulty": d, "mean_task_reward": mean, "move": move, "advance": move == "advance"})
        d = nxt
    moves = [s["move"] for s in stages]
    flips = sum(1 for a, b in zip(moves, moves[1:]) if {a, b} == {"advance", "retreat"})
    assert flips == 0


RESULT = {"mean_task_reward": 0.61234, "reward_means": {"reward_format_fn": 0.91, "reward_task_success_fn": 0.61234},
          "valid_json_rate": 0.875}


def test_the_stage_record_holds_the_result_the_decision_and_the_cost():
    history = [{"reward": 1.0, "frac_reward_zero_std": 0.25}, {"reward": 1.2}, {"reward": 0.9, "frac_reward_zero_std": 0.75}]
    record = CU.stage_record(2, 1, RESULT, ("advance", 2, "+0.612 > 0.6"), history, 24, 61.234, 0.45678)
    assert record == {"stage": 2, "difficulty": 1, "mean_task_reward": 0.6123,
                      "reward_means": {"reward_format_fn": 0.91, "reward_task_success_fn": 0.6123},
                      "valid_json_rate": 0.875, "advance": True, "move": "advance", "reason": "+0.612 > 0.6",
                      "next_difficulty": 2, "train_seconds": 61.23, "reward_seconds": 0.457,
                      "frac_reward_zero_std": 0.5, "steps": 24}
    line = CU.stage_line(record, 0.6)
    assert line.startswith("[stage 2] difficulty 1 | held-out task reward +0.612 (threshold 0.6) | valid JSON 88%")
    assert "format=+0.910 task_success=+0.612" in line and line.endswith("ADVANCE to 2 (+0.612 > 0.6)")


def test_the_history_appends_one_line_per_logged_step_with_its_stage(tmp_path):
    path = tmp_path / "logs" / "train_history.jsonl"
    CU.append_history(path, 1, 1, [{"reward": 0.1, "step": 1}])
    CU.append_history(path, 2, 2, [{"reward": 0.2, "step": 2}, {"reward": 0.3, "step": 3}])
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert [(r["stage"], r["difficulty"], r["step"]) for r in rows] == [(1, 1, 1), (2, 2, 2), (2, 2, 3)]
    assert CU.mean_or_none([None, "x"]) is None and CU.mean_or_none([1, 2, None]) == 1.5


def test_a_stages_history_written_again_replaces_its_first_copy(tmp_path):
    """A run stopped between the history write and the stage's record resumes from the
    stage's last checkpoint and writes the history again: it must appear once."""
    path = tmp_path / "train_history.jsonl"
    CU.append_history(path, 1, 1, [{"reward": 0.1, "step": 1}])
    CU.append_history(path, 2, 2, [{"reward": 0.2, "step": 2}, {"reward": 0.3, "step": 3}])
    CU.append_history(path, 2, 2, [{"reward": 0.2, "step": 2}, {"reward": 0.3, "step": 3}])  # the resumed end
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert [(r["stage"], r["step"]) for r in rows] == [(1, 1), (2, 2), (2, 3)]
    assert not list(tmp_path.glob("*.tmp*"))


@given(st.floats(-1.0, 1.0), st.sampled_from([0.6, 0.55]))
@settings(max_examples=300, deadline=None)
def test_the_decision_its_reason_and_the_line_show_the_one_recorded_mean(mean, threshold):
    """The curriculum decides on the mean the state records: the log line's held-out reward,
    its task_success mean and the decision's reason print one number, and the move follows
    from it (a mean of 0.59847 was +0.599 in the line and +0.598 in the reason)."""
    decision = CU.curriculum_step([], 2, mean, threshold, 0.3)
    result = {"mean_task_reward": mean, "reward_means": {"reward_task_success_fn": mean}, "valid_json_rate": 1.0}
    record = CU.stage_record(1, 2, result, decision, [], 1, 1.0, 0.1)
    shown = f"{record['mean_task_reward']:+.3f}"
    assert CU.stage_line(record, threshold).count(shown) == 3
    assert (decision[0] == "advance") == (record["mean_task_reward"] > threshold)


def test_a_mean_just_under_the_threshold_reads_the_same_everywhere():
    record = CU.stage_record(1, 2, {"mean_task_reward": 0.59847, "reward_means": {}, "valid_json_rate": 1.0},
                             CU.curriculum_step([], 2, 0.59847, 0.6, 0.3), [], 1, 1.0, 0.1)
    assert record["mean_task_reward"] == 0.5985 and "+0.599" in record["reason"] and record["move"] == "stay"
