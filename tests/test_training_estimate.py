"""lifestack.training.estimate: the T4 cost estimate the notebook prints before a run."""

from __future__ import annotations

from script_run import T

from lifestack.training.estimate import estimate_line, estimate_run


def cfg(*argv: str) -> dict:
    return T.build_config(list(argv), profile="unsloth")


def test_the_default_run_is_500_steps_and_the_estimate_says_it_is_one():
    e = estimate_run(cfg())
    assert e["grpo_steps"] == 5 * 100 * 4 // 4  # stages x prompts x completions / completions per step
    assert abs(
        e["total_minutes"] - e["grpo_minutes"] - e["eval_minutes"]) <= 1
    assert 60 <= e["total_minutes"] <= 180 and 3 <= e["peak_gib"] <= 8  # the documented working's range
    assert estimate_line(cfg()).startswith("ESTIMATE (not measured) for a T4")


def test_the_estimate_grows_with_the_work_asked_for():
    base = estimate_run(cfg())
    assert estimate_run(cfg("--N_STAGES=10"))["grpo_steps"] == 2 * base["grpo_steps"]
    longer = estimate_run(cfg("--MAX_COMPLETION_LENGTH=512"))
    assert longer["seconds_per_step"] > base["seconds_per_step"] and longer["peak_gib"] > base["peak_gib"]
    episodes = estimate_run(cfg("--HORIZON=3", "--MAX_SEQ_LENGTH=4096"))
    assert episodes["total_minutes"] > base["total_minutes"] and episodes["peak_gib"] > base["peak_gib"]


def test_docs_quote_the_default_runs_estimate_as_it_prints():
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "gpu.md").read_text(encoding="utf-8")
    quoted = [line for line in text.splitlines() if line.startswith("ESTIMATE (not measured)")]
    assert quoted == [estimate_line(cfg())]
