#!/usr/bin/env python
"""Curriculum GRPO training on LifeStack life conflicts (HuggingFace TRL, Unsloth when present).

    python scripts/train_trl.py                       # the constants below, as they are
    python scripts/train_trl.py --N_STAGES=2 --SEED=7 # nanoGPT-style overrides, type-checked

The model reads a life conflict (metrics, budget, routes, events) and answers with one
JSON action; six reward functions built on ``get_lifestack_evaluation`` score it; after
each stage a held-out evaluation decides whether difficulty rises (1 -> 5) or falls back.
On a machine without a GPU the script runs a *CPU profile*: a tiny random Qwen2-
architecture model, to check the whole pipeline in minutes. See docs/train_trl.md.

Read top to bottom: the constants; the dataset; the evaluation and the six rewards; the
GRPO configuration; the curriculum loop; main. The machinery (configuration checks,
model loading, run state and resume, logging, evaluations, plots) is the package
``lifestack.training``, one concept per module.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere: make `lifestack` importable
    sys.path.insert(0, str(ROOT))

from lifestack.scoring import fallback  # noqa: E402
from lifestack.prompts import scenario_prompt, completion_text, prompt_text  # noqa: E402
from lifestack.task_reward import P_IMPLAUSIBLE, P_UNAFFORDABLE  # noqa: E402
from lifestack.scenarios import Scenario, sample_scenarios  # noqa: E402
from lifestack.training import config, seeds  # noqa: E402
from lifestack.training.checks import (  # noqa: E402
    check_env_server, check_episode_length, check_report_to, check_vllm, installed_versions, unsloth_problem, vllm_stage_problem,
)
from lifestack.training.context import RunContext  # noqa: E402
from lifestack.training.decisions import decisions  # noqa: E402
from lifestack.training.curriculum import append_history, curriculum_step, stage_line, stage_record  # noqa: E402
from lifestack.training.distributed import (  # noqa: E402
    barrier, broadcast_object, init_distributed, is_main_process, log, main_process_first, world_info,
)
from lifestack.training.run_evaluation import (  # noqa: E402
    episode_factory, evaluate_and_plot, evaluate_policy, held_out_prompts, policy_advance,
)

from lifestack.training.kl_reference import build_with_reference, load_checkpoint_policy  # noqa: E402
from lifestack.training.models import device_precision, import_unsloth, load_model, save_final, save_merged, save_model, unwrap  # noqa: E402
from lifestack.training.publish import finish_run  # noqa: E402
from lifestack.training.grpo_rewards import (  # noqa: E402
    EVALUATOR, REWARD_NAMES, chosen_rewards, component_reward, format_score, reward_function, valid_format_score,
)
from lifestack.training.run_state import (  # noqa: E402
    RunPaths, last_checkpoint, load_curriculum_state, start_run, write_json_atomic,
)
from lifestack.training.warm_start import warm_start  # noqa: E402
from lifestack.training.watch import diversity_line, integrity_line, integrity_watch, stage_diversity  # noqa: E402
from lifestack.value import CURRICULUM_THRESHOLD  # noqa: E402

_NAMES_BEFORE_CONSTANTS = set(globals())
# =====================================================================================
# Constants: edit these, or override any of them as --NAME=value on the command line.
# =====================================================================================
# --- model ---------------------------------------------------------------------------
MODEL_NAME = "Qwen/Qwen2.5-1.5B-Instruct"  # any chat model with a chat template
DEVICE_PROFILE = "auto"  # auto | unsloth | peft | cpu (auto: unsloth > peft on a GPU, else cpu)
USE_LORA = True  # LoRA adapters (QLoRA with Unsloth); False trains all weights
LORA_RANK = 16
LORA_ALPHA = 32
LOAD_IN_4BIT = True  # Unsloth profile only
MAX_SEQ_LENGTH = 2048  # prompt + completion tokens (Unsloth)
# --- curriculum ----------------------------------------------------------------------
N_STAGES = 5  # curriculum stages; difficulty starts at START_DIFFICULTY and may rise each stage
START_DIFFICULTY = 1
N_PROMPTS_PER_STAGE = 100
ADVANCE_THRESHOLD = CURRICULUM_THRESHOLD  # 0.6: held-out mean task reward above which difficulty rises
RETREAT_THRESHOLD = 0.3  # ... below which, two stages running at one difficulty, it falls back one (-1.0: never)
N_EVAL_PROMPTS = 20  # held-out prompts per stage evaluation
# --- GRPO ----------------------------------------------------------------------------
LEARNING_RATES = [5e-6, 5e-6, 4e-6, 3e-6, 2e-6]  # one per stage (the last repeats if fewer)
NUM_GENERATIONS = 4  # completions per prompt (the GRPO group)
PER_DEVICE_BATCH_SIZE = 4  # completions per device per step; x processes x accumulation % NUM_GENERATIONS == 0
GRAD_ACCUM_STEPS = 1
MAX_COMPLETION_LENGTH = 256  # tokens (per turn in episode mode)
HORIZON = 1  # decisions per GRPO sample: 1 = one action per prompt; > 1 = closed-loop episodes of up to HORIZON turns
ON_POLICY_STATES = 0.0  # share of each stage's prompts at a state the stage's model reached itself (greedy, 1+ steps on)
ENV_URL = ""  # episode mode: play episodes on a `python -m lifestack.serve` server at this URL ("" = in-process)
TEMPERATURE = 1.0  # sampling temperature for GRPO generations
BETA = 0.0  # KL coefficient toward GRPO's start (stage_0, else the base model; 0: no reference, TRL's default)
REWARD_WEIGHTS = {  # the rewards GRPO optimises, by name, and their weights (leave a name out to leave that reward out)
    "reward_format_fn": 1.0, "reward_plausibility_fn": 0.5, "reward_task_success_fn": 2.0,
    "reward_milestone_fn": 1.0, "reward_reasoning_fn": 0.5, "reward_human_feedback_fn": 0.5,
}
# --- logging, outputs, evaluation ----------------------------------------------------
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
PUSH_TO_HUB = ""  # a hub repo id (owner/name): push the final model, its card and plots at the end ("" = off)
# --- vLLM generation (GPU) and reporting ---------------------------------------------
USE_VLLM = False  # TRL's vLLM generation (GPU + `pip install vllm`)
VLLM_MODE = "colocate"  # colocate: vLLM shares each training GPU | server: `trl vllm-serve` elsewhere
VLLM_GPU_MEMORY_UTILIZATION = 0.3  # colocate mode: share of each GPU's memory vLLM may take
VLLM_SERVER_HOST = "127.0.0.1"  # server mode: where `trl vllm-serve` listens
VLLM_SERVER_PORT = 8000
REPORT_TO = "auto"  # auto (tensorboard when installed) | none | tensorboard | wandb
# --- warm start, feedback, CPU profile -----------------------------------------------
WARM_START_SFT_STEPS = 0  # supervised steps on demonstrations before GRPO
WARM_START_POLICY = "format"  # format: random decisions in the right form (GRPO must find the decisions) | rules | heuristic
WARM_START_LR = 1e-5
FEEDBACK_DB = ""  # outcome-feedback SQLite file; "" = lifestack.feedback.default_db_path()
FEEDBACK_ON_ERROR = "raise"  # raise | zero: what an unreadable feedback database does
CPU_BASE_DIR = ""  # where the CPU profile's tiny model is built; "" = OUTPUT_DIR/cpu_base_model
# The CPU profile swaps in these values (unless given on the command line): a pipeline
# check in minutes on 2 cores, not real training. Why each value: docs/train_trl.md.
CPU_PROFILE = {
    "USE_LORA": False,  # a tiny random model learns nothing through a rank-16 adapter
    "N_PROMPTS_PER_STAGE": 96,  # 24 optimizer steps per stage
    "N_EVAL_PROMPTS": 8,
    "PER_DEVICE_BATCH_SIZE": 16,  # 4 prompts x 4 completions per step
    "MAX_COMPLETION_LENGTH": 160,  # a complete JSON action is ~140 tokens of the tiny tokenizer
    "TEMPERATURE": 0.7,  # a barely warm-started model breaks its JSON too often at 1.0
    "LEARNING_RATES": [5e-5],  # from an imitation start 2e-4 unlearns what it imitated (docs/learning.md)
    "SAVE_STEPS": 2,
    "WARM_START_SFT_STEPS": 1000,  # demonstrations (WARM_START_POLICY): without them no completion parses
    "WARM_START_POLICY": "heuristic",  # a start that can play, as an instruct model can; from `format` no task is finished
    "WARM_START_LR": 2e-3,
    "ON_POLICY_STATES": 0.5,  # half the prompts at states the model's own play reached
}
# =====================================================================================
CONFIG_KEYS = tuple(n for n in globals() if n.isupper() and not n.startswith("_") and n not in _NAMES_BEFORE_CONSTANTS)
ConfigError = config.ConfigError


def default_config() -> dict[str, Any]:
    """The constants block above as a dict (deep-copied lists and dicts)."""
    g = globals()
    return {n: json.loads(json.dumps(g[n])) for n in CONFIG_KEYS}


def build_config(argv: Sequence[str], world_size: int = 1, profile: str | None = None) -> dict[str, Any]:
    """The constants, ``--KEY=value`` overrides typed like them, the CPU profile swapped in
    when it runs, all validated (lifestack.training.config). ``profile`` skips detection."""
    return config.build_config(argv, default_config(), world_size, profile)


# =====================================================================================
# Dataset: seeded conversational prompts carrying the state they were written from
# =====================================================================================
def generate_dataset(n_prompts: int, difficulty: int | None = None, *, seed: int,
                     advance: Callable[[list[Scenario]], list[Scenario]] | None = None):
    """``n_prompts`` seeded conversational prompts as a ``datasets.Dataset``.

    Each item is ``lifestack.scenarios.sample_scenario``'s: a task from ``TaskGenerator``
    (flight_crisis or code_merge_crisis), a ``ConflictEvent`` of the same difficulty
    cascaded through the ``DependencyGraph``, rolled a few steps forward so states vary,
    rendered with its metadata by ``scenario_prompt``. Item ``i`` is drawn from
    ``random.Random(seed + i)`` and records its seed and difficulty; ``difficulty=None``
    cycles 1..5. Same arguments, identical dataset. ``seed`` has no default: a default
    bound to the SEED constant would ignore a ``--SEED`` override.
    ``advance`` may move the scenarios on before they are rendered (the on-policy states
    of ``ON_POLICY_STATES``: :func:`lifestack.onpolicy.advance_by_policy`).
    """
    from datasets import Dataset

    scenarios = sample_scenarios(n_prompts, difficulty, seed)
    if advance is not None:
        scenarios = advance(scenarios)
    rows: dict[str, list] = {"prompt": [], "difficulty": [], "domain": [], "seed": []}
    for sc in scenarios:
        rows["prompt"].append(scenario_prompt(sc))
        rows["difficulty"].append(sc.difficulty)
        rows["domain"].append(sc.task.domain)
        rows["seed"].append(sc.seed)
    return Dataset.from_dict(rows)


# =====================================================================================
# Evaluation + the six reward functions
# =====================================================================================
# The run context of this process: TRL calls the reward functions with a fixed signature,
# so what they record (step, reward time, hack signatures, generations.jsonl) goes here.
RUN = RunContext(reward_weights=dict(REWARD_WEIGHTS))


def get_lifestack_evaluation(completion: Any, prompt: Any) -> dict[str, Any]:
    """Score one completion against the state its prompt was written from.

    Returns ``{"reward": float in [-1, 1], "breakdown": dict, "action": LifeStackAction | None}``;
    on any parse or environment failure ``{"reward": -0.5, "breakdown": {"error": ...},
    "action": None}``. Never raises. Only the prompt's metadata is read: a completion
    cannot change the state it is scored against (lifestack.scoring). Cached per
    (prompt, completion): the six rewards of one answer cost one evaluation.
    """
    try:
        # RUN.observe sees each fresh evaluation once: hack signatures, every LOG_INTERVAL-th to generations.jsonl
        return EVALUATOR.evaluate(prompt_text(prompt), completion_text(completion), on_fresh=RUN.observe)
    except Exception as exc:  # never let one completion crash a training run
        return fallback(f"evaluation error: {type(exc).__name__}: {exc}")


def _evaluations(completions: Sequence[Any], prompts: Sequence[Any] | None, kwargs: dict) -> list[dict]:
    state = kwargs.get("trainer_state")
    if state is not None and getattr(state, "global_step", None) is not None:
        RUN.step = state.global_step
    prompts = prompts if prompts is not None else kwargs.get("prompt") or [""] * len(completions)
    return [get_lifestack_evaluation(c, p) for c, p in zip(completions, prompts)]


def _scored(completions: Sequence[Any], prompts: Sequence[Any] | None, kwargs: dict, score: Callable[[dict], float],
            unparseable: float) -> list[float]:
    """``score(evaluation)`` for each completion that parsed, ``unparseable`` for the rest."""
    return [unparseable if ev["action"] is None else float(score(ev)) for ev in _evaluations(completions, prompts, kwargs)]


# Each reward is clipped to [-1, 1], timed, and in episode mode (HORIZON > 1) scored per
# turn and aggregated per episode (lifestack.training.grpo_rewards.reward_function).
@reward_function(RUN)
def reward_format_fn(completions: Sequence[Any], prompts: Sequence[Any] | None = None, **kwargs) -> list[float]:
    """JSON format compliance, graded: -1 empty/refusal, -0.6 no JSON, -0.4..-0.1 partial, 0.1..1 valid."""
    prompts = prompts if prompts is not None else kwargs.get("prompt")
    if not prompts or len(prompts) != len(completions):
        return [format_score(completion_text(c)) for c in completions]
    # With prompts, reuse the action the (shared, cached) evaluation parsed: one parse per
    # completion for all six rewards. The evaluation parses the same metadata-stripped text.
    return [valid_format_score(ev["action"]) if ev["action"] is not None else format_score(completion_text(c))
            for c, ev in zip(completions, _evaluations(completions, prompts, kwargs))]


@reward_function(RUN)
def reward_plausibility_fn(completions: Sequence[Any], prompts: Sequence[Any] | None = None, **kwargs) -> list[float]:
    """Claims must be paid for: minus the unpaid claimed goodness points / UNPAID_FULL_AT (0 when
    all is paid or nothing is claimed; never positive, so claiming is never worth anything by
    itself); over budget: minus the overspend penalty's share; -1 for negative costs or
    unparseable text."""
    def paid_for(ev: dict) -> float:
        b = ev["breakdown"]
        if any(n.startswith("negative_cost") for n in ev["action"].notes):
            return -1.0
        if "penalty.unaffordable" in b:
            return float(b["penalty.unaffordable"]) / -P_UNAFFORDABLE
        return float(b.get("penalty.implausible", 0.0)) / -P_IMPLAUSIBLE  # the task reward's unpaid ramp, as a share

    return _scored(completions, prompts, kwargs, paid_for, unparseable=-1.0)


@reward_function(RUN)
def reward_task_success_fn(completions: Sequence[Any], prompts: Sequence[Any] | None = None, **kwargs) -> list[float]:
    """The decision's task reward: its step reward blended with the value of the episode it
    starts (lifestack.value); per turn of a played episode (``per_turn``) the step reward
    alone. -0.5 when it cannot be evaluated."""
    key = "step_reward" if kwargs.get("per_turn") else "reward"
    return [float(ev.get(key, ev["reward"])) for ev in _evaluations(completions, prompts, kwargs)]


@reward_function(RUN)
def reward_milestone_fn(completions: Sequence[Any], prompts: Sequence[Any] | None = None, **kwargs) -> list[float]:
    """Milestone progress made by the action: its share of the best per-step milestone reward;
    a dead end -0.4 (still a valid answer: above unparseable text, -0.5)."""
    return _scored(completions, prompts, kwargs, component_reward("component.milestone", "penalty.dead_end", -0.4),
                   unparseable=-0.5)


@reward_function(RUN)
def reward_reasoning_fn(completions: Sequence[Any], prompts: Sequence[Any] | None = None, **kwargs) -> list[float]:
    """Planning coherence of the reasoning with state, action and route (0..1); keyword
    stuffing -0.4; unparseable -0.5."""
    return _scored(completions, prompts, kwargs, component_reward("component.reasoning", "penalty.keyword_stuffing", -0.4),
                   unparseable=-0.5)


@reward_function(RUN)
def reward_human_feedback_fn(completions: Sequence[Any], prompts: Sequence[Any] | None = None, **kwargs) -> list[float]:
    """Agreement with recorded outcomes of this situation (conflict; or task family under the
    same pressured domain; weighted by difficulty); 0 where none apply; -1 unparseable."""
    try:
        store = RUN.feedback.store()
    except Exception:
        if RUN.feedback.on_error != "zero":
            raise
        return [0.0] * len(completions)

    def agreement(ev: dict) -> float:
        conflict_id, family, pressured, difficulty = ev["situation"]
        score = store.score(conflict_id, ev["action"].action_type, ev["action"].target_domain,
                            pressured_domain=pressured, difficulty=difficulty, family=family)
        return 0.0 if score is None else score

    return _scored(completions, prompts, kwargs, agreement, unparseable=-1.0)  # unparseable: every reward's lowest


REWARD_FUNCS = [reward_format_fn, reward_plausibility_fn, reward_task_success_fn,
                reward_milestone_fn, reward_reasoning_fn, reward_human_feedback_fn]
assert tuple(f.__name__ for f in REWARD_FUNCS) == REWARD_NAMES  # the names REWARD_WEIGHTS may use
RUN.score_lines_with(REWARD_FUNCS)  # generations.jsonl scores every line with all six, weighted as GRPO weights them


# =====================================================================================
# GRPO configuration and the curriculum
# =====================================================================================
def grpo_config(cfg: dict[str, Any], stage: int, output_dir: Path):
    """TRL GRPOConfig for one stage (TRL 1.x names: processing_class, no max_prompt_length)."""
    import importlib.util

    import torch
    from trl import GRPOConfig

    report = cfg["REPORT_TO"]
    if report == "auto":
        report = "tensorboard" if importlib.util.find_spec("tensorboard") else "none"
    cuda = torch.cuda.is_available() and cfg["_PROFILE"] != "cpu"
    precision = device_precision(cfg)  # autocast over fp32 trainable weights (see weight_precision)
    kwargs = dict(
        output_dir=str(output_dir), learning_rate=config.stage_learning_rate(cfg, stage),
        per_device_train_batch_size=cfg["PER_DEVICE_BATCH_SIZE"], gradient_accumulation_steps=cfg["GRAD_ACCUM_STEPS"],
        num_generations=cfg["NUM_GENERATIONS"], max_completion_length=cfg["MAX_COMPLETION_LENGTH"],
        temperature=cfg["TEMPERATURE"], beta=cfg["BETA"],
        reward_weights=[float(cfg["REWARD_WEIGHTS"][f.__name__])
                        for f in chosen_rewards(REWARD_FUNCS, cfg["REWARD_WEIGHTS"])],
        num_train_epochs=1, logging_steps=1, save_strategy="steps", save_steps=cfg["SAVE_STEPS"], save_total_limit=1,
        report_to=report, seed=cfg["SEED"] + stage, data_seed=cfg["SEED"] + stage, bf16=precision == "bf16", fp16=precision == "fp16",
        use_cpu=not cuda, remove_unused_columns=False,
        gradient_checkpointing=cfg["_PROFILE"] != "cpu",  # TRL's default, but on CPU: the tiny model needs no memory saved
        disable_tqdm=not is_main_process(),
        # Stated, not left to defaults, since Unsloth's GRPOConfig changes them (8-bit AdamW, weight decay, 10 % warmup,
        # "bnpo", top_k from the model's generation config): every profile trains the same way. Each stage's rate
        # decays linearly to 0 within it. "bnpo" is TRL's default "dapo" with one process and no accumulation;
        # under Unsloth "dapo" would also mask truncated completions and raise epsilon_high to 0.28.
        optim="adamw_torch_fused", weight_decay=0.0, lr_scheduler_type="linear", warmup_steps=0,
        loss_type="bnpo", top_k=0, top_p=1.0,
    )
    if cfg["USE_VLLM"]:
        kwargs.update(use_vllm=True, vllm_mode=cfg["VLLM_MODE"])
        if cfg["VLLM_MODE"] == "colocate":
            kwargs.update(vllm_gpu_memory_utilization=cfg["VLLM_GPU_MEMORY_UTILIZATION"])
        else:
            kwargs.update(vllm_server_host=cfg["VLLM_SERVER_HOST"], vllm_server_port=cfg["VLLM_SERVER_PORT"])
    return GRPOConfig(**kwargs)


def train_curriculum(model, tokenizer, cfg: dict[str, Any], state: dict[str, Any] | None = None,
                     paths: RunPaths | None = None) -> tuple[Any, dict[str, Any]]:
    """Stage by stage: train on the stage's prompts, save ``stage_N``, evaluate held out,
    decide the next difficulty, record and log the stage. ``state`` is :func:`start_run`'s
    (by default read as a resume reads it); it stays in memory and is written (atomically)
    after every stage."""
    paths = paths or RunPaths.of(cfg)
    state = state if state is not None else load_curriculum_state(paths.state, cfg)
    RUN.configure(cfg)
    if state["next_stage"] > cfg["N_STAGES"]:
        log(f"[curriculum] {paths.state}: all {cfg['N_STAGES']} stages are done; nothing to train "
            "(raise N_STAGES to continue, or --RESUME=False to start over)")
    for stage in range(state["next_stage"], cfg["N_STAGES"] + 1):
        difficulty = state["difficulty"]
        RUN.stage, RUN.difficulty = stage, difficulty
        dataset = generate_dataset(cfg["N_PROMPTS_PER_STAGE"], difficulty, seed=seeds.stage_prompts(cfg["SEED"], stage),
                                   advance=policy_advance(model, tokenizer, cfg))
        trainer = stage_trainer(model, tokenizer, cfg, stage, dataset, paths, announce=stage == state["next_stage"])
        resume = last_checkpoint(paths.checkpoints(stage)) if cfg["RESUME"] else None
        dropped = config.dropped_prompts(cfg, world_info()[1])
        log(f"[stage {stage}/{cfg['N_STAGES']}] difficulty {difficulty}, {len(dataset)} prompts"
            + (f" ({dropped} left out: they do not fill a GRPO step of {config.prompts_per_step(cfg, world_info()[1])})"
               if dropped else "") + (f", resuming from {resume}" if resume else ""))
        load_checkpoint_policy(trainer, resume)  # a LoRA checkpoint with the KL reference's adapter in it
        RUN.signatures = {}  # the integrity watch reads this stage's completions only
        reward_t0, t0 = RUN.reward_seconds, time.perf_counter()
        trainer.train(resume_from_checkpoint=resume)  # train
        seconds, reward_seconds = time.perf_counter() - t0, RUN.reward_seconds - reward_t0
        model, history = trainer.model, [h for h in trainer.state.log_history if "reward" in h]
        if is_main_process():  # save
            save_model(model, tokenizer, paths.stage(stage))
            append_history(paths.train_history, stage, difficulty, history)
        barrier()
        record = None
        if is_main_process():  # evaluate held out, decide
            prompts = held_out_prompts(cfg["N_EVAL_PROMPTS"], difficulty, seeds.held_out_prompts(cfg["SEED"], stage))
            result = evaluate_policy(unwrap(model), tokenizer, prompts, cfg, RUN)
            decision = curriculum_step(state["stages"], difficulty, result["mean_task_reward"],
                                       cfg["ADVANCE_THRESHOLD"], cfg["RETREAT_THRESHOLD"])
            record = stage_record(stage, difficulty, result, decision, history, trainer.state.global_step, seconds,
                                  reward_seconds)
            record.update(watch_stage(result, cfg, stage, difficulty, state["stages"][-1] if state["stages"] else None, RUN))
        say_steps_per_rank(stage, trainer.state.global_step)
        state = record_stage(state, broadcast_object(record), paths, cfg)  # every rank takes rank 0's decision; log
    return model, finish_curriculum(model, tokenizer, state, cfg, paths)


def stage_trainer(model, tokenizer, cfg: dict[str, Any], stage: int, dataset, paths: RunPaths, announce: bool = False):
    """The GRPOTrainer of one stage: the chosen rewards, :func:`grpo_config`, the stage's
    prompts, in episode mode the rollout (the curriculum's and the CPU step bench's)."""
    from trl import GRPOTrainer

    os.environ["TENSORBOARD_LOGGING_DIR"] = str(paths.tensorboard(stage))  # REPORT_TO: kept after the stage
    trainer, reference = build_with_reference(  # BETA > 0: the KL reference is GRPO's start in every stage
        lambda: GRPOTrainer(model=model, reward_funcs=chosen_rewards(REWARD_FUNCS, cfg["REWARD_WEIGHTS"]),
                            args=grpo_config(cfg, stage, paths.checkpoints(stage)), train_dataset=dataset,
                            processing_class=tokenizer, **episode_rollout(cfg, announce=announce)),
        model, cfg, paths)
    if announce and cfg["BETA"] > 0:
        log(f"[kl] BETA={cfg['BETA']}: the KL penalty's reference is {reference}")
    return trainer


def episode_rollout(cfg: dict[str, Any], announce: bool) -> dict[str, Any]:
    """``HORIZON > 1``: the trainer's ``rollout_func``, playing each prompt as a closed-loop
    episode (lifestack.rollout; environment tokens masked from the loss). ``{}`` otherwise."""
    mode = decisions(cfg["HORIZON"])
    if mode.episodes:
        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # said once below, not per stage by TRL
        if announce:
            log(f"[episodes] HORIZON={mode.horizon}: each GRPO sample is a closed-loop episode of up to "
                f"{mode.horizon} turns; environment tokens are masked from the loss (TRL rollout_func, "
                "experimental in TRL 1.14)")
    return mode.trainer_kwargs(make_episode=episode_factory(cfg), on_rollout=RUN.log_rollout)


def watch_stage(result: dict[str, Any], cfg: dict[str, Any], stage: int, difficulty: int, previous: dict | None,
                run: RunContext) -> dict[str, Any]:
    """The stage's answer diversity and (INTEGRITY_PROMPTS > 0) its reward-integrity watch."""
    out = {"diversity": stage_diversity(result["turn_prompts"], result["completions"])}
    if cfg["INTEGRITY_PROMPTS"] > 0:
        out["integrity"] = integrity_watch(cfg, stage, difficulty, previous, run)
    return out


def say_steps_per_rank(stage: int, steps: int) -> None:
    """Several processes: proof, per rank, that every process trained its share."""
    rank, world = world_info()
    if world > 1:
        print(f"[rank {rank}] stage {stage}: {steps} optimizer steps done", flush=True)


def record_stage(state: dict[str, Any], record: dict[str, Any], paths: RunPaths, cfg: dict[str, Any]) -> dict[str, Any]:
    """Add the stage's record to the state, write it, drop the spent step checkpoints, log the stage."""
    state["stages"].append(record)
    state["difficulty"] = record["next_difficulty"]
    state["next_stage"] = record["stage"] + 1
    if is_main_process():
        write_json_atomic(paths.state, state)
        shutil.rmtree(paths.checkpoints(record["stage"]), ignore_errors=True)  # the stage is saved
        log(stage_line(record, cfg["ADVANCE_THRESHOLD"]))
        log(diversity_line(record["stage"], record["diversity"]))
        if "integrity" in record:
            log(integrity_line(record["stage"], record["integrity"]))
    barrier()
    return state


def finish_curriculum(model, tokenizer, state: dict[str, Any], cfg: dict[str, Any], paths: RunPaths) -> dict[str, Any]:
    """Save the final model and tokenizer (and with SAVE_MERGED a merged copy); the state
    lists the files written, so that RESUME=False can move them aside."""
    state["finished"] = True
    if is_main_process():
        state["final_files"] = save_final(model, tokenizer, paths.out)
        write_json_atomic(paths.state, state)
        log(f"[curriculum] final model and tokenizer saved to {paths.out}")
        if cfg["SAVE_MERGED"]:
            method = save_merged(model, tokenizer, paths.merged, cfg, adapter_dir=paths.out)
            log(f"[curriculum] merged model ({method}) saved to {paths.merged}" if method else
                f"[curriculum] SAVE_MERGED: no adapter to merge (full-weight training); {paths.out} holds the full model")
    barrier()
    return state


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
    if cfg["_PROFILE"] == "unsloth":
        unsloth = import_unsloth()  # before anything imports transformers, trl or peft: Unsloth patches them
        problem = unsloth_problem(cfg, installed_versions(unsloth))
        if problem:
            print(f"config error: {problem}", file=sys.stderr)
            return 2
    check_vllm(cfg)
    check_report_to(cfg)
    check_env_server(cfg)
    init_distributed(cpu=cfg["_PROFILE"] == "cpu")
    RUN.feedback.configure(cfg["FEEDBACK_DB"], cfg["FEEDBACK_ON_ERROR"])
    problem = open_feedback(cfg)  # a broken database stops the run here, not mid-training
    if problem:
        print(f"feedback database error: {problem}", file=sys.stderr)
        return 2
    import random

    import torch
    from transformers import set_seed

    random.seed(cfg["SEED"])
    set_seed(cfg["SEED"])
    threads = torch.get_num_threads()  # a seeded CPU run repeats bit for bit with one thread only
    log(f"[setup] profile {cfg['_PROFILE']}, world size {world}, model {cfg['MODEL_NAME']}, "
        f"{cfg['N_STAGES']} stages x {cfg['N_PROMPTS_PER_STAGE']} prompts, torch {torch.__version__}, {threads} CPU threads"
        + (" (bit-for-bit repeatable with OMP_NUM_THREADS=1)" if cfg["_PROFILE"] == "cpu" and threads > 1 else ""))
    paths = RunPaths.of(cfg)
    state = start_run(cfg)  # the run's state, in memory from here to finish_run
    done_stages = state["next_stage"] - 1
    problem = vllm_stage_problem(cfg, done_stages)
    if problem:
        print(f"config error: {problem}", file=sys.stderr)
        return 2
    mid_stage = last_checkpoint(paths.checkpoints(done_stages + 1), quiet=True) if cfg["RESUME"] else None
    # the model the next stage starts from (a checkpoint inside it restores its weights; the stage's
    # on-policy prompts are played by this model before, as in the run that stopped)
    init_from = paths.stage(done_stages) if done_stages >= 1 else paths.grpo_start() if mid_stage else None
    model, tokenizer = load_model(cfg, init_from)
    check_episode_length(cfg, model, tokenizer)
    if done_stages == 0 and not mid_stage:
        if is_main_process():  # a fresh run starts fresh logs
            RUN.log.close()
            for path in (paths.generations, paths.train_history):
                path.unlink(missing_ok=True)
        warm_start(model, tokenizer, cfg)
        if cfg["WARM_START_SFT_STEPS"] > 0:
            if is_main_process():  # GRPO's starting point: the final evaluation compares against it
                save_model(model, tokenizer, paths.stage(0))
                log(f"[warm start] saved the warm-started model to {paths.stage(0)} (GRPO's start)")
            barrier()
    elif init_from is not None:
        log(f"[setup] resuming after stage {done_stages} from {init_from}")
    model, state = train_curriculum(model, tokenizer, cfg, state, paths)
    summary = evaluate_and_plot(model, tokenizer, cfg, RUN, state["stages"])
    if is_main_process():  # the model card (OUTPUT_DIR/README.md) and, with PUSH_TO_HUB, the upload
        finish_run(cfg, default_config(), summary, state)
    RUN.log.close()
    return 0


def open_feedback(cfg: dict[str, Any]) -> str | None:
    """Open the outcome-feedback database, rank 0 first (only one process ever creates and
    seeds it). FEEDBACK_ON_ERROR=raise: the error, to stop the run; zero: say so, go on."""
    with main_process_first():
        try:
            RUN.feedback.store()
        except Exception as exc:
            if cfg["FEEDBACK_ON_ERROR"] == "raise":
                return str(exc)
            log(f"[setup] feedback database unavailable ({exc}); reward_human_feedback_fn will return 0.0")
    return None

if __name__ == "__main__":
    raise SystemExit(main())
