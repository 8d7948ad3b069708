#!/usr/bin/env python
"""Proof of learning on CPU: does GRPO make decisions better than its start, and better than more imitation would?

    python scripts/learning_check.py                  # seeds 1-3, GRPO + the imitation control (not timed alone)
    python scripts/learning_check.py --first-seed 4   # another seed range
    python scripts/learning_check.py --control=shuffled  # the control arm gets shuffled rewards instead
    python scripts/learning_check.py --control=none   # GRPO against its start only
    python scripts/learning_check.py --deterministic  # under torch.use_deterministic_algorithms(True)
    python scripts/learning_check.py --seeds 1 --quick  # the reduced version CI runs (no control arm)
    python scripts/learning_check.py --beyond-teacher # GRPO must also beat its teacher (the heuristic) at d4-5

For each seed: build the CPU profile's tiny Qwen2 model, warm-start it on the CPU
profile's demonstrations (WARM_START_POLICY: the CPU profile's ``heuristic``; ``--
--WARM_START_POLICY=format`` starts from valid JSON with random decisions instead, so any
decision gain is GRPO's own), then score it on
one fixed held-out prompt set (the same prompts for every seed, all difficulties and
both task families) before GRPO and after the GRPO curriculum, both with the CPU
profile's own values (CPU_PROFILE). Each held-out prompt is answered 4 times, sampled at
0.7 (the CPU profile's training temperature, whatever a TEMPERATURE override trains with)
with a fixed torch seed: that is the policy GRPO optimises.

The control arm starts from the same warm-started weights. ``imitation`` (the default)
spends GRPO's compute on more of the warm start: as many supervised steps as GRPO took
optimizer steps, each on as many demonstrations as GRPO's batch has completions, at
GRPO's learning rate, on the warm start's own demonstrations. ``shuffled`` runs the same
curriculum with every batch's rewards shuffled among its completions (the same values,
detached from the answers that earned them): the compute without the signal.

The comparison is paired over prompts, with a 95 % bootstrap confidence interval over
prompts (2,000 resamples). It reports apart (a) the valid-JSON rate, (b) decision
quality: the task reward among valid answers, paired per prompt and seed, (c) the
regret per decision against the oracle (the reward's greedy maximiser), the share of
decisions equal to the heuristic's and how they score, (d) answer diversity per task
family, (e) closed-loop play: the trainer's own final evaluation (greedy, whole
episodes in which each decision meets the state the policy's earlier ones made) on 100
fixed starts, paired over starts, and a per-difficulty table of every arm, the heuristic
and the greedy maximiser (decision quality, regret, valid JSON, closed-loop success).

The full check passes when
- the interval of (b) GRPO vs its start lies above 0 (a gain in format alone fails),
- with a control arm, the interval of GRPO's decisions vs the control's lies above 0,
  and so does that of GRPO's closed-loop episode reward vs the control's,
- closed-loop success, the primary outcome, rose: the interval of its paired change
  lies above 0 (a policy that finishes no more tasks has not learned the job),
- closed-loop episode reward did not get worse beyond noise (its interval reaches above 0),
- with ``--beyond-teacher`` (a heuristic warm start, as in the CPU profile), GRPO's closed-loop success at
  difficulties 4-5 beats the heuristic's own on the same starts (paired interval above 0),
- and no seed collapsed onto one answer. A result counts on three seed ranges.

``--quick`` (8 held-out prompts; CI runs it with ``--seeds 1``) is a smoke check of the pipeline, not evidence: it
passes when the run completes with finite figures, GRPO changed the policy's answers and
they did not collapse. Its paired change is printed but not judged: on 8 prompts its
interval is about +-0.2, and its sign flips with any change to the code.

This file is the command; the arms and measurements are
``lifestack.training.learning_check``'s, the rule, tables and reports
``lifestack.training.learning_rule``'s.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from lifestack.training.learning_check import CONTROLS, EVAL_TEMPERATURE, run_seed, settings  # noqa: E402
from lifestack.training.learning_rule import compare_runs, report, report_saved  # noqa: E402


def default_out(first_seed: int, seeds: int) -> Path:
    """The runs' working directory unless ``--out`` names one: one per seed range, so seeds
    trained as separate processes (two at a time on a 2-core CPU) never share a folder,
    a feedback database or a ``learning_check.json``; ``--from-json`` pools their files."""
    last = first_seed + seeds - 1
    return Path("training_logs/learning_check") / (f"seed_{first_seed}" if seeds == 1 else f"seeds_{first_seed}-{last}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="how many seeds (default 3)")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="the reduced CI version")
    parser.add_argument("--out", default=None,
                        help="working directory for the runs (default: training_logs/learning_check/seed_N, or "
                             "seeds_N-M for several)")
    parser.add_argument("--json", default=None, help="where to write the results (default: OUT/learning_check.json)")
    parser.add_argument("--control", nargs="?", const="imitation", choices=[*sorted(CONTROLS), "none"],
                        default=None,
                        help="the control arm trained per seed from the same warm-started weights, which GRPO must "
                             "beat: 'imitation' (the default): as many supervised steps on the warm start's "
                             "demonstrations as GRPO took optimizer steps; 'shuffled': the same curriculum with rewards "
                             "shuffled within each batch; 'none': no control arm (GRPO is judged against its start "
                             "only; the default of --quick)")
    parser.add_argument("--deterministic", action="store_true", help="torch.use_deterministic_algorithms(True)")
    parser.add_argument("--from-json", nargs="+", default=None, metavar="PATH",
                        help="train nothing: judge and print the seeds saved in PATH (a learning_check.json) "
                             "with today's rule; several PATHs of one recipe (seeds trained apart) are pooled")
    parser.add_argument("--versus", nargs=2, default=None, metavar=("A", "B"),
                        help="train nothing: compare the GRPO arms of two saved runs (learning_check.json files of "
                             "the same seeds, e.g. two recipes): B minus A, paired over prompts and starts")
    parser.add_argument("--beyond-teacher", action="store_true",
                        help="warm start on the heuristic; GRPO must also finish more tasks than the heuristic at "
                             "difficulties 4-5 (paired 95%% CI above 0)")
    parser.add_argument("overrides", nargs="*", help="extra --KEY=value overrides for train_trl.py")
    args = parser.parse_args(argv)
    if args.versus:
        return compare_runs(Path(args.versus[0]), Path(args.versus[1]))
    if args.control is None:
        args.control = "none" if args.quick else "imitation"
    if args.control == "none":
        args.control = None
    import train_trl as T  # the training script: the arms train with it, the references are scored by it

    if args.from_json:
        return report_saved(T, [Path(p) for p in args.from_json])
    if args.deterministic:
        import torch

        torch.use_deterministic_algorithms(True)
    out = Path(args.out) if args.out else default_out(args.first_seed, args.seeds)
    out.mkdir(parents=True, exist_ok=True)
    s = settings(T, args.quick)
    if args.beyond_teacher:  # the teacher's warm start; an explicit override after -- still wins
        args.overrides = ["--WARM_START_POLICY=heuristic", *args.overrides]
    results = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        print(f"[learning check] seed {seed}: warm start {s['warm_steps']} steps, {s['stages']} GRPO stages "
              f"x {s['prompts']} prompts, {s['held_out']} held-out prompts"
              + (f"; then the overrides {' '.join(args.overrides)} (they win)" if args.overrides else ""), flush=True)
        r = run_seed(T, seed, out, s, args.overrides, control=args.control)
        print(f"[learning check] seed {seed}: task reward {r['before']['reward_task_success_fn']:+.3f} -> "
              f"{r['after']['reward_task_success_fn']:+.3f}, valid JSON {r['before']['valid_json_rate']:.0%} -> "
              f"{r['after']['valid_json_rate']:.0%} ({r['seconds']:.0f}s)", flush=True)
        results.append(r)
    summary = report(T, results, s, args.quick, args.control, teacher=args.beyond_teacher)
    path = Path(args.json) if args.json else out / "learning_check.json"
    s = {**s, "control": args.control, "deterministic": args.deterministic, "overrides": list(args.overrides),
         "beyond_teacher": args.beyond_teacher,
         "eval_temperature": EVAL_TEMPERATURE}
    path.write_text(json.dumps({"settings": s, "seeds": results, "summary": summary}, indent=2, default=str))
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
