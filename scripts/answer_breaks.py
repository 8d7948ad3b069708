#!/usr/bin/env python
"""Where do a model's closed-loop answers stop parsing? By turn, by surprise events, by prompt length.

    python scripts/answer_breaks.py --model lifestack_model/stage_0 --compare lifestack_model
    python scripts/answer_breaks.py --model lifestack_model --episodes 100 --seed 20000007 --json breaks.json

Plays the final evaluation's starts (``run_evaluation.evaluation_starts``: ``--episodes``,
difficulty rising 1 -> 5; ``--seed`` 20,000,042 is the default run's, ``SEED`` 42) greedily,
single decisions, as the trainer's final evaluation does, and records for every decision
its episode, the turn it was (the prompt's ``STEP``), how many surprise events had fired, the prompt's
length in the model's tokens, and whether the answer parsed. Prints the unparseable
answers per turn and per events fired, the episodes stuck on one (a rejected answer
leaves the state and so the prompt unchanged: greedy play writes it again), and the prompt lengths of parsed and unparsed
answers beside those of the warm start's demonstrations (``--demonstrations`` states of its
scenario stream, ``sample_scenario``: 0-2 steps into a task). A prompt longer than any
demonstration is a state the warm start never showed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for _p in (ROOT, ROOT / "scripts"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from lifestack.training import seeds  # noqa: E402

QUANTILES = (0.1, 0.5, 0.9, 1.0)


def quantiles(values: list[int]) -> list[int] | None:
    """p10, median, p90 and max (None for no values)."""
    if not values:
        return None
    s = sorted(values)
    return [s[min(len(s) - 1, int(q * len(s)))] for q in QUANTILES]


def summarise(rows: list[dict]) -> dict:
    """Unparseable answers per turn (turns 4 and later pooled as "4+") and per events fired
    (2 or more pooled as "2+"), as ``[unparseable, decisions]``; prompt-length quantiles of
    parsed and unparseable answers; episodes with an unparseable answer, and those *stuck*
    on it: a rejected answer leaves the state, so the prompt, as it was, and a greedy
    player writes the same answer again until the episode runs out of decisions."""
    def tally(key) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for r in rows:
            cell = out.setdefault(key(r), [0, 0])
            cell[0] += not r["parsed"]
            cell[1] += 1
        return dict(sorted(out.items()))

    episodes: dict[int, list[dict]] = {}
    for r in rows:
        episodes.setdefault(r.get("episode", 0), []).append(r)
    broken = [rs for rs in episodes.values() if not all(r["parsed"] for r in rs)]

    def stuck(rs: list[dict]) -> bool:  # from its first unparseable answer on, the same turn, never parsed again
        first = next(i for i, r in enumerate(rs) if not r["parsed"])
        return all(not r["parsed"] and r["turn"] == rs[first]["turn"] for r in rs[first:])

    return {"episodes": len(episodes), "with_unparseable": len(broken), "stuck": sum(map(stuck, broken)),
            "by_turn": tally(lambda r: str(r["turn"]) if r["turn"] < 4 else "4+"),
            "by_events": tally(lambda r: str(r["events"]) if r["events"] < 2 else "2+"),
            "prompt_tokens": {"parsed": quantiles([r["tokens"] for r in rows if r["parsed"]]),
                              "unparseable": quantiles([r["tokens"] for r in rows if not r["parsed"]])}}


def recording_player(model, tok, max_new_tokens: int, rows: list[dict]):
    """The final evaluation's greedy player, noting each decision's turn, events fired,
    prompt length and (once scored) whether it parsed."""
    from lifestack.training.episode_play import model_player
    from lifestack.training.grpo_rewards import EVALUATOR

    play = model_player(model, tok, max_new_tokens)

    def answer(live):
        texts = play(live)
        for ep, text in zip(live, texts):
            messages = ep.messages_now()
            prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            rows.append({"episode": ep.played.start, "turn": ep.env.state.step + 1, "events": len(ep.env.state.events_fired),
                         "tokens": len(tok(prompt, add_special_tokens=False)["input_ids"]),
                         "difficulty": ep.sc.difficulty,
                         "parsed": EVALUATOR.evaluate(ep.current_prompt_text(), text)["action"] is not None})
        return texts
    return answer


def demonstration_lengths(tok, n: int, seed: int = 42) -> list[int] | None:
    """Prompt lengths of the warm start's first ``n`` demonstration states (SEED ``seed``)."""
    from lifestack.prompts import scenario_prompt
    from lifestack.scenarios import sample_scenario

    return quantiles([len(tok(tok.apply_chat_template(scenario_prompt(
        sample_scenario(seed + seeds.WARM_START_SCENARIOS + i, 1 + i % 5)), tokenize=False, add_generation_prompt=True),
        add_special_tokens=False)["input_ids"]) for i in range(n)])


def format_report(name: str, s: dict, demos: list[int] | None) -> str:
    cell = lambda c: f"{c[0]}/{c[1]}"  # noqa: E731
    q = lambda v: "-" if v is None else "/".join(map(str, v))  # noqa: E731
    return "\n".join([
        f"{name}",
        f"  episodes with an unparseable answer: {s['with_unparseable']} of {s['episodes']}, stuck on it to the end: "
        f"{s['stuck']}",
        "  unparseable by turn:          " + "  ".join(f"{k}: {cell(c)}" for k, c in s["by_turn"].items()),
        "  unparseable by events fired:  " + "  ".join(f"{k}: {cell(c)}" for k, c in s["by_events"].items()),
        f"  prompt tokens p10/p50/p90/max: parsed {q(s['prompt_tokens']['parsed'])}, "
        f"unparseable {q(s['prompt_tokens']['unparseable'])}, the warm start's demonstrations {q(demos)}"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a trained folder (OUTPUT_DIR, a stage_N folder) or a hub id")
    ap.add_argument("--compare", nargs="*", default=[], help="more models, on the same starts")
    ap.add_argument("--episodes", type=int, default=50, help="final-evaluation starts (difficulty rising 1 -> 5)")
    ap.add_argument("--seed", type=int, default=seeds.final_evaluation(42), help="seed of the starts")
    ap.add_argument("--demonstrations", type=int, default=300, help="warm-start demonstration states to measure")
    ap.add_argument("--max-new-tokens", type=int, default=160)
    ap.add_argument("--json", default="", help="write every decision's record and the summaries here")
    args = ap.parse_args(argv)
    if args.episodes < 1 or args.demonstrations < 1:
        print("--episodes and --demonstrations must be at least 1", file=sys.stderr)
        return 2
    import evaluate as E  # scripts/evaluate.py: the one loader of saved models

    models = E.load_models((args.model, *args.compare))
    if models is None:
        return 2
    from lifestack.training.episode_play import play_episodes
    from lifestack.training.run_evaluation import evaluation_starts

    starts = evaluation_starts(args.episodes, args.seed)
    out = {}
    print(f"[breaks] {len(starts)} closed-loop episodes from seed {args.seed}, greedy, single decisions")
    for name, (model, tok) in models.items():
        rows: list[dict] = []
        play_episodes(recording_player(model, tok, args.max_new_tokens, rows), starts, 1, regret=False)
        out[name] = {"summary": summarise(rows), "rows": rows}
        print(format_report(name, out[name]["summary"], demonstration_lengths(tok, args.demonstrations)))
    if args.json:
        import json

        Path(args.json).write_text(json.dumps({"args": vars(args), "models": out}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
