"""The run's plots: trained vs start per evaluation episode (PLOT_PATH), the curriculum per
stage (CURRICULUM_PLOT_PATH) and the per-reward training curves (CURVES_PATH). matplotlib
is imported inside each function (Agg backend). In the CPU profile every title says the
run is a pipeline check.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from lifestack.training.grpo_rewards import REWARD_NAMES


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


def success_rate(rows: Sequence[dict]) -> float | None:
    """The share of ``rows`` (final-evaluation episodes) whose outcome is a success."""
    return sum(r.get("outcome") == "success" for r in rows) / len(rows) if rows else None


def _with_success(label: str, rows: Sequence[dict]) -> str:
    rate = success_rate(rows)
    return label if rate is None or not any("outcome" in r for r in rows) else f"{label}, success {rate:.0%}"


REFERENCE_LINES = (("random", "tab:red"), ("heuristic", "tab:green"))  # the floor, and the teacher of the CPU profile


def plot_reward_curve(trained: list[dict], base: list[dict], path: str | Path, start_label: str = "base model",
                      cpu: bool = False, horizon: int = 1, references: dict[str, list[dict]] | None = None) -> None:
    """Per-episode mean task reward of the trained model and of the model GRPO started
    from, each labelled with its closed-loop success rate. ``references``: the reference
    policies' episodes on the same starts (``run_evaluation.reference_episodes``, in
    episode order); random play and the heuristic are drawn as their mean reward per
    difficulty (dashed), with their success rates, so the plot shows where the models sit
    between the floor and the teacher. No threshold here: ADVANCE_THRESHOLD applies to
    the held-out mean of the curriculum's evaluation (grpo_curriculum.png), not to these
    episodes. ``horizon > 1``: closed-loop conversations, scored as training aggregates
    them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    for rows, label, colour in ((base, start_label, "tab:gray"), (trained, "GRPO-trained", "tab:blue")):
        xs = [r["episode"] for r in rows]
        ys = [r["reward"] for r in rows]
        ax.plot(xs, ys, "o", ms=3, alpha=0.45, color=colour, label=f"{label} (per episode)")
        ax.plot(xs, rolling_mean(ys), "-", lw=2, color=colour, label=_with_success(f"{label} (rolling mean, 10)", rows))
    for name, colour in REFERENCE_LINES:
        rows = (references or {}).get(name) or []
        label = _with_success(f"{name} (mean per difficulty)", rows)
        for d in sorted({r["difficulty"] for r in rows}):
            idx = [i for i, r in enumerate(rows) if r["difficulty"] == d]
            mean = sum(rows[i]["reward"] for i in idx) / len(idx)
            ax.hlines(mean, min(idx) - 0.5, max(idx) + 0.5, colors=colour, linestyles="--", lw=1.2, label=label)
            label = None  # one legend entry per policy
    ax.set_xlabel("evaluation episode (difficulty rises 1 -> 5)")
    ax.set_ylabel("mean task reward per step of the episode" if horizon == 1 else
                  f"episode task reward (closed loop, <= {horizon} turns)")
    ax.set_ylim(-1.05, 1.05)
    _plot_title(ax, f"LifeStack GRPO: trained vs {start_label}, on the same closed-loop episodes", cpu)
    ax.legend(fontsize=7, loc="lower left")
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


def plot_curriculum(stages: list[dict], path: str | Path, threshold: float, cpu: bool = False,
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


def plot_training_curves(history_path: Path, path: str | Path, cpu: bool = False) -> bool:
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
    _plot_title(ax, "GRPO training curves per reward function", cpu)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True
