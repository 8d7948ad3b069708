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
