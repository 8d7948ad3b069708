"""The curriculum around GRPO's stages: the decision after each stage (advance, stay,
retreat), the stage's record in ``curriculum_state.json``, its log line, and the
trainer's per-step history (``train_history.jsonl``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

RECORDED_PLACES = 4  # a stage's held-out means as curriculum_state.json keeps them


def recorded(x: float) -> float:
    """``x`` as the run's state records it. The curriculum decides on this value, so the
    decision, its reason, the log line and a resumed run's state all show one number (a
    mean of 0.59847 was +0.599 in the line and +0.598 in the reason)."""
    return round(x, RECORDED_PLACES)


def curriculum_step(stages: Sequence[dict], difficulty: int, mean: float, advance_threshold: float,
                    retreat_threshold: float) -> tuple[str, int, str]:
    """The curriculum's decision after a stage: ``(move, next difficulty, reason)``, move one
    of ``advance``, ``retreat``, ``stay``.

    Advance when the held-out mean task reward is above ``advance_threshold``
    (ADVANCE_THRESHOLD; below difficulty 5). Retreat one difficulty (above 1) when it is
    below ``retreat_threshold`` (RETREAT_THRESHOLD) for the second
    stage running at this difficulty: the first stage after a rise often dips. Likewise
    the first stage after a retreat never advances. That, and the band between the two
    thresholds, is the hysteresis that keeps the difficulty from oscillating.
    ``stages``: the decisions of the stages before this one, in order.
    """
    high, low = advance_threshold, retreat_threshold
    mean = recorded(mean)
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


def mean_or_none(xs: Sequence[Any]) -> float | None:
    """The mean of the numbers in ``xs`` rounded to 4 places (None when there are none):
    a stage's mean of a per-step metric TRL may leave out."""
    vals = [float(x) for x in xs if isinstance(x, (int, float))]
    return round(sum(vals) / len(vals), 4) if vals else None


def stage_record(stage: int, difficulty: int, result: dict[str, Any], decision: tuple[str, int, str],
                 history: Sequence[dict], steps: int, train_seconds: float, reward_seconds: float) -> dict[str, Any]:
    """What ``curriculum_state.json`` keeps of a stage: the held-out result
    (:func:`lifestack.training.run_evaluation.evaluate_policy`), the decision
    (:func:`curriculum_step`), and what training cost."""
    move, next_difficulty, reason = decision
    return {
        "stage": stage, "difficulty": difficulty, "mean_task_reward": recorded(result["mean_task_reward"]),
        "reward_means": {k: recorded(v) for k, v in result["reward_means"].items()},
        "valid_json_rate": recorded(result["valid_json_rate"]), "advance": move == "advance",
        "move": move, "reason": reason, "next_difficulty": next_difficulty,
        "train_seconds": round(train_seconds, 2), "reward_seconds": round(reward_seconds, 3),
        "frac_reward_zero_std": mean_or_none([h.get("frac_reward_zero_std") for h in history]),
        "steps": steps,
    }


def stage_line(record: dict[str, Any], advance_threshold: float) -> str:
    """The stage's one log line: held-out reward against the threshold, valid JSON, each
    reward's mean, the reward code's share of training time, and the decision."""
    means = " ".join(f"{k.removeprefix('reward_').removesuffix('_fn')}={v:+.3f}" for k, v in record["reward_means"].items())
    train_seconds, reward_seconds = record["train_seconds"], record["reward_seconds"]
    return (f"[stage {record['stage']}] difficulty {record['difficulty']} | held-out task reward "
            f"{record['mean_task_reward']:+.3f} (threshold {advance_threshold}) | valid JSON {record['valid_json_rate']:.0%} | "
            f"{means} | reward code {reward_seconds / max(train_seconds, 1e-9):.1%} of {train_seconds:.1f}s | "
            f"{record['move'].upper()} to {record['next_difficulty']} ({record['reason']})")


def append_history(path: Path, stage: int, difficulty: int, history: Sequence[dict]) -> None:
    """Append a stage's per-step TRL log (its entries with a reward) to ``train_history.jsonl``,
    replacing rows of that stage already there: a run stopped after this write and before
    the stage was recorded redoes the stage's end, and its history would appear twice."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True) if path.exists() else []
    kept = [line for line in lines if _stage_of(line) != stage]
    if len(kept) != len(lines):  # rewritten whole, then renamed: a crash leaves the old file or the new one
        tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
        tmp.write_text("".join(kept), encoding="utf-8")
        os.replace(tmp, path)
    with open(path, "a", encoding="utf-8") as fh:
        for h in history:
            fh.write(json.dumps({"stage": stage, "difficulty": difficulty, **h}) + "\n")


def _stage_of(line: str) -> int | None:
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return row.get("stage") if isinstance(row, dict) else None
