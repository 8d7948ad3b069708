#!/usr/bin/env python
"""Count the CPU instructions one get_lifestack_evaluation costs, with valgrind.

    python scripts/bench_instructions.py              # 1,000 fresh pairs (~1 minute)
    python scripts/bench_instructions.py --pairs 60   # quick (the test suite runs this)

Wall-clock figures on a shared 2-core VM swing by +-40 % from one minute to the next,
which hides any change smaller than that. Instruction counts do not: callgrind counts
the same total for the same interpreter, code and inputs whatever else the machine is
doing. So this script is the instrument for comparing two versions of the reward path
(or two interpreters, ``--python``): it runs one workload twice under callgrind, once
with 0 and once with ``--pairs`` fresh (prompt, completion) pairs after the same warm-up,
and prints the difference per pair. It needs ``valgrind`` (Debian: ``apt install
valgrind``); seconds still come from scripts/bench_rewards.py.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def write_pairs(path: Path, n_pairs: int, n_prompts: int = 100) -> None:
    """The workload: ``n_pairs`` fresh pairs over ``n_prompts`` prompts, as JSON."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "scripts"))
    import train_trl as T
    from bench_rewards import fresh_completions
    from lifestack.prompts import prompt_text
    from lifestack.training.grpo_rewards import EVALUATOR

    ds = T.generate_dataset(n_prompts, None, seed=7)
    contexts = []
    for p in ds["prompt"]:
        task, state, _ = EVALUATOR.context(prompt_text(p))
        contexts.append((p, task, state))
    pairs = fresh_completions(contexts, n_pairs, seed=1)
    path.write_text(json.dumps([[prompt_text(p), c] for p, c in pairs]))


def workload(pairs_file: str, n: int, log_dir: str) -> None:
    """Warm every prompt's cached state, then evaluate the first ``n`` pairs."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "scripts"))
    import train_trl as T
    from lifestack.training.grpo_rewards import EVALUATOR

    T.RUN.log.open(log_dir)
    pairs = json.loads(Path(pairs_file).read_text())
    seen = set()
    for prompt, _ in pairs:
        if prompt not in seen:
            seen.add(prompt)
            EVALUATOR.context(prompt)
    for prompt, completion in pairs[:n]:
        T.get_lifestack_evaluation(completion, prompt)


def count_instructions(python: str, pairs_file: Path, n: int, log_dir: str) -> int:
    """Instructions callgrind collected for one run of the workload with ``n`` pairs."""
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", python, str(Path(__file__).resolve()),
           "--workload", str(pairs_file), str(n), log_dir]
    env = dict(os.environ, PYTHONHASHSEED="0")  # string hashes fixed: the same run twice
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    match = re.search(r"Collected\s*:\s*(\d+)", proc.stderr)
    if proc.returncode != 0 or match is None:
        raise RuntimeError(f"callgrind run failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return int(match.group(1))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1000, help="fresh pairs evaluated (default 1000)")
    parser.add_argument("--python", default=sys.executable, help="interpreter to measure (default: this one)")
    parser.add_argument("--json", help="write the figures as JSON here")
    parser.add_argument("--workload", nargs=3, metavar=("PAIRS_FILE", "N", "LOG_DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.workload:
        workload(args.workload[0], int(args.workload[1]), args.workload[2])
        return 0
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    if shutil.which("valgrind") is None:
        print("bench_instructions: valgrind is not installed (Debian/Ubuntu: apt install valgrind)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="lifestack-instr-") as tmp:
        pairs_file = Path(tmp) / "pairs.json"
        write_pairs(pairs_file, args.pairs)
        base = count_instructions(args.python, pairs_file, 0, tmp)
        full = count_instructions(args.python, pairs_file, args.pairs, tmp)
    per_pair = (full - base) / args.pairs
    figures = {"instructions_per_evaluation": round(per_pair), "pairs": args.pairs, "python": args.python}
    print(f"get_lifestack_evaluation, fresh pairs: {per_pair:,.0f} instructions per evaluation "
          f"({args.pairs} pairs, {args.python})")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
