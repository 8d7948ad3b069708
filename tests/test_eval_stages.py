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
    assert ES.successes_by_difficulty(rows) == "d1 1/2, d2 2/2, d5 0/1"


# --- GRPO's paired change (final - stage_0) and pooled replays -------------------------

import json  # noqa: E402

import pytest  # noqa: E402
from hypothesis import given, settings, strategies as st  # noqa: E402

from lifestack.training.episode_play import paired_runs, runs_bootstrap_ci  # noqa: E402


def _rows(outcomes: list[str], rewards: list[float], first_seed: int = 100) -> list[dict]:
    return [{"seed": first_seed + i, "difficulty": 1 + i % 5, "outcome": o, "reward": r}
            for i, (o, r) in enumerate(zip(outcomes, rewards))]


def test_paired_change_is_per_start_and_refuses_other_starts():
    before = _rows(["success", "timeout", "timeout", "success"], [0.5, 0.0, 0.1, 0.4])
    after = _rows(["success", "success", "timeout", "timeout"], [0.7, 0.2, 0.1, 0.0])
    change = ES.paired_rows(before, after)
    assert change["success"]["mean"] == pytest.approx(0.0) and change["success"]["starts"] == 4
    assert change["episode_reward"]["mean"] == pytest.approx((0.2 + 0.2 + 0.0 - 0.4) / 4)
    lo, hi = change["episode_reward"]["ci95"]
    assert lo <= change["episode_reward"]["mean"] <= hi
    with pytest.raises(ValueError, match="same state"):
        ES.paired_rows(before, _rows(["success"] * 4, [0.0] * 4, first_seed=200))
    with pytest.raises(ValueError, match="same state"):
        ES.paired_rows(before, list(reversed(after)))
    with pytest.raises(ValueError, match="same starts"):
        ES.paired_rows(before, after[:3])


def test_the_pooled_interval_holds_the_spread_between_runs():
    # two runs whose starts agree within each run but whose changes have opposite signs:
    # pooled over starts alone the interval would be narrow; over runs it spans both
    up = (_rows(["timeout"] * 50, [0.0] * 50), _rows(["success"] * 50, [0.5] * 50))
    down = (_rows(["success"] * 50, [0.5] * 50, 300), _rows(["timeout"] * 50, [0.0] * 50, 300))
    pooled = paired_runs([(ES.rows_as_played(a), ES.rows_as_played(b)) for a, b in (up, down)])
    assert pooled["success"]["mean"] == pytest.approx(0.0) and pooled["success"]["runs"] == 2
    lo, hi = pooled["success"]["ci95"]
    assert lo == pytest.approx(-1.0) and hi == pytest.approx(1.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.floats(-1, 1), min_size=1, max_size=8), min_size=1, max_size=6), st.integers(0, 9))
def test_runs_bootstrap_interval_is_ordered_within_the_values_and_seeded(runs, seed):
    lo, hi = runs_bootstrap_ci(runs, resamples=200, seed=seed)
    values = [x for r in runs for x in r]
    assert min(values) - 1e-12 <= lo <= hi <= max(values) + 1e-12
    assert (lo, hi) == runs_bootstrap_ci(runs, resamples=200, seed=seed)


def _save_replay(path, seed: int, before: list[dict], after: list[dict], horizon: int = 1):
    path.write_text(json.dumps({"seed": seed, "horizon": horizon, "eval_seeds": [seed + 20_000_000],
                                "models": {"stage_0": before, "final": after}}))
    return str(path)


def test_from_json_prints_each_run_and_the_pooled_change(tmp_path, capsys):
    a = _save_replay(tmp_path / "a.json", 1, *_rows_pair(0.0, 1.0))
    b = _save_replay(tmp_path / "b.json", 2, *_rows_pair(0.0, 0.0))
    assert ES.main(["--from-json", a, b]) == 0
    out = capsys.readouterr().out
    assert "seed 1 (4 starts): final - stage_0: episode reward +1.000" in out and "success +100.0%" in out
    assert "seed 2 (4 starts)" in out
    assert "2 runs, final - stage_0, mean over runs: episode reward +0.500" in out and "success +50.0%" in out


def _rows_pair(before_reward: float, after_reward: float) -> tuple[list[dict], list[dict]]:
    won = "success" if after_reward > before_reward else "timeout"
    return _rows(["timeout"] * 4, [before_reward] * 4), _rows([won] * 4, [after_reward] * 4)


@pytest.mark.parametrize("content, message", [
    ("not json", "--from-json"),
    ('{"seed": 1, "models": {"stage_0": []}}', "needs the episodes of stage_0 and final"),
    ('{"seed": 1, "models": {"stage_0": [{"seed": 1, "difficulty": 1, "outcome": "success", "reward": NaN}],'
     ' "final": [{"seed": 1, "difficulty": 1, "outcome": "success", "reward": 0.0}]}}', "finite reward"),
    ('{"seed": true, "models": {}}', "not an eval_stages --json file"),
    ('[1, 2]', "not an eval_stages --json file"),
])
def test_from_json_refuses_a_bad_file_in_one_line(tmp_path, capsys, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert ES.main(["--from-json", str(bad)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_from_json_refuses_a_repeated_seed_and_mixed_horizons(tmp_path, capsys):
    a = _save_replay(tmp_path / "a.json", 1, *_rows_pair(0.0, 1.0))
    assert ES.main(["--from-json", a, a]) == 2
    assert "a seed appears twice" in capsys.readouterr().err
    b = _save_replay(tmp_path / "b.json", 2, *_rows_pair(0.0, 1.0), horizon=3)
    assert ES.main(["--from-json", a, b]) == 2
    out = capsys.readouterr()
    assert "HORIZON differ" in out.err and out.out == ""  # nothing pooled, nothing printed
    doc = json.loads((tmp_path / "b.json").read_text())
    del doc["horizon"]  # a file without the setting is refused as another setting, not a crash
    (tmp_path / "b.json").write_text(json.dumps(doc))
    assert ES.main(["--from-json", a, b]) == 2
    assert "HORIZON differ" in capsys.readouterr().err


def test_models_names_a_saved_model_or_is_refused(tmp_path, capsys):
    for n in (0, 1):
        _save(tmp_path / f"stage_{n}", "config.json")
    assert ES.main(["--output-dir", str(tmp_path), "--models", "stage_0,final"]) == 2
    assert "no saved final" in capsys.readouterr().err
