"""The training script's configuration: ``--KEY=value`` overrides typed like their
defaults, validation that names the first bad constant, the device profile, and the CPU
profile's swap-in. Pure (no torch until a profile must be detected); all tested.

The defaults themselves are the constants block at the top of ``scripts/train_trl.py``:
:func:`build_config` takes them as a dict.
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any, Sequence

from lifestack.episodes import MAX_HORIZON
from lifestack.policies import DEMONSTRATORS
from lifestack.training.distributed import log
from lifestack.training.grpo_rewards import REWARD_NAMES
from lifestack.training import seeds

PROFILES = ("auto", "unsloth", "peft", "cpu")


class ConfigError(ValueError):
    """A bad constant or override; the message is one line naming the constant."""


def _coerce(key: str, raw: str, default: Any) -> Any:
    if isinstance(default, str):
        return raw
    if isinstance(default, bool):
        low = raw.strip().lower()
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no"):
            return False
        raise ConfigError(f"{key}: expected a bool (True/False), got {raw!r}")
    if len(raw) > 10_000:
        raise ConfigError(f"{key}: value is too long ({len(raw)} characters)")
    try:
        value = ast.literal_eval(raw.strip())
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        raise ConfigError(f"{key}: expected {type(default).__name__}, got {raw!r}") from None
    return _check_type(key, value, default)


def _check_type(key: str, value: Any, default: Any) -> Any:
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected a bool, got {value!r}")
        return value
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an int, got {value!r}")
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a float, got {value!r}")
        return float(value)
    if isinstance(default, list):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        if default:
            return [_check_type(f"{key}[{i}]", v, default[0]) for i, v in enumerate(value)]
        return list(value)
    if isinstance(default, dict):
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a dict, got {value!r}")
        return value
    return value


def parse_overrides(argv: Sequence[str], defaults: dict[str, Any]) -> dict[str, Any]:
    """``["--KEY=value", ...]`` -> ``{KEY: typed value}``; names are case-insensitive.

    The value must have the default's type (an int where an int is, a list of floats where
    a list of floats is, ...). Unknown keys are rejected with the list of valid ones.
    """
    out: dict[str, Any] = {}
    for arg in argv:
        if not arg.startswith("--") or "=" not in arg:
            raise ConfigError(f"{arg}: overrides look like --KEY=value (e.g. --N_STAGES=3)")
        key, raw = arg[2:].split("=", 1)
        key = key.strip().upper()
        if key not in defaults:
            raise ConfigError(f"{key}: unknown constant; valid: {', '.join(sorted(defaults))}")
        out[key] = _coerce(key, raw, defaults[key])
    return out


def validate_config(cfg: dict[str, Any], world_size: int = 1) -> None:
    """Raise :class:`ConfigError` naming the first bad constant (before any model loads)."""

    def need(ok: bool, key: str, why: str) -> None:
        if not ok:
            raise ConfigError(f"{key}: {why} (got {cfg.get(key)!r})")

    def finite(x: Any) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)

    need(cfg["DEVICE_PROFILE"] in PROFILES, "DEVICE_PROFILE", f"must be one of {', '.join(PROFILES)}")
    need(isinstance(cfg["MODEL_NAME"], str) and cfg["MODEL_NAME"].strip() != "", "MODEL_NAME", "must be a model id or path")
    need(1 <= cfg["N_STAGES"] <= seeds.MAX_STAGES, "N_STAGES",  # each stream of scenarios at its own offset
         f"must be in 1..{seeds.MAX_STAGES} (a later stage's prompts would be the warm start's scenarios)")
    need(1 <= cfg["START_DIFFICULTY"] <= 5, "START_DIFFICULTY", "must be in 1..5")
    need(1 <= cfg["N_PROMPTS_PER_STAGE"] <= seeds.MAX_STAGE_PROMPTS, "N_PROMPTS_PER_STAGE",
         f"must be in 1..{seeds.MAX_STAGE_PROMPTS} (more would be the next stage's prompts)")
    need(finite(cfg["ADVANCE_THRESHOLD"]) and -1.0 < cfg["ADVANCE_THRESHOLD"] < 1.0, "ADVANCE_THRESHOLD",
         "must be in (-1, 1): the task reward's range")
    need(finite(cfg["RETREAT_THRESHOLD"]) and -1.0 <= cfg["RETREAT_THRESHOLD"] < cfg["ADVANCE_THRESHOLD"],
         "RETREAT_THRESHOLD", "must be finite, at least -1.0 (never retreat) and below ADVANCE_THRESHOLD")
    need(1 <= cfg["N_EVAL_PROMPTS"] <= seeds.PER_STAGE, "N_EVAL_PROMPTS",
         f"must be in 1..{seeds.PER_STAGE} (more would be the next stage's held-out prompts)")
    lrs = cfg["LEARNING_RATES"]
    need(len(lrs) >= 1 and all(finite(x) and 0 < x < 1 for x in lrs), "LEARNING_RATES", "must be a non-empty list of rates in (0, 1)")
    need(cfg["NUM_GENERATIONS"] >= 2, "NUM_GENERATIONS", "GRPO needs at least 2 completions per prompt")
    need(cfg["PER_DEVICE_BATCH_SIZE"] >= 1, "PER_DEVICE_BATCH_SIZE", "must be at least 1")
    need(cfg["GRAD_ACCUM_STEPS"] >= 1, "GRAD_ACCUM_STEPS", "must be at least 1")
    batch = completions_per_step(cfg, world_size)
    need(batch % cfg["NUM_GENERATIONS"] == 0, "NUM_GENERATIONS",
         f"PER_DEVICE_BATCH_SIZE x GRAD_ACCUM_STEPS x processes = {batch} must be divisible by it")
    per_step = prompts_per_step(cfg, world_size)
    need(cfg["N_PROMPTS_PER_STAGE"] >= per_step, "N_PROMPTS_PER_STAGE",
         f"must be at least the {per_step} prompts of one GRPO step (PER_DEVICE_BATCH_SIZE x GRAD_ACCUM_STEPS x "
         "processes / NUM_GENERATIONS): a stage with fewer has no step")
    need(8 <= cfg["MAX_COMPLETION_LENGTH"] <= 8192, "MAX_COMPLETION_LENGTH", "must be in 8..8192")
    need(finite(cfg["TEMPERATURE"]) and cfg["TEMPERATURE"] > 0, "TEMPERATURE", "must be > 0")
    need(finite(cfg["BETA"]) and cfg["BETA"] >= 0, "BETA", "must be >= 0")
    w = cfg["REWARD_WEIGHTS"]
    need(isinstance(w, dict) and set(w) <= set(REWARD_NAMES), "REWARD_WEIGHTS",
         f"must map reward names to weights; the names are {', '.join(REWARD_NAMES)}")
    need(all(finite(x) for x in w.values()) and any(x != 0 for x in w.values()), "REWARD_WEIGHTS",
         "must hold finite weights, not all zero")
    need(cfg["LOG_INTERVAL"] >= 1, "LOG_INTERVAL", "must be at least 1")
    need(0 <= cfg["INTEGRITY_PROMPTS"] <= 1000, "INTEGRITY_PROMPTS", "must be in [0, 1000] (0 turns the integrity watch off)")
    need(cfg["SAVE_STEPS"] >= 1, "SAVE_STEPS", "must be at least 1")
    need(1 <= cfg["N_EVAL_EPISODES"] <= seeds.PER_STAGE, "N_EVAL_EPISODES",
         f"must be in 1..{seeds.PER_STAGE} (more would be eval_stages.py's next seed's episodes)")
    need(cfg["LORA_RANK"] >= 1 and cfg["LORA_ALPHA"] >= 1, "LORA_RANK", "LORA_RANK and LORA_ALPHA must be >= 1")
    need(0 < cfg["VLLM_GPU_MEMORY_UTILIZATION"] < 1, "VLLM_GPU_MEMORY_UTILIZATION", "must be in (0, 1)")
    need(cfg["VLLM_MODE"] in ("colocate", "server"), "VLLM_MODE", "must be colocate or server")
    need(1 <= cfg["VLLM_SERVER_PORT"] <= 65535, "VLLM_SERVER_PORT", "must be a TCP port")
    need(cfg["REPORT_TO"] in ("auto", "none", "tensorboard", "wandb"), "REPORT_TO", "must be auto, none, tensorboard or wandb")
    need(0 <= cfg["WARM_START_SFT_STEPS"] <= seeds.MAX_DEMONSTRATIONS, "WARM_START_SFT_STEPS",
         f"must be in 0..{seeds.MAX_DEMONSTRATIONS} (more would draw the integrity watch's scenarios)")
    need(cfg["WARM_START_POLICY"] in DEMONSTRATORS, "WARM_START_POLICY", f"must be one of {', '.join(DEMONSTRATORS)}")
    need(finite(cfg["WARM_START_LR"]) and 0 < cfg["WARM_START_LR"] < 1, "WARM_START_LR", "must be in (0, 1)")
    need(cfg["FEEDBACK_ON_ERROR"] in ("raise", "zero"), "FEEDBACK_ON_ERROR", "must be raise or zero")
    need(cfg["OUTPUT_DIR"].strip() != "" and cfg["LOG_DIR"].strip() != "", "OUTPUT_DIR", "OUTPUT_DIR and LOG_DIR must be set")
    need(isinstance(cfg["CPU_PROFILE"], dict) and set(cfg["CPU_PROFILE"]) <= set(cfg), "CPU_PROFILE",
         "must map constant names to values")
    need(finite(cfg["ON_POLICY_STATES"]) and 0 <= cfg["ON_POLICY_STATES"] <= 1, "ON_POLICY_STATES",
         "must be a share in [0, 1] (0: every prompt is a sample_scenario state)")
    need(1 <= cfg["HORIZON"] <= MAX_HORIZON, "HORIZON", f"must be in 1..{MAX_HORIZON} (1: single decisions; more: episodes)")
    need(cfg["HORIZON"] == 1 or not cfg["USE_VLLM"], "HORIZON",
         "episode mode (HORIZON > 1) generates each turn with transformers, not vLLM: set USE_VLLM=False")
    need(cfg["ENV_URL"] == "" or re.fullmatch(r"https?://[^\s/]+(/\S*)?", cfg["ENV_URL"]) is not None, "ENV_URL",
         "must be empty (in-process) or an http(s) URL such as http://127.0.0.1:8000")
    need(cfg["ENV_URL"] == "" or cfg["HORIZON"] > 1, "ENV_URL",
         "the server plays episodes: set HORIZON > 1 (single decisions are scored in-process from the prompt)")
    if cfg["USE_VLLM"]:
        profile = cfg.get("_PROFILE", cfg["DEVICE_PROFILE"])
        need(profile != "cpu", "USE_VLLM", "vLLM needs a GPU; the CPU profile cannot use it")
        # TRL syncs the merged policy into its vLLM engine every step, which fails for a 4-bit
        # bitsandbytes model, and Unsloth refuses use_vllm without its own fast_inference engine
        # (unsloth/models/rl_replacements.py): refused here, before a model loads
        need(profile != "unsloth", "USE_VLLM",
             "the unsloth profile cannot use TRL's vLLM generation (it syncs weights into vLLM every step, which "
             "fails for a 4-bit model); set USE_VLLM=False, or --DEVICE_PROFILE=peft for LoRA + vLLM")
    need(cfg["USE_LORA"] or cfg.get("_PROFILE", cfg["DEVICE_PROFILE"]) != "unsloth", "USE_LORA",
         "full fine-tuning (USE_LORA=False) needs fp32 master weights, which this script loads in the peft "
         "profile only; use --DEVICE_PROFILE=peft")
    need(cfg["PUSH_TO_HUB"] == "" or re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", cfg["PUSH_TO_HUB"]) is not None,
         "PUSH_TO_HUB", "must be empty (off) or a hub repo id, owner/name")


def completions_per_step(cfg: dict[str, Any], world_size: int = 1) -> int:
    """The completions of one GRPO optimizer step over all processes."""
    return cfg["PER_DEVICE_BATCH_SIZE"] * cfg["GRAD_ACCUM_STEPS"] * world_size


def prompts_per_step(cfg: dict[str, Any], world_size: int = 1) -> int:
    """The prompts of one GRPO step, each with its NUM_GENERATIONS completions. TRL's sampler
    drops a stage's last prompts when they do not fill a step."""
    return max(completions_per_step(cfg, world_size) // cfg["NUM_GENERATIONS"], 1)


def dropped_prompts(cfg: dict[str, Any], world_size: int = 1) -> int:
    """How many of a stage's N_PROMPTS_PER_STAGE prompts TRL never trains on (a partial step)."""
    return cfg["N_PROMPTS_PER_STAGE"] % prompts_per_step(cfg, world_size)


def stage_learning_rate(cfg: dict[str, Any], stage: int) -> float:
    """The learning rate of curriculum stage ``stage`` (1-based): one rate per stage in
    ``LEARNING_RATES``, the last repeating when the list is shorter than the run."""
    rates = cfg["LEARNING_RATES"]
    return rates[min(stage - 1, len(rates) - 1)]


def resolve_profile(requested: str, world_size: int = 1, use_lora: bool = True) -> str:
    """The device profile to run: unsloth / peft on a GPU, cpu otherwise."""
    import importlib.util

    several = "[setup] several processes: Unsloth is single-GPU, using transformers + PEFT"
    if requested == "unsloth" and world_size > 1:
        log(several)
        return "peft"
    if requested != "auto":
        return requested
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    if use_lora and importlib.util.find_spec("unsloth") is not None:
        if world_size == 1:
            return "unsloth"
        log(several)  # installed but not usable here: say why it is not the profile
    return "peft"  # Unsloth is single-GPU and 4-bit LoRA here: else transformers + PEFT


def build_config(argv: Sequence[str], defaults: dict[str, Any], world_size: int = 1,
                 profile: str | None = None) -> dict[str, Any]:
    """``defaults`` (the script's constants) + overrides, the CPU profile's values swapped
    in, then validated.

    ``profile`` skips detection (tests); otherwise it is resolved from the hardware.
    """
    overrides = parse_overrides(argv, defaults)
    cfg = {**defaults, **overrides}
    try:
        validate_config(cfg, world_size)  # catch bad values before touching torch
    except ConfigError as error:
        # a setting valid only with the CPU profile's values (--NUM_GENERATIONS=8 with its
        # batch of 16) waits for the profile to be known; on a GPU the last check raises it
        if profile not in (None, "cpu") or cfg["DEVICE_PROFILE"] not in ("auto", "cpu"):
            raise
        try:
            validate_config(with_cpu_profile(cfg, overrides, defaults)[0], world_size)
        except (ConfigError, AttributeError, KeyError, TypeError):  # invalid either way (or no usable CPU_PROFILE)
            raise error from None
    cfg["_PROFILE"] = profile or resolve_profile(cfg["DEVICE_PROFILE"], world_size, cfg["USE_LORA"])
    if cfg["_PROFILE"] == "cpu":
        cfg, replaced = with_cpu_profile(cfg, overrides, defaults)
        if replaced:  # an edited constant must not be swapped out silently
            log(f"[setup] the CPU profile replaced {len(replaced)} constants (CPU_PROFILE; a --KEY=value "
                "on the command line keeps yours):\n" + "\n".join(replaced))
    validate_config(cfg, world_size)
    return cfg


def with_cpu_profile(cfg: dict[str, Any], overrides: dict[str, Any],
                     defaults: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``cfg`` with the CPU profile's values swapped in, except for keys given on the
    command line, and a line for each value it changed."""
    out, replaced = dict(cfg), []
    for key, value in cfg["CPU_PROFILE"].items():
        if key not in overrides:
            value = _check_type(f"CPU_PROFILE[{key}]", value, defaults[key])
            if value != out[key]:
                replaced.append(f"[setup]   {key}: {out[key]!r} -> {value!r}")
            out[key] = value
    return out, replaced
