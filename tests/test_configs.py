"""The example accelerate configs in configs/accelerate/ parse and say what README claims."""

from pathlib import Path

import pytest
import yaml

CONFIGS = Path(__file__).resolve().parent.parent / "configs" / "accelerate"
EXPECTED = {
    "multi_gpu.yaml": ("MULTI_GPU", None),
    "deepspeed_zero2.yaml": ("DEEPSPEED", 2),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_accelerate_config(name):
    cfg = yaml.safe_load((CONFIGS / name).read_text())
    kind, zero = EXPECTED[name]
    assert cfg["distributed_type"] == kind
    assert cfg["num_processes"] >= 2 and cfg["use_cpu"] is False and cfg["mixed_precision"] == "bf16"
    if zero is not None:
        assert cfg["deepspeed_config"]["zero_stage"] == zero


def test_readme_names_every_config():
    readme = (CONFIGS.parent.parent / "README.md").read_text()
    assert sorted(p.name for p in CONFIGS.glob("*.yaml")) == sorted(EXPECTED)
    for name in EXPECTED:
        assert f"configs/accelerate/{name}" in readme or name in readme


def test_no_parameter_sharding_config_is_offered():
    """Rank 0 alone saves each stage and generates the held-out evaluation; with sharded
    parameters (ZeRO-3, FSDP) that waits forever for the other ranks. So none is shipped
    or recommended."""
    docs = [CONFIGS.parent.parent / "README.md", *sorted((CONFIGS.parent.parent / "docs").glob("*.md"))]
    for path in docs:
        text = path.read_text()
        for offer in ("deepspeed_zero3.yaml", "fsdp.yaml", "--config_file configs/accelerate/fsdp"):
            assert offer not in text, (path.name, offer)
    for cfg in CONFIGS.glob("*.yaml"):
        data = yaml.safe_load(cfg.read_text())
        assert data["distributed_type"] != "FSDP" and data.get("deepspeed_config", {}).get("zero_stage") != 3, cfg.name
