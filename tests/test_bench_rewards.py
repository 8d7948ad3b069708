"""The reward benchmark runs in its quick shape and reports sane figures."""

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
    for key in ("state_rebuild_plus_step_us_median", "evaluations_per_second_median",
                "six_rewards_64_batch_ms_median", "generate_dataset_50_s_median"):
        assert math.isfinite(figures[key]) and figures[key] > 0, key
    phases = figures["phases_us_median"]
    assert set(phases) == {"json_loads_metadata", "task_from_metadata_warm", "rebuild_state", "parse_action",
                           "restore_copy", "step_parsed"}
    assert all(math.isfinite(v) and v > 0 for v in phases.values()), phases
    printed = capsys.readouterr().out
    assert "get_lifestack_evaluation, fresh pairs" in printed and "64-completion batch" in printed
    assert "phases, each timed alone" in printed
