"""scripts/gpu_check.py: the plan, the precision rule on reference GPUs, and the CPU dry run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_check.py"
sys.path.insert(0, str(ROOT / "scripts"))
import gpu_check as G  # noqa: E402


def test_precision_rule_on_reference_gpus():
    assert G.precision_table() == {"T4": "fp16", "A100": "bf16", "H100": "bf16"}


def test_plan_skips_unsloth_without_a_gpu_or_install():
    rows = {r["profile"]: r["skipped"] for r in G.plan(cuda=False)}
    assert rows["peft"] is None and rows["full"] is None and rows["unsloth"] is not None


def test_summary_marks_unchanged_weights_and_failures():
    ok = {"mode": "peft", "precision": "fp16", "weights_dtype": "float16", "peak_memory_bytes": 2 ** 30,
          "peak_memory_kind": "cuda_allocated", "step_time_s": 1.5, "tokens_per_s": 900.0, "reward_share": 0.004,
          "trainable_tensors_changed": 196, "trainable_tensors": 196}
    lines = G.summary_lines([ok, {"mode": "full", "error": "OOM"}, {"mode": "unsloth", "skipped": "not installed"}])
    assert "| peft | fp16 | float16 | 1.00 GiB (GPU) | 1.500 | 900.0 | 0.40% | 196 of 196 |" in lines
    assert any("FAILED: OOM" in line for line in lines) and any("skipped: not installed" in line for line in lines)


@pytest.mark.slow
def test_dry_run_trains_every_installed_profile_on_cpu_and_moves_every_trainable_tensor(tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", LIFESTACK_FEEDBACK_DB=str(tmp_path / "fb.sqlite3"))
    out = tmp_path / "gpu_check.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--json", str(out)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "the rule on reference GPUs: T4 fp16, A100 bf16, H100 bf16" in proc.stdout
    results = {r["mode"]: r for r in json.loads(out.read_text())["results"]}
    for mode in ("peft", "full"):
        r = results[mode]
        assert r["precision"] == "fp32" and r["weights_dtype"] == "float32"
        assert r["trainable_tensors"] > 0 and r["trainable_tensors_changed"] == r["trainable_tensors"]
