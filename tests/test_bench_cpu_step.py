"""The CPU step bench (scripts/bench_cpu_step.py, lifestack.training.step_profile): the
structure of what it reports, never a timing value."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from lifestack.training.step_profile import CATEGORIES, DETAILS, StepProfiler, summarize  # noqa: E402
from script_run import isolated  # noqa: E402,F401  (autouse: T.RUN, logs and feedback under tmp_path)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Run:
    reward_seconds = 0.0


def test_a_step_is_split_into_disjoint_parts_and_the_overhead_is_the_remainder():
    clock, run = _Clock(), _Run()
    p = StepProfiler(run, clock=clock)
    p.step_begin()  # t = 0
    clock.now = 0.1  # data loader
    p._add_generation(0.5)  # inside _prepare_inputs (0.1 .. 0.8): generate 0.5, rewards 0.05, the rest 0.15
    run.reward_seconds += 0.05
    p._add_prepare(0.7)
    clock.now = 1.5
    p._add_training_step(1.4)  # training_step 0.1 .. 1.5: prepare 0.7, loss and backward 0.7
    clock.now = 1.6
    p.optimizer_step()  # clipping and the optimizer step: 0.1
    clock.now = 1.7
    p.step_end()
    (s,) = p.steps
    assert s["wall"] == pytest.approx(1.7)
    assert s["generation"] == pytest.approx(0.5) and s["scoring"] == pytest.approx(0.05)
    assert s["forward_backward"] == pytest.approx(0.8) and s["optimizer"] == pytest.approx(0.1)
    assert s["overhead"] == pytest.approx(0.35) and s["prepare_other"] == pytest.approx(0.15)
    assert s["log_save_other"] == pytest.approx(0.2)
    clock.now = 2.0  # the next step starts where this one ended: logging and saving count as its overhead
    p.step_begin()
    clock.now = 2.5
    p.step_end()
    assert p.steps[1]["wall"] == pytest.approx(0.8) and p.steps[1]["overhead"] == pytest.approx(0.8)


def test_summary_shares_sum_to_one_and_skip_the_warm_up():
    rows = [{"wall": w, "generation": g, "scoring": 0.01, "forward_backward": f, "overhead": w - g - 0.01 - f,
             "prepare_other": 0.0, "log_save_other": w - g - 0.01 - f, "optimizer": 0.0}
            for w, g, f in [(9.0, 5.0, 3.0), (2.0, 1.0, 0.5), (3.0, 1.2, 1.0), (2.5, 1.1, 0.9)]]
    s = summarize(rows, skip_first=1)
    assert s["steps"] == 3 and s["median"]["wall"] == 2.5
    assert sum(s["share"].values()) == pytest.approx(1.0)
    assert s["steps_per_minute"] == pytest.approx(60 / 2.5)
    with pytest.raises(ValueError):
        summarize(rows[:1], skip_first=1)


@pytest.mark.parametrize("horizon", [1, 2])
def test_the_bench_runs_real_grpo_steps_and_reports_every_part(tmp_path, tiny_model_dir, horizon):
    import bench_cpu_step

    out = tmp_path / "bench.json"
    rc = bench_cpu_step.main(["--steps", "3", "--horizon", str(horizon), "--warm-steps", "2", "--base-dir",
                              str(tiny_model_dir), "--json", str(out), "--PER_DEVICE_BATCH_SIZE=4",
                              "--MAX_COMPLETION_LENGTH=12", "--REPORT_TO=none", "--SAVE_STEPS=2"])
    assert rc == 0
    report = json.loads(out.read_text())
    assert report["settings"]["horizon"] == horizon
    summary = report["summary"]
    assert summary["steps"] == 2  # 3 steps, the first left out
    assert set(summary["share"]) == set(CATEGORIES)
    assert sum(summary["share"].values()) == pytest.approx(1.0)
    assert set(summary["median"]) == {"wall", *CATEGORIES, *DETAILS, "decode_steps", "generation_per_decode_step"}
    assert summary["median"]["decode_steps"] >= 1
    (run,) = report["runs"]
    assert len(run["steps"]) == 3
    for step in run["steps"]:
        assert all(math.isfinite(step[k]) and step[k] >= 0 for k in ("wall", *CATEGORIES, *DETAILS))
        assert step["generation"] + step["scoring"] + step["forward_backward"] + step["overhead"] == pytest.approx(
            step["wall"], rel=1e-6, abs=1e-6)
        assert step["generate_calls"] >= 1  # episode mode: one call per turn played
    assert run["warm_start"]["steps"] == 2 and run["warm_start"]["seconds_per_step"] > 0
    assert summary["steps_per_minute"] > 0
