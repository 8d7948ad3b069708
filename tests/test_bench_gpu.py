"""Tests for scripts/bench_gpu.py.

The fast tests check the stored Qwen2.5-1.5B-Instruct configuration and the parameter
count formula without building the 1.5B model. The slow test runs the benchmark's
scaled-down CPU shape end to end (a few seconds of GRPO on a tiny random model).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "bench_gpu.py"
CONFIG = ROOT / "lifestack" / "data" / "model_configs" / "qwen2.5-1.5b-instruct.json"


@pytest.fixture(scope="module")
def bench():
    """The script as a module; the offline variables it sets on import are undone afterwards."""
    saved = dict(os.environ)
    try:
        spec = importlib.util.spec_from_file_location("bench_gpu_under_test", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return module


def test_config_json_is_the_real_qwen25_15b_shape():
    cfg = json.loads(CONFIG.read_text(encoding="utf-8"))
    assert cfg["architectures"] == ["Qwen2ForCausalLM"]
    assert cfg["model_type"] == "qwen2"
    assert (cfg["num_hidden_layers"], cfg["hidden_size"]) == (28, 1536)
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"]) == (12, 2)
    assert cfg["intermediate_size"] == 8960
    assert cfg["vocab_size"] == 151936
    assert cfg["tie_word_embeddings"] is True
    assert cfg["max_position_embeddings"] == 32768
    assert cfg["rope_theta"] == 1000000.0 and cfg["rms_norm_eps"] == 1e-6
    assert (cfg["bos_token_id"], cfg["eos_token_id"]) == (151643, 151645)


def test_config_builds_a_15b_qwen2config(bench):
    from transformers import Qwen2Config

    config = Qwen2Config(**bench.qwen2_config_kwargs(bench.load_model_config(CONFIG)))
    assert config.num_hidden_layers == 28 and config.hidden_size == 1536
    assert config.num_attention_heads == 12 and config.num_key_value_heads == 2
    counts = bench.qwen2_param_count(config)
    # Model card: 1.54B parameters, 1.31B non-embedding.
    assert 1.50e9 < counts["total"] < 1.56e9
    assert 1.30e9 < counts["non_embedding"] < 1.32e9
    assert counts["lm_head"] == 0  # tied embeddings


@pytest.mark.parametrize("tied", [True, False])
def test_param_count_formula_matches_a_built_model(bench, tied):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=6,
                         num_key_value_heads=2, vocab_size=100, tie_word_embeddings=tied)
    with torch.device("meta"):
        model = Qwen2ForCausalLM(config)
    assert bench.qwen2_param_count(config)["total"] == sum(p.numel() for p in model.parameters())


def test_round_up_and_skip_reasons(bench, monkeypatch):
    assert bench.round_up(1918, 64) == 1920 and bench.round_up(1920, 64) == 1920
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("vllm", "unsloth") else real_find_spec(name, *a))
    assert bench.skip_reason("vllm", cuda=True) == "not installed"
    assert bench.skip_reason("unsloth", cuda=True) == "not installed"
    assert bench.skip_reason("peft", cuda=False) is None


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
