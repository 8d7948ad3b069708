"""Fixtures shared across test files."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """The CPU profile's tiny random Qwen2 model and offline tokenizer, built once per test
    session (about 5 s, nothing downloaded). Read-only: copy it before changing it."""
    from lifestack.training.tiny_model import build_tiny_model

    base = tmp_path_factory.mktemp("tiny") / "model"
    build_tiny_model(base, seed=42)
    return base
