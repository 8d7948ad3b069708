"""The model card written with every final save (``OUTPUT_DIR/README.md``), in the Hugging
Face Hub's format: YAML metadata, then what the model is, how it was trained (the
constants that differ from the script's defaults, the curriculum per stage), how it did
(the final evaluation against its start model and the reference policies), the plots,
how to load it, and its limits. Pure: a string from the run's records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from lifestack.training.decisions import decisions
from lifestack.training.episode_play import paired_line

HIDDEN_KEYS = ("CPU_PROFILE",)  # a dict of values the CPU profile swapped in: shown as the swapped values
NOT_MEASURED = "—"  # a table cell for a figure the run did not measure


def changed_constants(cfg: dict[str, Any], defaults: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(name, default, this run's value)`` of every constant this run changed."""
    return [(k, defaults[k], cfg[k]) for k in defaults if k not in HIDDEN_KEYS and cfg.get(k) != defaults[k]]


def _fmt(x: Any) -> str:
    return "n/a" if x is None else f"{x:+.3f}" if isinstance(x, float) else str(x)


def model_card(cfg: dict[str, Any], defaults: dict[str, Any], state: dict[str, Any], summary: dict[str, Any],
               plots: Sequence[str] = (), repo_id: str = "") -> str:
    """The card's markdown. ``state``: the curriculum state; ``summary``: the final
    evaluation (``evaluate_and_plot``'s); ``plots``: image file names next to the card."""
    cpu = cfg.get("_PROFILE") == "cpu"
    lora = bool(cfg.get("USE_LORA"))
    base = "a tiny random-weight Qwen2-architecture model (the CPU profile)" if cpu else f"`{cfg['MODEL_NAME']}`"
    tags = ["lifestack", "grpo", "trl", "reinforcement-learning", "curriculum"] + (["lora", "peft"] if lora else [])
    if cfg.get("_PROFILE") == "unsloth":
        tags.append("unsloth")
    meta = ["---", "library_name: " + ("peft" if lora else "transformers")]
    if not cpu:
        meta.append(f"base_model: {cfg['MODEL_NAME']}")
    meta += ["pipeline_tag: text-generation", "tags:"] + [f"- {t}" for t in tags] + ["---", ""]
    name = repo_id or Path(cfg["OUTPUT_DIR"]).name
    lines = meta + [f"# {name}: LifeStack GRPO", ""]
    if cpu:
        lines += ["> **CPU pipeline check, not a trained model.** This folder comes from the CPU profile: a tiny model",
                  "> with random initial weights, trained for minutes to check that every stage of the pipeline runs.",
                  "> Its numbers say nothing about a real model. Train on a GPU for a real one.", ""]
    lines += [
        f"{base} trained with GRPO (HuggingFace TRL) to resolve LifeStack life conflicts: it reads a state (23 life",
        "metrics in 6 domains, a budget, open routes, events) and answers with one JSON action, scored by six reward",
        "functions built on a simulated environment. A success-based curriculum raises the difficulty (1-5) when the",
        f"held-out mean task reward passes {cfg['ADVANCE_THRESHOLD']:g}"
        + (f" and lowers it after two stages below {cfg['RETREAT_THRESHOLD']:g}." if cfg["RETREAT_THRESHOLD"] > -1 else "."),
        "", "## Training", "",
        f"- Method: GRPO, {cfg['NUM_GENERATIONS']} completions per prompt, " + ("LoRA" if lora else "all weights")
        + f" ({'rank ' + str(cfg['LORA_RANK']) if lora else 'full fine-tuning'}), {cfg['N_STAGES']} stages of "
        f"{cfg['N_PROMPTS_PER_STAGE']} prompts, learning rates {cfg['LEARNING_RATES']}, temperature {cfg['TEMPERATURE']}, "
        f"reward weights {cfg['REWARD_WEIGHTS']}, seed {cfg['SEED']}.",
        f"- Profile: {cfg.get('_PROFILE')}; decisions per sample (HORIZON): {cfg['HORIZON']}; warm start: "
        + (f"{cfg['WARM_START_SFT_STEPS']} supervised steps on `{cfg['WARM_START_POLICY']}` demonstrations"
           if cfg["WARM_START_SFT_STEPS"] > 0 else "none") + ".",
    ]
    changed = changed_constants(cfg, defaults)
    lines += ["", "Constants that differ from `scripts/train_trl.py`'s defaults:", ""]
    if changed:
        lines += ["| constant | default | this run |", "|---|---|---|"]
        lines += [f"| `{k}` | `{json.dumps(d)}` | `{json.dumps(v)}` |" for k, d, v in changed]
    else:
        lines.append("none.")
    stages = state.get("stages") or []
    lines += ["", "### Curriculum", "", "| stage | difficulty | held-out task reward | valid JSON | decision |",
              "|---:|---:|---:|---:|---|"]
    for s in stages:
        lines.append(f"| {s['stage']} | {s['difficulty']} | {s['mean_task_reward']:+.3f} | {s['valid_json_rate']:.0%} | "
                     f"{s.get('move', 'advance' if s.get('advance') else 'stay')}: {s.get('reason', '')} |")
    lines += ["", "## Final evaluation", ""]
    if summary:
        lines += [f"{summary.get('episodes', cfg['N_EVAL_EPISODES'])} seeded episodes, difficulty rising 1 -> 5, greedy "
                  "decoding; reward: " + decisions(cfg["HORIZON"]).final_reward + ".", "",
                  "| policy | mean reward | success | valid JSON |", "|---|---:|---:|---:|",
                  f"| this model | {_fmt(summary.get('trained_mean'))} | {_pct(summary.get('trained_success'))} | "
                  f"{_pct(summary.get('trained_valid_json'))} |",
                  f"| {summary.get('start_model', 'start model')} | {_fmt(summary.get('base_mean'))} | "
                  f"{_pct(summary.get('base_success'))} | {_pct(summary.get('base_valid_json'))} |"]
        references = summary.get("references") or {}
        for ref, row in references.items():
            # a reference row holds what the final evaluation measured of that policy (mean
            # reward, success): a figure it did not measure is not printed
            valid = _pct(row["valid_json"]) if "valid_json" in row else NOT_MEASURED
            lines.append(f"| {ref} (reference policy) | {_fmt(row.get('mean'))} | {_pct(row.get('success'))} | {valid} |")
        if any("valid_json" not in row for row in references.values()):
            lines += ["", f"{NOT_MEASURED}: not measured (the final evaluation scores the reference policies' "
                      "decisions, not whether their answers parse)."]
        change = summary.get("paired")
        if change:  # one set of starts is one draw: the paired change carries its interval
            lines += ["", f"This model minus {summary.get('start_model', 'its start')}, paired over the same "
                      f"{change['success']['starts']} starts: {paired_line(change)}."]
        lines += ["", "Evaluate it again, per difficulty and with intervals: "
                  "`python scripts/evaluate.py --model <this folder>`; every saved stage on more starts: "
                  "`python scripts/eval_stages.py`."]
    else:
        lines.append("Not evaluated.")
    if plots:
        lines += ["", "## Plots", ""] + [f"![{Path(p).stem}]({Path(p).name})" for p in plots]
    load = repo_id or cfg["OUTPUT_DIR"]
    lines += ["", "## How to load", "", "```python"]
    if lora and not cpu:
        lines += ["from peft import AutoPeftModelForCausalLM", "from transformers import AutoTokenizer", "",
                  f"model = AutoPeftModelForCausalLM.from_pretrained({load!r})",
                  f"tokenizer = AutoTokenizer.from_pretrained({load!r})"]
    else:
        lines += ["from transformers import AutoModelForCausalLM, AutoTokenizer", "",
                  f"model = AutoModelForCausalLM.from_pretrained({load!r})",
                  f"tokenizer = AutoTokenizer.from_pretrained({load!r})"]
    lines += ["```", "", "Prompts are the chat messages `lifestack.prompts.build_prompt` writes; "
              "`python scripts/play.py --model <this folder>` shows one episode turn by turn.", "",
              "## Limits", "",
              "- The environment is a simulation with two task families (`flight_crisis`, `code_merge_crisis`); "
              "nothing here is advice about real lives.",
              "- The rewards are verifiable but can be gamed in ways the integrity battery has not met; "
              "read `generations.jsonl` and the integrity lines of the training log.",
              "- Results are for the seeds and episodes named above; rerun `scripts/evaluate.py` with other seeds.", ""]
    return "\n".join(lines)


def _pct(x: Any) -> str:
    return "n/a" if x is None else f"{x:.0%}"
