"""Turn groups: would per-turn credit (GiGPO's step groups) find groups in LifeStack?

In episode mode a GRPO group is ``group_size`` episodes played from one prompt, and each
episode gets one advantage for all its turns. GiGPO adds a per-turn advantage: the turns
of a group that start from the *same* state form a step group, and each turn is valued
against the others of its step group by the return from that turn on. It helps only
where step groups form: at the first turn every episode of a group starts from the same
state, so the step group is the whole group and says what the episode advantage says;
at later turns two episodes share a state only if everything they did so far left the
world the same. Here an answer claims metric changes and pays costs in free numbers, so
two answers of the same decision usually leave different states.

This module plays groups of sampled episodes (:class:`lifestack.episodes.Episode`: an
unparseable answer is a wasted turn, time passes) and measures, per turn index:

- ``in_step_group``: share of the episodes' turns whose starting state (every field of
  ``EpisodeState``) another episode of the same group also reached at that turn;
- ``informative``: share in such a step group whose returns differ (where a per-turn
  advantage would be non-zero);
- ``same_progress``: share whose *progress* (step, route steps done, closed routes,
  milestones, events fired) another episode shares: the groups a coarser, inexact
  grouping would form.

The player sees the current state's own prompt (``build_prompt``), as the trainer's
single-decision prompts and its final closed-loop evaluation show it. A player
(``Answerer``) answers a list of (member index, live episode) pairs, one answer each, so a model, a reference policy and a test double are
measured the same way (``scripts/turn_groups.py``).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from collections import Counter
from typing import Any, Callable, Sequence

from lifestack.env import EpisodeState
from lifestack.episodes import MAX_HORIZON, Episode
from lifestack.prompts import build_prompt
from lifestack.scenarios import Scenario

Answerer = Callable[[list[tuple[int, Episode]]], list[str]]  # (member index in its group, live episode) -> one answer each


def exact_key(state: EpisodeState) -> str:
    """A digest of every field of the state: two episodes with this key are in the same
    world (a digest, so a saved row stays small)."""
    return hashlib.sha256(json.dumps(state.to_dict(), sort_keys=True).encode()).hexdigest()[:16]


def progress_key(state: EpisodeState) -> str:
    """The discrete facts of the state (no metric or resource values)."""
    return json.dumps([state.step, sorted((k, sorted(v)) for k, v in state.route_progress.items()),
                       sorted(state.closed_routes), sorted(state.milestones), list(state.events_fired), state.done])


def play_groups(answer: Answerer, starts: Sequence[Scenario], group_size: int) -> list[dict[str, Any]]:
    """``group_size`` episodes from each start, played to the task's end in lockstep (up to
    ``MAX_HORIZON`` turns). One row per start and turn index: the turn's starting states'
    keys, the decisions taken, and the return from that turn on, one entry per episode
    still playing."""
    if group_size < 2:
        raise ValueError(f"a group needs at least 2 episodes, not {group_size}")
    groups = [[Episode.from_scenario(sc, min(sc.task.horizon, MAX_HORIZON)) for _ in range(group_size)]
              for sc in starts]
    seen: list[list[list[tuple[str, str]]]] = [[[] for _ in g] for g in groups]  # per episode: keys per turn
    while True:
        live = [(gi, ei, ep) for gi, g in enumerate(groups) for ei, ep in enumerate(g) if not ep.done]
        if not live:
            break
        for gi, ei, ep in live:
            seen[gi][ei].append((exact_key(ep.env.state), progress_key(ep.env.state)))
        texts = answer([(ei, ep) for _, ei, ep in live])
        if len(texts) != len(live):
            raise ValueError(f"the player returned {len(texts)} answers for {len(live)} episodes")
        for (_, _, ep), text in zip(live, texts):
            ep.step(text)
    rows = []
    for gi, (sc, g) in enumerate(zip(starts, groups)):
        for t in range(max(len(ep.turns) for ep in g)):
            members = [ei for ei, ep in enumerate(g) if len(ep.turns) > t]
            rows.append({
                "seed": sc.seed, "difficulty": sc.difficulty, "turn": t + 1, "members": members,
                "exact": [seen[gi][ei][t][0] for ei in members],
                "progress": [seen[gi][ei][t][1] for ei in members],
                "decisions": [_decision(g[ei].turns[t].action) for ei in members],
                "returns": [round(sum(x.reward for x in g[ei].turns[t:]), 9) for ei in members],
            })
    return rows


def _decision(action: dict[str, Any] | None) -> tuple[str, str | None] | None:
    """``(action_type, route)`` of a played turn's action (None: unparseable)."""
    return None if action is None else (action["action_type"], action.get("route"))


def _shares(row: dict[str, Any]) -> tuple[int, int, int]:
    """(turns in an exact step group, in one whose returns differ, in a progress group)."""
    exact, progress = Counter(row["exact"]), Counter(row["progress"])
    spread = {k: len({r for e, r in zip(row["exact"], row["returns"]) if e == k}) > 1 for k in exact}
    return (sum(1 for k in row["exact"] if exact[k] > 1), sum(1 for k in row["exact"] if exact[k] > 1 and spread[k]),
            sum(1 for k in row["progress"] if progress[k] > 1))


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per turn index (``"1"``, ``"2"``, ...) and pooled over the later turns (``"2+"``)."""
    out = {}
    turns = sorted({r["turn"] for r in rows})
    for key, within in [*((str(t), {t}) for t in turns), ("2+", {t for t in turns if t > 1})]:
        rs = [r for r in rows if r["turn"] in within]
        n = sum(len(r["exact"]) for r in rs)
        if not n:
            continue
        exact, informative, progress = (sum(x) for x in zip(*(_shares(r) for r in rs)))
        out[key] = {"turns": n, "in_step_group": exact / n, "informative": informative / n,
                    "same_progress": progress / n,
                    "distinct_decisions": sum(len(set(r["decisions"])) for r in rs) / len(rs)}
    return out


def format_table(results: dict[str, dict[str, dict[str, float]]]) -> str:
    """One line per player and turn index."""
    from lifestack.training.state_probe import player_table

    return player_table(results, "turn", [
        ("turns", "turns", "d"), ("in step group", "in_step_group", ".0%"), ("informative", "informative", ".0%"),
        ("same progress", "same_progress", ".0%"), ("decisions/group", "distinct_decisions", ".1f")])


def _prompt(ep: Episode) -> list[dict[str, str]]:
    return build_prompt(ep.task, ep.conflict, ep.env.state, ep.difficulty, ep.seed)


def policy_answerer(policy: Callable, seed: int = 0) -> Answerer:
    """A reference policy (``lifestack.policies``) as a player; each episode of a group
    draws from its own seeded stream, so a random policy's episodes differ."""
    def answer(live: list[tuple[int, Episode]]) -> list[str]:
        return [policy(ep.env, random.Random(f"{seed}:{ep.seed}:{member}:{len(ep.turns)}")) for member, ep in live]
    return answer


def model_answerer(model, tokenizer, max_new_tokens: int, temperature: float, seed: int = 0,
                   batch_size: int = 32) -> Answerer:
    """A causal LM sampling each live episode's answer at ``temperature`` (a fixed torch
    seed per round: the same model, the same groups)."""
    from lifestack.training.generation import generate_completions

    rounds = itertools.count()

    def answer(live: list[tuple[int, Episode]]) -> list[str]:
        return generate_completions(model, tokenizer, [_prompt(ep) for _, ep in live], max_new_tokens,
                                    batch_size=batch_size, temperature=temperature, seed=seed + next(rounds))
    return answer
