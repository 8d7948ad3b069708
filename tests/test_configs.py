"""The example accelerate configs in configs/accelerate/ parse and say what README claims."""

from pathlib import Path

import pytest
import yaml

CONFIGS = Path(__file__).resolve().parent.parent / "configs" / "accelerate"
EXPECTED = {
    "multi_gpu.yaml": ("MULTI_GPU", None),
    "deepspeed_zero2.yaml": ("DEEPSPEED", 2),
    "deepspeed_zero3.yaml": ("DEEPSPEED", 3),
    "fsdp.yaml": ("FSDP", None),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_accelerate_config(name):
    cfg = yaml.safe_load((CONFIGS / name).read_text())
    kind, zero = EXPECTED[name]
    assert cfg["distributed_type"] == kind
    assert cfg["num_processes"] >= 2 and cfg["use_cpu"] is False and cfg["mixed_precision"] == "bf16"
    if zero is not None:
        assert cfg["deepspeed_config"]["zero_stage"] == zero
    if kind == "FSDP":
        assert cfg["fsdp_config"]["fsdp_transformer_layer_cls_to_wrap"] == "Qwen2DecoderLayer"


def test_readme_names_every_config():
    readme = (CONFIGS.parent.parent / "README.md").read_text()
    for name in EXPECTED:
        assert f"configs/accelerate/{name}" in readme or name in readme
