#!/usr/bin/env python
"""Group probes: does a GRPO group hold a better decision at the states a policy's own play reaches?

    python scripts/group_probe.py --model lifestack_model/stage_0 --compare lifestack_model
    python scripts/group_probe.py --model lifestack_model/stage_0 --compare lifestack_model/stage_2 lifestack_model
    python scripts/group_probe.py --model lifestack_model --states 200 --group 8 --json groups.json

Moves ``--states`` seeded scenarios (difficulties 1-5 in turn, or ``--difficulty``) on by ``--model``'s own
greedy answers, then at each state samples a group of ``--group`` answers at
``--temperature`` (the CPU profile's training temperature by default) and answers
greedily, for ``--model`` and for each ``--compare`` model at the same states (and the
heuristic, whose one answer per state shows where its decision stands). Prints per difficulty
how often the group holds several decisions and the reward's greedy maximiser's, how
much of the group's reward spread lies between decisions, and whether the greedy answer
(what closed-loop play uses) is the maximiser's decision (``lifestack.training.group_probe``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for _p in (ROOT, ROOT / "scripts"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from lifestack.training import group_probe as G  # noqa: E402

PROBE_SEED = 44_000_000  # apart from the training, held-out, evaluation and state-probe seeds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a trained folder (OUTPUT_DIR, a stage_N folder) or a hub id; "
                                                   "its greedy play moves the states on")
    ap.add_argument("--compare", nargs="*", default=[], help="more models probed at the same states")
    ap.add_argument("--states", type=int, default=100, help="seeded scenarios")
    ap.add_argument("--difficulty", type=int, default=0, help="1-5; 0 cycles 1..5")
    ap.add_argument("--group", type=int, default=8, help="answers sampled per state")
    ap.add_argument("--temperature", type=float, default=0.7, help="sampling temperature (the CPU profile's 0.7)")
    ap.add_argument("--seed", type=int, default=PROBE_SEED)
    ap.add_argument("--max-new-tokens", type=int, default=160)
    ap.add_argument("--json", default="", help="write every state's answers and the summary here")
    args = ap.parse_args(argv)
    if args.states < 1 or args.group < 2 or not 0 < args.temperature <= 5 or args.difficulty not in range(0, 6):
        print("--states must be at least 1, --group at least 2, --temperature in (0, 5] and --difficulty 0-5",
              file=sys.stderr)
        return 2

    import evaluate as E  # scripts/evaluate.py: the one loader of saved models

    from lifestack.training import state_probe as P

    models = E.load_models((args.model, *args.compare))
    if models is None:
        return 2
    from lifestack.training.generation import generate_completions

    first_model, first_tok = models[args.model]
    states = G.probe_states(args.states, args.seed,
                            lambda prompts: generate_completions(first_model, first_tok, prompts, args.max_new_tokens),
                            args.difficulty or None)
    rows = {name: G.run_groups(G.model_sampler(m, tok, args.max_new_tokens, args.temperature, args.seed),
                               P.model_player(m, tok, args.max_new_tokens), states, args.group)
            for name, (m, tok) in models.items()}
    from lifestack.policies import heuristic

    rows["heuristic"] = G.run_groups(G.policy_sampler(heuristic), P.policy_player(heuristic), states, args.group)
    return P.report(f"[groups] {len(states)} states moved on by {args.model}'s greedy play (seed {args.seed}); "
                    f"groups of {args.group} at temperature {args.temperature}; 'or.' is the reward's greedy "
                    "maximiser's decision", rows, G.summarise, G.format_table, args.json, vars(args))


if __name__ == "__main__":
    raise SystemExit(main())
