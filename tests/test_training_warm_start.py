"""lifestack.training.warm_start: each demonstration is tokenized once."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import train_trl as T  # noqa: E402
import lifestack.training.warm_start as WS  # noqa: E402
from lifestack.training.models import load_model  # noqa: E402


def test_each_demonstration_is_tokenized_once_and_the_time_is_split(tiny_model_dir, tmp_path, monkeypatch):
    cfg = T.build_config([f"--OUTPUT_DIR={tmp_path / 'out'}", f"--LOG_DIR={tmp_path / 'logs'}",
                          f"--CPU_BASE_DIR={tiny_model_dir}", "--WARM_START_SFT_STEPS=40", "--SEED=3"], profile="cpu")
    model, tok = load_model(cfg, banner=False)
    rendered = []
    real = type(tok).apply_chat_template
    monkeypatch.setattr(type(tok), "apply_chat_template", lambda self, m, **k: rendered.append(m) or real(self, m, **k))
    timings = {}
    losses = WS.warm_start(model, tok, cfg, timings=timings)
    assert len(losses) == 40
    drawn = {id(m) for m in rendered}
    assert len(rendered) == len(drawn) < 40 * 4  # 160 draws from 64 demonstrations: each rendered once
    assert set(timings) == {"demonstrations", "tokenize", "model"} and all(v >= 0 for v in timings.values())
