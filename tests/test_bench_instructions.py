"""scripts/bench_instructions.py: instruction counts of the reward path under callgrind."""

import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import bench_instructions


def test_workload_evaluates_the_pairs_it_is_given(tmp_path, monkeypatch):
    pairs = tmp_path / "pairs.json"
    bench_instructions.write_pairs(pairs, 6, n_prompts=3)
    data = json.loads(pairs.read_text())
    assert len(data) == 6 and len({c for _, c in data}) == 6  # fresh: no two completions alike
    import train_trl as T
    import lifestack.training.grpo_rewards as RW
    from lifestack.training.generation_log import GenerationLog

    monkeypatch.setattr(T.RUN, "log", GenerationLog(tmp_path))  # restored afterwards
    monkeypatch.setattr(T.RUN, "evaluations", 0)
    RW.EVALUATOR.evaluations.clear()
    bench_instructions.workload(str(pairs), 6, str(tmp_path))
    assert all((p, c) in RW.EVALUATOR.evaluations for p, c in data)
    assert all(RW.EVALUATOR.evaluations[(p, c)]["action"] is not None for p, c in data)  # valid actions, scored


def test_missing_valgrind_is_a_clear_error(monkeypatch, capsys):
    monkeypatch.setattr(bench_instructions.shutil, "which", lambda name: None)
    assert bench_instructions.main(["--pairs", "5"]) == 2
    assert "valgrind is not installed" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind not installed")
def test_counts_instructions_per_evaluation(tmp_path, capsys):
    out = tmp_path / "instr.json"
    assert bench_instructions.main(["--pairs", "60", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    # one evaluation steps the answer and plays the episode it starts to the task's end
    # (lifestack.value): about 2.5 million instructions at steady state (300 pairs), more
    # with few pairs, which carry one-off costs (the feedback store opening for the first
    # logged line). Far from 0, far from seconds.
    assert 200_000 < figures["instructions_per_evaluation"] < 8_000_000, figures
    assert "instructions per evaluation" in capsys.readouterr().out
