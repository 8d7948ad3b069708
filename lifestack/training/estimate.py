"""What a run will cost on a Colab T4, before it starts: an ESTIMATE from documented
per-step figures, not a measurement. ``scripts/gpu_rehearsal.py`` measures the real
figures on any GPU; replace these with them once measured.

The working (Qwen2.5-1.5B-Instruct, Unsloth 4-bit QLoRA, LoRA rank 16, fp16 on a T4):

- **Generation** is memory-bound decoding: one token for the whole batch per forward
  pass. Reading ~0.9 GB of 4-bit weights at the T4's 320 GB/s takes ~3 ms; with the
  4-bit dequantisation and ``generate``'s per-token overhead a decode step of a small
  model takes tens of milliseconds, so 30 ms is assumed (:data:`T4_DECODE_STEP_S`). A
  GRPO step decodes up to ``MAX_COMPLETION_LENGTH`` tokens: 256 x 30 ms = 7.7 s.
- **Forward and backward** over ``PER_DEVICE_BATCH_SIZE`` x (about 1,000 prompt tokens +
  the completion): 6 x 1.5e9 FLOPs per token x 5,000 tokens = 4.5e13, plus a third for
  gradient checkpointing's recompute, at an assumed 20 TFLOP/s sustained (the T4's fp16
  tensor peak is 65): about 3 s.
- So about 11 s per GRPO step (:func:`step_seconds`). The evaluations decode greedily in
  batches of 16: the held-out prompts each stage, and the final evaluation's episodes
  (each turn a batch round), twice (trained and GRPO's start).
- **Peak memory**: 4-bit weights ~0.9 GB, the tied 16-bit embedding ~0.5 GB, LoRA
  adapters with AdamW state ~0.3 GB, checkpointed activations ~1 GB, and the LM head's
  logits over 151,936 tokens for the batch's completion tokens (Unsloth computes them in
  chunks) ~1-2 GB: about 5 GB of the T4's 15 GB (:data:`T4_PEAK_GIB`).
"""

from __future__ import annotations

import math
from typing import Any

T4_DECODE_STEP_S = 0.030  # seconds per decoded token position (the whole batch at once), assumed
T4_TRAIN_TOKENS_PER_S = 20e12 / (6 * 1.5e9 * 4 / 3)  # tokens/s of forward+backward at 20 TFLOP/s with recompute
PROMPT_TOKENS = 1000  # a prompt in Qwen2.5 tokens (scripts/sequence_lengths.py measures 890-1,000)
EVAL_BATCH = 16  # lifestack.training.generation.generate_completions' batch size
T4_PEAK_GIB = 5.0  # single decisions (one prompt + one completion per sequence)
T4_FIXED_GIB = 2.0  # of which weights, embedding, adapters and optimizer state: the rest grows with sequence length
AVERAGE_EPISODE_TURNS = 4  # the final evaluation's episodes last 2-5 decisions (task horizons by difficulty)


def step_seconds(cfg: dict[str, Any]) -> float:
    """Estimated seconds of one GRPO step on a T4: decoding the completions, then forward
    and backward over the batch (every turn of an episode in episode mode)."""
    turns = cfg["HORIZON"]
    decode = turns * cfg["MAX_COMPLETION_LENGTH"] * T4_DECODE_STEP_S
    tokens = cfg["PER_DEVICE_BATCH_SIZE"] * cfg["GRAD_ACCUM_STEPS"] * sequence_tokens(cfg)
    return decode * cfg["GRAD_ACCUM_STEPS"] + tokens / T4_TRAIN_TOKENS_PER_S


def sequence_tokens(cfg: dict[str, Any]) -> int:
    """About how long one GRPO sequence is: the prompt, each turn's completion and (episode
    mode) the environment's reply of about 200 tokens."""
    return PROMPT_TOKENS + cfg["HORIZON"] * (cfg["MAX_COMPLETION_LENGTH"] + 200)


def estimate_run(cfg: dict[str, Any]) -> dict[str, Any]:
    """GRPO steps, minutes of training and evaluation, and peak GPU memory for ``cfg`` on a
    T4 (all estimates; see the module docstring for the working)."""
    per_step_completions = cfg["PER_DEVICE_BATCH_SIZE"] * cfg["GRAD_ACCUM_STEPS"]
    steps_per_stage = math.ceil(cfg["N_PROMPTS_PER_STAGE"] * cfg["NUM_GENERATIONS"] / per_step_completions)
    steps = steps_per_stage * cfg["N_STAGES"]
    batch_seconds = cfg["MAX_COMPLETION_LENGTH"] * T4_DECODE_STEP_S  # one greedy batch, decoded to the limit
    held_out = cfg["N_STAGES"] * math.ceil(cfg["N_EVAL_PROMPTS"] / EVAL_BATCH) * cfg["HORIZON"] * batch_seconds
    on_policy = cfg["N_STAGES"] * math.ceil(cfg["N_PROMPTS_PER_STAGE"] * cfg["ON_POLICY_STATES"] / EVAL_BATCH) * batch_seconds
    final = 2 * AVERAGE_EPISODE_TURNS * math.ceil(cfg["N_EVAL_EPISODES"] / EVAL_BATCH) * batch_seconds
    grpo_minutes = steps * step_seconds(cfg) / 60
    eval_minutes = (held_out + on_policy + final) / 60
    return {"gpu": "T4", "grpo_steps": steps, "seconds_per_step": round(step_seconds(cfg), 1),
            "grpo_minutes": round(grpo_minutes), "eval_minutes": round(eval_minutes),
            "total_minutes": round(grpo_minutes + eval_minutes), "peak_gib": round(peak_gib(cfg), 1)}


def peak_gib(cfg: dict[str, Any]) -> float:
    """Estimated peak GPU memory: the fixed part, and activations and logits in proportion to
    the sequence length (5 GB at the default single decision of 256 completion tokens)."""
    default = PROMPT_TOKENS + 256 + 200
    per_batch = cfg["PER_DEVICE_BATCH_SIZE"] / 4
    return T4_FIXED_GIB + (T4_PEAK_GIB - T4_FIXED_GIB) * per_batch * sequence_tokens(cfg) / default


def estimate_line(cfg: dict[str, Any]) -> str:
    e = estimate_run(cfg)
    return (f"ESTIMATE (not measured) for a T4: {e['grpo_steps']} GRPO steps x ~{e['seconds_per_step']} s = "
            f"~{e['grpo_minutes']} min, evaluations ~{e['eval_minutes']} min, total ~{e['total_minutes']} min; "
            f"peak GPU memory ~{e['peak_gib']} GB. Faster GPUs take less; scripts/gpu_rehearsal.py measures yours.")
