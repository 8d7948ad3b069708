"""lifestack.training.models without a model: the precision rule (compute capability ->
compute precision) and which weights train in fp32. Loading, saving and merging real
(tiny) models are tested in test_train_model.py."""

from __future__ import annotations

import pytest

import lifestack.training.models as MD


@pytest.mark.parametrize("capability, expected", [
    ((7, 5), "fp16"),  # T4: torch.cuda.is_bf16_supported() says True, but bf16 is only emulated
    ((7, 0), "fp16"), ((6, 1), "fp16"), ((8, 0), "bf16"), ((8, 6), "bf16"), ((9, 0), "bf16"), (None, "fp32"),
])
def test_choose_precision_from_the_compute_capability(capability, expected):
    assert MD.choose_precision(capability) == expected


def test_trained_weights_are_fp32_only_a_lora_base_is_half():
    for precision in ("fp32", "bf16", "fp16"):
        assert MD.weight_precision(precision, lora=False) == "fp32"
        assert MD.weight_precision(precision, lora=True) == precision


def test_a_saved_model_folder_holds_full_weights_or_a_lora_adapter(tmp_path):
    full, adapter, empty = tmp_path / "full", tmp_path / "adapter", tmp_path / "empty"
    for d in (full, adapter, empty):
        d.mkdir()
    (full / "config.json").write_text("{}")
    (adapter / "adapter_config.json").write_text("{}")
    (empty / "tokenizer_config.json").write_text("{}")  # a tokenizer alone is no model
    assert MD.is_saved_model(full) and MD.is_saved_model(adapter) and not MD.is_saved_model(empty)
    assert MD.is_adapter(adapter) and not MD.is_adapter(full)
    assert not MD.is_saved_model(tmp_path / "missing")
    odd = tmp_path / "odd"
    (odd / "config.json").mkdir(parents=True)  # a folder by that name is not the file
    assert not MD.is_saved_model(odd)


def test_the_cpu_base_model_path_is_absolute_so_a_lora_adapter_finds_its_base_from_anywhere(tmp_path, monkeypatch):
    """PEFT records the path the base was loaded from in adapter_config.json; a relative
    OUTPUT_DIR made it relative, and evaluate.py run from another folder fell back to the hub."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    import train_trl as T
    from lifestack.training.models import base_model_name

    monkeypatch.chdir(tmp_path)
    cfg = T.build_config(["--OUTPUT_DIR=./runs/x"], profile="cpu")
    assert Path(base_model_name(cfg)) == (tmp_path / "runs" / "x" / "cpu_base_model").resolve()
    assert base_model_name({**cfg, "CPU_BASE_DIR": "base"}) == str((tmp_path / "base").resolve())
    assert base_model_name({**cfg, "_PROFILE": "peft"}) == cfg["MODEL_NAME"]
