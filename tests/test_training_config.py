"""lifestack.training.config: --KEY=value overrides typed like the defaults, the checks
validate_config runs (and the documented list of them), the device profile."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import train_trl as T  # noqa: E402  (the constants: the defaults the overrides are typed by)
import lifestack.episodes as EP  # noqa: E402
import lifestack.training.config as TC  # noqa: E402

DEFAULTS = T.default_config()


def cfg_with(**changes):
    cfg = T.default_config()
    cfg.update(changes)
    return cfg


@pytest.mark.parametrize("arg, key, expected", [
    ("--N_STAGES=3", "N_STAGES", 3),
    ("--ADVANCE_THRESHOLD=0.7", "ADVANCE_THRESHOLD", 0.7),
    ("--ADVANCE_THRESHOLD=1", "ADVANCE_THRESHOLD", 1.0),  # a float accepts an int literal, as a float
    ("--USE_LORA=True", "USE_LORA", True),
    ("--USE_LORA=false", "USE_LORA", False),
    ("--USE_LORA=1", "USE_LORA", True),
    ("--USE_LORA=0", "USE_LORA", False),
    ("--MODEL_NAME=org/some-model", "MODEL_NAME", "org/some-model"),
    ("--MODEL_NAME=[1, 2]", "MODEL_NAME", "[1, 2]"),  # a str is taken raw, not evaluated
    ("--OUTPUT_DIR=./out=x", "OUTPUT_DIR", "./out=x"),  # split on the first '=' only
    ("--LEARNING_RATES=[1e-4, 2e-5, 3]", "LEARNING_RATES", [1e-4, 2e-5, 3.0]),
    ("--REWARD_WEIGHTS=[1, 0.5, 2, 1, 0, 0]", "REWARD_WEIGHTS", [1.0, 0.5, 2.0, 1.0, 0.0, 0.0]),
    ("--n_stages=2", "N_STAGES", 2),  # names are case-insensitive
    ("--Seed=7", "SEED", 7),
])
def test_parse_overrides_coerces_to_the_default_type(arg, key, expected):
    out = TC.parse_overrides([arg], DEFAULTS)
    assert out == {key: expected}
    assert type(out[key]) is type(expected)
    if isinstance(expected, list):
        assert all(type(x) is float for x in out[key])


def test_parse_overrides_several_and_none():
    assert TC.parse_overrides([], DEFAULTS) == {}
    out = TC.parse_overrides(["--N_STAGES=2", "--use_vllm=False", "--LOG_DIR=elsewhere"], DEFAULTS)
    assert out == {"N_STAGES": 2, "USE_VLLM": False, "LOG_DIR": "elsewhere"}


def test_parse_overrides_unknown_key_lists_the_valid_ones():
    with pytest.raises(T.ConfigError) as err:
        TC.parse_overrides(["--BOGUS=1"], DEFAULTS)
    msg = str(err.value)
    assert msg.startswith("BOGUS")
    assert "\n" not in msg
    for key in DEFAULTS:
        assert key in msg


@pytest.mark.parametrize("arg, key", [
    ("--N_STAGES=2.5", "N_STAGES"),
    ("--N_STAGES=", "N_STAGES"),
    ("--N_STAGES=three", "N_STAGES"),
    ("--SEED=True", "SEED"),  # a bool is not an int here
    ("--LEARNING_RATES=abc", "LEARNING_RATES"),
    ("--LEARNING_RATES=1e-4", "LEARNING_RATES"),  # not a list
    ("--LEARNING_RATES=[1e-4, 'x']", "LEARNING_RATES"),
    ("--USE_LORA=maybe", "USE_LORA"),
    ("--ADVANCE_THRESHOLD=True", "ADVANCE_THRESHOLD"),
    ("--ADVANCE_THRESHOLD=[0.5]", "ADVANCE_THRESHOLD"),
    ("--CPU_PROFILE=[1]", "CPU_PROFILE"),
])
def test_parse_overrides_wrong_type_names_the_key(arg, key):
    with pytest.raises(T.ConfigError) as err:
        TC.parse_overrides([arg], DEFAULTS)
    msg = str(err.value)
    assert msg.startswith(key), msg
    assert "\n" not in msg


@pytest.mark.parametrize("arg", ["N_STAGES=3", "--N_STAGES", "-N_STAGES=3", "N_STAGES", "", "--"])
def test_parse_overrides_malformed_argument(arg):
    with pytest.raises(T.ConfigError) as err:
        TC.parse_overrides([arg], DEFAULTS)
    assert "--KEY=value" in str(err.value)


def test_parse_overrides_pathological_nesting_is_a_config_error():
    with pytest.raises(T.ConfigError):
        TC.parse_overrides(["--N_STAGES=" + "-" * 10_000 + "1"], DEFAULTS)


@pytest.mark.parametrize("names, changes, world", [
    (("DEVICE_PROFILE",), {"DEVICE_PROFILE": "tpu"}, 1),
    (("N_STAGES",), {"N_STAGES": 0}, 1),
    (("ADVANCE_THRESHOLD",), {"ADVANCE_THRESHOLD": 1.5}, 1),
    (("ADVANCE_THRESHOLD",), {"ADVANCE_THRESHOLD": float("nan")}, 1),
    (("NUM_GENERATIONS", "PER_DEVICE_BATCH_SIZE"), {"PER_DEVICE_BATCH_SIZE": 3}, 1),
    (("NUM_GENERATIONS", "PER_DEVICE_BATCH_SIZE"), {"PER_DEVICE_BATCH_SIZE": 2}, 3),  # 2 x 1 x 3 = 6, not % 4
    (("NUM_GENERATIONS", "PER_DEVICE_BATCH_SIZE"), {"NUM_GENERATIONS": 8}, 3),  # 4 x 1 x 3 = 12, not % 8
    (("REWARD_WEIGHTS",), {"REWARD_WEIGHTS": [1.0] * 5}, 1),
    (("REWARD_WEIGHTS",), {"REWARD_WEIGHTS": [1.0] * 7}, 1),
    (("REWARD_WEIGHTS",), {"REWARD_WEIGHTS": [1.0, 1.0, float("nan"), 1.0, 1.0, 1.0]}, 1),
    (("REWARD_WEIGHTS",), {"REWARD_WEIGHTS": [0.0] * 6}, 1),
    (("LEARNING_RATES",), {"LEARNING_RATES": []}, 1),
    (("LEARNING_RATES",), {"LEARNING_RATES": [5e-6, -1e-6]}, 1),
    (("MAX_COMPLETION_LENGTH",), {"MAX_COMPLETION_LENGTH": 4}, 1),
    (("USE_VLLM",), {"USE_VLLM": True, "DEVICE_PROFILE": "cpu"}, 1),
    (("USE_VLLM",), {"USE_VLLM": True, "_PROFILE": "cpu"}, 1),
])
def test_validate_config_names_the_bad_constant(names, changes, world):
    with pytest.raises(T.ConfigError) as err:
        TC.validate_config(cfg_with(**changes), world_size=world)
    msg = str(err.value)
    assert msg.startswith(names), msg
    assert "\n" not in msg


def test_validate_config_batch_divisibility_counts_processes():
    cfg = cfg_with(PER_DEVICE_BATCH_SIZE=2)
    TC.validate_config(cfg, world_size=2)  # 2 x 1 x 2 = 4: fine
    TC.validate_config(cfg, world_size=4)
    with pytest.raises(T.ConfigError):
        TC.validate_config(cfg, world_size=1)
    with pytest.raises(T.ConfigError):
        TC.validate_config(cfg, world_size=3)
    TC.validate_config(cfg_with(PER_DEVICE_BATCH_SIZE=1, GRAD_ACCUM_STEPS=4))  # accumulation counts too
    TC.validate_config(cfg_with(USE_VLLM=True, DEVICE_PROFILE="peft"))  # vLLM is fine on a GPU profile


def test_full_fine_tuning_never_resolves_to_unsloth(monkeypatch):
    import importlib.util

    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "unsloth" else real(name, *a))
    assert TC.resolve_profile("auto", 1, use_lora=True) == "unsloth"
    assert TC.resolve_profile("auto", 1, use_lora=False) == "peft"  # fp32 master weights + autocast
    assert TC.resolve_profile("auto", 2, use_lora=True) == "peft"
    with pytest.raises(T.ConfigError, match="^USE_LORA"):
        T.build_config(["--USE_LORA=False", "--DEVICE_PROFILE=unsloth"])


def test_vllm_mode_is_validated():
    with pytest.raises(T.ConfigError, match="^VLLM_MODE"):
        T.build_config(["--VLLM_MODE=remote"], profile="peft")


def test_horizon_is_validated():
    assert T.build_config(["--HORIZON=3"], profile="cpu")["HORIZON"] == 3
    for bad in ("--HORIZON=0", f"--HORIZON={EP.MAX_HORIZON + 1}"):
        with pytest.raises(T.ConfigError, match="HORIZON"):
            T.build_config([bad], profile="cpu")
    with pytest.raises(T.ConfigError, match="USE_VLLM=False"):
        TC.validate_config({**T.build_config(["--HORIZON=2"], profile="cpu"), "USE_VLLM": True})


def test_retreat_threshold_is_validated():
    with pytest.raises(Exception, match="RETREAT_THRESHOLD"):
        TC.validate_config(cfg_with(RETREAT_THRESHOLD=0.7))
    with pytest.raises(Exception, match="RETREAT_THRESHOLD"):
        TC.validate_config(cfg_with(RETREAT_THRESHOLD=float("nan")))
    TC.validate_config(cfg_with(RETREAT_THRESHOLD=-1.0))


def test_the_documented_configuration_checks_are_validate_configs_in_order():
    """docs/train_trl.md's numbered list under "Validation" has one item per check of
    validate_config, in the order they run, each naming the key its error names."""
    import ast
    import re

    src = (ROOT / "lifestack" / "training" / "config.py").read_text(encoding="utf-8")
    fn = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == "validate_config")
    calls = sorted((n for n in ast.walk(fn) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "need"),
                   key=lambda n: (n.lineno, n.col_offset))
    keys = [ast.literal_eval(c.args[1]) for c in calls]
    doc = (ROOT / "docs" / "train_trl.md").read_text(encoding="utf-8")
    section = doc[doc.index("### Validation"):doc.index("### The CPU profile's values")]
    items = re.findall(r"^\d+\. `([A-Z_0-9]+)`", section, re.M)
    assert items == keys
    assert f"The {len(keys)} checks, in order" in section

