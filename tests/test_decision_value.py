"""scripts/decision_value.py: the figures issue #25 asks for, in a small shape."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import decision_value as D  # noqa: E402


def test_spearman_of_known_rankings():
    assert D.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert D.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    assert D.spearman([1, 1, 1], [1, 2, 3]) == 1.0  # a constant ranks nothing: no disagreement


def test_small_run_meets_the_targets_and_writes_json(tmp_path, capsys):
    out = tmp_path / "dv.json"
    assert D.main(["--first-seed", "20000", "--states", "3", "--episodes", "2", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Spearman" in text and "closed loop, greedy" in text and "all targets met" in text
    r = json.loads(out.read_text())
    assert r["states"] == 9 and 0.0 <= r["spend_win_rate"] <= 0.1 and r["spearman_mean"] >= 0.9


def test_misses_names_each_failed_target():
    r = {"spend_win_rate": 0.5, "overpay_win_rate": 0.2, "spearman_mean": 0.5, "regret_mean": 0.1, "greedy_success": 0.5}
    assert len(D.misses(r)) == 5
