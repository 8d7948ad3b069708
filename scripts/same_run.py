#!/usr/bin/env python
"""Did two runs of the trainer do the same thing? For checking that a refactor changed no
behaviour: run the same seeded command before and after, then

    python scripts/same_run.py BEFORE_DIR AFTER_DIR

where each DIR holds the run's ``model/`` (OUTPUT_DIR) and ``logs/`` (LOG_DIR). Compares the
curriculum decisions (``curriculum_state.json`` without its timings), ``generations.jsonl``
(without timestamps), ``eval_episodes.jsonl`` and ``train_history.jsonl`` (without
timings). Prints one line per file; exit status 0 when all are identical, 1 otherwise.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

def _is_timing(key: str) -> bool:
    """Wall-clock fields: a log line's ``time``, TRL's ``step_time``/``*_runtime``/
    ``*_per_second``/``total_flos``, a stage's ``*_seconds``."""
    return key in ("time", "step_time", "total_flos") or key.endswith(("_seconds", "_runtime", "_per_second"))


def _untimed(row: Any) -> Any:
    if isinstance(row, dict):
        return {k: _untimed(v) for k, v in row.items() if not _is_timing(k)}
    if isinstance(row, list):
        return [_untimed(x) for x in row]
    return row


def _jsonl(path: Path) -> list:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _state(run: Path) -> list:
    state = json.loads((run / "model" / "curriculum_state.json").read_text(encoding="utf-8"))
    return [state.get("difficulty"), state.get("next_stage"), state.get("settings"), state.get("stages")]


CHECKS: dict[str, Callable[[Path], Any]] = {
    "curriculum_state.json (decisions, without timings)": _state,
    "generations.jsonl (without timestamps)": lambda run: _jsonl(run / "logs" / "generations.jsonl"),
    "eval_episodes.jsonl": lambda run: _jsonl(run / "logs" / "eval_episodes.jsonl"),
    "train_history.jsonl (without timings)": lambda run: _jsonl(run / "logs" / "train_history.jsonl"),
}


def compare(before: Path, after: Path) -> list[str]:
    """One line per file: identical, or where the first difference is."""
    lines = []
    for name, read in CHECKS.items():
        try:
            a, b = _untimed(read(before)), _untimed(read(after))
        except (OSError, ValueError) as exc:
            lines.append(f"{name}: MISSING ({type(exc).__name__}: {exc})")
            continue
        if a == b:
            lines.append(f"{name}: identical ({len(a)} entries)")
            continue
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        lines.append(f"{name}: DIFFERENT (first at entry {first}; {len(a)} vs {len(b)} entries)")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    lines = compare(Path(args[0]), Path(args[1]))
    print("\n".join(lines))
    return 0 if all(": identical" in line for line in lines) else 1


if __name__ == "__main__":
    raise SystemExit(main())
