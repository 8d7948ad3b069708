"""The reward benchmark runs in its quick shape and reports every figure it names.

Only the report's structure is checked: timings change with the machine's load (a phase
time derived by subtraction, ``step_parsed``, came out at -620 µs on a busy machine),
so no test asserts one."""

import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))


def test_quick_bench_reports_finite_figures(tmp_path, capsys):
    import bench_rewards

    out = tmp_path / "bench.json"
    assert bench_rewards.main(["--quick", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    timed = ("state_rebuild_plus_step_us_median", "state_rebuild_plus_step_task_cached_us_median",
             "evaluations_per_second_median", "six_rewards_64_batch_ms_median", "generate_dataset_50_s_median")
    assert set(figures) == {*timed, "phases_us_median", "repeats", "pairs", "setup_s"}
    for key in timed:
        assert isinstance(figures[key], (int, float)) and math.isfinite(figures[key]), key
    # the quick shape: 2 repeats over 300 fresh (prompt, completion) pairs
    assert figures["repeats"] == 2 and figures["pairs"] == 300
    phases = figures["phases_us_median"]
    assert list(phases) == ["json_loads_metadata", "task_from_metadata_warm", "rebuild_state", "parse_action",
                            "restore_copy", "step_parsed"]
    assert all(isinstance(v, (int, float)) and math.isfinite(v) for v in phases.values()), phases
    printed = capsys.readouterr().out
    assert "get_lifestack_evaluation, fresh pairs" in printed and "64-completion batch" in printed
    assert "phases, each timed alone" in printed
    assert "generate_dataset(50)" in printed
