"""The learning check: its summary logic (fast) and the reduced CPU experiment (slow, in CI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import learning_check as L  # noqa: E402


def fake(seed: int, before: float, after: float) -> dict:
    row = dict.fromkeys(L.METRICS, 0.0)
    return {"seed": seed, "before": {**row, "reward_task_success_fn": before},
            "after": {**row, "reward_task_success_fn": after}, "frac_reward_zero_std": [0.0, 0.5]}


def test_summary_passes_only_when_the_rise_beats_the_spread():
    ok = L.summarise([fake(1, -0.2, 0.2), fake(2, -0.1, 0.25), fake(3, -0.15, 0.3)])
    assert ok["passed"] and ok["task_deltas"] == pytest.approx([0.4, 0.35, 0.45])
    noisy = L.summarise([fake(1, -0.2, 0.5), fake(2, 0.4, 0.45), fake(3, -0.6, -0.5)])
    assert not noisy["passed"]  # the mean rise (0.28) is below the seed spread (~0.5)
    one_worse = L.summarise([fake(1, 0.0, 0.3), fake(2, 0.0, 0.3), fake(3, 0.0, -0.01)])
    assert not one_worse["passed"]  # every seed must improve
    assert ok["mean_frac_reward_zero_std"] == pytest.approx(0.25)


def test_table_lists_every_metric():
    table = L.format_table(L.summarise([fake(1, 0.0, 0.1)]), 1)
    for m in L.METRICS:
        assert f"| {m} |" in table


@pytest.mark.slow
def test_reduced_learning_check_shows_improvement(tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false")
    cmd = [sys.executable, str(ROOT / "scripts" / "learning_check.py"), "--seeds", "1", "--quick",
           "--out", str(tmp_path / "lc")]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((tmp_path / "lc" / "learning_check.json").read_text())
    assert result["summary"]["passed"]
    seed = result["seeds"][0]
    assert seed["after"]["reward_task_success_fn"] > seed["before"]["reward_task_success_fn"]
    assert "PASS" in proc.stdout
