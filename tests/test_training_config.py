"""lifestack.training.config: --KEY=value overrides typed like the defaults, the checks
validate_config runs (and the documented list of them), the device profile, and
build_config over the training script's constants (the CPU profile swapped in, what it
replaced printed, ON_POLICY_STATES validated and kept out of an old run's fingerprint)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import train_trl as T  # noqa: E402  (the constants: the defaults the overrides are typed by)
import lifestack.episodes as EP  # noqa: E402
import lifestack.training.config as TC  # noqa: E402
import lifestack.training.run_evaluation as EV  # noqa: E402
import lifestack.training.run_state as RS  # noqa: E402

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
    ("--REWARD_WEIGHTS={'reward_format_fn': 1, 'reward_task_success_fn': 2.5}", "REWARD_WEIGHTS",
     {"reward_format_fn": 1, "reward_task_success_fn": 2.5}),
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
    (("REWARD_WEIGHTS",), {"REWARD_WEIGHTS": {"reward_format": 1.0}}, 1),  # not a reward's name
    (("REWARD_WEIGHTS",), {"REWARD_WEIGHTS": {"reward_format_fn": float("nan")}}, 1),
    (("REWARD_WEIGHTS",), {"REWARD_WEIGHTS": {"reward_format_fn": 0.0, "reward_task_success_fn": 0}}, 1),
    (("REWARD_WEIGHTS",), {"REWARD_WEIGHTS": {}}, 1),
    (("REWARD_WEIGHTS",), {"REWARD_WEIGHTS": {"reward_format_fn": "1"}}, 1),
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


def test_full_fine_tuning_never_resolves_to_unsloth(monkeypatch, capsys):
    import importlib.util

    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "unsloth" else real(name, *a))
    assert TC.resolve_profile("auto", 1, use_lora=True) == "unsloth"
    assert TC.resolve_profile("auto", 1, use_lora=False) == "peft"  # fp32 master weights + autocast
    assert "several processes" not in capsys.readouterr().out
    assert TC.resolve_profile("auto", 2, use_lora=True) == "peft"
    assert "[setup] several processes: Unsloth is single-GPU" in capsys.readouterr().out  # says why
    assert TC.resolve_profile("unsloth", 2) == "peft"
    assert "several processes" in capsys.readouterr().out
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


# ------------------------------------------------------------------------------------
# build_config: the script's constants, overrides, the CPU profile swapped in, validated
# ------------------------------------------------------------------------------------
def test_default_config_is_valid_and_deep_copied():
    for world in (1, 2, 3, 4):
        TC.validate_config(T.default_config(), world_size=world)
    cfg = T.default_config()
    cfg["LEARNING_RATES"].append(0.5)
    cfg["CPU_PROFILE"]["N_STAGES"] = 99
    assert T.default_config()["LEARNING_RATES"] == T.LEARNING_RATES
    assert "N_STAGES" not in T.default_config()["CPU_PROFILE"]
    assert set(cfg) == set(T.CONFIG_KEYS)


def test_build_config_cpu_profile_swaps_in_its_values_except_overrides():
    cfg = T.build_config([], profile="cpu")
    assert cfg["_PROFILE"] == "cpu"
    for key, value in T.CPU_PROFILE.items():
        assert cfg[key] == value, key
    for key in set(DEFAULTS) - set(T.CPU_PROFILE):
        assert cfg[key] == DEFAULTS[key], key

    cfg = T.build_config(["--MAX_COMPLETION_LENGTH=64", "--use_lora=True", "--N_STAGES=2"], profile="cpu")
    assert cfg["MAX_COMPLETION_LENGTH"] == 64 and cfg["USE_LORA"] is True and cfg["N_STAGES"] == 2
    assert cfg["N_PROMPTS_PER_STAGE"] == T.CPU_PROFILE["N_PROMPTS_PER_STAGE"]
    assert cfg["LEARNING_RATES"] == T.CPU_PROFILE["LEARNING_RATES"]
    assert T.default_config() == DEFAULTS  # nothing leaked into the constants


def test_build_config_prints_what_the_cpu_profile_replaced(monkeypatch, capsys):
    monkeypatch.setattr(T, "TEMPERATURE", 0.9)  # a user edited the constants block...
    monkeypatch.setattr(T, "N_PROMPTS_PER_STAGE", 40)
    cfg = T.build_config(["--N_PROMPTS_PER_STAGE=32"], profile="cpu")  # ...and overrode one of them
    out = capsys.readouterr().out
    assert cfg["TEMPERATURE"] == T.CPU_PROFILE["TEMPERATURE"] and cfg["N_PROMPTS_PER_STAGE"] == 32
    assert "[setup]   TEMPERATURE: 0.9 -> 0.7" in out
    assert "[setup]   LEARNING_RATES: [5e-06, 5e-06, 4e-06, 3e-06, 2e-06] -> [5e-05]" in out
    assert "N_PROMPTS_PER_STAGE" not in out  # the command line wins, so nothing was replaced
    assert "N_EVAL_EPISODES" not in out  # the profile's value equals the default: not a replacement
    changed = [k for k, v in T.CPU_PROFILE.items() if k != "N_PROMPTS_PER_STAGE" and v != T.default_config()[k]]
    assert f"the CPU profile replaced {len(changed)} constants" in out
    assert out.count("\n[setup]   ") == len(changed)
    T.build_config([], profile="peft")
    assert capsys.readouterr().out == ""  # the GPU profiles replace nothing


def test_build_config_gpu_profile_keeps_defaults():
    cfg = T.build_config([], profile="peft")
    assert cfg.pop("_PROFILE") == "peft"
    assert cfg == DEFAULTS
    cfg = T.build_config(["--N_STAGES=3"], profile="peft")
    assert cfg["N_STAGES"] == 3 and cfg["USE_LORA"] == DEFAULTS["USE_LORA"]


def test_build_config_rejects_vllm_on_the_cpu_profile_and_bad_overrides():
    with pytest.raises(T.ConfigError) as err:
        T.build_config(["--USE_VLLM=True"], profile="cpu")
    assert str(err.value).startswith("USE_VLLM")
    assert T.build_config(["--USE_VLLM=True"], profile="peft")["USE_VLLM"] is True
    with pytest.raises(T.ConfigError) as err:
        T.build_config(["--N_STAGES=0"], profile="cpu")
    assert str(err.value).startswith("N_STAGES")


def test_a_setting_valid_only_with_the_cpu_profiles_values_waits_for_the_profile(monkeypatch):
    """The first check runs before the hardware is known, on the constants as written: a
    group of 8 does not divide their batch of 4, but does the CPU profile's 16. On a CPU
    it runs; on a GPU it is refused; invalid under both, it is refused at once."""
    cfg = T.build_config(["--NUM_GENERATIONS=8"], profile="cpu")
    assert (cfg["NUM_GENERATIONS"], cfg["PER_DEVICE_BATCH_SIZE"]) == (8, T.CPU_PROFILE["PER_DEVICE_BATCH_SIZE"])
    with pytest.raises(T.ConfigError, match="NUM_GENERATIONS"):
        T.build_config(["--NUM_GENERATIONS=8"], profile="peft")
    with pytest.raises(T.ConfigError, match="NUM_GENERATIONS"):
        T.build_config(["--NUM_GENERATIONS=8", "--DEVICE_PROFILE=peft"])  # refused before any detection
    detected = []
    monkeypatch.setattr(TC, "resolve_profile", lambda *a: detected.append(a) or "cpu")
    with pytest.raises(T.ConfigError, match="NUM_GENERATIONS"):
        T.build_config(["--NUM_GENERATIONS=7"])  # divides neither batch
    assert detected == []  # refused before detection (which imports torch)
    assert T.build_config(["--NUM_GENERATIONS=8"])["NUM_GENERATIONS"] == 8 and len(detected) == 1


def test_on_policy_states_is_validated_and_off_keeps_the_fingerprint():
    for bad in ("--ON_POLICY_STATES=-0.1", "--ON_POLICY_STATES=1.5", "--ON_POLICY_STATES=nan"):
        with pytest.raises(T.ConfigError, match="ON_POLICY_STATES"):
            T.build_config([bad], profile="cpu")
    off = T.build_config(["--ON_POLICY_STATES=0.0"], profile="cpu")
    assert "ON_POLICY_STATES" not in RS.run_settings(off)  # runs recorded before the setting still resume
    assert EV.policy_advance(None, None, off) is None
    on = T.build_config(["--ON_POLICY_STATES=0.5"], profile="cpu")
    assert RS.run_settings(on)["ON_POLICY_STATES"] == 0.5
    assert RS.config_fingerprint(RS.run_settings(on)) != RS.config_fingerprint(RS.run_settings(off))


def test_each_stage_takes_its_own_learning_rate_and_the_last_repeats():
    cfg = {"LEARNING_RATES": [5e-6, 4e-6, 2e-6]}
    assert [TC.stage_learning_rate(cfg, stage) for stage in range(1, 6)] == [5e-6, 4e-6, 2e-6, 2e-6, 2e-6]
    assert TC.stage_learning_rate({"LEARNING_RATES": [5e-5]}, 3) == 5e-5


def test_a_stage_needs_at_least_one_grpo_steps_prompts_and_its_remainder_is_counted():
    """TRL's sampler fills each GRPO step with PER_DEVICE_BATCH_SIZE x GRAD_ACCUM_STEPS x
    processes / NUM_GENERATIONS prompts and drops a partial last one: a stage with fewer
    prompts had no step and crashed after the warm start."""
    cfg = T.build_config([], profile="cpu")  # 16 completions of 4: 4 prompts a step
    assert TC.prompts_per_step(cfg) == 4 and TC.prompts_per_step(cfg, world_size=3) == 12
    with pytest.raises(T.ConfigError, match="^N_PROMPTS_PER_STAGE: must be at least the 4 prompts"):
        T.build_config(["--N_PROMPTS_PER_STAGE=3"], profile="cpu")
    assert TC.dropped_prompts(T.build_config(["--N_PROMPTS_PER_STAGE=7"], profile="cpu")) == 3
    assert TC.dropped_prompts(T.build_config([], profile="cpu")) == 0
    with pytest.raises(T.ConfigError, match="N_PROMPTS_PER_STAGE"):  # 4 completions x 3 processes / 4: 3 a step
        T.build_config(["--N_PROMPTS_PER_STAGE=2"], world_size=3, profile="peft")
    T.build_config(["--N_PROMPTS_PER_STAGE=3"], world_size=3, profile="peft")
