"""Closed-loop episodes: the model acts, the environment answers, the model acts again.

An :class:`Episode` starts from a seeded scenario (or from a rendered prompt, whose
metadata rebuilds the state), holds the conversation so far, and advances one turn per
answer: the answer is parsed and stepped through :class:`LifeStackEnv`, and the
environment's reply (what happened, then the new state, rendered by
``lifestack.prompts``) becomes the next user message. It ends when the task ends
(success, failure, timeout) or after ``horizon`` turns.

An answer that cannot be parsed is a wasted turn: it scores the fallback reward, and
the world does not wait for it. Time passes as if the model had done nothing
(``IDLE_ANSWER``: rest, no claims, no cost): events fire, the deadline comes closer.
Otherwise nonsense would stop the clock and let a policy stall a failing task by
talking garbage. (``LifeStackEnv.step`` itself changes nothing on a rejected action;
that is the single-decision contract, where no time follows.) The state is rounded after
each step exactly as ``sample_scenario`` rounds it, so every environment turn's metadata
rebuilds the very state the episode continues from: any turn can be rescored alone.

Same scenario, same answers -> same turns, same observations, same rewards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from .conflicts import ConflictEvent
from .env import EpisodeState, LifeStackEnv, round_state
from .scoring import FALLBACK_REWARD, parse_completion
from .generator import TaskGenerator
from .prompts import ANSWER_SCHEMA, build_prompt, prompt_text, read_metadata, render_observation, strip_metadata
from .scenarios import Scenario, conflict_from_metadata, rebuild_state, task_from_metadata
from .tasks import Task
from .value import episode_outcome

# What the world does with a turn whose answer could not be read: as if the model did nothing.
MAX_HORIZON = 8  # the most turns an episode may be asked for (no task lasts longer: 5 at most today)
IDLE_ANSWER = ('{"action_type": "rest", "target_domain": "mental_wellbeing", "route": null, "metric_changes": {}, '
               '"resource_cost": {"time": 0, "money": 0, "energy": 0}, "reasoning": "No action this turn."}')


@dataclass
class Turn:
    """One decision: the user text it answered (holds the pre-action state's metadata),
    the answer, and what the environment made of it."""

    prompt: str
    completion: str
    action: dict[str, Any] | None
    reward: float  # the environment's task reward (FALLBACK_REWARD when rejected)
    breakdown: dict[str, Any]
    info: list[str]
    observation: str | None = None  # the environment's reply; None when the episode ended here

    def to_dict(self, head: int = 300) -> dict[str, Any]:
        obs = self.observation
        return {"completion": self.completion, "action": self.action, "task_reward": self.reward,
                "task_breakdown": self.breakdown, "info": self.info,
                "observation_head": None if obs is None else strip_metadata(obs).strip()[:head]}


@dataclass
class Episode:
    task: Task
    conflict: ConflictEvent
    state: EpisodeState  # the state the episode started from (a copy; never changed)
    difficulty: int
    seed: int
    horizon: int
    messages: list[dict[str, str]] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    env: LifeStackEnv = field(default_factory=LifeStackEnv)

    def __post_init__(self) -> None:
        if self.horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {self.horizon}")
        self.state = self.state.clone()
        self.env.restore(self.task, self.state)
        if not self.messages:
            self.messages = build_prompt(self.task, self.conflict, self.state, self.difficulty, self.seed)
        self.messages = [dict(m) for m in self.messages]

    # -- construction --------------------------------------------------------------
    @classmethod
    def from_scenario(cls, sc: Scenario, horizon: int) -> Episode:
        return cls(sc.task, sc.conflict, sc.state, sc.difficulty, sc.seed, horizon)

    @classmethod
    def from_prompt(cls, messages: Sequence[dict[str, str]] | str, horizon: int,
                    generator: TaskGenerator | None = None) -> Episode:
        """The episode a rendered prompt starts (its metadata rebuilds the state).
        Raises ValueError when the prompt carries no usable metadata."""
        meta = read_metadata(prompt_text(messages))
        if isinstance(meta, str):
            raise ValueError(meta)
        ep = cls.from_metadata(meta, horizon, generator)
        if not isinstance(messages, str):
            ep.messages = [dict(m) for m in messages]
        return ep

    @classmethod
    def from_metadata(cls, meta: dict[str, Any], horizon: int, generator: TaskGenerator | None = None) -> Episode:
        """The episode that starts at the state a ``<SYSTEM_METADATA>`` object describes;
        its first prompt is that state's prompt, byte for byte. Raises ValueError when the
        metadata is malformed (the checks the rewards apply to untrusted prompts)."""
        if not isinstance(meta, dict):
            raise ValueError("metadata must be a JSON object")
        try:
            task = task_from_metadata(meta, generator)
        except Exception as exc:  # an unknown family or difficulty surfaces from the generator
            raise ValueError(f"task construction failed: {exc}") from None
        state = rebuild_state(meta, task)
        difficulty, seed = meta.get("difficulty"), meta.get("seed")
        return cls(task, conflict_from_metadata(meta), state, int(difficulty), int(seed), horizon)

    # -- play ----------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.env.state.done or len(self.turns) >= self.horizon

    def step(self, completion: str) -> Turn:
        """Play one answer; append it and the environment's reply to the conversation."""
        if self.done:
            raise RuntimeError("the episode is over")
        prompt = prompt_text(self.messages)
        before = self.env.state.clone()
        action, reason = parse_completion(completion)
        if action is None:
            idle = self.env.step(IDLE_ANSWER)  # its reward is not the model's: the turn scores the fallback
            round_state(self.env.state)
            turn = Turn(prompt, completion, None, FALLBACK_REWARD, {"error": reason or "unparseable completion"},
                        [f"action rejected: {reason}; time passed without an action"]
                        + [m for m in idle.metadata["info"] if m.startswith(("event:", "episode over", "milestone"))])
        else:
            obs = self.env.step(action)
            round_state(self.env.state)
            turn = Turn(prompt, completion, action.to_dict(), float(obs.reward), obs.metadata["breakdown"],
                        list(obs.metadata["info"]))
        self.turns.append(turn)
        self.messages.append({"role": "assistant", "content": completion})
        if not self.done:
            turn.observation = render_observation(self.task, self.conflict, before, self.env.state, turn.info,
                                                  self.difficulty, self.seed)
            if action is None:  # remind it of the format it missed
                turn.observation += f" Format: {ANSWER_SCHEMA}"
            self.messages.append({"role": "user", "content": turn.observation})
        return turn

    # -- results -------------------------------------------------------------------
    def outcome(self) -> dict[str, Any]:
        return episode_outcome(self.task, self.state, self.env.state)

    def record(self) -> dict[str, Any]:
        """What a log keeps of the episode (no hidden state)."""
        return {"seed": self.seed, "difficulty": self.difficulty, "domain": self.task.domain,
                "conflict_id": self.conflict.id, "horizon": self.horizon,
                "turns": [t.to_dict() for t in self.turns], "outcome": self.outcome()}


Policy = Callable[[Episode], str]


def play(episode: Episode, policy: Policy) -> Episode:
    """Run ``policy`` (episode -> answer text) until the episode ends."""
    while not episode.done:
        episode.step(policy(episode))
    return episode


def play_many(episodes: Sequence[Episode], answer: Callable[[list[list[dict[str, str]]]], list[str]]) -> list[Episode]:
    """Advance many episodes in lockstep: ``answer`` gets the conversations of the live
    ones and returns one answer each (a batched model generates them together)."""
    while True:
        live = [e for e in episodes if not e.done]
        if not live:
            return list(episodes)
        texts = answer([e.messages for e in live])
        if len(texts) != len(live):
            raise ValueError(f"answer returned {len(texts)} texts for {len(live)} conversations")
        for e, text in zip(live, texts):
            e.step(text)
