"""The learning check's arms and measurements (``scripts/learning_check.py`` is the command).

A seed's run (:func:`run_seed`): the CPU profile's tiny model warm-started, scored on the
fixed held-out prompts (:data:`HELD_OUT_SEED`) and the fixed closed-loop starts
(:data:`EPISODE_SEED`) before and after the GRPO curriculum (:func:`train_arm`), and,
with a control arm, after the control's training from the same weights instead
(:data:`CONTROLS`: :func:`imitation_arm`, or :func:`train_arm` with
:func:`shuffled_reward`). Also here: the run sizes (:func:`settings`), the per-answer
scores the rule reads (:func:`answer_scores`, :func:`episode_scores`) and the reference
policies' scores on the same prompts and starts (:func:`reference_scores`,
:func:`reference_play`). The rule that judges them and its tables:
``lifestack.training.learning_rule``.

``T`` is the training script's module (``scripts/train_trl.py``: its constants, run
context, reward functions and curriculum), passed in by the caller: the package never
imports the script.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import random
import time
from pathlib import Path

from lifestack.prompts import completion_text, prompt_text
from lifestack.training.config import stage_learning_rate
from lifestack.training.run_evaluation import evaluate_policy, held_out_prompts, run_episodes
from lifestack.training.models import load_model
from lifestack.training.grpo_rewards import EVALUATOR
from lifestack.training.warm_start import warm_start
from lifestack.training.watch import stage_diversity

HELD_OUT_SEED = 31_000_000  # fixed: every seed is measured on the same prompts
EPISODE_SEED = 32_000_000  # fixed: every seed plays the same closed-loop episode starts
EVAL_TEMPERATURE = 0.7  # the held-out samples' temperature, whatever a training override sets: the same
# measurement for every recipe (--versus), the CPU profile's TEMPERATURE (a test holds them equal)
METRICS = ("reward_format_fn", "reward_plausibility_fn", "reward_task_success_fn", "reward_milestone_fn",
           "reward_reasoning_fn", "reward_human_feedback_fn", "valid_json_rate")
CONTROLS = {  # --control=KIND: what the control arm does with the GRPO arm's compute
    "shuffled": "same compute, rewards shuffled within each batch",
    "imitation": "more imitation: as many supervised steps on the warm start's demonstrations as GRPO's",
}


def settings(T, quick: bool) -> dict:
    """Training sizes. The full check runs the CPU profile's own recipe (warm start, prompts
    per stage, batch, learning rate: ``T.CPU_PROFILE``); --quick is CI's smoke version
    (fewer steps and prompts)."""
    if quick:
        return {"warm_steps": 300, "stages": 3, "prompts": 16, "held_out": 8, "samples": 4, "lr": 2e-4, "batch": 16,
                "held_out_difficulty": 1, "episodes": 10}
    cpu = T.CPU_PROFILE
    return {"warm_steps": cpu["WARM_START_SFT_STEPS"], "stages": 5, "prompts": cpu["N_PROMPTS_PER_STAGE"],
            "held_out": 80, "samples": 4, "lr": cpu["LEARNING_RATES"][0], "batch": cpu["PER_DEVICE_BATCH_SIZE"],
            "held_out_difficulty": None, "episodes": 100}


def answer_scores(T, prompts: list, completions: list[str], samples: int) -> list[dict]:
    """Per held-out prompt: its answers' task rewards and whether each parsed. Scored in the
    ``rescore`` phase: ``evaluate_policy`` already counted and logged these answers, so
    they do not reach generations.jsonl a second time (they used to, after training,
    labelled as training answers of the last stage)."""
    out = []
    with T.RUN.in_phase("rescore"):
        for i, prompt in enumerate(prompts):
            rows = []
            for c in completions[i * samples:(i + 1) * samples]:
                ev = T.get_lifestack_evaluation(c, prompt)
                rows.append({"task": float(ev["reward"]), "valid": ev["action"] is not None,
                             "key": action_key(ev["action"])})
            out.append(rows)
    return out


def action_key(action) -> list | None:
    """lifestack.diversity.answer_key as a JSON list (None: no decision)."""
    from lifestack.diversity import answer_key

    return None if action is None else list(answer_key(action))


def episode_scores(T, model, tok, cfg: dict, n: int) -> list[dict]:
    """The trainer's final evaluation (``run_episodes``: greedy, whole episodes from
    ``evaluation_starts``, difficulty 1 -> 5, families alternating) on the fixed starts of
    EPISODE_SEED: per episode its reward, each step's reward and route status, its outcome."""
    keep = ("difficulty", "domain", "reward", "steps", "outcome", "valid_json_rate", "turn_rewards", "route_statuses")
    return [{k: r[k] for k in keep if k in r} for r in run_episodes(model, tok, cfg, n, EPISODE_SEED, T.RUN)]


def reference_scores(T, prompts: list) -> list[dict]:
    """Per held-out prompt: the oracle's and the heuristic's task reward on it, and the
    heuristic's decision (``heuristic_key``: what the warm start imitates)."""
    from lifestack.env import LifeStackEnv
    from lifestack.policies import heuristic, oracle

    env = LifeStackEnv()
    out = []
    for prompt in prompts:
        task, state, meta = EVALUATOR.context(prompt_text(prompt))
        row = {"difficulty": int(meta.get("difficulty", 0))}
        for name, policy in (("oracle", oracle), ("heuristic", heuristic)):
            env.restore(task, state)
            ev = T.get_lifestack_evaluation(policy(env), prompt)
            row[name] = float(ev["reward"])
            row[f"{name}_key"] = action_key(ev["action"])
        out.append(row)
    return out


def reference_play(T, n: int) -> dict[str, list[dict]]:
    """The reference policies' closed-loop play on the trainer's final-evaluation starts of
    EPISODE_SEED, played and scored as the trainer's final evaluation plays them
    (``lifestack.training.run_evaluation.reference_episodes``, HORIZON = 1): per policy, per
    episode its difficulty, mean step reward and outcome. ``oracle`` is the greedy
    maximiser of the decision reward."""
    from lifestack.training.run_evaluation import reference_episodes

    return reference_episodes(1, n, EPISODE_SEED, T.RUN)


def held_out(s: dict) -> list:
    """The fixed held-out prompts (the same for every seed)."""
    return held_out_prompts(s["held_out"], s["held_out_difficulty"], HELD_OUT_SEED)


def shuffled_reward(fn, text_of):
    """``fn`` with its outputs permuted within each batch: the control arm's reward, the
    same values GRPO would see but no longer attached to the completions that earned
    them. The permutation is seeded by the batch's texts, so the six rewards of one batch
    get the same one (the weighted total moves as a whole) and a rerun is identical."""
    @functools.wraps(fn)
    def wrapper(completions, *args, **kwargs):
        out = list(fn(completions, *args, **kwargs))
        digest = hashlib.sha256("\x00".join(text_of(c) for c in completions).encode()).hexdigest()
        order = list(range(len(out)))
        random.Random(digest).shuffle(order)
        return [out[i] for i in order]

    return wrapper


def train_arm(T, model, tok, cfg: dict, control: bool):
    """train_curriculum as the trainer runs it; ``control``: with shuffled rewards."""
    if not control:
        return T.train_curriculum(model, tok, cfg)
    real = list(T.REWARD_FUNCS)
    T.REWARD_FUNCS[:] = [shuffled_reward(f, completion_text) for f in real]
    try:
        return T.train_curriculum(model, tok, cfg)
    finally:
        T.REWARD_FUNCS[:] = real


def grpo_compute(cfg: dict) -> tuple[float, int]:
    """The learning rate and completions per optimizer step the GRPO arm trained with, read
    from the run's own settings (an override after ``--`` included): the mean of the rates
    its stages used (one rate in the CPU profile), and the batch times accumulation."""
    used = [stage_learning_rate(cfg, stage) for stage in range(1, cfg["N_STAGES"] + 1)]
    return sum(used) / len(used), cfg["PER_DEVICE_BATCH_SIZE"] * cfg["GRAD_ACCUM_STEPS"]


def imitation_arm(T, model, tok, cfg: dict, grpo_steps: int):
    """The imitation control: from the warm-started weights, ``grpo_steps`` more supervised
    steps (as many as GRPO's optimizer steps), each on as many demonstrations as GRPO's
    step had completions, at GRPO's learning rate (:func:`grpo_compute`), on the warm
    start's own demonstrations (the same WARM_START_POLICY, the same scenarios): GRPO's
    compute spent on more of the warm start instead."""
    lr, batch = grpo_compute(cfg)
    icfg = {**cfg, "WARM_START_SFT_STEPS": grpo_steps, "WARM_START_LR": lr}
    warm_start(model, tok, icfg, batch_size=batch)
    return model


def measurement_config(cfg: dict) -> dict:
    """The run's settings as the held-out evaluation uses them: sampled at EVAL_TEMPERATURE,
    not at the TEMPERATURE a recipe trains with (training may sample hotter; the yardstick
    must not move with it, or ``--versus`` would compare two measurements)."""
    return {**cfg, "TEMPERATURE": EVAL_TEMPERATURE}


def run_seed(T, seed: int, out_dir: Path, s: dict, extra: list[str], control: str | None = None) -> dict:
    """One seed of the check: the CPU profile's model warm-started (``s``: :func:`settings`;
    ``extra``: the caller's ``--KEY=value`` overrides, they win), scored on the held-out
    prompts and the closed-loop starts before and after GRPO and, with ``control``
    (a :data:`CONTROLS` kind), after the control arm; the logs and models under
    ``out_dir/seed_N``. Returns the seed's record as the rule reads it."""
    from transformers import set_seed

    run_dir = out_dir / f"seed_{seed}"
    argv = [
        "--DEVICE_PROFILE=cpu", f"--SEED={seed}", f"--OUTPUT_DIR={run_dir / 'model'}", f"--LOG_DIR={run_dir / 'logs'}",
        f"--CPU_BASE_DIR={run_dir / 'base'}", f"--WARM_START_SFT_STEPS={s['warm_steps']}",
        f"--N_STAGES={s['stages']}", f"--N_PROMPTS_PER_STAGE={s['prompts']}", "--RESUME=False",
        f"--LEARNING_RATES=[{s['lr']}]", f"--PER_DEVICE_BATCH_SIZE={s['batch']}",
        f"--FEEDBACK_DB={out_dir / 'feedback.sqlite3'}", *extra,
    ]
    cfg = T.build_config(argv, profile="cpu")
    T.RUN.feedback.configure(cfg["FEEDBACK_DB"])
    T.RUN.configure(cfg)
    set_seed(seed)
    t0 = time.perf_counter()
    model, tok = load_model(cfg, banner=False)
    warm_start(model, tok, cfg)
    prompts = held_out_prompts(s["held_out"], s["held_out_difficulty"], HELD_OUT_SEED)
    measure = measurement_config(cfg)
    before = evaluate_policy(model, tok, prompts, measure, T.RUN, samples=s["samples"])
    episodes_before = episode_scores(T, model, tok, cfg, s["episodes"])
    start = copy.deepcopy(model) if control else None  # the control arm starts from the same weights
    model, state = train_arm(T, model, tok, cfg, control=False)
    after = evaluate_policy(model, tok, prompts, measure, T.RUN, samples=s["samples"])
    episodes_after = episode_scores(T, model, tok, cfg, s["episodes"])
    control_answers = control_episodes = None
    if control:
        ccfg = {**cfg, "OUTPUT_DIR": str(run_dir / "control_model"), "LOG_DIR": str(run_dir / "control_logs")}
        T.RUN.configure(ccfg)
        set_seed(seed)
        if control == "imitation":
            start = imitation_arm(T, start, tok, ccfg, sum(st["steps"] for st in state["stages"]))
        else:
            start, _ = train_arm(T, start, tok, ccfg, control=True)
        control_after = evaluate_policy(start, tok, prompts, measurement_config(ccfg), T.RUN,
                                        samples=s["samples"])
        control_answers = answer_scores(T, prompts, control_after["completions"], s["samples"])
        control_episodes = episode_scores(T, start, tok, ccfg, s["episodes"])
        T.RUN.configure(cfg)

    def row(r: dict) -> dict:
        return {**r["reward_means"], "valid_json_rate": r["valid_json_rate"]}

    history = [json.loads(x) for x in (Path(cfg["LOG_DIR"]) / "train_history.jsonl").read_text().splitlines() if x]
    answered = [p for p in prompts for _ in range(s["samples"])]  # the prompt of each completion, in order
    return {
        "seed": seed, "before": row(before), "after": row(after), "seconds": round(time.perf_counter() - t0, 1),
        "diversity_before": stage_diversity(answered, before["completions"]),
        "diversity_after": stage_diversity(answered, after["completions"]),
        "answers_changed": sum(a != b for a, b in zip(before["completions"], after["completions"])) / len(after["completions"]),
        "answers_before": answer_scores(T, prompts, before["completions"], s["samples"]),
        "answers_after": answer_scores(T, prompts, after["completions"], s["samples"]),
        "answers_control": control_answers,
        "episodes_before": episodes_before, "episodes_after": episodes_after, "episodes_control": control_episodes,
        "stages": state["stages"],
        "frac_reward_zero_std": [h.get("frac_reward_zero_std") for h in history],
        "train_reward_means": {m: [h.get(f"rewards/{m}/mean") for h in history] for m in METRICS[:-1]},
    }
