"""scripts/eval_stages.py without a model: which saved folders it replays, in order. The
replay itself runs on a real tiny run in test_train_e2e.py."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import eval_stages as ES  # noqa: E402


def _save(folder: Path, marker: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / marker).write_text("{}")


def test_full_weight_stages_in_numeric_order_then_the_final_model(tmp_path):
    for n in (10, 2, 0):
        _save(tmp_path / f"stage_{n}", "config.json")
    _save(tmp_path, "config.json")
    assert [name for name, _ in ES.saved_models(tmp_path)] == ["stage_0", "stage_2", "stage_10", "final"]


def test_lora_adapter_saves_are_replayed_too(tmp_path):
    # USE_LORA (the GPU default) saves adapter_config.json, never config.json
    for n in (0, 1):
        _save(tmp_path / f"stage_{n}", "adapter_config.json")
    _save(tmp_path, "adapter_config.json")
    assert ES.saved_models(tmp_path) == [("stage_0", tmp_path / "stage_0"), ("stage_1", tmp_path / "stage_1"),
                                         ("final", tmp_path)]


def test_folders_without_a_model_or_with_odd_names_are_skipped(tmp_path):
    _save(tmp_path / "stage_1", "tokenizer_config.json")  # interrupted before the weights
    _save(tmp_path / "stage_x", "config.json")
    (tmp_path / "stage_2").mkdir()
    assert ES.saved_models(tmp_path) == []
    assert ES.main(["--output-dir", str(tmp_path)]) == 1


def test_successes_are_counted_per_difficulty():
    rows = [{"difficulty": d, "outcome": o} for d, o in ((2, "success"), (1, "running"), (1, "success"), (2, "success"),
                                                         (5, "failure"))]
    assert ES.by_difficulty(rows) == "d1 1/2, d2 2/2, d5 0/1"
