"""The one engine that plays seeded episodes, and its statistics: the trainer's final
evaluation and its reference policies (``lifestack.training.run_evaluation``),
``scripts/evaluate.py``, ``scripts/play.py`` and the learning check all play through
:func:`play_episodes`.

A *player* answers a batch of live episodes with one text each: a model (greedy
generation from each episode's current prompt) or a reference policy of
``lifestack.policies`` (random, heuristic, oracle: the greedy maximiser of the decision
reward). Every player meets the same starts (``episode_starts``: ``sample_scenario`` seeds
``seed + i`` per difficulty, task families alternating) and plays each to its end, so
their episodes are paired. Per decision it records the step reward, whether the answer
parsed, and its decision reward and regret against the oracle at the very state it met
(``lifestack.value``, as the single-decision task reward is scored in training).

``horizon == 1`` is the trainer's single-decision setting: every decision is a fresh
prompt of the current state. ``horizon > 1`` plays the conversation of episode mode
(``lifestack.episodes.Episode``: earlier turns and the environment's replies stay in
the context), up to ``horizon`` turns.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from lifestack.env import LifeStackEnv
from lifestack.generator import DOMAINS
from lifestack.episodes import Episode
from lifestack.policies import heuristic, oracle, random_valid
from lifestack.prompts import build_prompt, prompt_text
from lifestack.scenarios import Scenario, at_crisis, sample_scenario
from lifestack.training.grpo_rewards import EVALUATOR
from lifestack.value import episode_outcome, episode_reward

FAMILIES = DOMAINS  # the task families, in the generator's order
REFERENCES = {"random": random_valid, "heuristic": heuristic, "oracle": oracle}  # oracle: the strongest
Answer = Callable[[list[Any]], list[str]]  # live episodes -> one answer text each


@dataclass
class Played:
    """One played episode: per decision its step reward, validity, decision reward and
    regret; its outcome and episode task reward (turn mean blended with the outcome)."""

    start: int
    difficulty: int
    seed: int
    rewards: list[float] = field(default_factory=list)
    valid: list[bool] = field(default_factory=list)
    decision: list[float] = field(default_factory=list)
    regret: list[float] = field(default_factory=list)
    outcome: str = "running"
    episode_reward: float = 0.0
    route_statuses: list[str] = field(default_factory=list)  # per decision: the env's route_status, or "invalid"
    episode: Any = None  # horizon > 1: the played lifestack.episodes.Episode
    domain: str = ""  # the task family; with seed and difficulty it names the start ("" in files saved before it)

    SAVED = ("start", "difficulty", "seed", "rewards", "valid", "decision", "regret", "outcome", "episode_reward")

    def to_dict(self) -> dict[str, Any]:
        return {**{k: getattr(self, k) for k in self.SAVED}, "domain": self.domain}

    @property
    def start_key(self) -> tuple[int, int, str]:
        """Which start this was: ``sample_scenario``'s seed and difficulty and the task family
        (evaluations on nearby ``--seed`` values reuse a scenario seed with the other family)."""
        return self.seed, self.difficulty, self.domain

    @classmethod
    def from_dict(cls, d: Any) -> Played:
        """The inverse of :meth:`to_dict`, for an evaluation's saved JSON (``evaluate.py
        --from-json``). A row missing a field, or holding one of the wrong kind, is a
        ``ValueError``."""
        if not isinstance(d, dict) or any(k not in d for k in cls.SAVED):
            raise ValueError(f"an episode row needs the fields {', '.join(cls.SAVED)}")

        def number(x: Any) -> bool:
            return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)

        if not (all(isinstance(d[k], int) and not isinstance(d[k], bool) for k in ("start", "difficulty", "seed"))
                and number(d["episode_reward"]) and isinstance(d["outcome"], str)
                and all(isinstance(d[k], list) for k in ("rewards", "valid", "decision", "regret"))
                and all(number(x) for k in ("rewards", "decision", "regret") for x in d[k])
                and all(isinstance(v, bool) for v in d["valid"])):
            raise ValueError("an episode row holds a field of the wrong kind (numbers must be finite)")
        if not isinstance(d.get("domain", ""), str):
            raise ValueError("an episode row's domain must be a string")
        return cls(**{k: d[k] for k in cls.SAVED}, domain=d.get("domain", ""))


def episode_starts(episodes_per_difficulty: int, difficulties: Sequence[int], seed: int,
                   from_crisis: bool = False) -> list[Scenario]:
    """The evaluation's starts: for each difficulty ``episodes_per_difficulty`` scenarios
    ``sample_scenario(seed + 1000 * d + i, d, family)``, families alternating, each in the
    scenario's own state (0-2 steps rolled forward, as the training prompts), or with
    ``from_crisis`` at the crisis itself (``at_crisis``: the whole task, as the trainer's
    final evaluation starts)."""
    starts = [sample_scenario(seed + 1000 * d + i, d, FAMILIES[i % 2])
              for d in difficulties for i in range(episodes_per_difficulty)]
    return [at_crisis(sc) for sc in starts] if from_crisis else starts


def parse_difficulties(text: str) -> list[int]:
    """``"1-5"``, ``"3"`` or ``"1,3,5"`` -> sorted difficulties; ValueError naming the problem."""
    out: set[int] = set()
    for part in text.replace(" ", "").split(","):
        lo, _, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi or lo)
        except ValueError:
            raise ValueError(f"difficulties: expected e.g. 1-5 or 1,3,5, got {text!r}") from None
        if not 1 <= a <= b <= 5:
            raise ValueError(f"difficulties must lie in 1..5, got {text!r}")
        out.update(range(a, b + 1))
    return sorted(out)


def policy_player(policy: Callable, seed: int = 0) -> Answer:
    """A reference policy as a player: ``policy(env, rng)`` on each live episode's env."""
    def answer(live: list[Any]) -> list[str]:
        return [policy(ep.env, random.Random(f"{seed}:{ep.seed}:{len(ep.rewards_so_far)}")) for ep in live]

    return answer


def model_player(model, tokenizer, max_new_tokens: int = 256, batch_size: int = 16) -> Answer:
    """A causal LM as a player: greedy completions of each live episode's messages."""
    from lifestack.training.generation import generate_completions

    def answer(live: list[Any]) -> list[str]:
        return generate_completions(model, tokenizer, [ep.messages_now() for ep in live], max_new_tokens,
                                    batch_size=batch_size)

    return answer


class _Live:
    """An episode being played: its env (horizon 1: fresh prompts) or its Episode (the
    conversation), and what has been recorded so far."""

    def __init__(self, i: int, sc: Scenario, horizon: int) -> None:
        self.played = Played(i, sc.difficulty, sc.seed, domain=sc.domain)
        self.sc, self.horizon = sc, horizon
        self.seed = sc.seed
        if horizon > 1:
            self.episode = Episode.from_scenario(sc, horizon)
            self.env = self.episode.env
        else:
            self.episode = None
            self.env = LifeStackEnv()
            self.env.restore(sc.task, sc.state)
        self.start_state = self.env.state.clone()
        self.rewards_so_far = self.played.rewards
        self.stopped = False  # the player quit (an answer of None)

    @property
    def done(self) -> bool:
        if self.stopped:
            return True
        if self.episode is not None:
            return self.episode.done
        return self.env.state.done or len(self.played.rewards) >= self.env.task.horizon

    def messages_now(self) -> list[dict[str, str]]:
        if self.episode is not None:
            return self.episode.messages
        return build_prompt(self.sc.task, self.sc.conflict, self.env.state, self.sc.difficulty, self.sc.seed)

    def current_prompt_text(self) -> str:
        """The text carrying the current state's metadata (what the decision reward reads)."""
        if self.episode is not None:
            return self.episode.messages[-1]["content"]
        return prompt_text(self.messages_now())

    def play(self, text: str, best: float | None) -> Any:
        """One decision: scored as a single decision at the state it met (and against the
        oracle's, when ``best`` is given), then stepped. Returns the step's observation
        (horizon 1) or turn (horizon > 1)."""
        ptext = self.current_prompt_text()
        ev = EVALUATOR.evaluate(ptext, text)
        p = self.played
        p.decision.append(float(ev["reward"]))
        if best is not None:
            p.regret.append(best - float(ev["reward"]))
        p.valid.append(ev["action"] is not None)
        if self.episode is not None:
            step = self.episode.step(text)
            breakdown = step.breakdown
        else:
            step = self.env.step(text)
            breakdown = step.metadata["breakdown"]
        p.rewards.append(step.reward)
        p.route_statuses.append("invalid" if "error" in breakdown else str(breakdown.get("route_status", "none")))
        return step

    def finish(self) -> Played:
        p = self.played
        end = self.env.state
        p.outcome = end.outcome
        if p.rewards:  # a player who quit before the first decision played no episode: 0.0
            p.episode_reward = episode_reward(p.rewards, episode_outcome(self.sc.task, self.start_state, end)["score"])
        p.episode = self.episode
        return p


def play_episodes(answer: Answer, starts: Sequence[Scenario], horizon: int = 1,
                  progress: Callable[[int], None] | None = None, regret: bool = True,
                  on_turn: Callable[[Any, str, Any], None] | None = None) -> list[Played]:
    """Play every start to its end with ``answer``, batched per round: each round every live
    episode takes one decision. An answer of ``None`` stops that episode (a person quit).

    Horizon 1: each decision answers a fresh prompt of the current state; a rejected
    answer changes nothing, not even the step counter, so an episode stops after its
    task's horizon of decisions. Horizon > 1: the conversation of episode mode, up to
    ``horizon`` turns. ``regret``: also score the oracle's decision at every state met
    (about 50 ms a state). ``on_turn(live, text, step)`` sees every decision as it is
    played; ``progress(n)`` the number of decisions of each round."""
    live = [_Live(i, sc, horizon) for i, sc in enumerate(starts)]
    while True:
        batch = [ep for ep in live if not ep.done]
        if not batch:
            break
        best = [_oracle_value(ep) if regret else None for ep in batch]
        for ep, text, b in zip(batch, answer(batch), best):
            if text is None:
                ep.stopped = True
                continue
            step = ep.play(text, b)
            if on_turn is not None:
                on_turn(ep, text, step)
        if progress is not None:
            progress(len(batch))
    return [ep.finish() for ep in live]


def _oracle_value(ep: _Live) -> float:
    """The oracle's decision reward at this episode's current state (the regret's reference)."""
    return float(EVALUATOR.evaluate(ep.current_prompt_text(), oracle(ep.env))["reward"])  # oracle() reads only


def bootstrap_ci(values: Sequence[float], resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95 % percentile interval of the mean of ``values`` (resampled with replacement)."""
    if len(values) < 2:
        return (values[0], values[0]) if values else (float("nan"), float("nan"))
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    return means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def runs_bootstrap_ci(runs: Sequence[Sequence[float]], resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95 % percentile interval of the mean over runs of each run's mean of its values,
    resampling the runs and then the values within each drawn run (a two-level bootstrap):
    the interval holds the spread between training runs, not only between a run's starts."""
    runs = [list(r) for r in runs if len(r)]
    if not runs:
        return float("nan"), float("nan")
    rng = random.Random(seed)
    means = []
    for _ in range(resamples):
        drawn = [runs[rng.randrange(len(runs))] for _ in runs]
        means.append(sum(sum(r[rng.randrange(len(r))] for _ in r) / len(r) for r in drawn) / len(drawn))
    means.sort()
    return means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


METRICS = ("success", "episode_reward", "decision_step_reward", "valid_json", "regret")


def summarise(played: Sequence[Played]) -> dict[str, dict[str, Any]]:
    """Per metric: mean and 95 % bootstrap interval over episodes (per-decision metrics are
    averaged within an episode first, so each episode counts once)."""
    per_episode = {
        "success": [float(p.outcome == "success") for p in played],
        "episode_reward": [p.episode_reward for p in played],
        "decision_step_reward": [statistics.mean(p.rewards) for p in played if p.rewards],
        "valid_json": [statistics.mean(map(float, p.valid)) for p in played if p.valid],
        "regret": [statistics.mean(p.regret) for p in played if p.regret],
    }
    return {k: {"mean": statistics.mean(v) if v else None, "ci95": list(bootstrap_ci(v)) if v else None, "n": len(v)}
            for k, v in per_episode.items()}


def by_difficulty(played: Sequence[Played]) -> dict[str, dict[str, dict[str, Any]]]:
    """:func:`summarise` per difficulty, plus ``"all"``."""
    out = {str(d): summarise([p for p in played if p.difficulty == d]) for d in sorted({p.difficulty for p in played})}
    out["all"] = summarise(played)
    return out


def paired(a: Sequence[Played], b: Sequence[Played]) -> dict[str, dict[str, Any]]:
    """``b - a`` over the same starts: episode reward and success, with 95 % intervals.

    ``a[i]`` and ``b[i]`` are one start played by the two players. A start (its seed,
    difficulty and task family: ``Played.start_key``) that appears more than once, as when several runs' evaluations of the same
    starts are pooled, counts once, with the mean of its differences: the interval is over
    starts, as the learning check's is over prompts."""
    return {key: {"mean": statistics.mean(diffs) if diffs else None, "ci95": list(bootstrap_ci(diffs)) if diffs else None,
                  "starts": len(diffs)}
            for key, diffs in start_differences(a, b).items()}


def start_differences(a: Sequence[Played], b: Sequence[Played]) -> dict[str, list[float]]:
    """Per start, ``b - a`` of the episode reward and of success (:func:`paired`'s
    differences; a start played more than once gives the mean of its differences)."""
    if len(a) != len(b):  # zip would drop the longer side's tail unseen
        raise ValueError(f"paired episodes must come from the same starts, as many on each side ({len(a)} vs {len(b)})")
    out = {}
    for key, get in (("episode_reward", lambda p: p.episode_reward), ("success", lambda p: float(p.outcome == "success"))):
        by_start: dict[tuple[int, int, str], list[float]] = {}
        for x, y in zip(a, b):
            if x.start_key != y.start_key:
                raise ValueError("paired episodes must start from the same state (seed, difficulty and task family)")
            by_start.setdefault(x.start_key, []).append(get(y) - get(x))
        out[key] = [statistics.mean(v) for v in by_start.values()]
    return out


def paired_line(change: dict[str, dict[str, Any]]) -> str:
    """A paired difference (:func:`paired` or :func:`paired_runs`) as one line's tail:
    episode reward and success with their 95 % intervals."""
    d, w = change["episode_reward"], change["success"]
    return (f"episode reward {d['mean']:+.3f} (95% CI {d['ci95'][0]:+.3f} .. {d['ci95'][1]:+.3f}), "
            f"success {w['mean']:+.1%} (95% CI {w['ci95'][0]:+.1%} .. {w['ci95'][1]:+.1%})")


def paired_runs(runs: Sequence[tuple[Sequence[Played], Sequence[Played]]]) -> dict[str, dict[str, Any]]:
    """Several training runs' paired comparisons (each ``(a, b)`` as :func:`paired` takes
    it): per metric the mean over runs of each run's mean difference, and a 95 % interval
    that resamples the runs, then the starts within each (:func:`runs_bootstrap_ci`)."""
    per_run = [start_differences(a, b) for a, b in runs]
    if not per_run or not all(d["success"] for d in per_run):
        raise ValueError("every run needs at least one paired start")
    return {key: {"mean": statistics.mean(statistics.mean(d[key]) for d in per_run),
                  "ci95": list(runs_bootstrap_ci([d[key] for d in per_run])), "runs": len(per_run)}
            for key in ("episode_reward", "success")}


def format_table(results: dict[str, dict[str, dict[str, dict[str, Any]]]]) -> str:
    """Markdown, one block per difficulty: a row per player, a column per metric (mean and
    interval)."""
    def cell(m: dict[str, Any], pct: bool) -> str:
        if m["mean"] is None:
            return "n/a"
        lo, hi = m["ci95"]
        return (f"{m['mean']:.0%} [{lo:.0%}, {hi:.0%}]" if pct else f"{m['mean']:+.3f} [{lo:+.3f}, {hi:+.3f}]")

    players = list(results)
    keys = list(next(iter(results.values())))
    lines = []
    for d in keys:
        n = next(iter(results.values()))[d]["success"]["n"]
        lines += ["", f"difficulty {d} ({n} episodes; mean [95% CI over episodes])",
                  "| player | success | episode reward | step reward per decision | valid JSON | regret vs oracle |",
                  "|---|---:|---:|---:|---:|---:|"]
        for name in players:
            row = results[name][d]
            lines.append(f"| {name} | " + " | ".join(cell(row[m], m in ("success", "valid_json")) for m in METRICS) + " |")
    return "\n".join(lines).lstrip("\n")
