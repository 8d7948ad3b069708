"""lifestack.training.bench: the stored Qwen2.5-1.5B-Instruct configuration, the parameter
count formula and the environment checks, without building the 1.5B model. The command
that uses them, scripts/bench_gpu.py, is run in test_bench_gpu.py."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import lifestack.training.bench as B

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "lifestack" / "data" / "model_configs" / "qwen2.5-1.5b-instruct.json"


def test_config_json_is_the_real_qwen25_15b_shape():
    assert B.MODEL_CONFIG_PATH == CONFIG  # the default load_model_config reads
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


def test_config_builds_a_15b_qwen2config():
    from transformers import Qwen2Config

    config = Qwen2Config(**B.qwen2_config_kwargs(B.load_model_config(CONFIG)))
    assert config.num_hidden_layers == 28 and config.hidden_size == 1536
    assert config.num_attention_heads == 12 and config.num_key_value_heads == 2
    counts = B.qwen2_param_count(config)
    # Model card: 1.54B parameters, 1.31B non-embedding.
    assert 1.50e9 < counts["total"] < 1.56e9
    assert 1.30e9 < counts["non_embedding"] < 1.32e9
    assert counts["lm_head"] == 0  # tied embeddings


@pytest.mark.parametrize("tied", [True, False])
def test_param_count_formula_matches_a_built_model(tied):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=6,
                         num_key_value_heads=2, vocab_size=100, tie_word_embeddings=tied)
    with torch.device("meta"):
        model = Qwen2ForCausalLM(config)
    assert B.qwen2_param_count(config)["total"] == sum(p.numel() for p in model.parameters())


def test_round_up_and_skip_reasons(monkeypatch):
    assert B.round_up(1918, 64) == 1920 and B.round_up(1920, 64) == 1920
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("vllm", "unsloth") else real_find_spec(name, *a))
    assert B.skip_reason("vllm", cuda=True) == "not installed"
    assert B.skip_reason("unsloth", cuda=True) == "not installed"
    assert B.skip_reason("peft", cuda=False) is None
