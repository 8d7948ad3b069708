"""scripts/gpu_rehearsal.py: the GPU rehearsal's harness, run through its CPU profile here
(the GPU figures come from running it on a GPU), and its pass rule."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import gpu_rehearsal as R  # noqa: E402


def result(**over):
    base = {"profile": "peft", "run": "single", "status": 0, "grpo_steps": 2, "s_per_step": 1.0, "tokens_per_s": 900.0,
            "peak_memory_gib": 9.5, "peak_memory_of": "GPU allocated",
            "generate_padding": {"grpo": {"left": 2}, "other": {"left": 5, "none": 1}}}
    return {**base, **over}


def test_the_pass_rule_fails_on_right_padding_outside_grpo_a_failed_run_or_no_steps():
    assert R.problems(result()) == []
    assert "generate calls outside GRPO padded {'right': 3}" in R.problems(
        result(generate_padding={"other": {"left": 2, "right": 3}}))
    assert "exit status 2" in R.problems(result(status=2))
    assert "no GRPO step was logged" in R.problems(result(grpo_steps=0))
    assert "no evaluation generate call was seen" in R.problems(result(generate_padding={"grpo": {"left": 1}}))
    assert "PROBLEM" in R.line(result(status=1)) and "PROBLEM" not in R.line(result())
    drifted = result(trainer_args={**R.STATED_ARGS, "optim": "adamw_8bit"})  # as Unsloth's defaults would make it
    assert "does not hold the stated settings" in " ".join(R.problems(drifted))


def last(args: list[str], key: str) -> str:
    """The value the trainer takes for ``key``: the last one given wins."""
    return [a.split("=", 1)[1] for a in args if a.startswith(f"--{key}=")][-1]


def test_every_run_is_short_starts_afresh_and_writes_under_its_own_folder(tmp_path):
    for run in R.RUNS:
        args = R.overrides("peft", tmp_path / "m", tmp_path, run)
        assert last(args, "RESUME") == "False" and int(last(args, "N_STAGES")) <= 2
        assert int(last(args, "WARM_START_SFT_STEPS")) <= 2
        assert all(str(tmp_path / "peft" / run) in a for a in args if a.startswith(("--OUTPUT_DIR", "--LOG_DIR")))
    assert last(R.overrides("unsloth", tmp_path, tmp_path, "episodes"), "HORIZON") == "2"
    kl = R.overrides("unsloth", tmp_path, tmp_path, "kl")  # the reference across stages, after a warm start
    assert float(last(kl, "BETA")) > 0 and last(kl, "N_STAGES") == "2" and int(last(kl, "WARM_START_SFT_STEPS")) > 0


@pytest.mark.slow
def test_the_rehearsal_runs_every_run_on_the_cpu_profile(tmp_path):
    out = tmp_path / "rehearsal.json"
    assert R.main(["--cpu", "--work", str(tmp_path / "work"), "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [(r["profile"], r["run"]) for r in rows] == [("cpu", "single"), ("cpu", "episodes"), ("cpu", "kl")]
    for r in rows:
        assert r["status"] == 0 and r["grpo_steps"] >= 1 and r["s_per_step"] > 0 and r["tokens_per_s"] > 0
        assert r["trainer_args"] == R.STATED_ARGS and not R.problems(r)
        assert set(r["generate_padding"]["other"]) <= {"left", "none"} and r["generate_padding"]["grpo"]
    assert "stage_0, GRPO's start" in rows[-1]["kl_reference"]  # the kl run's reference, as its trainer said
