"""scripts/show_generations.py: readable generation logs, new and old field names."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import show_generations as SG  # noqa: E402

NEW = {"step": 3, "stage": 2, "difficulty": 1, "phase": "train", "prompt_head": "GOAL: get home",
       "completion": "{...}", "action": {"action_type": "rest"}, "grpo_reward": 3.25,
       "grpo_rewards": {"reward_format_fn": 1.0, "reward_task_success_fn": 0.5},
       "grpo_weights": {"reward_format_fn": 1.0, "reward_task_success_fn": 2.0},
       "task_reward": 0.5, "task_breakdown": {"total": 0.5, "route_status": "advanced"}}
OLD = {"step": 1, "stage": 1, "difficulty": 1, "prompt_head": "GOAL", "completion": "x", "action": None,
       "reward": -0.5, "breakdown": {"error": "no JSON object found"}}


def test_new_entry_names_the_weighted_grpo_reward_and_the_task_reward():
    text = SG.format_entry(NEW)
    assert "GRPO reward (weighted total) +3.250" in text and "task reward +0.500" in text
    assert "format=1.0x+1.000" in text and "task_success=2.0x+0.500" in text
    assert "task reward breakdown:" in text and "route_status=advanced" in text


def test_old_entry_is_shown_as_a_task_reward_without_grpo_total():
    text = SG.format_entry(OLD)
    assert "GRPO reward (weighted total) n/a" in text and "task reward -0.500" in text
    assert "error=no JSON object found" in text and "did not parse" in text


def test_main_filters_by_stage_and_counts_bad_lines(tmp_path, capsys):
    path = tmp_path / "generations.jsonl"
    path.write_text("\n".join([json.dumps(OLD), "{not json", json.dumps(NEW), "[1, 2]"]) + "\n")
    assert SG.main(["--file", str(path), "--stage", "2"]) == 0
    out = capsys.readouterr().out
    assert "stage 2" in out and "stage 1 |" not in out and "(1 of 1 entries shown; 2 invalid lines skipped)" in out


def test_main_missing_file_is_a_clear_error(tmp_path, capsys):
    assert SG.main(["--file", str(tmp_path / "none.jsonl")]) == 1
    assert "no such file" in capsys.readouterr().err


EPISODE = {"step": 4, "stage": 1, "difficulty": 2, "phase": "train", "episode": 12, "horizon": 3,
           "prompt_head": "GOAL: ship", "grpo_reward": -0.5, "task_reward": 0.125,
           "grpo_rewards": {"reward_format_fn": 0.25, "reward_task_success_fn": 0.125},
           "grpo_weights": {"reward_format_fn": 1.0, "reward_task_success_fn": 2.0},
           "outcome": {"result": "running", "score": 0.3, "milestones_reached": ["m1"], "resources_kept": 0.8},
           "turns": [{"prompt_head": "GOAL: ship", "completion": '{"action_type": "rest"}', "action": {"action_type": "rest"},
                      "task_reward": 0.75, "grpo_reward": 2.5, "grpo_rewards": {"reward_format_fn": 1.0},
                      "observation_head": "RESULT OF YOUR ACTION: rested"},
                     {"prompt_head": "RESULT OF YOUR ACTION: rested", "completion": "oops", "action": None,
                      "task_reward": -0.5, "grpo_reward": -3.0, "grpo_rewards": {"reward_format_fn": -0.6},
                      "observation_head": None}]}


def test_episode_entry_shows_each_turn_then_the_outcome():
    text = SG.format_entry(EPISODE)
    assert text.startswith("--- episode 12 |") and "2 of 3 turns" in text and "task reward +0.125" in text
    first, second = text.index("turn 1:"), text.index("turn 2:")
    assert first < second < text.index("outcome: running")
    assert "answered:" in text and "RESULT OF YOUR ACTION: rested" in text[second:]
    assert "did not parse" in text[second:] and "format=1.0x-0.600" in text
    assert "milestones reached ['m1']" in text


def test_episode_entry_with_damaged_turns_does_not_crash():
    text = SG.format_entry({**EPISODE, "turns": ["junk", {}], "outcome": None, "grpo_rewards": None})
    assert "turn 2:" in text and "outcome: None" in text
