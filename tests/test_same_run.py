"""scripts/same_run.py: two runs compared file by file, timings aside."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import same_run  # noqa: E402


def fake_run(root: Path, reward: float = 0.5, seconds: float = 1.0) -> Path:
    (root / "model").mkdir(parents=True)
    (root / "logs").mkdir()
    state = {"difficulty": 1, "next_stage": 2, "settings": {"SEED": 1},
             "stages": [{"stage": 1, "mean_task_reward": reward, "train_seconds": seconds}]}
    (root / "model" / "curriculum_state.json").write_text(json.dumps(state))
    (root / "logs" / "generations.jsonl").write_text(json.dumps({"time": seconds, "task_reward": reward,
                                                                 "task_breakdown": {"penalty.timeout": -0.1}}) + "\n")
    (root / "logs" / "eval_episodes.jsonl").write_text(json.dumps({"reward": reward}) + "\n")
    (root / "logs" / "train_history.jsonl").write_text(json.dumps({"step_time": seconds, "reward": reward}) + "\n")
    return root


def test_timings_are_ignored_and_any_other_change_is_found(tmp_path, capsys):
    a, b = fake_run(tmp_path / "a"), fake_run(tmp_path / "b", seconds=9.0)
    assert same_run.main([str(a), str(b)]) == 0
    assert capsys.readouterr().out.count(": identical") == 4
    c = fake_run(tmp_path / "c", reward=0.6)
    assert same_run.main([str(a), str(c)]) == 1
    assert capsys.readouterr().out.count("DIFFERENT") == 4
    shutil.rmtree(c / "logs")
    assert same_run.main([str(a), str(c)]) == 1 and "MISSING" in capsys.readouterr().out
    assert same_run.main([str(a)]) == 2
