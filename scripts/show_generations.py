#!/usr/bin/env python
"""Print logged generations readably.

    python scripts/show_generations.py                 # the last 5 lines
    python scripts/show_generations.py --last 20 --stage 2
    python scripts/show_generations.py --file path/to/generations.jsonl

Each entry shows the prompt head, the completion, the parsed action and the reward with
its breakdown. Lines that are not valid JSON are reported and skipped.
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
    head = (f"--- step {e.get('step')} | stage {e.get('stage')} | difficulty {e.get('difficulty')} | "
            f"{e.get('phase', 'train')} | reward {e.get('reward', float('nan')):+.3f}")
    wrap = lambda s: textwrap.indent(textwrap.fill(str(s), width), "    ")  # noqa: E731
    lines = [head, "  prompt:", wrap(e.get("prompt_head", "")), "  completion:", wrap(e.get("completion", ""))]
    action = e.get("action")
    lines.append("  action: " + (json.dumps(action) if action else "(none: the completion did not parse)"))
    breakdown = e.get("breakdown") or {}
    items = [f"{k}={v:+.3f}" if isinstance(v, (int, float)) and not isinstance(v, bool) else f"{k}={v}"
             for k, v in breakdown.items()]
    lines.append("  breakdown:")
    lines.append(wrap(", ".join(items)))
    return "\n".join(lines)


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
