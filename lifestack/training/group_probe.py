"""Group probes: what a GRPO group holds at the states a policy's own play reaches.

GRPO learns a better decision only if its group of sampled answers holds one, and only
if the reward separates the decisions more than the numbers written around them. At
later turns of an episode (a route half done, a budget half spent) a policy that copies
a teacher errs most, and that is where whole tasks are won or lost. So each probe state
is a seeded scenario (``sample_scenarios``) moved on by the policy's own greedy answers
(:func:`lifestack.onpolicy.advance_by_policy`, every scenario, 1 .. the steps left), and
at it we compare, against the reward's greedy maximiser (``lifestack.policies.oracle``):

- the group: ``group_size`` answers sampled at the training temperature. Does it hold
  more than one decision (``mixed``), does it hold the oracle's (``holds_oracle``), what
  share of its answers take it (``oracle_share``), and how much of the spread of task
  reward inside the group lies between decisions rather than within one (``between``:
  1 - within-decision variance / total variance, pooled over the groups)?
- the greedy answer, which closed-loop play uses: is it the oracle's decision
  (``greedy_is_oracle``), and its task reward.

A decision is ``(action_type, route)`` (``state_probe.decision``). Rewards are the
single-decision task reward GRPO trains on (``lifestack.scoring.Evaluator``).
``scripts/group_probe.py`` probes saved models; a sampler and a greedy player are plain
functions, so tests probe reference policies the same way.
"""

from __future__ import annotations

import statistics
from typing import Any, Callable, Sequence

from lifestack.onpolicy import advance_by_policy
from lifestack.prompts import prompt_text, scenario_prompt
from lifestack.scenarios import Scenario, sample_scenarios
from lifestack.scoring import Evaluator
from lifestack.training.state_probe import Player, decision, oracle_answer, player_table, policy_player

Sampler = Callable[[list[Scenario], int], list[str]]  # states, group size -> group_size answers per state, in order


def probe_states(n: int, seed: int, play: Callable[[list[list[dict]]], list[str]] | None = None,
                 difficulty: int | None = None) -> list[Scenario]:
    """``n`` seeded scenarios (at ``difficulty``, or difficulties cycling 1-5), each moved
    on by ``play``'s answers (a batch of chat prompts -> one answer each) when given: the
    states that policy's own play reaches."""
    states = sample_scenarios(n, difficulty, seed)
    return states if play is None else advance_by_policy(states, play, 1.0)


def run_groups(sample: Sampler, greedy: Player, states: Sequence[Scenario], group_size: int,
               evaluator: Evaluator | None = None) -> list[dict[str, Any]]:
    """One row per state: the oracle's decision and reward, the sampled group's decisions
    and rewards, and the greedy answer's."""
    if group_size < 2:
        raise ValueError(f"a group needs at least 2 answers, not {group_size}")
    evaluator = evaluator or Evaluator()
    states = list(states)
    texts, best = sample(states, group_size), greedy(states)
    if len(texts) != group_size * len(states) or len(best) != len(states):
        raise ValueError(f"the players returned {len(texts)} sampled and {len(best)} greedy answers for "
                         f"{len(states)} states in groups of {group_size}")
    rows = []
    for i, sc in enumerate(states):
        ptext = prompt_text(scenario_prompt(sc))
        ref = evaluator.evaluate(ptext, oracle_answer(sc))
        group = [evaluator.evaluate(ptext, t) for t in texts[i * group_size:(i + 1) * group_size]]
        top = evaluator.evaluate(ptext, best[i])
        rows.append({"seed": sc.seed, "difficulty": sc.difficulty, "step": sc.state.step,
                     "oracle": decision(ref["action"]), "oracle_reward": float(ref["reward"]),
                     "decisions": [decision(e["action"]) for e in group],
                     "rewards": [float(e["reward"]) for e in group],
                     "greedy": decision(top["action"]), "greedy_reward": float(top["reward"])})
    return rows


def _between_share(rows: Sequence[dict[str, Any]]) -> float:
    """Share of the within-group reward variance that lies between decisions, pooled:
    1 - sum of squares around each decision's mean / sum of squares around the group's."""
    total = within = 0.0
    for r in rows:
        mean = statistics.fmean(r["rewards"])
        total += sum((x - mean) ** 2 for x in r["rewards"])
        by: dict[Any, list[float]] = {}
        for d, x in zip(r["decisions"], r["rewards"]):
            by.setdefault(d, []).append(x)
        within += sum((x - statistics.fmean(xs)) ** 2 for xs in by.values() for x in xs)
    return 0.0 if total <= 1e-12 else max(0.0, 1.0 - within / total)


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per difficulty (``"1"`` .. ``"5"``, present ones), pooled over the easy and the hard
    ones (``"1-2"``, ``"3-5"``) and over all (``"all"``)."""
    out = {}
    pools = {"1-2": {1, 2}, "3-5": {3, 4, 5}, "all": {1, 2, 3, 4, 5}}
    keys = sorted({str(r["difficulty"]) for r in rows}) + list(pools)
    for key in keys:
        within = pools[key] if key in pools else {int(key)}
        rs = [r for r in rows if r["difficulty"] in within]
        if not rs:
            continue

        def share(flag: Callable[[dict], bool]) -> float:
            return sum(1 for r in rs if flag(r)) / len(rs)

        out[key] = {
            "states": len(rs),
            "mixed": share(lambda r: len(set(r["decisions"])) > 1),
            "holds_oracle": share(lambda r: r["oracle"] in r["decisions"]),
            "oracle_share": statistics.fmean(sum(d == r["oracle"] for d in r["decisions"]) / len(r["decisions"])
                                             for r in rs),
            "between": _between_share(rs),
            "unparseable": statistics.fmean(sum(d is None for d in r["decisions"]) / len(r["decisions"]) for r in rs),
            "greedy_is_oracle": share(lambda r: r["greedy"] == r["oracle"]),
            "greedy_reward": statistics.fmean(r["greedy_reward"] for r in rs),
            "sampled_reward": statistics.fmean(x for r in rs for x in r["rewards"]),
            "oracle_reward": statistics.fmean(r["oracle_reward"] for r in rs),
        }
    return out


def format_table(results: dict[str, dict[str, dict[str, float]]]) -> str:
    """One line per player and difficulty."""
    return player_table(results, "diff.", [
        ("states", "states", "d"), ("mixed", "mixed", ".0%"), ("holds or.", "holds_oracle", ".0%"),
        ("or. share", "oracle_share", ".0%"), ("between", "between", ".0%"), ("unparse.", "unparseable", ".0%"),
        ("greedy=or.", "greedy_is_oracle", ".0%"), ("greedy rew.", "greedy_reward", "+.3f"),
        ("sampled", "sampled_reward", "+.3f"), ("oracle", "oracle_reward", "+.3f")])


def policy_sampler(policy: Callable) -> Sampler:
    """A reference policy (``lifestack.policies``) as a sampler: its one answer at each
    state, ``group_size`` times (it is deterministic per state), so its row shows where
    its greedy decision stands."""
    answer = policy_player(policy)
    return lambda states, group_size: [a for a in answer(states) for _ in range(group_size)]


def model_sampler(model, tokenizer, max_new_tokens: int, temperature: float, seed: int = 0,
                  batch_size: int = 32) -> Sampler:
    """A causal LM sampling ``group_size`` answers per state at ``temperature`` (a fixed
    torch seed: the same model, the same groups)."""
    from lifestack.training.generation import generate_completions

    def sample(states: list[Scenario], group_size: int) -> list[str]:
        prompts = [scenario_prompt(sc) for sc in states for _ in range(group_size)]
        return generate_completions(model, tokenizer, prompts, max_new_tokens, batch_size=batch_size,
                                    temperature=temperature, seed=seed)
    return sample
