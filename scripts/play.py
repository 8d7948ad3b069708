#!/usr/bin/env python
"""Watch a model play one seeded LifeStack episode turn by turn, or play it yourself.

    python scripts/play.py --model lifestack_model                 # the trained model, greedy
    python scripts/play.py --model lifestack_model --difficulty 4 --seed 7
    python scripts/play.py --human                                 # you type the JSON actions
    python scripts/play.py --policy heuristic                      # a reference policy plays

Each turn shows the situation exactly as the model reads it (the prompt, without its
metadata block), the answer, what happened (the environment's notes), the step reward
and its parts, and the resources left. With ``--human`` a line that is not a valid action
gets the parser's reason and another try (``help`` shows the answer schema, ``quit``
ends). A bad ``--model`` is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Callable, TextIO

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "scripts"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from lifestack.actions import parse_action  # noqa: E402
from lifestack.env import LifeStackEnv  # noqa: E402
from lifestack.policies import HONEST  # noqa: E402
from lifestack.prompts import ANSWER_SCHEMA, strip_metadata  # noqa: E402
from lifestack.scenarios import sample_scenario  # noqa: E402
from lifestack.training import episode_play as M  # noqa: E402

FAMILIES = M.FAMILIES
RULE = "-" * 78


def parts(breakdown: dict) -> str:
    """The step reward's parts, largest first: components and penalties that are not 0."""
    items = [(k, v) for k, v in breakdown.items() if k.startswith(("component.", "penalty.")) and isinstance(v, float)
             and abs(v) > 1e-9]
    items.sort(key=lambda kv: -abs(kv[1]))
    return ", ".join(f"{k.split('.', 1)[1]} {v:+.3f}" for k, v in items) or "none"


def human_answer(read: Callable[[str], str], out: TextIO) -> Callable[[LifeStackEnv, list], str | None]:
    """Ask for a JSON action until one parses (None: the player quit)."""
    def answer(env: LifeStackEnv, messages: list) -> str | None:
        while True:
            try:
                line = read("your action (JSON, 'help', 'quit')> ").strip()
            except EOFError:
                return None
            if line.lower() in ("quit", "exit", "q"):
                return None
            if line.lower() in ("help", "?", ""):
                print(f"Answer with one JSON object:\n{ANSWER_SCHEMA}", file=out)
                continue
            action, reason = parse_action(line)
            if action is None:
                print(f"not a valid action: {reason}. Try again ('help' shows the schema).", file=out)
                continue
            return line

    return answer


def model_answer(model, tokenizer, max_new_tokens: int) -> Callable[[LifeStackEnv, list], str]:
    from lifestack.training.generation import generate_completions

    return lambda env, messages: generate_completions(model, tokenizer, [messages], max_new_tokens)[0]


def play(answer: Callable[[LifeStackEnv, list], str | None], seed: int, difficulty: int, family: str,
         out: TextIO | None = None) -> dict:
    """One episode to its end (or until the player quits), played through the episode engine
    the final evaluation and evaluate.py use (``episode_play.play_episodes``, horizon 1: a
    fresh prompt of the current state each turn, at most the task's horizon of turns, since
    a rejected answer changes nothing, not even the step counter); returns its outcome and
    rewards."""
    out = out or sys.stdout
    sc = sample_scenario(seed, difficulty, family)

    def ask(live: list) -> list[str | None]:
        ep = live[0]
        messages = ep.messages_now()
        print(f"{RULE}\nturn {len(ep.played.rewards) + 1} of at most {ep.env.task.horizon} (the task's step "
              f"{ep.env.state.step + 1})\n{RULE}", file=out)
        print(strip_metadata(messages[1]["content"]).strip(), file=out)
        text = answer(ep.env, messages)
        if text is None:
            print("(stopped)", file=out)
        return [text]

    def show(ep, text: str, obs) -> None:
        print(f"\n>>> answer:\n{text.strip()}\n", file=out)
        b = obs.metadata["breakdown"]
        for note in obs.metadata.get("info", []):
            print(f"  * {note}", file=out)
        if "error" in b:
            print(f"  (the answer did not parse: {b['error']})", file=out)
        res = ep.env.state.resources
        print(f"step reward {obs.reward:+.3f} (parts: {parts(b)}); left: {res['time']:.1f} h, ${res['money']:.0f}, "
              f"energy {res['energy']:.0f}", file=out)

    played = M.play_episodes(ask, [sc], horizon=1, regret=False, on_turn=show)[0]
    rewards = played.rewards
    mean = (sum(rewards) / len(rewards)) if rewards else 0.0
    if played.outcome != "running":
        print(f"{RULE}\nepisode over: {played.outcome} after {len(rewards)} turns; mean step reward {mean:+.3f}",
              file=out)
    else:  # the turn cap, or the player stopped: a rejected answer does not move the task on
        print(f"{RULE}\nepisode over: stopped after {len(rewards)} turns with the task still running; mean step "
              f"reward {mean:+.3f}", file=out)
    return {"outcome": played.outcome, "rewards": rewards}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--model", help="a model folder, LoRA adapter folder or hub id")
    who.add_argument("--human", action="store_true", help="play it yourself")
    who.add_argument("--policy", choices=sorted(HONEST), help="watch a reference policy")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--difficulty", type=int, default=1, choices=range(1, 6), metavar="1-5")
    parser.add_argument("--family", choices=FAMILIES, default=FAMILIES[0])
    parser.add_argument("--max-new-tokens", type=int, default=256)
    args = parser.parse_args(argv)
    if args.model:
        from evaluate import UsageError, load

        try:
            answer = model_answer(*load(args.model), args.max_new_tokens)
        except UsageError as exc:
            print(f"play: {exc}", file=sys.stderr)
            return 2
    elif args.human:
        answer = human_answer(input, sys.stdout)
    else:
        policy = HONEST[args.policy]
        answer = lambda env, messages: policy(env, random.Random(args.seed))  # noqa: E731
    play(answer, args.seed, args.difficulty, args.family)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
