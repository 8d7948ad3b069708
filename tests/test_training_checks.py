"""Tests for lifestack/training/checks.py: what the trainer refuses before it loads a model."""

from __future__ import annotations

import pytest

from script_run import T, isolated  # noqa: F401  (isolated: autouse)
import lifestack.training.checks as CK


def test_use_vllm_without_vllm_names_the_install_command(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    cfg = T.build_config(["--USE_VLLM=True"], profile="peft")
    with pytest.raises(SystemExit, match="pip install vllm"):
        CK.check_vllm(cfg)


def test_vllm_colocate_trains_at_most_one_stage_per_process():
    cfg = T.default_config()
    cfg.update(USE_VLLM=True, VLLM_MODE="colocate", N_STAGES=5)
    assert "would start 5 vLLM engines" in CK.colocate_problem(cfg, done_stages=0)
    assert "--N_STAGES=3" in CK.colocate_problem(cfg, done_stages=2)
    assert CK.colocate_problem(cfg, done_stages=4) is None  # one stage left
    assert CK.colocate_problem({**cfg, "VLLM_MODE": "server"}, done_stages=0) is None
    assert CK.colocate_problem({**cfg, "USE_VLLM": False}, done_stages=0) is None
