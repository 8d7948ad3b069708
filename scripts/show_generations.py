#!/usr/bin/env python
"""Print logged generations readably.

    python scripts/show_generations.py                 # the last 5 lines
    python scripts/show_generations.py --last 20 --stage 2
    python scripts/show_generations.py --file path/to/generations.jsonl

Each entry shows the prompt head, the completion, the parsed action, the weighted total
GRPO reward with each of the six rewards, and the env's task reward with its breakdown.
Lines that are not valid JSON are reported and skipped. Logs written before 2026-12-04
have only ``reward`` (the task reward) and ``breakdown``; they are shown as such.
An episode-mode line (``HORIZON > 1``) holds a ``turns`` list: each turn is shown with
what it answered, its completion, its action and its own rewards, then the episode's
outcome and its aggregated rewards.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path


def read_entries(path: Path) -> tuple[list[dict], int]:
    """Valid JSON objects in ``path`` and the number of bad lines skipped."""
    entries, bad = [], 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                bad += 1
                continue
            if isinstance(obj, dict):
                entries.append(obj)
            else:
                bad += 1
    return entries, bad


def format_entry(e: dict, width: int = 100) -> str:
    if isinstance(e.get("turns"), list):
        return format_episode(e, width)
    task = e.get("task_reward", e.get("reward", float("nan")))
    grpo = e.get("grpo_reward")
    head = (f"--- step {e.get('step')} | stage {e.get('stage')} | difficulty {e.get('difficulty')} | "
            f"{e.get('phase', 'train')} | GRPO reward (weighted total) "
            + (f"{grpo:+.3f}" if isinstance(grpo, (int, float)) else "n/a") + f" | task reward {task:+.3f}")
    wrap = lambda s: textwrap.indent(textwrap.fill(str(s), width), "    ")  # noqa: E731
    lines = [head, "  prompt:", wrap(e.get("prompt_head", "")), "  completion:", wrap(e.get("completion", ""))]
    action = e.get("action")
    lines.append("  action: " + (json.dumps(action) if action else "(none: the completion did not parse)"))
    lines += _rewards(e.get("grpo_rewards"), e.get("grpo_weights"), width)
    breakdown = e.get("task_breakdown", e.get("breakdown")) or {}
    lines.append("  task reward breakdown:")
    lines.append(wrap(", ".join(_item(k, v) for k, v in breakdown.items())))
    return "\n".join(lines)


def _wrap(s, width: int, indent: str = "    ") -> str:
    return textwrap.indent(textwrap.fill(str(s), width), indent)


def _rewards(rewards, weights, width: int, indent: str = "  ") -> list[str]:
    if not isinstance(rewards, dict) or not rewards:
        return []
    weights = weights if isinstance(weights, dict) else {}
    return [f"{indent}GRPO rewards (weight x value):",
            _wrap(", ".join(f"{k.removeprefix('reward_').removesuffix('_fn')}={weights.get(k, '?')}x{_num(v)}"
                            for k, v in rewards.items()), width, indent + "  ")]


def _num(v) -> str:
    return f"{v:+.3f}" if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def format_episode(e: dict, width: int = 100) -> str:
    """One episode-mode line: its turns in order, then its outcome and aggregated rewards."""
    outcome = e.get("outcome") if isinstance(e.get("outcome"), dict) else {}
    lines = [f"--- episode {e.get('episode')} | step {e.get('step')} | stage {e.get('stage')} | difficulty "
             f"{e.get('difficulty')} | {e.get('phase', 'train')} | {len(e['turns'])} of {e.get('horizon')} turns | "
             f"GRPO reward (weighted total) {_num(e.get('grpo_reward'))} | task reward {_num(e.get('task_reward'))}"]
    for k, t in enumerate(e["turns"], 1):
        if not isinstance(t, dict):
            continue
        lines += [f"  turn {k}: task reward {_num(t.get('task_reward'))} | GRPO reward {_num(t.get('grpo_reward'))}",
                  "    answered:", _wrap(t.get("prompt_head", ""), width, "      "),
                  "    completion:", _wrap(t.get("completion", ""), width, "      "),
                  "    action: " + (json.dumps(t["action"]) if t.get("action") else "(none: the completion did not parse)")]
        lines += _rewards(t.get("grpo_rewards"), e.get("grpo_weights"), width, "    ")
    lines.append(f"  outcome: {outcome.get('result')} | score {_num(outcome.get('score'))} | milestones reached "
                 f"{outcome.get('milestones_reached')} | resources kept {_num(outcome.get('resources_kept'))}")
    lines += _rewards(e.get("grpo_rewards"), e.get("grpo_weights"), width)
    return "\n".join(lines)


def _item(key: str, value) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{key}={value:+.3f}"
    return f"{key}={value}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", default="training_logs/generations.jsonl")
    parser.add_argument("--last", type=int, default=5, help="how many entries (from the end)")
    parser.add_argument("--stage", type=int, help="only this curriculum stage")
    args = parser.parse_args(argv)
    path = Path(args.file)
    if not path.exists():
        print(f"{path}: no such file (run scripts/train_trl.py first, or pass --file)", file=sys.stderr)
        return 1
    entries, bad = read_entries(path)
    if args.stage is not None:
        entries = [e for e in entries if e.get("stage") == args.stage]
    shown = entries[-args.last:] if args.last > 0 else entries
    for e in shown:
        print(format_entry(e))
    print(f"({len(shown)} of {len(entries)} entries shown" + (f"; {bad} invalid lines skipped" if bad else "") + ")")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
