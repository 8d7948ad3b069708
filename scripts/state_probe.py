#!/usr/bin/env python
"""Does a model's answer change as it should when the state changes?

    python scripts/state_probe.py --model lifestack_model                     # 40 scenarios, difficulties 1-5
    python scripts/state_probe.py --model lifestack_model --compare lifestack_model/stage_0
    python scripts/state_probe.py --model lifestack_model --difficulty 1 --json probe.json

Pairs each seeded scenario with a copy in which one thing changed (a route's next step
marked done; the budget cut to a quarter: ``lifestack.training.state_probe``) and asks
each model (greedy) and the reference policies (random, heuristic, and the reward's
greedy maximiser, the oracle) for a decision at both. Prints, per player and probe, how
often the decision changed, how often the oracle's did, how often it matched the
oracle's before and after, the share still naming the step already done ("stale"), and
the task reward after the change. A bad ``--model`` is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from lifestack.training import state_probe as P  # noqa: E402

PROBE_SEED = 33_000_000  # apart from the training, held-out and evaluation seeds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a trained folder (OUTPUT_DIR, a stage_N folder) or a hub id")
    ap.add_argument("--compare", default="", help="a second model probed on the same pairs")
    ap.add_argument("--scenarios", type=int, default=40, help="seeded scenarios (one pair per probe each)")
    ap.add_argument("--difficulty", type=int, default=0, help="1-5; 0 cycles 1..5")
    ap.add_argument("--seed", type=int, default=PROBE_SEED)
    ap.add_argument("--max-new-tokens", type=int, default=160)
    ap.add_argument("--json", default="", help="write every pair's answers and the summary here")
    args = ap.parse_args(argv)
    if args.difficulty not in range(0, 6) or args.scenarios < 1:
        print("--difficulty must be 0-5 and --scenarios at least 1", file=sys.stderr)
        return 2

    import evaluate as E  # scripts/evaluate.py: the one loader of saved models

    from lifestack.policies import heuristic, oracle, random_valid

    models = E.load_models((args.model, args.compare))
    if models is None:
        return 2
    players = {name: P.model_player(model, tok, args.max_new_tokens) for name, (model, tok) in models.items()}
    players.update(random=P.policy_player(random_valid), heuristic=P.policy_player(heuristic),
                   oracle=P.policy_player(oracle))
    pairs = P.probe_pairs(args.scenarios, args.seed, args.difficulty or None)
    rows = {name: P.run_probes(player, pairs) for name, player in players.items()}
    return P.report(f"[probe] {len(pairs)} pairs from {args.scenarios} scenarios (seed {args.seed}, "
                    f"difficulty {args.difficulty or '1-5'})", rows, P.summarise, P.format_table, args.json, vars(args))


if __name__ == "__main__":
    raise SystemExit(main())
