"""What single-step training cannot learn: plans whose first action pays off later.

Single-step GRPO scores one action by the environment's reward for that step, so the
best it can learn is the *greedy* policy: at every state, the action with the highest
immediate reward. Episode mode scores the whole trajectory (``episode_reward``: the
turns' mean blended with the outcome). This module compares the two on the same
candidate actions, by exhaustive search over every sequence of ``horizon`` of them:

- ``greedy_plan``: each step the candidate with the best immediate reward;
- ``best_plan``: the sequence with the best episode reward.

When their first actions differ and the best plan's first action earns *less* now, that
first action only pays off later: a single-step learner is pushed away from it.
Steps follow ``Episode.step`` exactly (the state is rounded after each step).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .actions import ACTION_TYPES
from .env import EpisodeState, LifeStackEnv, round_state
from .heuristic import planned_action, worst_metrics
from .tasks import Task
from .value import episode_outcome, episode_reward


@dataclass(frozen=True)
class Plan:
    actions: tuple[str, ...]  # the answers, in order
    turn_rewards: tuple[float, ...]
    outcome: float  # episode_outcome score
    value: float  # episode_reward(turn_rewards, outcome): what episode mode optimises

    @property
    def first(self) -> str:
        return self.actions[0]


def candidates(env: LifeStackEnv) -> list[str]:
    """A small honest action set: the next step of every open route, and every action type
    off-route, each paying for modest fixes of the two worst metrics."""
    worst = worst_metrics(env, 2)
    out = [planned_action(env, r, t, worst, 5.0) for r in env.open_routes() for t in env.next_action_types(r)]
    return out + [planned_action(env, None, t, worst, 5.0) for t in ACTION_TYPES]


def _step(task: Task, state: EpisodeState, text: str) -> tuple[EpisodeState, float]:
    env = LifeStackEnv()
    env.restore(task, state)
    reward = env.step(text).reward
    round_state(env.state)
    return env.state, reward


def _plan(task: Task, start: EpisodeState, actions: list[str], rewards: list[float], end: EpisodeState) -> Plan:
    outcome = episode_outcome(task, start, end)["score"]
    return Plan(tuple(actions), tuple(rewards), outcome, episode_reward(rewards, outcome))


def greedy_plan(task: Task, start: EpisodeState, horizon: int,
                propose: Callable[[LifeStackEnv], list[str]] = candidates) -> Plan:
    state, actions, rewards = start, [], []
    for _ in range(horizon):
        if state.done:
            break
        env = LifeStackEnv()
        env.restore(task, state)
        best = None
        for text in propose(env):
            nxt, r = _step(task, state, text)
            if best is None or r > best[1]:
                best = (text, r, nxt)
        actions.append(best[0])
        rewards.append(best[1])
        state = best[2]
    return _plan(task, start, actions, rewards, state)


def best_plan(task: Task, start: EpisodeState, horizon: int,
              propose: Callable[[LifeStackEnv], list[str]] = candidates) -> Plan:
    """The sequence of at most ``horizon`` candidates with the highest episode reward
    (exhaustive: about len(candidates) ** horizon steps)."""
    best: list[Plan] = []

    def search(state: EpisodeState, actions: list[str], rewards: list[float]) -> None:
        if actions and (state.done or len(actions) == horizon):
            plan = _plan(task, start, actions, rewards, state)
            if not best or plan.value > best[0].value:
                best[:] = [plan]
            return
        env = LifeStackEnv()
        env.restore(task, state)
        for text in propose(env):
            nxt, r = _step(task, state, text)
            search(nxt, actions + [text], rewards + [r])

    search(start, [], [])
    return best[0]
