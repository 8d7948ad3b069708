#!/usr/bin/env python
"""Where do a model's closed-loop answers stop parsing? By turn, by surprise events, by prompt length.

    python scripts/answer_breaks.py --model lifestack_model/stage_0 --compare lifestack_model
    python scripts/answer_breaks.py --model lifestack_model --episodes 100 --seed 20000007 --json breaks.json
    python scripts/answer_breaks.py --model lifestack_model/stage_0 --samples 8

Plays the final evaluation's starts (``run_evaluation.evaluation_starts``: ``--episodes``,
difficulty rising 1 -> 5; ``--seed`` 20,000,042 is the default run's, ``SEED`` 42) greedily,
single decisions, as the trainer's final evaluation does, and records for every decision
its episode, the turn it was (the prompt's ``STEP``), how many surprise events had fired, the prompt's
length in the model's tokens, and whether the answer parsed. Prints the unparseable
answers per turn and per events fired, the episodes stuck on one (a rejected answer
leaves the state and so the prompt unchanged: greedy play writes it again), and the prompt lengths of parsed and unparsed
answers beside those of the warm start's demonstrations (``--demonstrations`` states of its
scenario stream, ``sample_scenario``: 0-2 steps into a task). A prompt longer than any
demonstration is a state the warm start never showed. ``--samples K`` also samples K
answers at ``--temperature`` at the state each broken episode first broke at, and at as
many states whose greedy answer parsed: does the state break the model's sampled answers
too (what a GRPO group there would hold), or only its greedy one?
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


def prompt_tokens(tok, messages: list[dict]) -> int:
    """A chat prompt's length as the model reads it (chat template, generation prompt)."""
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return len(tok(text, add_special_tokens=False)["input_ids"])


def play_and_record(model, tok, starts, max_new_tokens: int, prompts: list | None = None) -> list[dict]:
    """The final evaluation's greedy play of ``starts``, one record per decision: its
    episode, turn, events fired and prompt length, noted as it is asked, and whether it
    parsed, read from the play's own scoring (``Played.valid``) afterwards. ``prompts``
    (optional) gets each decision's chat prompt, in the order of the records."""
    from lifestack.training.episode_play import model_player, play_episodes

    greedy = model_player(model, tok, max_new_tokens)
    rows: list[dict] = []

    def answer(live):
        for ep in live:
            messages = ep.messages_now()  # rendered once per decision, for the length and the record
            rows.append({"episode": ep.played.start, "turn": ep.env.state.step + 1,
                         "events": len(ep.env.state.events_fired), "tokens": prompt_tokens(tok, messages),
                         "difficulty": ep.sc.difficulty})
            if prompts is not None:
                prompts.append(messages)
        return greedy(live)

    played = play_episodes(answer, starts, 1, regret=False)
    answered = {p.start: iter(p.valid) for p in played}  # each episode's decisions, in the order they were asked
    for r in rows:
        r["parsed"] = next(answered[r["episode"]])
    return rows


def resampled_states(rows: list[dict]) -> tuple[list[int], list[int]]:
    """The records to sample again: each episode's first unparseable decision (the state a
    greedy player gets stuck at), and as many parsed ones, each episode's first, in order."""
    broken, parsed, seen_broken, seen_parsed = [], [], set(), set()
    for i, r in enumerate(rows):
        episode = r.get("episode", 0)
        if not r["parsed"] and episode not in seen_broken:
            seen_broken.add(episode)
            broken.append(i)
        elif r["parsed"] and episode not in seen_parsed:
            seen_parsed.add(episode)
            parsed.append(i)
    return broken, parsed[:len(broken)]


def sampled_unparseable(model, tok, prompts: list[list[dict]], samples: int, temperature: float,
                        max_new_tokens: int, seed: int = 0) -> list[int]:
    """``[unparseable, answers]`` of ``samples`` answers sampled at ``temperature`` at each
    prompt (a fixed torch seed), judged as the play judges them (an evaluation with no action)."""
    from lifestack.prompts import prompt_text
    from lifestack.training.generation import generate_completions
    from lifestack.training.grpo_rewards import EVALUATOR

    asked = [p for p in prompts for _ in range(samples)]
    answers = generate_completions(model, tok, asked, max_new_tokens, batch_size=32, temperature=temperature, seed=seed)
    bad = sum(EVALUATOR.evaluate(prompt_text(p), a)["action"] is None for p, a in zip(asked, answers))
    return [bad, len(answers)]


def demonstration_prompts(n: int, seed: int = 42) -> list[list[dict]]:
    """The chat prompts of the warm start's first ``n`` demonstration states (SEED ``seed``)."""
    from lifestack.prompts import scenario_prompt
    from lifestack.scenarios import sample_scenario

    return [scenario_prompt(sample_scenario(seed + seeds.WARM_START_SCENARIOS + i, 1 + i % 5)) for i in range(n)]


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
    ap.add_argument("--samples", type=int, default=0,
                    help="also sample this many answers at each state an episode broke at, and at as many parsed ones")
    ap.add_argument("--temperature", type=float, default=0.7, help="--samples' temperature (the CPU profile's 0.7)")
    ap.add_argument("--max-new-tokens", type=int, default=160)
    ap.add_argument("--json", default="", help="write every decision's record and the summaries here")
    args = ap.parse_args(argv)
    if args.episodes < 1 or args.demonstrations < 1 or args.samples < 0 or not 0 < args.temperature <= 5:
        print("--episodes and --demonstrations must be at least 1, --samples at least 0, --temperature in (0, 5]",
              file=sys.stderr)
        return 2
    import evaluate as E  # scripts/evaluate.py: the one loader of saved models

    models = E.load_models((args.model, *args.compare))
    if models is None:
        return 2
    from lifestack.training.run_evaluation import evaluation_starts

    starts = evaluation_starts(args.episodes, args.seed)
    demos = demonstration_prompts(args.demonstrations)  # each model measures them in its own tokens
    out = {}
    print(f"[breaks] {len(starts)} closed-loop episodes from seed {args.seed}, greedy, single decisions")
    for name, (model, tok) in models.items():
        prompts: list[list[dict]] = []
        rows = play_and_record(model, tok, starts, args.max_new_tokens, prompts)
        out[name] = {"summary": summarise(rows), "rows": rows}
        print(format_report(name, out[name]["summary"], quantiles([prompt_tokens(tok, p) for p in demos])))
        if args.samples:
            broken, parsed = resampled_states(rows)
            sampled = {side: sampled_unparseable(model, tok, [prompts[i] for i in idx], args.samples, args.temperature,
                                                 args.max_new_tokens) if idx else [0, 0]
                       for side, idx in (("broken", broken), ("parsed", parsed))}
            out[name]["summary"]["sampled"] = sampled
            print(f"  sampled at {args.temperature}, {args.samples} per state, unparseable: at the {len(broken)} states "
                  f"episodes broke at {sampled['broken'][0]}/{sampled['broken'][1]}, at {len(parsed)} parsed states "
                  f"{sampled['parsed'][0]}/{sampled['parsed'][1]}")
    if args.json:
        import json

        Path(args.json).write_text(json.dumps({"args": vars(args), "models": out}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
