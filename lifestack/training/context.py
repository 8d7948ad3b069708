"""The run context: what one training process knows about where it is and what it saw.

The reward functions are called by TRL with a fixed signature, so what they record (the
step, the time spent in reward code, the hack signatures of the policy's answers, the
sampled lines of ``generations.jsonl``) goes into one :class:`RunContext`, which the
training script creates once (``RUN``) and passes to the library code that reads it:
the curriculum loop, the evaluations, the integrity watch. The feedback database the
sixth reward reads is opened through it too (:class:`FeedbackSource`).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from lifestack.episodes import Episode
from lifestack.hacks import signatures as hack_signatures
from lifestack.prompts import strip_metadata
from lifestack.training.decisions import decisions
from lifestack.training.distributed import is_main_process
from lifestack.training.generation_log import GenerationLog
from lifestack.training.grpo_rewards import (
    OUTCOME_REWARD, REWARD_NAMES, episode_reward_vector, reward_vector, weighted_reward,
)

PHASES = ("train", "eval", "integrity", "reference", "rescore")
# neither counted nor logged: the watch's hack texts, the reference policies' answers, and the
# policy's answers scored again after they were counted once (the learning check's tables)
NOT_THE_POLICY = ("integrity", "reference", "rescore")


class FeedbackSource:
    """The outcome-feedback database of ``reward_human_feedback_fn``: opened lazily, once
    per process; ``on_error`` ("raise" | "zero") says what an unreadable one does."""

    def __init__(self, path: str | None = None, on_error: str = "raise") -> None:
        self.configure(path, on_error)

    def configure(self, path: str | None, on_error: str = "raise") -> None:
        self.path, self.on_error, self._store = path or None, on_error, None

    def store(self):
        if self._store is None:
            from lifestack.feedback import FeedbackStore

            self._store = FeedbackStore(self.path)
        return self._store


@dataclass
class RunContext:
    """One training process's run: position, counters, the generation log, the rewards."""

    stage: int = 0
    difficulty: int = 0
    step: int = 0  # the trainer's global step (read from each reward call)
    phase: str = "train"
    episodes: bool = False  # episode mode (HORIZON > 1): whole episodes are logged, not single evaluations
    log_interval: int = 20  # every N-th fresh evaluation (or played episode) goes to generations.jsonl
    reward_weights: dict[str, float] = field(default_factory=dict)  # REWARD_WEIGHTS: the rewards GRPO optimises, by name
    reward_funcs: list[Callable] = field(default_factory=list)  # all six, in REWARD_NAMES order: what scores a logged line
    reward_seconds: float = 0.0  # wall time spent in reward code, all stages
    evaluations: int = 0  # fresh evaluations seen (the generation log samples them)
    episodes_played: int = 0
    signatures: dict[str, int] = field(default_factory=dict)  # hack signatures of this stage's completions
    log: GenerationLog = field(default_factory=GenerationLog)
    feedback: FeedbackSource = field(default_factory=FeedbackSource)
    _quiet: int = 0

    def configure(self, cfg: dict[str, Any]) -> None:
        """Take a run's settings: where it logs, how often, its reward weights, its mode."""
        self.log.open(cfg["LOG_DIR"])
        self.log_interval = cfg["LOG_INTERVAL"]
        self.reward_weights = dict(cfg["REWARD_WEIGHTS"])
        self.episodes = decisions(cfg["HORIZON"]).episodes

    @contextlib.contextmanager
    def in_phase(self, phase: str, episodes: bool | None = None) -> Iterator[None]:
        """Run a block in ``phase`` (one of PHASES), restoring the previous one after."""
        assert phase in PHASES, phase
        before = (self.phase, self.episodes)
        self.phase = phase
        if episodes is not None:
            self.episodes = episodes
        try:
            yield
        finally:
            self.phase, self.episodes = before

    def score_lines_with(self, funcs: Sequence[Callable]) -> None:
        """The reward functions a logged line is scored with: the training script's six, in
        REWARD_NAMES order (each line shows all six and the total GRPO optimises)."""
        names = tuple(f.__name__ for f in funcs)
        if names != REWARD_NAMES:
            raise ValueError(f"a logged line is scored with the six rewards {REWARD_NAMES}, got {names}")
        self.reward_funcs = list(funcs)

    # --- what the reward functions report -------------------------------------------
    def observe(self, ptext: str, ctext: str, result: dict) -> None:
        """A fresh evaluation of the policy's answer: count its hack signatures and, every
        log_interval-th, write it to the generation log (episode mode logs episodes)."""
        if self.phase in NOT_THE_POLICY:
            return
        counts = self.signatures
        counts["completions"] = counts.get("completions", 0) + 1
        for name in hack_signatures(result.get("action"), result["breakdown"]):
            counts[name] = counts.get(name, 0) + 1
        if not self.episodes and not self._quiet:
            self.evaluations += 1
            if self.evaluations % self.log_interval == 0 and is_main_process():
                self.log.write(self._generation_line(ptext, ctext, result))

    def vector(self, completion: Any, prompt: Any) -> dict[str, float]:
        """The six rewards of one completion."""
        return reward_vector(self.reward_funcs, completion, prompt)

    def episode_vector(self, episode: Episode) -> dict[str, float]:
        """The six rewards of a played episode, aggregated as GRPO sees them."""
        return episode_reward_vector(self.reward_funcs, episode)

    def weighted(self, rewards: dict[str, float]) -> float:
        return weighted_reward(rewards, self.reward_weights)

    def _where(self) -> dict[str, Any]:
        return {"time": round(time.time(), 3), "phase": self.phase, "step": self.step, "stage": self.stage,
                "difficulty": self.difficulty}

    def _generation_line(self, ptext: str, ctext: str, result: dict) -> dict[str, Any]:
        action = result.get("action")
        # All six rewards of this completion (the evaluation is cached: no second env step)
        # and the weighted total GRPO optimises, named as such.
        components = self.vector(ctext, ptext)
        return {**self._where(), "evaluation": self.evaluations, "prompt_head": strip_metadata(ptext).strip()[:300],
                "completion": ctext[:4000], "action": action.to_dict() if action else None,
                "grpo_reward": self.weighted(components), "grpo_rewards": components,
                "grpo_weights": dict(self.reward_weights),
                "task_reward": result["reward"], "task_breakdown": result["breakdown"]}

    def log_rollout(self, episodes: Sequence[Episode], _outputs: Any = None, step: int | None = None) -> None:
        """lifestack.rollout's ``on_rollout`` hook: log the rollout's episodes at the
        trainer's ``step`` (the reward functions, which set it otherwise, run after)."""
        if step is not None:
            self.step = step
        for episode in episodes:
            self.log_episode(episode)

    def log_episode(self, episode: Episode) -> None:
        """Every log_interval-th played episode (episode mode) to the generation log: one
        line per episode, its turns in order, each with its own six rewards."""
        self.episodes_played += 1
        if self.episodes_played % self.log_interval or not is_main_process():
            return
        record = episode.record()  # an in-process Episode or a RemoteEpisode alike
        self._quiet += 1  # the turns are logged inside the episode's line, not one by one
        try:
            turns = []
            for t, logged in zip(episode.turns, record["turns"]):
                # one evaluation per turn, cached: the reward functions reuse it (or this reuses theirs)
                components = self.vector(t.completion, t.prompt)
                turns.append({"prompt_head": strip_metadata(t.prompt).strip()[:300], **logged,
                              "grpo_reward": self.weighted(components), "grpo_rewards": components})
            total = self.episode_vector(episode)
        finally:
            self._quiet -= 1
        self.log.write({
            **self._where(), "episode": self.episodes_played, "horizon": record["horizon"], "seed": record["seed"],
            "domain": record["domain"], "prompt_head": turns[0]["prompt_head"] if turns else "",
            "turns": turns, "outcome": record["outcome"],
            "grpo_reward": self.weighted(total), "grpo_rewards": total,
            "grpo_weights": dict(self.reward_weights), "task_reward": total[OUTCOME_REWARD],
        })
