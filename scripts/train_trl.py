#!/usr/bin/env python
"""Curriculum GRPO training on LifeStack life conflicts (HuggingFace TRL, Unsloth when present).

    python scripts/train_trl.py                       # the constants below, as they are
    python scripts/train_trl.py --N_STAGES=2 --SEED=7 # nanoGPT-style overrides, type-checked

The model reads a life conflict (metrics, budget, routes, events) and answers with one
JSON action; six reward functions built on ``get_lifestack_evaluation`` score it; after
each stage a held-out evaluation decides whether difficulty rises (1 -> 5). On a machine
without a GPU the script runs a *CPU profile*: a tiny random Qwen2-architecture model,
to check the whole pipeline in minutes. See docs/train_trl.md.

Sections, in order: constants, configuration, model loading, dataset, evaluation + six
rewards, curriculum, evaluation + plot, main.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere: make `lifestack` importable
    sys.path.insert(0, str(ROOT))

from lifestack.actions import ACTION_FIELDS, LifeStackAction, parse_action  # noqa: E402
from lifestack.env import LifeStackEnv  # noqa: E402
from lifestack.episodes import Episode, episode_reward, play, play_many  # noqa: E402
from lifestack.diversity import answer_diversity  # noqa: E402
from lifestack.evaluation import (  # noqa: E402
    EVAL_CACHE_SIZE, FALLBACK_REWARD, PROMPT_CACHE_SIZE, Evaluator, cache_put, parse_completion,
    fallback as _fallback,
)
from lifestack.hacks import SIGNATURES, battery as hack_battery, signatures as hack_signatures  # noqa: E402
from lifestack.prompts import (  # noqa: E402  (several names re-exported: the script is their public face)
    ANSWER_SCHEMA, METADATA_CLOSE, METADATA_OPEN, METADATA_RE as _METADATA_RE, SYSTEM_PROMPT, build_prompt,
    completion_text, fmt_number as _fmt, prompt_text, read_metadata, strip_metadata,
)
from lifestack.reward import P_IMPLAUSIBLE, P_UNAFFORDABLE  # noqa: E402
from lifestack.rollout import make_rollout_func  # noqa: E402
from lifestack.onpolicy import advance_by_policy  # noqa: E402
from lifestack.policies import DEMONSTRATORS  # noqa: E402
from lifestack.scenarios import Scenario, sample_scenario  # noqa: E402

_NAMES_BEFORE_CONSTANTS = set(globals())
# =====================================================================================
# Constants: edit these, or override any of them as --NAME=value on the command line.
# =====================================================================================
MODEL_NAME = "Qwen/Qwen2.5-1.5B-Instruct"  # any chat model with a chat template
DEVICE_PROFILE = "auto"  # auto | unsloth | peft | cpu (auto: unsloth > peft on a GPU, else cpu)
USE_LORA = True  # LoRA adapters (QLoRA with Unsloth); False trains all weights
LORA_RANK = 16
LORA_ALPHA = 32
LOAD_IN_4BIT = True  # Unsloth profile only
MAX_SEQ_LENGTH = 2048  # prompt + completion tokens (Unsloth)
N_STAGES = 5  # curriculum stages; difficulty starts at START_DIFFICULTY and may rise each stage
START_DIFFICULTY = 1
N_PROMPTS_PER_STAGE = 100
ADVANCE_THRESHOLD = 0.6  # held-out mean task reward above which difficulty rises
RETREAT_THRESHOLD = 0.3  # ... below which, two stages running at one difficulty, it falls back one (-1.0: never)
N_EVAL_PROMPTS = 20  # held-out prompts per stage evaluation
LEARNING_RATES = [5e-6, 5e-6, 4e-6, 3e-6, 2e-6]  # one per stage (the last repeats if fewer)
NUM_GENERATIONS = 4  # completions per prompt (the GRPO group)
PER_DEVICE_BATCH_SIZE = 4  # completions per device per step; x processes x accumulation % NUM_GENERATIONS == 0
GRAD_ACCUM_STEPS = 1
MAX_COMPLETION_LENGTH = 256  # tokens (per turn in episode mode)
HORIZON = 1  # decisions per GRPO sample: 1 = one action per prompt; > 1 = closed-loop episodes of up to HORIZON turns
ON_POLICY_STATES = 0.0  # share of each stage's prompts at a state the stage's model reached itself (greedy, 1+ steps on)
ENV_URL = ""  # episode mode: play episodes on a `python -m lifestack.serve` server at this URL ("" = in-process)
TEMPERATURE = 1.0  # sampling temperature for GRPO generations
BETA = 0.0  # KL coefficient (0: no reference model, TRL's default)
REWARD_WEIGHTS = [1.0, 0.5, 2.0, 1.0, 0.5, 0.5]  # format, plausibility, task, milestone, reasoning, feedback
LOG_INTERVAL = 20  # every N-th reward evaluation is appended to LOG_DIR/generations.jsonl
INTEGRITY_PROMPTS = 10  # reward-integrity watch: prompts the hack battery is scored on each stage (0: off)
SAVE_STEPS = 25  # step checkpoints inside a stage (for resume)
OUTPUT_DIR = "./lifestack_model"
LOG_DIR = "training_logs"
PLOT_PATH = "grpo_reward_curve.png"
CURVES_PATH = "grpo_training_curves.png"
CURRICULUM_PLOT_PATH = "grpo_curriculum.png"  # per stage: held-out task reward vs ADVANCE_THRESHOLD, and difficulty
N_EVAL_EPISODES = 50  # final evaluation episodes (difficulty 1 -> 5, domains alternating)
SEED = 42
RESUME = True  # pick up at the first unfinished stage / last step checkpoint (False: move the old run aside)
RESUME_ANY_CONFIG = False  # resume even a run whose recorded settings differ from these
SAVE_MERGED = False  # also save a merged (adapter folded in) copy of the final model
USE_VLLM = False  # TRL's vLLM generation (GPU + `pip install vllm`)
VLLM_MODE = "colocate"  # colocate: vLLM shares each training GPU | server: `trl vllm-serve` elsewhere
VLLM_GPU_MEMORY_UTILIZATION = 0.3  # colocate mode: share of each GPU's memory vLLM may take
VLLM_SERVER_HOST = "127.0.0.1"  # server mode: where `trl vllm-serve` listens
VLLM_SERVER_PORT = 8000
REPORT_TO = "auto"  # auto (tensorboard when installed) | none | tensorboard | wandb
WARM_START_SFT_STEPS = 0  # supervised steps on demonstrations before GRPO
WARM_START_POLICY = "format"  # format: random decisions in the right form (GRPO must find the decisions) | heuristic
WARM_START_LR = 1e-5
FEEDBACK_DB = ""  # outcome-feedback SQLite file; "" = lifestack.feedback.default_db_path()
FEEDBACK_ON_ERROR = "raise"  # raise | zero: what an unreadable feedback database does
CPU_BASE_DIR = ""  # where the CPU profile's tiny model is built; "" = OUTPUT_DIR/cpu_base_model
# The CPU profile swaps in these values (unless given on the command line): small and
# fast, a pipeline check rather than real training.
# The values come from the learning check (docs/learning.md).
CPU_PROFILE = {
    "USE_LORA": False,  # a tiny random model learns nothing through a rank-16 adapter
    "N_PROMPTS_PER_STAGE": 96,  # 24 optimizer steps per stage: with 4, GRPO moved the format, not the decisions;
    # with 12, decisions improved on seeds 1-6 but not enough on seeds 7-9 (docs/learning.md)
    "N_EVAL_PROMPTS": 8,
    "PER_DEVICE_BATCH_SIZE": 16,  # 4 prompts x 4 completions per step: 4-completion steps were too noisy
    "MAX_COMPLETION_LENGTH": 160,  # a complete JSON action is ~140 tokens of the tiny tokenizer
    "TEMPERATURE": 0.7,  # a barely warm-started model breaks its JSON too often at 1.0
    "LEARNING_RATES": [2e-4],
    "N_EVAL_EPISODES": 50,
    "SAVE_STEPS": 2,
    "WARM_START_SFT_STEPS": 1000,  # demonstrations (WARM_START_POLICY): without them no completion parses; after
    # 300 steps 30-40 % still failed to parse and GRPO's signal was mostly format (docs/learning.md)
    "WARM_START_LR": 2e-3,
    "ON_POLICY_STATES": 0.5,  # half the prompts at states the model's own play reached: on seeds 10-12 closed-loop
    # play improved +0.218 with it, +0.146 without; decisions +0.101 and +0.085 (docs/learning.md)
}
# =====================================================================================
CONFIG_KEYS = tuple(n for n in globals() if n.isupper() and not n.startswith("_") and n not in _NAMES_BEFORE_CONSTANTS)

REWARD_NAMES = (
    "reward_format_fn",
    "reward_plausibility_fn",
    "reward_task_success_fn",
    "reward_milestone_fn",
    "reward_reasoning_fn",
    "reward_human_feedback_fn",
)
PROFILES = ("auto", "unsloth", "peft", "cpu")
MAX_HORIZON = 8  # no task lasts longer


# =====================================================================================
# Configuration: defaults, --KEY=value overrides, validation (all pure, all tested)
# =====================================================================================
class ConfigError(ValueError):
    """A bad constant or override; the message is one line naming the constant."""


def default_config() -> dict[str, Any]:
    """The constants block above as a dict (deep-copied lists and dicts)."""
    g = globals()
    return {n: json.loads(json.dumps(g[n])) for n in CONFIG_KEYS}


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
    need(1 <= cfg["N_STAGES"] <= 50, "N_STAGES", "must be in 1..50")
    need(1 <= cfg["START_DIFFICULTY"] <= 5, "START_DIFFICULTY", "must be in 1..5")
    need(cfg["N_PROMPTS_PER_STAGE"] >= 1, "N_PROMPTS_PER_STAGE", "must be at least 1")
    need(finite(cfg["ADVANCE_THRESHOLD"]) and -1.0 < cfg["ADVANCE_THRESHOLD"] < 1.0, "ADVANCE_THRESHOLD",
         "must be in (-1, 1): the task reward's range")
    need(finite(cfg["RETREAT_THRESHOLD"]) and -1.0 <= cfg["RETREAT_THRESHOLD"] < cfg["ADVANCE_THRESHOLD"],
         "RETREAT_THRESHOLD", "must be finite, at least -1.0 (never retreat) and below ADVANCE_THRESHOLD")
    need(cfg["N_EVAL_PROMPTS"] >= 1, "N_EVAL_PROMPTS", "must be at least 1")
    lrs = cfg["LEARNING_RATES"]
    need(len(lrs) >= 1 and all(finite(x) and 0 < x < 1 for x in lrs), "LEARNING_RATES", "must be a non-empty list of rates in (0, 1)")
    need(cfg["NUM_GENERATIONS"] >= 2, "NUM_GENERATIONS", "GRPO needs at least 2 completions per prompt")
    need(cfg["PER_DEVICE_BATCH_SIZE"] >= 1, "PER_DEVICE_BATCH_SIZE", "must be at least 1")
    need(cfg["GRAD_ACCUM_STEPS"] >= 1, "GRAD_ACCUM_STEPS", "must be at least 1")
    batch = cfg["PER_DEVICE_BATCH_SIZE"] * cfg["GRAD_ACCUM_STEPS"] * world_size
    need(batch % cfg["NUM_GENERATIONS"] == 0, "NUM_GENERATIONS",
         f"PER_DEVICE_BATCH_SIZE x GRAD_ACCUM_STEPS x processes = {batch} must be divisible by it")
    need(8 <= cfg["MAX_COMPLETION_LENGTH"] <= 8192, "MAX_COMPLETION_LENGTH", "must be in 8..8192")
    need(finite(cfg["TEMPERATURE"]) and cfg["TEMPERATURE"] > 0, "TEMPERATURE", "must be > 0")
    need(finite(cfg["BETA"]) and cfg["BETA"] >= 0, "BETA", "must be >= 0")
    w = cfg["REWARD_WEIGHTS"]
    need(len(w) == len(REWARD_NAMES) and all(finite(x) for x in w) and any(x != 0 for x in w), "REWARD_WEIGHTS",
         f"must be {len(REWARD_NAMES)} finite numbers, not all zero, in the order {', '.join(REWARD_NAMES)}")
    need(cfg["LOG_INTERVAL"] >= 1, "LOG_INTERVAL", "must be at least 1")
    need(0 <= cfg["INTEGRITY_PROMPTS"] <= 1000, "INTEGRITY_PROMPTS", "must be in [0, 1000] (0 turns the integrity watch off)")
    need(cfg["SAVE_STEPS"] >= 1, "SAVE_STEPS", "must be at least 1")
    need(cfg["N_EVAL_EPISODES"] >= 1, "N_EVAL_EPISODES", "must be at least 1")
    need(cfg["LORA_RANK"] >= 1 and cfg["LORA_ALPHA"] >= 1, "LORA_RANK", "LORA_RANK and LORA_ALPHA must be >= 1")
    need(0 < cfg["VLLM_GPU_MEMORY_UTILIZATION"] < 1, "VLLM_GPU_MEMORY_UTILIZATION", "must be in (0, 1)")
    need(cfg["VLLM_MODE"] in ("colocate", "server"), "VLLM_MODE", "must be colocate or server")
    need(1 <= cfg["VLLM_SERVER_PORT"] <= 65535, "VLLM_SERVER_PORT", "must be a TCP port")
    need(cfg["REPORT_TO"] in ("auto", "none", "tensorboard", "wandb"), "REPORT_TO", "must be auto, none, tensorboard or wandb")
    need(cfg["WARM_START_SFT_STEPS"] >= 0, "WARM_START_SFT_STEPS", "must be >= 0")
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
        need(cfg.get("_PROFILE", cfg["DEVICE_PROFILE"]) != "cpu", "USE_VLLM", "vLLM needs a GPU; the CPU profile cannot use it")
    need(cfg["USE_LORA"] or cfg.get("_PROFILE", cfg["DEVICE_PROFILE"]) != "unsloth", "USE_LORA",
         "full fine-tuning (USE_LORA=False) needs fp32 master weights, which this script loads in the peft "
         "profile only; use --DEVICE_PROFILE=peft")


def resolve_profile(requested: str, world_size: int = 1, use_lora: bool = True) -> str:
    """The device profile to run: unsloth / peft on a GPU, cpu otherwise."""
    import importlib.util

    if requested != "auto":
        return requested
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    if world_size == 1 and use_lora and importlib.util.find_spec("unsloth") is not None:
        return "unsloth"
    return "peft"  # Unsloth is single-GPU and 4-bit LoRA here: else transformers + PEFT


def build_config(argv: Sequence[str], world_size: int = 1, profile: str | None = None) -> dict[str, Any]:
    """Defaults + overrides, the CPU profile's values swapped in, then validated.

    ``profile`` skips detection (tests); otherwise it is resolved from the hardware.
    """
    defaults = default_config()
    overrides = parse_overrides(argv, defaults)
    cfg = {**defaults, **overrides}
    validate_config(cfg, world_size)  # catch bad values before touching torch
    cfg["_PROFILE"] = profile or resolve_profile(cfg["DEVICE_PROFILE"], world_size, cfg["USE_LORA"])
    if cfg["_PROFILE"] == "cpu":
        replaced = []
        for key, value in cfg["CPU_PROFILE"].items():
            if key not in overrides:
                value = _check_type(f"CPU_PROFILE[{key}]", value, defaults[key])
                if value != cfg[key]:
                    replaced.append(f"[setup]   {key}: {cfg[key]!r} -> {value!r}")
                cfg[key] = value
        if replaced:  # an edited constant must not be swapped out silently
            log(f"[setup] the CPU profile replaced {len(replaced)} constants (CPU_PROFILE; a --KEY=value "
                "on the command line keeps yours):\n" + "\n".join(replaced))
    validate_config(cfg, world_size)
    return cfg


# =====================================================================================
# Distributed helpers (single process unless launched by torchrun / accelerate)
# =====================================================================================
def world_info() -> tuple[int, int]:
    """(rank, world size) from the launcher's environment."""
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def is_main_process() -> bool:
    return world_info()[0] == 0


def broadcast_object(obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank (identity in a single process)."""
    if world_info()[1] == 1:
        return obj
    import torch.distributed as dist

    if not dist.is_initialized():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier() -> None:
    if world_info()[1] > 1:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.barrier()


def init_distributed() -> None:
    """Join the process group early (gloo on CPU, NCCL on GPUs) so barriers work before
    the first trainer exists; a no-op in a single process."""
    if world_info()[1] > 1:
        from accelerate import PartialState

        PartialState()


def log(msg: str) -> None:
    if is_main_process():
        print(msg, flush=True)


# =====================================================================================
# Model loading
# =====================================================================================
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Small enough that a CPU step takes well under a second on 2 cores with ~900-token prompts,
# large enough to learn the JSON answer format from a warm start (~0.22M parameters).
TINY_MODEL_SHAPE = dict(hidden_size=64, intermediate_size=192, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, max_position_embeddings=4096)
TINY_VOCAB_SIZE = 2048


def tokenizer_corpus(n: int = 300, seed: int = 12345) -> list[str]:
    """LifeStack text for the offline tokenizer: prompts and heuristic answers."""
    from lifestack.policies import heuristic

    texts = []
    env = LifeStackEnv()
    for i in range(n):
        sc = sample_scenario(seed + i, 1 + i % 5)
        messages = build_prompt(sc.task, sc.conflict, sc.state, sc.difficulty, sc.seed)
        texts.extend(m["content"] for m in messages)
        env.restore(sc.task, sc.state)
        texts.append(heuristic(env))
    return texts


def build_tiny_tokenizer(out_dir: Path, vocab_size: int = TINY_VOCAB_SIZE):
    """A byte-level BPE trained offline on LifeStack text, saved as a Qwen2 tokenizer.

    It is trained with Qwen2's own normaliser (NFC) and regex pre-tokenizer because
    transformers rebuilds a qwen2 tokenizer with those on load: anything else would
    change the token ids after a save/load round trip.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX, Qwen2Tokenizer

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(tokenizer_corpus(), trainer=trainer)
    model = json.loads(tok.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    hf_tok = Qwen2Tokenizer(vocab=model["vocab"], merges=merges, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                            additional_special_tokens=["<|im_start|>", "<|im_end|>"])
    hf_tok.chat_template = CHAT_TEMPLATE
    hf_tok.save_pretrained(out_dir)
    return hf_tok


def build_tiny_model(out_dir: Path, seed: int) -> None:
    """Build (once) the CPU profile's random-weight Qwen2 model + tokenizer in ``out_dir``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    if (out_dir / "config.json").exists() and (out_dir / "tokenizer_config.json").exists():
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    tok = build_tiny_tokenizer(out_dir)
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(tok), tie_word_embeddings=True, bos_token_id=None,
                         eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
                         pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"), **TINY_MODEL_SHAPE)
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    model.save_pretrained(out_dir)


def cpu_banner(cfg: dict[str, Any], base_dir: Path) -> str:
    bar = "=" * 78
    return "\n".join([
        bar,
        "  CPU PROFILE: PIPELINE CHECK, NOT REAL TRAINING",
        f"  No GPU found, so {cfg['MODEL_NAME']} is replaced by a tiny random-weight",
        f"  Qwen2-architecture model built offline in {base_dir}.",
        "  Every stage, checkpoint, log and plot is produced, but the numbers say nothing",
        "  about the real model. To train for real, run this script on a CUDA GPU",
        "  (Colab: see README.md) and, for 4-bit QLoRA, `pip install unsloth`.",
        bar,
    ])


def choose_precision(capability: tuple[int, int] | None) -> str:
    """Compute precision for a CUDA device of compute ``capability`` (``(major, minor)``;
    ``None``: no GPU, so fp32).

    bf16 only where the hardware has it (Ampere and later, major >= 8). A T4 (7.5) answers
    True to ``torch.cuda.is_bf16_supported()`` but only emulates bf16, so it gets fp16.
    """
    if capability is None:
        return "fp32"
    return "bf16" if capability[0] >= 8 else "fp16"


def device_precision(cfg: dict[str, Any]) -> str:
    """This run's compute precision: fp32 in the CPU profile, else from the GPU's capability."""
    if cfg["_PROFILE"] == "cpu":
        return "fp32"
    import torch

    if not torch.cuda.is_available():
        return "fp32"
    return choose_precision(tuple(torch.cuda.get_device_capability()))


def weight_precision(precision: str, lora: bool) -> str:
    """The dtype weights are loaded in. Trained weights are always fp32 master weights (the
    half-precision compute comes from autocast, TRL's bf16/fp16 flags): at a learning rate
    of 5e-6 most bf16 weight updates round away. Only a LoRA's frozen base may sit in the
    compute precision; its adapters are fp32 (:func:`_fp32_trainable`)."""
    return precision if lora else "fp32"


def torch_dtype(precision: str):
    import torch

    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def _fp32_trainable(model) -> None:
    """Cast every trainable parameter to fp32 (PEFT usually does so already for adapters)."""
    import torch

    for param in model.parameters():
        if param.requires_grad and param.dtype != torch.float32:
            param.data = param.data.float()


def _apply_lora(model, cfg: dict[str, Any]):
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=cfg["LORA_RANK"], lora_alpha=cfg["LORA_ALPHA"], lora_dropout=0.0, task_type="CAUSAL_LM",
                        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    return get_peft_model(model, config)


def import_unsloth():
    """Import Unsloth, or stop with an install hint. Unsloth patches transformers, trl and
    peft when it is imported, so it must come before them: ``main`` calls this first."""
    try:
        import unsloth
    except ImportError as exc:
        raise SystemExit(f"DEVICE_PROFILE=unsloth but Unsloth is not importable ({exc}); "
                         "install it with `pip install unsloth` or use --DEVICE_PROFILE=peft") from None
    return unsloth


def load_model(cfg: dict[str, Any], init_from: str | Path | None = None, banner: bool = True, collective: bool = True):
    """(model, tokenizer) for the configured profile.

    ``init_from`` is a stage directory saved earlier (resume): its weights, or its LoRA
    adapter on top of the base model, are loaded instead of the fresh base.
    ``collective=False`` when only this process loads (rank 0's final evaluation): no
    barrier then, since the other ranks may have finished.
    """
    profile = cfg["_PROFILE"]
    precision = device_precision(cfg)
    if profile == "unsloth":
        FastLanguageModel = import_unsloth().FastLanguageModel
        model, tok = FastLanguageModel.from_pretrained(str(init_from or cfg["MODEL_NAME"]), max_seq_length=cfg["MAX_SEQ_LENGTH"],
                                                       load_in_4bit=cfg["LOAD_IN_4BIT"], dtype=torch_dtype(precision))
        if init_from is None and cfg["USE_LORA"]:
            model = FastLanguageModel.get_peft_model(
                model, r=cfg["LORA_RANK"], lora_alpha=cfg["LORA_ALPHA"], lora_dropout=0.0, random_state=cfg["SEED"],
                target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                use_gradient_checkpointing="unsloth")
        _fp32_trainable(model)
        return model, _prepare_tokenizer(tok)

    import torch
    from transformers import AutoTokenizer

    if profile == "cpu":
        base = Path(cfg["CPU_BASE_DIR"] or Path(cfg["OUTPUT_DIR"]) / "cpu_base_model")
        if is_main_process():
            build_tiny_model(base, cfg["SEED"])
        if collective:
            barrier()  # the other ranks load what rank 0 built
        if banner:
            log(cpu_banner(cfg, base))
        name, device = str(base), "cpu"
    else:
        if not torch.cuda.is_available():
            raise SystemExit("DEVICE_PROFILE=peft needs a CUDA GPU; use --DEVICE_PROFILE=cpu for a pipeline check")
        name, device = cfg["MODEL_NAME"], "cuda"
    tok = AutoTokenizer.from_pretrained(name)
    return load_transformers_model(name, cfg, precision, device, init_from), _prepare_tokenizer(tok)


def load_transformers_model(name: str, cfg: dict[str, Any], precision: str, device: str,
                            init_from: str | Path | None = None):
    """The transformers (+ PEFT) model of the peft and cpu profiles, trainable weights fp32.

    ``init_from``: a stage directory (full weights, or a LoRA adapter on top of ``name``).
    """
    from transformers import AutoModelForCausalLM

    is_adapter = init_from is not None and (Path(init_from) / "adapter_config.json").exists()
    dtype = torch_dtype(weight_precision(precision, cfg["USE_LORA"] or is_adapter))
    model = AutoModelForCausalLM.from_pretrained(str(init_from) if init_from and not is_adapter else name, dtype=dtype)
    model.to(device)
    if is_adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(init_from), is_trainable=True)
    elif cfg["USE_LORA"]:
        model = _apply_lora(model, cfg)
    _fp32_trainable(model)
    return model


def _prepare_tokenizer(tok):
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"  # generation pads on the left
    return tok


# =====================================================================================
# Dataset: seeded conversational prompts carrying the state they were written from
# =====================================================================================
def generate_dataset(n_prompts: int, difficulty: int | None = None, seed: int = SEED,
                     advance: Callable[[list[Scenario]], list[Scenario]] | None = None):
    """``n_prompts`` seeded conversational prompts as a ``datasets.Dataset``.

    Item ``i`` is drawn from ``random.Random(seed + i)`` and records its seed and
    difficulty; ``difficulty=None`` cycles 1..5. Same arguments, identical dataset.
    ``advance`` may move the scenarios on before they are rendered (the on-policy states
    of ``ON_POLICY_STATES``: :func:`lifestack.onpolicy.advance_by_policy`).
    """
    from datasets import Dataset

    scenarios = [sample_scenario(seed + i, difficulty if difficulty is not None else 1 + i % 5) for i in range(n_prompts)]
    if advance is not None:
        scenarios = advance(scenarios)
    rows: dict[str, list] = {"prompt": [], "difficulty": [], "domain": [], "seed": []}
    for sc in scenarios:
        rows["prompt"].append(build_prompt(sc.task, sc.conflict, sc.state, sc.difficulty, sc.seed))
        rows["difficulty"].append(sc.difficulty)
        rows["domain"].append(sc.task.domain)
        rows["seed"].append(sc.seed)
    return Dataset.from_dict(rows)


def policy_advance(model, tokenizer, cfg: dict[str, Any]) -> Callable[[list[Scenario]], list[Scenario]] | None:
    """ON_POLICY_STATES > 0: move that share of a stage's scenarios on by ``model``'s own
    greedy answers (the play the final evaluation measures). None when off.

    Rank 0 plays; the other ranks get its answers (plain strings: scenarios hold
    mappingproxy tables that do not pickle) and replay them through the same environment,
    which is deterministic, so every process trains on one dataset."""
    share = cfg["ON_POLICY_STATES"]
    if share <= 0:
        return None

    def advance(scenarios: list[Scenario]) -> list[Scenario]:
        answers: list[list[str]] = []
        moved = None
        if is_main_process():
            core = _unwrap(model)

            def play(prompts: list[list[dict]]) -> list[str]:
                answers.append(generate_completions(core, tokenizer, prompts, cfg["MAX_COMPLETION_LENGTH"]))
                return answers[-1]

            t0 = time.perf_counter()
            moved = advance_by_policy(scenarios, play, share)
            steps = [b.state.step - a.state.step for a, b in zip(scenarios, moved)]
            log(f"[on-policy] {sum(k > 0 for k in steps)} of {len(steps)} prompts moved on by the model's own greedy "
                f"answers ({sum(steps)} steps, {time.perf_counter() - t0:.1f}s)")
        answers = broadcast_object(answers)
        if moved is None:
            batches = iter(answers)
            moved = advance_by_policy(scenarios, lambda prompts: next(batches), share)
        return moved

    return advance


# =====================================================================================
# Evaluation + the six reward functions
# =====================================================================================
# The evaluation cache lives in lifestack.evaluation; these names are its two caches.
EVALUATOR = Evaluator(PROMPT_CACHE_SIZE, EVAL_CACHE_SIZE)
_PROMPT_CACHE = EVALUATOR.prompts  # prompt text -> (task, state, meta) or error; insertion-ordered
_EVAL_CACHE = EVALUATOR.evaluations  # (prompt, completion) -> evaluation
_prompt_context = EVALUATOR.context
_cache_put = cache_put
RUN_CONTEXT: dict[str, Any] = {"stage": 0, "difficulty": 0, "step": 0, "phase": "train", "log_dir": LOG_DIR,
                               "log_interval": LOG_INTERVAL, "evaluations": 0, "reward_seconds": 0.0}


def get_lifestack_evaluation(completion: Any, prompt: Any) -> dict[str, Any]:
    """Score one completion against the state its prompt was written from.

    Returns ``{"reward": float in [-1, 1], "breakdown": dict, "action": LifeStackAction | None}``;
    on any parse or environment failure ``{"reward": -0.5, "breakdown": {"error": ...},
    "action": None}``. Never raises. Only the prompt's metadata is read: a completion
    cannot change the state it is scored against (lifestack.evaluation).
    """
    try:
        ptext, ctext = prompt_text(prompt), completion_text(completion)
        hit = _EVAL_CACHE.get((ptext, ctext))
        if hit is not None:
            return hit
        result = EVALUATOR.evaluate(ptext, ctext)
        if RUN_CONTEXT["phase"] != "integrity":  # the watch's own hack texts are not the policy's
            _count_signatures(result)
            if not RUN_CONTEXT.get("episodes"):  # episode mode logs whole episodes (_maybe_log_episode)
                _maybe_log_generation(ptext, ctext, result)
        return result
    except Exception as exc:  # never let one completion crash a training run
        return _fallback(f"evaluation error: {type(exc).__name__}: {exc}")


_LOG_FILE: dict[str, Any] = {"path": None, "fh": None, "inode": None}


def _generation_log(path: str):
    """The open generations.jsonl of this run (opened once per path: an open per line
    cost more than the rest of a logged evaluation)."""
    fh = _LOG_FILE["fh"]
    if fh is not None and _LOG_FILE["path"] == path and not fh.closed:
        try:  # still the same file? (a fresh run deletes it; so may a user). One syscall.
            if os.stat(path).st_ino == _LOG_FILE["inode"]:
                return fh
        except OSError:
            pass
    close_generation_log()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a", encoding="utf-8")
    _LOG_FILE.update(fh=fh, path=path, inode=os.fstat(fh.fileno()).st_ino)
    return fh


def close_generation_log() -> None:
    fh = _LOG_FILE["fh"]
    _LOG_FILE.update(fh=None, path=None, inode=None)
    if fh is not None:
        try:
            fh.close()
        except OSError:
            pass


def _count_signatures(result: dict) -> None:
    """Count the hack families this fresh evaluation shows (lifestack.hacks.signatures)."""
    counts = RUN_CONTEXT.setdefault("signatures", {})
    counts["completions"] = counts.get("completions", 0) + 1
    for name in hack_signatures(result.get("action"), result["breakdown"]):
        counts[name] = counts.get(name, 0) + 1


def _maybe_log_generation(ptext: str, ctext: str, result: dict) -> None:
    """Append every LOG_INTERVAL-th fresh evaluation to generations.jsonl (main process only)."""
    RUN_CONTEXT["evaluations"] += 1
    if RUN_CONTEXT["evaluations"] % RUN_CONTEXT["log_interval"] or not is_main_process():
        return
    head = strip_metadata(ptext).strip()[:300]
    action = result.get("action")
    # All six rewards of this completion (the evaluation is cached: no second env step)
    # and the weighted total GRPO optimises, named as such.
    components = reward_vector(ctext, ptext)
    weights = RUN_CONTEXT.get("reward_weights") or REWARD_WEIGHTS
    line = {
        "time": round(time.time(), 3), "phase": RUN_CONTEXT["phase"], "step": RUN_CONTEXT["step"],
        "stage": RUN_CONTEXT["stage"], "difficulty": RUN_CONTEXT["difficulty"], "evaluation": RUN_CONTEXT["evaluations"],
        "prompt_head": head, "completion": ctext[:4000], "action": action.to_dict() if action else None,
        "grpo_reward": weighted_reward(components, weights), "grpo_rewards": components,
        "grpo_weights": dict(zip(REWARD_NAMES, weights)),
        "task_reward": result["reward"], "task_breakdown": result["breakdown"],
    }
    _write_log_line(line)


def _maybe_log_episode(episode: Episode) -> None:
    """Append every LOG_INTERVAL-th played episode to generations.jsonl (episode mode):
    one line per episode, its turns in order, each with its own six rewards."""
    RUN_CONTEXT["episodes_played"] = RUN_CONTEXT.get("episodes_played", 0) + 1
    if RUN_CONTEXT["episodes_played"] % RUN_CONTEXT["log_interval"] or not is_main_process():
        return
    weights = RUN_CONTEXT.get("reward_weights") or REWARD_WEIGHTS
    record = episode.record()  # an in-process Episode or a RemoteEpisode alike
    was = RUN_CONTEXT.get("episodes")
    RUN_CONTEXT["episodes"] = True  # the turns are logged here, inside the episode's line, not one by one
    try:
        turns = []
        for t, logged in zip(episode.turns, record["turns"]):
            # one evaluation per turn, cached: the reward functions reuse it (or this reuses theirs)
            components = reward_vector(t.completion, t.prompt)
            turns.append({"prompt_head": strip_metadata(t.prompt).strip()[:300], **logged,
                          "grpo_reward": weighted_reward(components, weights), "grpo_rewards": components})
        total = episode_reward_vector(episode)
    finally:
        RUN_CONTEXT["episodes"] = was
    _write_log_line({
        "time": round(time.time(), 3), "phase": RUN_CONTEXT["phase"], "step": RUN_CONTEXT["step"],
        "stage": RUN_CONTEXT["stage"], "difficulty": RUN_CONTEXT["difficulty"],
        "episode": RUN_CONTEXT["episodes_played"], "horizon": record["horizon"], "seed": record["seed"],
        "domain": record["domain"], "prompt_head": turns[0]["prompt_head"] if turns else "",
        "turns": turns, "outcome": record["outcome"],
        "grpo_reward": weighted_reward(total, weights), "grpo_rewards": total,
        "grpo_weights": dict(zip(REWARD_NAMES, weights)), "task_reward": total[OUTCOME_REWARD],
    })


def _write_log_line(line: dict) -> None:
    try:
        fh = _generation_log(os.path.join(RUN_CONTEXT["log_dir"], "generations.jsonl"))
        fh.write(json.dumps(line, default=str) + "\n")
        fh.flush()  # a line is whole on disk once written: a killed run leaves valid JSONL
    except OSError as exc:  # a full disk must not change a reward
        if not RUN_CONTEXT.get("log_warned"):
            print(f"[log] could not write generations.jsonl: {exc}", file=sys.stderr)
            RUN_CONTEXT["log_warned"] = True


def _evaluations(completions: Sequence[Any], prompts: Sequence[Any] | None, kwargs: dict) -> list[dict]:
    state = kwargs.get("trainer_state")
    if state is not None and getattr(state, "global_step", None) is not None:
        RUN_CONTEXT["step"] = state.global_step
    prompts = prompts if prompts is not None else kwargs.get("prompt") or [""] * len(completions)
    return [get_lifestack_evaluation(c, p) for c, p in zip(completions, prompts)]


def _clip(values: Sequence[Any]) -> list[float]:
    # NaN first: min(1.0, nan) would silently turn it into the best possible reward
    return [0.0 if x != x else max(-1.0, min(1.0, x)) for x in map(float, values)]


# In episode mode (HORIZON > 1) this reward also carries the trajectory's outcome
# (lifestack.episodes.episode_reward); the other five are the mean over the turns.
OUTCOME_REWARD = "reward_task_success_fn"
EPISODE_FIELDS = ("turns", "episode_outcome", "episode")  # what the episode rollout adds to a reward call


def _per_episode(fn: Callable, kwargs: dict) -> list[float]:
    """``fn`` on every turn of every episode (each turn against the state it answered),
    aggregated per episode."""
    turns, outcomes = kwargs["turns"], kwargs.get("episode_outcome")
    rest = {k: v for k, v in kwargs.items() if k not in EPISODE_FIELDS and k not in ("prompts", "completions", "prompt")}
    flat = [pair for episode in turns for pair in episode]
    # per_turn: each turn is scored by what it did; the played continuation and the
    # outcome below are the episode's own (lifestack.value: nothing is counted twice)
    values = _clip(fn([c for _, c in flat], prompts=[p for p, _ in flat], per_turn=True, **rest))
    out, i = [], 0
    for k, episode in enumerate(turns):
        outcome = outcomes[k] if outcomes is not None and fn.__name__ == OUTCOME_REWARD else None
        out.append(episode_reward(values[i:i + len(episode)], outcome))
        i += len(episode)
    return out


def _timed(fn: Callable) -> Callable:
    """Count the wall time spent in reward code (reported per stage); clip to [-1, 1];
    in episode mode score each turn and aggregate per episode."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            if kwargs.get("turns") is not None:
                out = _per_episode(fn, kwargs)
            else:
                out = fn(*args, **{k: v for k, v in kwargs.items() if k not in EPISODE_FIELDS})
        finally:
            RUN_CONTEXT["reward_seconds"] += time.perf_counter() - t0
        return _clip(out)

    return wrapper


REFUSAL_RE = re.compile(r"\b(i can(?:no|')t|i am unable|i'm unable|as an ai|i won't|sorry)\b", re.I)


def format_score(text: str) -> float:
    """Graded JSON compliance: empty/refusal < unparseable < partial < complete.

    Unparseable text scores at most -0.1 and a parsed action at least +0.1, so format
    alone already ranks every schema-valid answer above every unparseable one.
    """
    action, reason = parse_completion(text)
    text = strip_metadata(text)
    if action is None and (not text.strip() or ("{" not in text and REFUSAL_RE.search(text))):
        return -1.0
    if action is None:
        from lifestack.actions import find_json_object

        obj, error, _ = find_json_object(text)
        if error is not None or not isinstance(obj, dict):
            return -0.6
        present = sum(1 for f in ACTION_FIELDS if f in obj) / len(ACTION_FIELDS)
        return -0.4 + 0.3 * present  # a partial object: closer to the schema, less bad
    return valid_format_score(action)


# What a forgiven note costs the format score (any other note: FORMAT_NOTE_COST). A
# clamped delta costs nothing here (the claim envelope is economics, not format, and a
# deduction would make 19.9 and 20.1 score apart).
FORMAT_NOTE_COST = 0.1
FORMAT_COSTS = {"missing": 0.15, "trailing_text": 0.2, "clamped": 0.0}


def valid_format_score(action: LifeStackAction) -> float:
    """The format score of a parsed action: 1, less what the parser had to forgive (>= 0.1)."""
    score = 1.0
    for note in action.notes:
        score -= FORMAT_COSTS.get(note.split(":", 1)[0], FORMAT_NOTE_COST)
    return max(score, 0.1)


@_timed
def reward_format_fn(completions: Sequence[Any], prompts: Sequence[Any] | None = None, **kwargs) -> list[float]:
    """JSON format compliance, graded: -1 empty/refusal, -0.6 no JSON, -0.4..-0.1 partial, 0.1..1 valid."""
    prompts = prompts if prompts is not None else kwargs.get("prompt")
    if not prompts or len(prompts) != len(completions):
        return [format_score(completion_text(c)) for c in completions]
    # With prompts, reuse the action the (shared, cached) evaluation parsed: one parse per
    # completion for all six rewards. The evaluation parses the same metadata-stripped text.
    return [valid_format_score(ev["action"]) if ev["action"] is not None else format_score(completion_text(c))
            for c, ev in zip(completions, _evaluations(completions, prompts, kwargs))]


@_timed
def reward_plausibility_fn(completions: Sequence[Any], prompts: Sequence[Any] | None = None, **kwargs) -> list[float]:
    """Claims must be paid for: minus the unpaid claimed goodness points / UNPAID_FULL_AT (0 when
    all is paid or nothing is claimed; never positive, so claiming is never worth anything by
    itself); over budget: minus the overspend penalty's share; -1 for negative costs or
    unparseable text."""
    out = []
    for ev in _evaluations(completions, prompts, kwargs):
        action, b = ev["action"], ev["breakdown"]
        if action is None:
            out.append(-1.0)
        elif any(n.startswith("negative_cost") for n in action.notes):
            out.append(-1.0)
        elif "penalty.unaffordable" in b:
            out.append(float(b["penalty.unaffordable"]) / -P_UNAFFORDABLE)
        else:  # the task reward's own implausible penalty (a ramp of the unpaid points), as a share
            out.append(float(b.get("penalty.implausible", 0.0)) / -P_IMPLAUSIBLE)
    return out


@_timed
def reward_task_success_fn(completions: Sequence[Any], prompts: Sequence[Any] | None = None, **kwargs) -> list[float]:
    """The decision's task reward: its step reward blended with the value of the episode it
    starts (lifestack.value); per turn of a played episode (``per_turn``) the step reward
    alone. -0.5 when it cannot be evaluated."""
    key = "step_reward" if kwargs.get("per_turn") else "reward"
    return [float(ev.get(key, ev["reward"])) for ev in _evaluations(completions, prompts, kwargs)]


@_timed
def reward_milestone_fn(completions: Sequence[Any], prompts: Sequence[Any] | None = None, **kwargs) -> list[float]:
    """Milestone progress made by the action: its share of the best per-step milestone reward."""
    out = []
    for ev in _evaluations(completions, prompts, kwargs):
        b = ev["breakdown"]
        if ev["action"] is None:
            out.append(-0.5)
        elif "penalty.dead_end" in b:
            out.append(-0.4)  # a dead end, but still a valid answer: above unparseable text
        else:
            out.append(float(b.get("component.milestone", 0.0)))
    return out


@_timed
def reward_reasoning_fn(completions: Sequence[Any], prompts: Sequence[Any] | None = None, **kwargs) -> list[float]:
    """Planning coherence of the reasoning with state, action and route (0..1); keyword
    stuffing -0.4; unparseable -0.5."""
    out = []
    for ev in _evaluations(completions, prompts, kwargs):
        b = ev["breakdown"]
        if ev["action"] is None:
            out.append(-0.5)
        elif "penalty.keyword_stuffing" in b:
            out.append(-0.4)
        else:
            out.append(float(b.get("component.reasoning", 0.0)))
    return out


_FEEDBACK: dict[str, Any] = {"store": None, "path": None, "on_error": "raise"}


def configure_feedback(path: str | None, on_error: str = "raise") -> None:
    """Choose the feedback database (opened lazily, once per process)."""
    _FEEDBACK.update(store=None, path=path or None, on_error=on_error)


def feedback_store():
    if _FEEDBACK["store"] is None:
        from lifestack.feedback import FeedbackStore

        _FEEDBACK["store"] = FeedbackStore(_FEEDBACK["path"])
    return _FEEDBACK["store"]


@_timed
def reward_human_feedback_fn(completions: Sequence[Any], prompts: Sequence[Any] | None = None, **kwargs) -> list[float]:
    """Agreement with recorded outcomes of this situation (conflict; or task family under the
    same pressured domain; weighted by difficulty); 0 where none apply; -1 unparseable."""
    out = []
    try:
        store = feedback_store()
    except Exception:
        if _FEEDBACK["on_error"] != "zero":
            raise
        return [0.0] * len(completions)
    for ev in _evaluations(completions, prompts, kwargs):
        action = ev["action"]
        if action is None:
            out.append(-1.0)  # unparseable text takes every reward's lowest score
            continue
        conflict_id, family, pressured, difficulty = ev["situation"]
        score = store.score(conflict_id, action.action_type, action.target_domain,
                            pressured_domain=pressured, difficulty=difficulty, family=family)
        out.append(0.0 if score is None else float(score))
    return out


REWARD_FUNCS = [reward_format_fn, reward_plausibility_fn, reward_task_success_fn,
                reward_milestone_fn, reward_reasoning_fn, reward_human_feedback_fn]
assert tuple(f.__name__ for f in REWARD_FUNCS) == REWARD_NAMES  # REWARD_WEIGHTS follow this order


def reward_vector(completion: Any, prompt: Any) -> dict[str, float]:
    """All six rewards for one completion (evaluation and logging helper)."""
    return {f.__name__: f([completion], prompts=[prompt])[0] for f in REWARD_FUNCS}


def episode_reward_vector(episode: Episode) -> dict[str, float]:
    """All six rewards of a played episode, aggregated as GRPO sees them in episode mode."""
    turns = [[[t.prompt, t.completion] for t in episode.turns]]
    outcome = [episode.outcome()["score"]]
    return {f.__name__: f([""], prompts=[""], turns=turns, episode_outcome=outcome)[0] for f in REWARD_FUNCS}


def weighted_reward(rewards: dict[str, float], weights: Sequence[float] = REWARD_WEIGHTS) -> float:
    """The total GRPO optimises for one completion: sum of weight x reward, in REWARD_NAMES order."""
    return sum(w * rewards[name] for name, w in zip(REWARD_NAMES, weights))


# =====================================================================================
# Generation, warm start and the curriculum
# =====================================================================================
def generate_completions(model, tokenizer, prompts: Sequence[list[dict]], max_new_tokens: int, batch_size: int = 16,
                         temperature: float = 0.0, seed: int = 0) -> list[str]:
    """Completions for conversational prompts: greedy (``temperature=0``), or sampled with
    a fixed torch seed, so evaluations are reproducible either way."""
    import torch

    sampling = {"do_sample": False}
    if temperature > 0:
        sampling = {"do_sample": True, "temperature": temperature, "top_p": 1.0, "top_k": 0}
        torch.manual_seed(seed)

    model_ = model
    was_training = model_.training
    model_.eval()
    out: list[str] = []
    device = next(model_.parameters()).device
    try:
        for i in range(0, len(prompts), batch_size):
            chunk = prompts[i:i + batch_size]
            texts = [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in chunk]
            enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
            with torch.no_grad():
                gen = model_.generate(**enc, max_new_tokens=max_new_tokens, **sampling,
                                      pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
            new = gen[:, enc["input_ids"].shape[1]:]
            out.extend(tokenizer.batch_decode(new, skip_special_tokens=True))
    finally:
        if was_training:
            model_.train()
    return out


def warm_start(model, tokenizer, cfg: dict[str, Any], *, batch_size: int = 4, first_demo: int = 0) -> list[float]:
    """A short supervised pass on demonstrations so a tiny model emits JSON.

    WARM_START_SFT_STEPS steps of ``batch_size`` demonstrations at WARM_START_LR, written
    by ``lifestack.policies.DEMONSTRATORS[WARM_START_POLICY]``: ``format`` (random
    decisions in the right form, honest costs: the format an instruction model brings,
    so every decision gain is GRPO's) or ``heuristic`` (the near-optimal decisions
    themselves). Loss is on the completion tokens only. In episode mode the
    demonstrations are the demonstrator's turns of played episodes, each after its
    conversation so far (so the model has seen environment turns). ``first_demo`` skips that many demonstration scenarios (the
    learning check's imitation control continues on scenarios the warm start never saw).
    Returns the loss per step.
    """
    import random

    import torch

    steps = cfg["WARM_START_SFT_STEPS"]
    if steps <= 0:
        return []
    demonstrator = DEMONSTRATORS[cfg["WARM_START_POLICY"]]
    rng = random.Random(cfg["SEED"] + 777)
    env = LifeStackEnv()
    pairs = []
    for i in range(first_demo, first_demo + max(64, steps * batch_size // 4)):
        sc = sample_scenario(cfg["SEED"] + 5_000_000 + i, 1 + i % 5)
        demo_rng = random.Random(cfg["SEED"] + 6_000_000 + i)  # Random(seed + index), as every generated item
        if cfg["HORIZON"] > 1:  # demonstrations of every turn, each in its conversation so far
            ep = play(Episode.from_scenario(sc, cfg["HORIZON"]), lambda e: demonstrator(e.env, demo_rng))
            pairs += [(ep.messages[:2 + 2 * k], t.completion) for k, t in enumerate(ep.turns)]
            continue
        env.restore(sc.task, sc.state)
        pairs.append((build_prompt(sc.task, sc.conflict, sc.state, sc.difficulty, sc.seed), demonstrator(env, demo_rng)))
    device = next(model.parameters()).device
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg["WARM_START_LR"])
    model.train()
    losses = []
    for step in range(steps):
        batch = rng.sample(pairs, min(batch_size, len(pairs)))
        ids, labels = [], []
        for messages, answer in batch:
            p = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            p_ids = tokenizer(p, add_special_tokens=False)["input_ids"]
            a_ids = tokenizer(answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            ids.append(p_ids + a_ids)
            labels.append([-100] * len(p_ids) + a_ids)
        width = max(len(x) for x in ids)
        pad = tokenizer.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(x)) + x for x in ids], device=device)
        label_t = torch.tensor([[-100] * (width - len(x)) + x for x in labels], device=device)
        mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in ids], device=device)
        loss = model(input_ids=input_ids, attention_mask=mask, labels=label_t).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        losses.append(float(loss.detach()))
        if step % 20 == 0 or step == steps - 1:
            log(f"[warm start] step {step + 1}/{steps} loss {losses[-1]:.3f}")
    return losses


def held_out_prompts(n: int, difficulty: int, seed: int) -> list[list[dict]]:
    ds = generate_dataset(n, difficulty, seed=seed)
    return list(ds["prompt"])


def evaluate_policy(model, tokenizer, prompts: Sequence[list[dict]], cfg: dict[str, Any], samples: int = 0) -> dict[str, Any]:
    """Mean of each reward and the valid-JSON rate on ``prompts``.

    Greedy completions by default (the curriculum's decision); ``samples=k`` scores k
    completions per prompt sampled at TEMPERATURE with a fixed seed instead, which
    measures the policy GRPO actually optimises. With HORIZON > 1 each prompt starts a
    closed-loop episode and the means are over episodes, aggregated as in training;
    ``completions`` and ``turn_prompts`` then list every turn.
    """
    RUN_CONTEXT["phase"] = "eval"
    if samples > 0:
        prompts = [p for p in prompts for _ in range(samples)]
    temperature = cfg["TEMPERATURE"] if samples > 0 else 0.0
    RUN_CONTEXT["episodes"] = cfg["HORIZON"] > 1

    def answer(conversations: list[list[dict]]) -> list[str]:
        return generate_completions(model, tokenizer, conversations, cfg["MAX_COMPLETION_LENGTH"],
                                    temperature=temperature, seed=cfg["SEED"])

    try:
        if cfg["HORIZON"] > 1:
            start = episode_factory(cfg)
            episodes = play_many([start(p, cfg["HORIZON"]) for p in prompts], answer)
            for ep in episodes:
                _maybe_log_episode(ep)
            rows = [episode_reward_vector(ep) for ep in episodes]
            turns = [t for ep in episodes for t in ep.turns]
            completions, turn_prompts = [t.completion for t in turns], [t.prompt for t in turns]
        else:
            completions = answer(list(prompts))
            rows = [reward_vector(c, p) for c, p in zip(completions, prompts)]
            turn_prompts = list(prompts)
    finally:
        RUN_CONTEXT["phase"] = "train"
    means = {k: sum(r[k] for r in rows) / len(rows) for k in REWARD_NAMES}
    valid = sum(1 for c in completions if parse_action(c)[0] is not None) / len(completions)
    return {"mean_task_reward": means["reward_task_success_fn"], "reward_means": means, "valid_json_rate": valid,
            "completions": completions, "turn_prompts": turn_prompts}


def grpo_config(cfg: dict[str, Any], stage: int, output_dir: Path):
    """TRL GRPOConfig for one stage (TRL 1.x names: processing_class, no max_prompt_length)."""
    import importlib.util

    import torch
    from trl import GRPOConfig

    lrs = cfg["LEARNING_RATES"]
    report = cfg["REPORT_TO"]
    if report == "auto":
        report = "tensorboard" if importlib.util.find_spec("tensorboard") else "none"
    cuda = torch.cuda.is_available() and cfg["_PROFILE"] != "cpu"
    precision = device_precision(cfg)  # autocast over fp32 trainable weights (see weight_precision)
    kwargs = dict(
        output_dir=str(output_dir), learning_rate=lrs[min(stage - 1, len(lrs) - 1)],
        per_device_train_batch_size=cfg["PER_DEVICE_BATCH_SIZE"], gradient_accumulation_steps=cfg["GRAD_ACCUM_STEPS"],
        num_generations=cfg["NUM_GENERATIONS"], max_completion_length=cfg["MAX_COMPLETION_LENGTH"],
        temperature=cfg["TEMPERATURE"], beta=cfg["BETA"], reward_weights=[float(w) for w in cfg["REWARD_WEIGHTS"]],
        num_train_epochs=1, logging_steps=1, save_strategy="steps", save_steps=cfg["SAVE_STEPS"], save_total_limit=1,
        report_to=report, seed=cfg["SEED"] + stage, data_seed=cfg["SEED"] + stage, bf16=precision == "bf16", fp16=precision == "fp16",
        use_cpu=not cuda, remove_unused_columns=False,
        disable_tqdm=not is_main_process(),
    )
    if cfg["USE_VLLM"]:
        kwargs.update(use_vllm=True, vllm_mode=cfg["VLLM_MODE"])
        if cfg["VLLM_MODE"] == "colocate":
            kwargs.update(vllm_gpu_memory_utilization=cfg["VLLM_GPU_MEMORY_UTILIZATION"])
        else:
            kwargs.update(vllm_server_host=cfg["VLLM_SERVER_HOST"], vllm_server_port=cfg["VLLM_SERVER_PORT"])
    return GRPOConfig(**kwargs)


def colocate_problem(cfg: dict[str, Any], done_stages: int) -> str | None:
    """vLLM colocate builds one engine per GRPOTrainer (TRL 1.14), so one process must train
    at most one stage with it; a reason string when this run would train more."""
    to_train = cfg["N_STAGES"] - done_stages
    if cfg["USE_VLLM"] and cfg["VLLM_MODE"] == "colocate" and to_train > 1:
        return (f"VLLM_MODE=colocate would start {to_train} vLLM engines in one process (one per stage); run one "
                f"stage per process (--N_STAGES={done_stages + 1}, then {done_stages + 2}, ...: each rerun resumes) "
                "or use --VLLM_MODE=server")
    return None


def check_vllm(cfg: dict[str, Any]) -> None:
    import importlib.util

    if cfg["USE_VLLM"] and importlib.util.find_spec("vllm") is None:
        raise SystemExit("USE_VLLM=True but vLLM is not installed: `pip install vllm` (GPU only), or set USE_VLLM=False")


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON so a crash leaves either the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# The settings that change what a run trains. N_STAGES is not one of them (raising it
# extends a finished run), nor are paths, logging, evaluation episodes or vLLM.
RUN_SETTING_KEYS = (
    "MODEL_NAME", "_PROFILE", "USE_LORA", "LORA_RANK", "LORA_ALPHA", "LOAD_IN_4BIT", "SEED", "START_DIFFICULTY",
    "N_PROMPTS_PER_STAGE", "ADVANCE_THRESHOLD", "RETREAT_THRESHOLD", "N_EVAL_PROMPTS", "LEARNING_RATES", "NUM_GENERATIONS",
    "MAX_COMPLETION_LENGTH", "TEMPERATURE", "BETA", "REWARD_WEIGHTS", "WARM_START_SFT_STEPS", "WARM_START_LR",
    "WARM_START_POLICY",
)


def run_settings(cfg: dict[str, Any]) -> dict[str, Any]:
    """What a curriculum state records about the configuration that wrote it."""
    settings = {key: cfg[key] for key in RUN_SETTING_KEYS}
    settings["COMPLETIONS_PER_STEP"] = cfg["PER_DEVICE_BATCH_SIZE"] * cfg["GRAD_ACCUM_STEPS"]  # per process
    settings["REWARD_FUNCTIONS"] = list(REWARD_NAMES)
    if cfg["HORIZON"] > 1:  # recorded only when set, so single-step runs keep their fingerprint
        settings["HORIZON"] = cfg["HORIZON"]
    if cfg["ON_POLICY_STATES"] > 0:  # likewise
        settings["ON_POLICY_STATES"] = cfg["ON_POLICY_STATES"]
    return settings


def config_fingerprint(settings: dict[str, Any]) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def fresh_state(cfg: dict[str, Any]) -> dict[str, Any]:
    settings = run_settings(cfg)
    return {"version": 1, "next_stage": 1, "difficulty": cfg["START_DIFFICULTY"], "stages": [], "finished": False,
            "fingerprint": config_fingerprint(settings), "settings": settings}


def settings_mismatch(recorded: dict[str, Any], cfg: dict[str, Any]) -> str | None:
    """``None`` when a recorded state belongs to this configuration, else what differs."""
    current = run_settings(cfg)
    if "fingerprint" not in recorded:
        return "it records no settings (written by an older version of this script)"
    if recorded["fingerprint"] == config_fingerprint(current):
        return None
    old = recorded.get("settings") if isinstance(recorded.get("settings"), dict) else {}
    keys = list(current) + [key for key in old if key not in current]  # HORIZON is recorded only when > 1
    diffs = [f"{key} {old.get(key, '(not recorded)')!r} -> {current.get(key, '(not recorded)')!r}"
             for key in keys if old.get(key) != current.get(key)]
    return "; ".join(diffs) or "its fingerprint differs"


def load_curriculum_state(path: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    """The state to continue from: a fresh one, or (RESUME) the recorded one when it was
    written by the same settings. A different configuration stops the run, in one line,
    unless RESUME_ANY_CONFIG; the state then records this run's settings from now on."""
    fresh = fresh_state(cfg)
    if not cfg["RESUME"] or not path.exists():
        return fresh
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        if state.get("version") != 1 or not isinstance(state.get("stages"), list):
            raise ValueError("unknown layout")
    except (OSError, ValueError, AttributeError) as exc:
        raise SystemExit(f"{path}: unreadable curriculum state ({exc}); delete it or run with --RESUME=False") from None
    mismatch = settings_mismatch(state, cfg)
    if mismatch is not None:
        if not cfg["RESUME_ANY_CONFIG"]:
            raise SystemExit(f"{path}: written by a different configuration ({mismatch}); rerun with those settings, "
                             "--RESUME=False to start over (the old run is moved aside), or --RESUME_ANY_CONFIG=True "
                             "to resume it anyway")
        log(f"[setup] RESUME_ANY_CONFIG: resuming {path} although its configuration differs ({mismatch})")
        state.update(fingerprint=fresh["fingerprint"], settings=fresh["settings"])
    return state


RUN_LOGS = ("generations.jsonl", "train_history.jsonl", "eval_episodes.jsonl")


def archive_previous_run(out: Path, log_dir: Path, stamp: str | None = None) -> Path | None:
    """Move a previous run out of the way of a fresh one (``RESUME=False``).

    Moved to ``out/previous_run_<stamp>/``: ``curriculum_state.json``, the ``stage_N``
    directories (with any step checkpoints), ``merged/``, the final-save files the state
    lists, and the run's logs (under ``logs/``). Nothing else in ``out`` is touched (the CPU
    profile's base model, earlier archives, files of your own). Returns the archive, or
    ``None`` when there was nothing to move.
    """
    names: list[str] = []
    state_path = out / "curriculum_state.json"
    if state_path.is_file():
        names.append(state_path.name)
        try:
            listed = json.loads(state_path.read_text(encoding="utf-8")).get("final_files", [])
        except (OSError, ValueError, AttributeError):
            listed = []
        names += [n for n in listed if isinstance(n, str) and n == Path(n).name and n not in ("", ".", "..")]
    if out.is_dir():
        names += sorted(p.name for p in out.iterdir() if p.is_dir() and re.fullmatch(r"stage_\d+|merged", p.name))
    names = [n for n in dict.fromkeys(names) if (out / n).exists()]
    logs = [log_dir / n for n in RUN_LOGS if (log_dir / n).is_file()]
    if not names and not logs:
        return None
    dest = out / f"previous_run_{stamp or time.strftime('%Y%m%d-%H%M%S')}"
    base, i = dest, 1
    while dest.exists():
        dest, i = base.with_name(f"{base.name}_{i}"), i + 1
    dest.mkdir(parents=True)
    for name in names:
        os.replace(out / name, dest / name)
    if logs:
        (dest / "logs").mkdir()
        for path in logs:
            shutil.move(str(path), str(dest / "logs" / path.name))  # LOG_DIR may be on another filesystem
    return dest


def start_run(cfg: dict[str, Any]) -> dict[str, Any]:
    """The curriculum state this run starts from, recorded before any training.

    ``RESUME=False`` first moves the previous run aside (rank 0), so that an interrupted
    fresh run followed by a plain rerun can never continue the old run. Writing the state
    now (with the settings fingerprint) also lets a resume inside stage 1 check them.
    """
    out = Path(cfg["OUTPUT_DIR"])
    state_path = out / "curriculum_state.json"
    if is_main_process() and not cfg["RESUME"]:
        moved = archive_previous_run(out, Path(cfg["LOG_DIR"]))
        if moved is not None:
            log(f"[setup] RESUME=False: the previous run (state, stage directories, final model, logs) moved to {moved}")
    barrier()
    state = load_curriculum_state(state_path, cfg)
    if is_main_process():
        write_json_atomic(state_path, state)
    barrier()
    return state


def last_checkpoint(directory: Path) -> str | None:
    if not directory.exists():
        return None
    ckpts = sorted((p for p in directory.glob("checkpoint-*") if p.is_dir() and p.name.split("-")[-1].isdigit()),
                   key=lambda p: int(p.name.split("-")[-1]))
    return str(ckpts[-1]) if ckpts else None


def _unwrap(model):
    return getattr(model, "module", model)


def save_model(model, tokenizer, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    _unwrap(model).save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def stage_diversity(prompts: Sequence[Any], completions: Sequence[str]) -> dict[str, dict]:
    """lifestack.diversity.answer_diversity of the held-out answers, per task family."""
    records = []
    for prompt, completion in zip(prompts, completions):
        ctx = _prompt_context(prompt_text(prompt))
        if not isinstance(ctx, str):
            records.append((ctx[0].domain, parse_completion(completion)[0], ctx[0].route_ids))
    return answer_diversity(records)


def diversity_line(stage: int, report: dict[str, dict]) -> str:
    """The one log line of a stage's answer diversity (held-out answers)."""
    parts = []
    for family, d in report.items():
        fits = "n/a" if d["route_fits"] is None else f"{d['route_fits']:.0%}"
        parts.append(f"{family}: {d['distinct']} distinct of {d['answers']} answers, route fits {fits}")
    collapsed = [f for f, d in report.items() if d["collapsed"]]
    tail = f" | COLLAPSED onto one answer: {', '.join(collapsed)}" if collapsed else ""
    return f"[diversity] stage {stage} | " + (" | ".join(parts) or "no parsed answer") + tail


def score_battery(sc: Scenario, weights: Sequence[float]) -> dict[str, tuple[float, dict[str, float]]]:
    """The honest answer and every hack of lifestack.hacks on scenario ``sc``, each scored
    through the six reward functions: ``{name: (weighted total, the six rewards)}``. These
    texts are not the policy's: they are neither logged nor counted as its completions."""
    prompt = build_prompt(sc.task, sc.conflict, sc.state, sc.difficulty, sc.seed)
    env = LifeStackEnv()
    env.restore(sc.task, sc.state)
    phase, RUN_CONTEXT["phase"] = RUN_CONTEXT["phase"], "integrity"
    try:
        out = {}
        for name, text in hack_battery(env, strip_metadata(prompt[1]["content"])).items():
            vec = reward_vector(text, prompt)
            out[name] = (weighted_reward(vec, weights), vec)
        return out
    finally:
        RUN_CONTEXT["phase"] = phase


WATCH_RATE = 0.2  # a hack signature in this share of the stage's completions raises a flag
WATCH_RISE = 0.1  # ... and the unparseable share rising by this much over the last stage


def integrity_watch(cfg: dict[str, Any], stage: int, difficulty: int, previous: dict | None) -> dict[str, Any]:
    """The reward-integrity watch of one stage.

    1. Scores the hack battery (lifestack.hacks) against the honest answer on
       INTEGRITY_PROMPTS fixed prompts at this stage's difficulty, through the six real
       reward functions and REWARD_WEIGHTS: ``margin`` is the smallest honest - hack
       difference over every hack and prompt (it must stay > 0), ``closest_hack`` the
       hack that got nearest.
    2. Reads the hack signatures counted on the policy's own completions this stage
       (every fresh training evaluation on this process) and flags keyword-list
       reasoning, unpaid or zero-cost claims in WATCH_RATE or more of them, and an
       unparseable share that rose by WATCH_RISE or more since the last stage.
    """
    margins: dict[str, list[float]] = {}
    for i in range(cfg["INTEGRITY_PROMPTS"]):
        sc = sample_scenario(cfg["SEED"] + 8_000_000 + 1000 * difficulty + i, difficulty)
        scored = score_battery(sc, cfg["REWARD_WEIGHTS"])
        for name, (total, _) in scored.items():
            if name != "honest":
                margins.setdefault(name, []).append(scored["honest"][0] - total)
    counts = RUN_CONTEXT.get("signatures") or {}
    n = counts.get("completions", 0)
    rates = {name: round(counts.get(name, 0) / n, 4) if n else 0.0 for name in SIGNATURES}
    flags = []
    worst = {name: min(ms) for name, ms in margins.items()}
    closest = min(worst, key=worst.get) if worst else None
    if closest is not None and worst[closest] <= 0:
        flags.append(f"hack {closest} scores at least as high as the honest answer")
    for name in ("keyword_list", "unpaid_claims", "zero_cost_claims", "unfaithful_reasoning"):
        if n and rates[name] >= WATCH_RATE:
            flags.append(f"{name.replace('_', ' ')} in {rates[name]:.0%} of the policy's completions")
    before = ((previous or {}).get("integrity") or {}).get("signature_rates", {}).get("unparseable")
    if n and before is not None and rates["unparseable"] >= before + WATCH_RISE:
        flags.append(f"unparseable answers rising: {before:.0%} -> {rates['unparseable']:.0%}")
    return {"prompts": cfg["INTEGRITY_PROMPTS"], "margin": round(worst[closest], 4) if closest else None,
            "closest_hack": closest, "hack_margins": {k: round(sum(v) / len(v), 4) for k, v in margins.items()},
            "completions": n, "signature_rates": rates, "flags": flags}


def integrity_line(stage: int, report: dict[str, Any]) -> str:
    """The one log line of the integrity watch for a stage."""
    rates = ", ".join(f"{k.replace('_', ' ')} {v:.0%}" for k, v in report["signature_rates"].items())
    margin = "n/a" if report["margin"] is None else f"{report['margin']:+.3f} (closest: {report['closest_hack']})"
    tail = "FLAG: " + "; ".join(report["flags"]) if report["flags"] else "OK"
    return (f"[integrity] stage {stage} | honest - best hack {margin} | "
            f"policy ({report['completions']} completions): {rates} | {tail}")


def merge_method(model) -> str | None:
    """How SAVE_MERGED folds a LoRA adapter into its base model.

    - ``"unsloth_merged_16bit"``: an Unsloth model; its own ``save_pretrained_merged(...,
      save_method="merged_16bit")`` dequantises a 4-bit base and writes 16-bit weights.
    - ``"reload_16bit"``: a PEFT model over a quantised (4/8-bit) base: merging into the
      quantised weights would round the adapter's small deltas away, so the base is
      reloaded in 16-bit and the saved adapter merged into that (PEFT's advice).
    - ``"merge"``: a PEFT model over a 16/32-bit base: ``merge_and_unload`` on a copy.
    - ``None``: no adapter (full-weight training); nothing to merge.
    """
    core = _unwrap(model)
    if hasattr(core, "save_pretrained_merged"):
        return "unsloth_merged_16bit"
    if not hasattr(core, "merge_and_unload"):
        return None
    base = core.get_base_model() if hasattr(core, "get_base_model") else core
    quantised = (getattr(base, "is_loaded_in_4bit", False) or getattr(base, "is_loaded_in_8bit", False)
                 or getattr(getattr(base, "config", None), "quantization_config", None) is not None)
    return "reload_16bit" if quantised else "merge"


def save_merged(model, tokenizer, directory: Path, cfg: dict[str, Any], adapter_dir: Path) -> str | None:
    """Write a merged copy (adapter folded in) that plain ``from_pretrained`` loads; returns
    the :func:`merge_method` used. ``adapter_dir`` holds the saved adapter (OUTPUT_DIR)."""
    method = merge_method(model)
    core = _unwrap(model)
    if method == "unsloth_merged_16bit":
        core.save_pretrained_merged(str(directory), tokenizer, save_method="merged_16bit")
        return method
    if method == "reload_16bit":
        from peft import PeftModel
        from transformers import AutoModelForCausalLM

        half = "bf16" if device_precision(cfg) == "bf16" else "fp16"
        base_name = next(iter(core.peft_config.values())).base_model_name_or_path
        base = AutoModelForCausalLM.from_pretrained(base_name, dtype=torch_dtype(half))
        merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    elif method == "merge":
        import copy

        merged = copy.deepcopy(core).merge_and_unload()
    else:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return method


def save_final(model, tokenizer, out: Path) -> list[str]:
    """Save the final model and tokenizer into ``out``; returns the file names written."""
    tmp = out / ".final_save"
    shutil.rmtree(tmp, ignore_errors=True)
    save_model(model, tokenizer, tmp)
    names = sorted(p.name for p in tmp.iterdir())
    for name in names:
        os.replace(tmp / name, out / name)
    tmp.rmdir()
    return names


def curriculum_step(stages: Sequence[dict], difficulty: int, mean: float, cfg: dict[str, Any]) -> tuple[str, int, str]:
    """The curriculum's decision after a stage: ``(move, next difficulty, reason)``, move one
    of ``advance``, ``retreat``, ``stay``.

    Advance when the held-out mean task reward is above ADVANCE_THRESHOLD (below 5).
    Retreat one difficulty (above 1) when it is below RETREAT_THRESHOLD for the second
    stage running at this difficulty: the first stage after a rise often dips. Likewise
    the first stage after a retreat never advances. That, and the band between the two
    thresholds, is the hysteresis that keeps the difficulty from oscillating.
    ``stages``: the decisions of the stages before this one, in order.
    """
    high, low = cfg["ADVANCE_THRESHOLD"], cfg["RETREAT_THRESHOLD"]
    before = stages[-1] if stages else None
    if mean > high:
        if before is not None and before.get("move") == "retreat":
            return "stay", difficulty, f"{mean:+.3f} > {high:g}, first stage since the retreat"
        if difficulty < 5:
            return "advance", difficulty + 1, f"{mean:+.3f} > {high:g}"
        return "stay", difficulty, f"{mean:+.3f} > {high:g} at the top difficulty"
    if mean < low:
        again = before is not None and before.get("difficulty") == difficulty and before.get("mean_task_reward", 1.0) < low
        if again and difficulty > 1:
            return "retreat", difficulty - 1, f"{mean:+.3f} < {low:g} for two stages at difficulty {difficulty}"
        if difficulty > 1:
            return "stay", difficulty, f"{mean:+.3f} < {low:g}, first stage below it here"
        return "stay", difficulty, f"{mean:+.3f} < {low:g} at the lowest difficulty"
    return "stay", difficulty, f"{low:g} <= {mean:+.3f} <= {high:g}"


def train_curriculum(model, tokenizer, cfg: dict[str, Any], state: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
    """Stage by stage: train, save ``stage_N``, evaluate held-out, decide the difficulty.

    ``state``: where to start (``start_run``'s); by default read as ``load_curriculum_state`` does.
    """
    from trl import GRPOTrainer

    out = Path(cfg["OUTPUT_DIR"])
    state_path = out / "curriculum_state.json"
    if state is None:
        state = load_curriculum_state(state_path, cfg)
    RUN_CONTEXT.update(log_dir=cfg["LOG_DIR"], log_interval=cfg["LOG_INTERVAL"], reward_weights=list(cfg["REWARD_WEIGHTS"]),
                       episodes=cfg["HORIZON"] > 1)
    if state["next_stage"] > cfg["N_STAGES"]:
        log(f"[curriculum] {state_path}: all {cfg['N_STAGES']} stages are done; nothing to train "
            "(raise N_STAGES to continue, or --RESUME=False to start over)")
    for stage in range(state["next_stage"], cfg["N_STAGES"] + 1):
        difficulty = state["difficulty"]
        RUN_CONTEXT.update(stage=stage, difficulty=difficulty)
        stage_dir = out / f"stage_{stage}"
        ckpt_dir = stage_dir / "checkpoints"
        dataset = generate_dataset(cfg["N_PROMPTS_PER_STAGE"], difficulty, seed=cfg["SEED"] + 100_000 * stage,
                                   advance=policy_advance(model, tokenizer, cfg))
        # TensorBoard (REPORT_TO) logs outside the step checkpoints, which are deleted after a stage
        os.environ["TENSORBOARD_LOGGING_DIR"] = str(Path(cfg["LOG_DIR"]) / "tensorboard" / f"stage_{stage}")
        episodes = {}
        if cfg["HORIZON"] > 1:  # closed-loop episodes through TRL's rollout_func (lifestack.rollout)
            os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # said once below, not per stage by TRL
            episodes["rollout_func"] = make_rollout_func(cfg["HORIZON"], make_episode=episode_factory(cfg),
                                                         on_rollout=_log_rollout)
            if stage == state["next_stage"]:
                log(f"[episodes] HORIZON={cfg['HORIZON']}: each GRPO sample is a closed-loop episode of up to "
                    f"{cfg['HORIZON']} turns; environment tokens are masked from the loss (TRL rollout_func, "
                    "experimental in TRL 1.14)")
        trainer = GRPOTrainer(model=model, reward_funcs=REWARD_FUNCS, args=grpo_config(cfg, stage, ckpt_dir),
                              train_dataset=dataset, processing_class=tokenizer, **episodes)
        resume = last_checkpoint(ckpt_dir) if cfg["RESUME"] else None
        log(f"[stage {stage}/{cfg['N_STAGES']}] difficulty {difficulty}, {len(dataset)} prompts"
            + (f", resuming from {resume}" if resume else ""))
        RUN_CONTEXT["signatures"] = {}  # the integrity watch reads this stage's completions only
        reward_t0, t0 = RUN_CONTEXT["reward_seconds"], time.perf_counter()
        trainer.train(resume_from_checkpoint=resume)
        train_seconds = time.perf_counter() - t0
        reward_seconds = RUN_CONTEXT["reward_seconds"] - reward_t0
        model = trainer.model
        history = [h for h in trainer.state.log_history if "reward" in h]
        if is_main_process():
            save_model(model, tokenizer, stage_dir)
            (Path(cfg["LOG_DIR"])).mkdir(parents=True, exist_ok=True)
            with open(Path(cfg["LOG_DIR"]) / "train_history.jsonl", "a", encoding="utf-8") as fh:
                for h in history:
                    fh.write(json.dumps({"stage": stage, "difficulty": difficulty, **h}) + "\n")
        barrier()
        decision = None
        if is_main_process():
            prompts = held_out_prompts(cfg["N_EVAL_PROMPTS"], difficulty, cfg["SEED"] + 9_000_000 + 1000 * stage)
            result = evaluate_policy(_unwrap(model), tokenizer, prompts, cfg)
            mean = result["mean_task_reward"]
            move, next_difficulty, reason = curriculum_step(state["stages"], difficulty, mean, cfg)
            decision = {
                "stage": stage, "difficulty": difficulty, "mean_task_reward": round(mean, 4),
                "reward_means": {k: round(v, 4) for k, v in result["reward_means"].items()},
                "valid_json_rate": round(result["valid_json_rate"], 4), "advance": move == "advance",
                "move": move, "reason": reason,
                "next_difficulty": next_difficulty, "train_seconds": round(train_seconds, 2),
                "reward_seconds": round(reward_seconds, 3),
                "frac_reward_zero_std": _mean([h.get("frac_reward_zero_std") for h in history]),
                "steps": trainer.state.global_step,
            }
            decision["diversity"] = stage_diversity(result["turn_prompts"], result["completions"])
            if cfg["INTEGRITY_PROMPTS"] > 0:
                decision["integrity"] = integrity_watch(cfg, stage, difficulty, state["stages"][-1] if state["stages"] else None)
        if world_info()[1] > 1:  # proof, per rank, that every process trained its share
            print(f"[rank {world_info()[0]}] stage {stage}: {trainer.state.global_step} optimizer steps done", flush=True)
        decision = broadcast_object(decision)  # every rank takes the same decision
        state["stages"].append(decision)
        state["difficulty"] = decision["next_difficulty"]
        state["next_stage"] = stage + 1
        if is_main_process():
            write_json_atomic(state_path, state)
            shutil.rmtree(ckpt_dir, ignore_errors=True)  # the stage is saved; step checkpoints are spent
            means = " ".join(f"{k.removeprefix('reward_').removesuffix('_fn')}={v:+.3f}" for k, v in decision["reward_means"].items())
            log(f"[stage {stage}] difficulty {difficulty} | held-out task reward {decision['mean_task_reward']:+.3f} "
                f"(threshold {cfg['ADVANCE_THRESHOLD']}) | valid JSON {decision['valid_json_rate']:.0%} | {means} | "
                f"reward code {reward_seconds / max(train_seconds, 1e-9):.1%} of {train_seconds:.1f}s | "
                f"{decision['move'].upper()} to {decision['next_difficulty']} ({decision['reason']})")
            log(diversity_line(stage, decision["diversity"]))
            if "integrity" in decision:
                log(integrity_line(stage, decision["integrity"]))
        barrier()
    state["finished"] = True
    if is_main_process():
        state["final_files"] = save_final(model, tokenizer, out)  # listed so that RESUME=False can move them
        write_json_atomic(state_path, state)
        log(f"[curriculum] final model and tokenizer saved to {out}")
        if cfg["SAVE_MERGED"]:
            method = save_merged(model, tokenizer, out / "merged", cfg, adapter_dir=out)
            log(f"[curriculum] merged model ({method}) saved to {out / 'merged'}" if method else
                f"[curriculum] SAVE_MERGED: no adapter to merge (full-weight training); {out} holds the full model")
    barrier()
    return model, state


def episode_factory(cfg: dict[str, Any]) -> Callable[[Any, int], Any]:
    """How episode mode starts the episode of a prompt: in-process (``Episode.from_prompt``),
    or on the ENV_URL server (``lifestack.client.RemoteEpisode`` reset with the prompt's
    metadata as its ``scenario``: the same state, hence the same episode)."""
    url = cfg["ENV_URL"]
    if not url:
        return lambda prompt, horizon: Episode.from_prompt(prompt, horizon)
    from lifestack.client import RemoteEpisode

    def remote(prompt: Any, horizon: int):
        meta = read_metadata(prompt_text(prompt))
        if isinstance(meta, str):
            raise ValueError(f"cannot start a remote episode: {meta}")
        return RemoteEpisode(url, scenario=meta, horizon=horizon)  # the server rebuilds this very state

    return remote


def check_episode_length(cfg: dict[str, Any], model, tokenizer) -> None:
    """Episode mode: say how long an episode's sequence gets, and stop before training
    when it cannot fit (Unsloth's MAX_SEQ_LENGTH, else the model's position limit)."""
    if cfg["HORIZON"] == 1:
        return
    from lifestack.rollout import episode_tokens

    need = episode_tokens(tokenizer, cfg["HORIZON"], cfg["MAX_COMPLETION_LENGTH"])
    config = getattr(_unwrap(model), "config", None)
    limit, what = getattr(config, "max_position_embeddings", None), "the model's max_position_embeddings"
    if cfg["_PROFILE"] == "unsloth":
        limit, what = cfg["MAX_SEQ_LENGTH"], "MAX_SEQ_LENGTH"
    log(f"[episodes] a {cfg['HORIZON']}-turn episode takes up to about {need} tokens (prompt, "
        f"{cfg['HORIZON']} answers of <= {cfg['MAX_COMPLETION_LENGTH']}, environment turns)"
        + (f"; limit {limit} ({what})" if limit else ""))
    if limit and need > limit:
        raise SystemExit(f"HORIZON={cfg['HORIZON']}: an episode needs about {need} tokens but {what} is {limit}; "
                         f"raise it (--MAX_SEQ_LENGTH={need + 256} with Unsloth) or lower HORIZON or "
                         "MAX_COMPLETION_LENGTH")
    if cfg["_PROFILE"] == "cpu":  # the tiny tokenizer's count says nothing about the real job: say the real one
        try:
            from lifestack.qwen_tokens import MissingQwenExtra, qwen25_tokenizer

            real = episode_tokens(qwen25_tokenizer(), cfg["HORIZON"], cfg["MAX_COMPLETION_LENGTH"])
        except MissingQwenExtra:
            return
        fits = real <= cfg["MAX_SEQ_LENGTH"]
        log(f"[episodes] in Qwen2.5 tokens (the real job) the same episode takes up to about {real}: "
            + (f"fits MAX_SEQ_LENGTH {cfg['MAX_SEQ_LENGTH']}" if fits else
               f"on a GPU with Unsloth it needs --MAX_SEQ_LENGTH={real + 256} (now {cfg['MAX_SEQ_LENGTH']})"))


def check_env_server(cfg: dict[str, Any]) -> None:
    """Stop before any model loads when ENV_URL is set but no server answers there."""
    if not cfg["ENV_URL"]:
        return
    from lifestack.client import LifeStackClient

    try:
        health = LifeStackClient(cfg["ENV_URL"], timeout=10).health()
    except Exception as exc:
        raise SystemExit(f"ENV_URL={cfg['ENV_URL']}: no LifeStack server answers ({type(exc).__name__}: {exc}); "
                         "start one with `python -m lifestack.serve` or set ENV_URL=\"\"") from None
    log(f"[setup] episodes play on {cfg['ENV_URL']} ({health})")


def _log_rollout(episodes: Sequence[Episode], _out: dict) -> None:
    for ep in episodes:
        _maybe_log_episode(ep)


def _mean(xs: Sequence[Any]) -> float | None:
    vals = [float(x) for x in xs if isinstance(x, (int, float))]
    return round(sum(vals) / len(vals), 4) if vals else None


# =====================================================================================
# Final evaluation and plots
# =====================================================================================
def run_episodes(model, tokenizer, cfg: dict[str, Any], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` full episodes (difficulty rising 1 -> 5, domains alternating), batched per step.

    HORIZON = 1: each step is a fresh single-decision prompt of the current state, for the
    task's whole horizon; the reward is the mean step reward (each step's reward and what it
    did to its route, ``route_status`` of the env's breakdown or "invalid", are kept per
    row). HORIZON > 1: the closed-loop
    conversation the policy was trained on, up to HORIZON turns; the reward is the
    episode's task reward as training aggregates it (turn mean blended with the outcome).
    """
    if cfg["HORIZON"] > 1:
        return run_conversations(model, tokenizer, cfg, n, seed)
    episodes = [{"episode": i, "difficulty": sc.difficulty, "domain": sc.task.domain, "seed": sc.seed, "env": env,
                 "conflict": sc.conflict, "rewards": [], "statuses": [], "valid": 0, "actions": 0}
                for i, (sc, env) in enumerate(evaluation_starts(n, seed))]
    for _round in range(max(e["env"].task.horizon for e in episodes)):
        live = [e for e in episodes if not e["env"].state.done and len(e["rewards"]) < e["env"].task.horizon]
        if not live:
            break
        prompts = [build_prompt(e["env"].task, e["conflict"], e["env"].state, e["difficulty"], e["seed"]) for e in live]
        texts = generate_completions(model, tokenizer, prompts, cfg["MAX_COMPLETION_LENGTH"])
        for e, text in zip(live, texts):
            obs = e["env"].step(text)
            e["rewards"].append(obs.reward)
            e["actions"] += 1
            breakdown = obs.metadata["breakdown"]
            e["valid"] += "error" not in breakdown
            e["statuses"].append("invalid" if "error" in breakdown else str(breakdown.get("route_status", "none")))
    return [{"episode": e["episode"], "difficulty": e["difficulty"], "domain": e["domain"], "seed": e["seed"],
             "reward": sum(e["rewards"]) / len(e["rewards"]), "steps": len(e["rewards"]),
             "outcome": e["env"].state.outcome, "valid_json_rate": e["valid"] / max(e["actions"], 1),
             "turn_rewards": [round(r, 4) for r in e["rewards"]], "route_statuses": e["statuses"]} for e in episodes]


def evaluation_starts(n: int, seed: int) -> list[tuple[Scenario, LifeStackEnv]]:
    """The final evaluation's ``n`` starts: difficulty rising 1 -> 5, task families
    alternating, each env reset to the crisis itself (not the scenario's roll-forward)."""
    starts = []
    for i in range(n):
        sc = sample_scenario(seed + i, 1 + (i * 5) // n, ("flight_crisis", "code_merge_crisis")[i % 2])
        env = LifeStackEnv()
        env.reset(seed=sc.seed, task=sc.task, conflict=sc.conflict)
        starts.append((sc, env))
    return starts


def run_conversations(model, tokenizer, cfg: dict[str, Any], n: int, seed: int) -> list[dict[str, Any]]:
    """run_episodes in episode mode: the same starts, played as closed-loop episodes."""
    starts = [Episode(sc.task, sc.conflict, env.state, sc.difficulty, sc.seed, cfg["HORIZON"])
              for sc, env in evaluation_starts(n, seed)]
    play_many(starts, lambda convs: generate_completions(model, tokenizer, convs, cfg["MAX_COMPLETION_LENGTH"]))
    rows = []
    for i, ep in enumerate(starts):
        valid = sum(t.action is not None for t in ep.turns)
        rows.append({"episode": i, "difficulty": ep.difficulty, "domain": ep.task.domain, "seed": ep.seed,
                     "reward": episode_reward_vector(ep)[OUTCOME_REWARD], "steps": len(ep.turns),
                     "outcome": ep.env.state.outcome, "valid_json_rate": valid / len(ep.turns),
                     "turn_rewards": [round(t.reward, 4) for t in ep.turns], "outcome_score": ep.outcome()["score"]})
    return rows


def rolling_mean(xs: Sequence[float], window: int = 10) -> list[float]:
    out = []
    for i in range(len(xs)):
        chunk = xs[max(0, i - window + 1): i + 1]
        out.append(sum(chunk) / len(chunk))
    return out


CPU_PLOT_NOTE = "CPU pipeline check: tiny warm-started model, not real training"


def _plot_title(ax, title: str, cpu: bool) -> None:
    """A plot's title; in the CPU profile with the pipeline-check note, in red."""
    ax.set_title(title + (f"\n{CPU_PLOT_NOTE}" if cpu else ""), color="tab:red" if cpu else "black",
                 fontsize=10 if cpu else 12)


def plot_reward_curve(trained: list[dict], base: list[dict], path: str | Path, start_label: str = "base model",
                      cpu: bool = False, horizon: int = 1) -> None:
    """Per-episode mean task reward of the trained model and of the model GRPO started
    from. No threshold here: ADVANCE_THRESHOLD applies to the held-out mean of the
    curriculum's evaluation (grpo_curriculum.png), not to these episodes. ``horizon > 1``:
    closed-loop conversations, scored as training aggregates them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    for rows, label, colour in ((base, start_label, "tab:gray"), (trained, "GRPO-trained", "tab:blue")):
        xs = [r["episode"] for r in rows]
        ys = [r["reward"] for r in rows]
        ax.plot(xs, ys, "o", ms=3, alpha=0.45, color=colour, label=f"{label} (per episode)")
        ax.plot(xs, rolling_mean(ys), "-", lw=2, color=colour, label=f"{label} (rolling mean, 10)")
    ax.set_xlabel("evaluation episode (difficulty rises 1 -> 5)")
    ax.set_ylabel("mean task reward per step of the episode" if horizon == 1 else
                  f"episode task reward (closed loop, <= {horizon} turns)")
    ax.set_ylim(-1.05, 1.05)
    _plot_title(ax, f"LifeStack GRPO: trained vs {start_label}", cpu)
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def curriculum_note(stages: list[dict], threshold: float, cpu: bool) -> str | None:
    """Why the difficulty never rose, when it did not (None when it did, or at 5)."""
    if not stages or any(d.get("advance") for d in stages) or stages[-1]["difficulty"] >= 5:
        return None
    best = max(d["mean_task_reward"] for d in stages)
    note = (f"never advanced: the held-out reward stayed below {threshold:g} (best {best:+.3f}), so every stage "
            f"trained at difficulty {stages[0]['difficulty']}\nand final-evaluation episodes above it measure "
            "levels the policy never trained on")
    if cpu:
        note += "\n(tiny CPU model: reaching the threshold needs route progress on almost every answer; docs/learning.md)"
    return note


def plot_curriculum(stages: list[dict], path: str | Path, threshold: float = ADVANCE_THRESHOLD, cpu: bool = False,
                    retreat: float | None = None) -> bool:
    """Per stage: the held-out mean task reward that decides the curriculum, with
    ADVANCE_THRESHOLD (and RETREAT_THRESHOLD when given), the difficulty trained (right
    axis), and each stage's move (up / down triangles)."""
    if not stages:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    xs = [d["stage"] for d in stages]
    ax.plot(xs, [d["mean_task_reward"] for d in stages], "o-", color="tab:blue", label="held-out mean task reward")
    ax.axhline(threshold, ls="--", lw=1, color="tab:red", label=f"ADVANCE_THRESHOLD {threshold:g}")
    if retreat is not None and retreat > -1.0:
        ax.axhline(retreat, ls=":", lw=1, color="tab:orange", label=f"RETREAT_THRESHOLD {retreat:g}")
    for marker, move, color in (("^", "advance", "tab:green"), ("v", "retreat", "tab:orange")):
        moved = [d for d in stages if d.get("move", "advance" if d.get("advance") else "stay") == move]
        if moved:
            ax.plot([d["stage"] for d in moved], [d["mean_task_reward"] for d in moved], marker, ms=9, color=color,
                    ls="none", label=move)
    ax.set_xlabel("curriculum stage")
    ax.set_ylabel("held-out mean task reward")
    ax.set_ylim(-1.05, 1.05)
    ax.set_xticks(xs)
    right = ax.twinx()
    right.step(xs, [d["difficulty"] for d in stages], where="mid", color="tab:gray", label="difficulty")
    right.set_ylim(0.5, 5.5)
    right.set_ylabel("difficulty")
    handles = ax.get_legend_handles_labels()
    extra = right.get_legend_handles_labels()
    ax.legend(handles[0] + extra[0], handles[1] + extra[1], fontsize=8, loc="lower right")
    note = curriculum_note(stages, threshold, cpu)
    if note:
        ax.text(0.01, 0.97, note, transform=ax.transAxes, fontsize=7, va="top", color="tab:red")
    _plot_title(ax, "Curriculum per stage", cpu)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def plot_training_curves(history_path: Path, path: str | Path) -> bool:
    """Per-reward-function means over training steps (all stages), from train_history.jsonl."""
    if not history_path.exists():
        return False
    rows = [json.loads(line) for line in history_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not rows:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    xs = list(range(1, len(rows) + 1))
    for name in REWARD_NAMES:
        key = f"rewards/{name}/mean"
        ys = [r.get(key) for r in rows]
        if any(y is not None for y in ys):
            ax.plot(xs, rolling_mean([y if y is not None else 0.0 for y in ys], 5), label=name.removesuffix("_fn"))
    zero = [r.get("frac_reward_zero_std") for r in rows]
    if any(z is not None for z in zero):
        ax.plot(xs, [z if z is not None else 0.0 for z in zero], "k:", label="frac_reward_zero_std")
    for i in range(1, len(rows)):
        if rows[i]["stage"] != rows[i - 1]["stage"]:
            ax.axvline(xs[i] - 0.5, color="grey", lw=0.5)
    ax.set_xlabel("training log step (all stages; grey lines = stage boundaries)")
    ax.set_ylabel("reward (rolling mean, 5)")
    ax.set_title("GRPO training curves per reward function")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def evaluate_and_plot(model, tokenizer, cfg: dict[str, Any]) -> dict[str, Any]:
    """Trained vs base model on N_EVAL_EPISODES episodes; writes the plot and eval JSONL."""
    if not is_main_process():
        return {}
    n, seed = cfg["N_EVAL_EPISODES"], cfg["SEED"] + 20_000_000
    core = _unwrap(model)
    trained = run_episodes(core, tokenizer, cfg, n, seed)
    start_dir = Path(cfg["OUTPUT_DIR"]) / "stage_0"
    start_label = "base model"
    if (start_dir / "config.json").exists() or (start_dir / "adapter_config.json").exists():
        # GRPO started from the warm-started model: compare with that, not with the base
        start_label = "warm-started model (GRPO's start)"
        start_model, start_tok = load_model(cfg, start_dir, banner=False, collective=False)
        base = run_episodes(_unwrap(start_model), start_tok, cfg, n, seed)
        del start_model
    elif hasattr(core, "disable_adapter"):
        with core.disable_adapter():  # the same weights without the adapter: the base model
            base = run_episodes(core, tokenizer, cfg, n, seed)
    else:
        base_model, base_tok = load_model({**cfg, "USE_LORA": False}, banner=False, collective=False)
        base = run_episodes(base_model, base_tok, cfg, n, seed)
        del base_model
    log_dir = Path(cfg["LOG_DIR"])
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / "eval_episodes.jsonl", "w", encoding="utf-8") as fh:
        for label, rows in (("trained", trained), ("base", base)):
            for r in rows:
                fh.write(json.dumps({"model": label, **r}) + "\n")
    cpu = cfg["_PROFILE"] == "cpu"
    plot_reward_curve(trained, base, cfg["PLOT_PATH"], start_label, cpu=cpu, horizon=cfg["HORIZON"])
    curves = plot_training_curves(log_dir / "train_history.jsonl", cfg["CURVES_PATH"])
    state_path = Path(cfg["OUTPUT_DIR"]) / "curriculum_state.json"
    stages = json.loads(state_path.read_text(encoding="utf-8")).get("stages", []) if state_path.exists() else []
    curriculum = plot_curriculum(stages, cfg["CURRICULUM_PLOT_PATH"], cfg["ADVANCE_THRESHOLD"], cpu=cpu,
                                 retreat=cfg["RETREAT_THRESHOLD"])
    summary = {
        "trained_mean": sum(r["reward"] for r in trained) / n, "base_mean": sum(r["reward"] for r in base) / n,
        "trained_valid_json": sum(r["valid_json_rate"] for r in trained) / n,
        "base_valid_json": sum(r["valid_json_rate"] for r in base) / n,
    }
    summary["start_model"] = start_label
    log(f"[eval] {n} episodes: trained {summary['trained_mean']:+.3f} vs {start_label} {summary['base_mean']:+.3f} mean "
        f"reward (valid JSON {summary['trained_valid_json']:.0%} vs {summary['base_valid_json']:.0%}); plot: {cfg['PLOT_PATH']}"
        + (f", curves: {cfg['CURVES_PATH']}" if curves else "")
        + (f", curriculum: {cfg['CURRICULUM_PLOT_PATH']}" if curriculum else ""))
    return summary


# =====================================================================================
# Main
# =====================================================================================
def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    rank, world = world_info()
    try:
        cfg = build_config(argv, world)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    if cfg["_PROFILE"] == "unsloth" and world > 1:
        log("[setup] several processes: Unsloth is single-GPU, using transformers + PEFT")
        cfg["_PROFILE"] = "peft"
    if cfg["_PROFILE"] == "unsloth":
        import_unsloth()  # before anything imports transformers, trl or peft: Unsloth patches them
    check_vllm(cfg)
    check_env_server(cfg)
    init_distributed()
    configure_feedback(cfg["FEEDBACK_DB"], cfg["FEEDBACK_ON_ERROR"])
    # Open the feedback database now: a broken one should stop the run here, not
    # mid-training. Rank 0 first, so only one process ever creates and seeds it.
    for turn in ("main", "others"):
        if (turn == "main") == is_main_process():
            try:
                feedback_store()
            except Exception as exc:
                if cfg["FEEDBACK_ON_ERROR"] == "raise":
                    print(f"feedback database error: {exc}", file=sys.stderr)
                    return 2
                log(f"[setup] feedback database unavailable ({exc}); reward_human_feedback_fn will return 0.0")
        barrier()
    import random

    import torch
    from transformers import set_seed

    random.seed(cfg["SEED"])
    set_seed(cfg["SEED"])
    log(f"[setup] profile {cfg['_PROFILE']}, world size {world}, model {cfg['MODEL_NAME']}, "
        f"{cfg['N_STAGES']} stages x {cfg['N_PROMPTS_PER_STAGE']} prompts, torch {torch.__version__}")
    out = Path(cfg["OUTPUT_DIR"])
    prior = start_run(cfg)
    done_stages = prior["next_stage"] - 1
    problem = colocate_problem(cfg, done_stages)
    if problem:
        print(f"config error: {problem}", file=sys.stderr)
        return 2
    init_from = out / f"stage_{done_stages}" if done_stages >= 1 else None
    model, tokenizer = load_model(cfg, init_from)
    check_episode_length(cfg, model, tokenizer)
    mid_stage = last_checkpoint(out / f"stage_{done_stages + 1}" / "checkpoints") if cfg["RESUME"] else None
    if init_from is None and not mid_stage:
        if is_main_process():  # a fresh run starts fresh logs
            close_generation_log()
            for name in ("generations.jsonl", "train_history.jsonl"):
                (Path(cfg["LOG_DIR"]) / name).unlink(missing_ok=True)
        warm_start(model, tokenizer, cfg)  # (a step checkpoint, when there is one, replaces these weights)
        if cfg["WARM_START_SFT_STEPS"] > 0 and not mid_stage:
            if is_main_process():  # GRPO's starting point: the final evaluation compares against it
                save_model(model, tokenizer, out / "stage_0")
                log(f"[warm start] saved the warm-started model to {out / 'stage_0'} (GRPO's start)")
            barrier()
    elif init_from is not None:
        log(f"[setup] resuming after stage {done_stages} from {init_from}")
    model, _state = train_curriculum(model, tokenizer, cfg, prior)
    evaluate_and_plot(model, tokenizer, cfg)
    close_generation_log()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
