#!/usr/bin/env python
"""Turn groups: would per-turn credit (GiGPO) find turns from identical states in a group of episodes?

    python scripts/turn_groups.py --model lifestack_model/stage_0 --compare lifestack_model
    python scripts/turn_groups.py --model lifestack_model --starts 100 --group 8 --json turns.json

Plays ``--group`` episodes from each of ``--starts`` seeded scenarios (difficulties 1-5 in
turn), each answer sampled at ``--temperature`` (the CPU profile's training temperature
by default), for each model and for reference policies (``random_honest``: random
decisions in the right form; ``heuristic``: deterministic, so its episodes never part).
Prints per turn how often a turn starts from a state another episode of its group also
reached (a GiGPO step group), how often such a group's returns differ (a non-zero
per-turn advantage), and how often the turns share only their progress
(``lifestack.training.turn_groups``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for _p in (ROOT, ROOT / "scripts"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from lifestack.training import turn_groups as T  # noqa: E402

TURN_GROUP_SEED = 45_000_000  # apart from the training, held-out, evaluation and probe seeds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a trained folder (OUTPUT_DIR, a stage_N folder) or a hub id")
    ap.add_argument("--compare", nargs="*", default=[], help="more models played from the same starts")
    ap.add_argument("--starts", type=int, default=40, help="seeded scenarios, difficulties 1-5 in turn")
    ap.add_argument("--group", type=int, default=8, help="episodes per start")
    ap.add_argument("--temperature", type=float, default=0.7, help="sampling temperature (the CPU profile's 0.7)")
    ap.add_argument("--seed", type=int, default=TURN_GROUP_SEED)
    ap.add_argument("--max-new-tokens", type=int, default=160)
    ap.add_argument("--json", default="", help="write every turn's keys, decisions and returns and the summary here")
    args = ap.parse_args(argv)
    if args.starts < 1 or args.group < 2 or not 0 < args.temperature <= 5:
        print("--starts must be at least 1, --group at least 2 and --temperature in (0, 5]", file=sys.stderr)
        return 2

    import evaluate as E  # scripts/evaluate.py: the one loader of saved models

    from lifestack.policies import heuristic, random_honest
    from lifestack.scenarios import sample_scenarios
    from lifestack.training.state_probe import report

    models = E.load_models((args.model, *args.compare))
    if models is None:
        return 2
    starts = sample_scenarios(args.starts, None, args.seed)
    rows = {name: T.play_groups(T.model_answerer(m, tok, args.max_new_tokens, args.temperature, args.seed),
                                starts, args.group)
            for name, (m, tok) in models.items()}
    for name, policy in (("random_honest", random_honest), ("heuristic", heuristic)):
        rows[name] = T.play_groups(T.policy_answerer(policy, args.seed), starts, args.group)
    return report(f"[turn groups] {len(starts)} starts (seed {args.seed}), {args.group} episodes each, answers "
                  f"sampled at {args.temperature}; a step group: turns of one group from an identical state",
                  rows, T.summarise, T.format_table, args.json, vars(args))


if __name__ == "__main__":
    raise SystemExit(main())
