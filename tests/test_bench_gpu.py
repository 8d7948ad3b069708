"""scripts/bench_gpu.py, the command: the benchmark's scaled-down CPU shape end to end (a
few seconds of GRPO on a tiny random model). The plumbing it measures with,
lifestack.training.bench, is tested in test_training_bench.py.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "bench_gpu.py"


@pytest.mark.slow
def test_cpu_bench_runs_and_reports_finite_figures(tmp_path):
    out = tmp_path / "bench.json"
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--cpu", "--json", str(out)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "[bench] step time:" in proc.stdout
    r = json.loads(out.read_text(encoding="utf-8"))
    assert r["device"] == "cpu" and r["shape_name"] == "tiny" and r["mode"] == "peft"
    assert math.isfinite(r["step_time_s"]) and r["step_time_s"] > 0
    assert r["tokens_per_s"] > 0
    assert 0.0 <= r["reward_share"] <= 1.0
    assert r["peak_memory_bytes"] > 0
    assert r["shape"]["num_hidden_layers"] == 2 and r["shape"]["hidden_size"] == 64
    assert r["shape"]["vocab_size"] == r["shape"]["tokenizer_len"]
    assert r["shape"]["real_params"] > 1.5e9
    assert not list(tmp_path.glob("training_logs*"))  # the reward log went to the bench's temp dir
