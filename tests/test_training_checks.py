"""Tests for lifestack/training/checks.py: what the trainer refuses before it loads a model."""

from __future__ import annotations

import pytest

from script_run import ROOT, T, isolated  # noqa: F401  (isolated: autouse)
import lifestack.training.checks as CK


def test_use_vllm_without_vllm_names_the_install_command(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    cfg = T.build_config(["--USE_VLLM=True"], profile="peft")
    with pytest.raises(SystemExit, match="pip install vllm"):
        CK.check_vllm(cfg)


def test_vllm_trains_at_most_one_stage_per_process_in_either_mode():
    cfg = T.default_config()
    cfg.update(USE_VLLM=True, VLLM_MODE="colocate", N_STAGES=5)
    assert "would start 5 vLLM engines" in CK.vllm_stage_problem(cfg, done_stages=0)
    assert "--N_STAGES=3" in CK.vllm_stage_problem(cfg, done_stages=2)
    assert CK.vllm_stage_problem(cfg, done_stages=4) is None  # one stage left
    # server mode: each stage's trainer opens a weight-sync group on the same port, the last one still open
    assert "open 5 weight-sync groups" in CK.vllm_stage_problem({**cfg, "VLLM_MODE": "server"}, done_stages=0)
    assert CK.vllm_stage_problem({**cfg, "VLLM_MODE": "server"}, done_stages=4) is None
    assert CK.vllm_stage_problem({**cfg, "USE_VLLM": False}, done_stages=0) is None


@pytest.mark.parametrize("logger, module", [("tensorboard", "tensorboard"), ("wandb", "wandb")])
def test_report_to_a_logger_that_is_not_installed_stops_before_a_model_loads(monkeypatch, logger, module):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in (module, "tensorboardX") else real(name, *a))
    with pytest.raises(SystemExit, match=f"pip install {module}"):
        CK.check_report_to(T.build_config([f"--REPORT_TO={logger}"], profile="cpu"))
    CK.check_report_to(T.build_config(["--REPORT_TO=none"], profile="cpu"))  # nothing to load
    CK.check_report_to(T.build_config(["--REPORT_TO=auto"], profile="cpu"))  # TensorBoard only when installed


@pytest.mark.parametrize("versions,refused", [
    ({"unsloth": "2026.10.9", "unsloth_zoo": "2026.10.9"}, None),
    ({"unsloth": "2026.5.9", "unsloth_zoo": "2026.5.5"}, None),
    ({"unsloth": "2026.5.8", "unsloth_zoo": "2026.10.9"}, "unsloth"),
    ({"unsloth": "2026.10.9", "unsloth_zoo": "2026.5.4"}, "unsloth_zoo"),
    ({"unsloth": None, "unsloth_zoo": "2026.10.9"}, "unsloth"),
    ({"unsloth": "not-a-version", "unsloth_zoo": "2026.10.9"}, "unsloth"),
])
def test_episode_mode_refuses_an_unsloth_without_the_masking_fix(versions, refused):
    from lifestack.training.checks import unsloth_problem

    assert unsloth_problem({"HORIZON": 1}, versions) is None  # single decisions have no environment tokens
    problem = unsloth_problem({"HORIZON": 3}, versions)
    if refused is None:
        assert problem is None
    else:
        assert problem.startswith(f"HORIZON=3: {refused} ") and "requirements-gpu.txt" in problem


def test_the_gpu_install_pins_a_release_with_the_masking_fix():
    """requirements-gpu.txt pins unsloth and unsloth_zoo exactly, at or above the fix."""
    import re

    from packaging.version import Version

    from lifestack.training.checks import UNSLOTH_MASKING_FIX

    text = (ROOT / "requirements-gpu.txt").read_text(encoding="utf-8")
    for name, first in UNSLOTH_MASKING_FIX.items():
        pins = re.findall(rf"^{name}==([\d.]+)$", text, re.M)
        assert len(pins) == 1 and Version(pins[0]) >= Version(first)
    assert not re.search(r"^(torch|torchvision|xformers)\b", text, re.M)  # --no-deps must never move torch
