"""What a decision is worth: what it achieves now plus what it leaves for the rest of the task.

The environment's step reward (:func:`lifestack.task_reward.task_reward`) judges one action by
what it did at once. Alone, it pays a policy to spend everything on the first decision:
more resources buy more goodness now, and the step cannot see that the next decisions
are left with nothing. So a single decision (``HORIZON = 1``) is scored by the episode it
starts:

1. **The episode value** ``Q(s, a)``: take the action, then let the *reference
   continuation* (:func:`lifestack.heuristic.heuristic`) play the task to its end, and
   score that trajectory exactly as episode mode scores a played episode
   (:func:`episode_reward` of the turns' step rewards and :func:`episode_outcome`).
2. **The reference value** ``Q(s, h)``: the same for the reference policy's own first
   decision ``h`` (one continuation per prompt, cached), with its number of continuation
   turns ``k_h``.
3. **The decision reward** blends the step reward with the episode value expressed per
   decision::

       value  = Q(s, h) + 2 (k_h + 1) (Q(s, a) - Q(s, h))
       reward = (1 - VALUE_SHARE) * step_reward + VALUE_SHARE * value

   clipped to [-1, 1] with its negative side squashed into (VALID_FLOOR, 0] as the step
   reward's is, so a schema-valid answer still outscores unparseable text.

   ``Q(s, a) - Q(s, h)`` is the decision's advantage over the reference decision on the
   episode's scale, where one decision weighs ``(1 - OUTCOME_SHARE) / (k + 1)`` of the
   episode reward; ``2 (k_h + 1)`` converts it back to the scale of one decision (when
   both continuations are as long, the factor makes the advantage equal to the difference
   of the two step rewards plus what the decision changes later). Ranked within a prompt
   the decision reward follows the episode value (docs/rewards.md has the figures from
   ``scripts/decision_value.py``), and the step reward's share keeps the immediate
   signal GRPO learns fastest from.

Episode mode (``HORIZON > 1``) plays the real continuation, so it scores each turn by the
step reward only and adds the outcome once per episode: nothing is counted twice.

Everything here is pure and deterministic: same state and answer, same value.
"""

from __future__ import annotations

from typing import Any, Sequence

from .cache import cache_put
from .env import EpisodeState, LifeStackEnv, Observation, round_state
from .heuristic import heuristic
from .metrics import METRIC_PATHS, RESOURCE_NAMES
from .task_reward import clip, soft_floor
from .tasks import Task

# How the trajectory's outcome is scored (episode_outcome): the end of the task, milestone
# progress made during the episode, and resources kept (in full on success, in proportion
# to the progress on a timeout, never after a failure: doing nothing keeps everything and
# earns nothing for it). Weights sum to 1.
OUTCOME_WEIGHTS = {"result": 0.5, "milestones": 0.25, "resources": 0.25}
RESULT_SCORES = {"success": 1.0, "failure": -1.0}  # timeout / still running: 0
OUTCOME_SHARE = 0.5  # of an episode's task reward; the rest is the mean of its turns' task rewards
# The held-out mean decision reward above which the curriculum raises difficulty: the
# reward is calibrated so the greedy maximiser clears it and random and hacked answers do
# not (lifestack.calibrate); scripts/train_trl.py's ADVANCE_THRESHOLD defaults to it.
CURRICULUM_THRESHOLD = 0.6
VALUE_SHARE = 0.9  # of a single decision's reward that is its episode value (the rest: its step reward)
ADVANTAGE_SCALE = 1.0 / (1.0 - OUTCOME_SHARE)  # 2: with (k_h + 1), one decision's share of an episode, inverted


def episode_outcome(task: Task, start: EpisodeState, end: EpisodeState) -> dict[str, Any]:
    """The trajectory's task outcome, scored in [-1, 1]: how the task ended (success +1,
    failure -1, otherwise 0), the share of the milestone reward still open at the start
    that the episode reached, and the share of the starting resources kept, credited in
    full on success, in proportion to that milestone share on a timeout and not at all
    after a failure (an episode that does nothing keeps them all and earns nothing)."""
    open_ms = [m for m in task.milestones if m.id not in start.milestones]
    total = sum(m.reward for m in open_ms)
    reached = [m.id for m in open_ms if m.id in end.milestones]
    progress = sum(m.reward for m in open_ms if m.id in reached) / total if total > 0 else 0.0
    kept = [min(1.0, max(0.0, end.resources[k] / start.resources[k])) if start.resources[k] > 0 else 1.0
            for k in RESOURCE_NAMES]
    kept_share = sum(kept) / len(kept)
    # reserves count once the task is done, else in proportion to the progress made (doing
    # nothing keeps everything and earns nothing for it); never after a failure
    earned = 1.0 if end.outcome == "success" else 0.0 if end.outcome == "failure" else progress
    parts = {"result": RESULT_SCORES.get(end.outcome, 0.0), "milestones": progress,
             "resources": kept_share * earned}
    score = sum(OUTCOME_WEIGHTS[k] * v for k, v in parts.items())
    return {"result": end.outcome, "milestones_reached": reached, "milestone_progress": round(progress, 4),
            "resources_kept": round(kept_share, 4), "score": round(max(-1.0, min(1.0, score)), 6)}


def episode_reward(turn_values: Sequence[float], outcome: float | None = None) -> float:
    """One reward for an episode from one reward's value on each of its turns: their
    mean, and for the task reward (``outcome`` given) blended with the trajectory's
    outcome score, ``(1 - OUTCOME_SHARE) * mean + OUTCOME_SHARE * outcome``.

    The mean (not the sum) keeps an episode that ends early by success on the scale of
    one that uses every turn, and a wasted (rejected) turn costs its share."""
    if not turn_values:
        raise ValueError("an episode has at least one turn")
    mean = sum(turn_values) / len(turn_values)
    return mean if outcome is None else (1.0 - OUTCOME_SHARE) * mean + OUTCOME_SHARE * outcome


CONTINUATION_CACHE_SIZE = 8192
_CONTINUATIONS: dict[tuple, tuple[tuple[float, ...], float]] = {}  # post-action state -> (turn rewards, outcome)


def _state_key(task: Task, s: EpisodeState) -> tuple:
    """Everything the continuation reads of a state (answers that differ only in wording
    leave the same state behind, and share one continuation)."""
    return (task.id, s.seed, s.step, s.done, s.outcome, tuple(s.metrics[p] for p in METRIC_PATHS),
            tuple(s.resources[k] for k in RESOURCE_NAMES), tuple(s.budget[k] for k in RESOURCE_NAMES),
            tuple(sorted(s.world.items())), tuple(sorted(s.hidden.items())),
            tuple((k, tuple(v)) for k, v in sorted(s.route_progress.items())), tuple(s.closed_routes),
            tuple(s.milestones), tuple(s.events_fired))


def continue_episode(env: LifeStackEnv, start: EpisodeState, first_reward: float) -> tuple[float, int]:
    """The episode value of a decision already stepped in ``env`` (whose state is the
    state after it; ``first_reward`` its step reward): the reference continuation plays
    the task to its end from there, as ``Episode.step`` would (the state rounded after
    each step). Returns ``(episode value, continuation turns)``. Changes ``env``.

    What the continuation earns depends only on the state it starts from (and the
    start's milestones and resources, which the outcome compares against), so it is
    cached per state (bounded, first in first out)."""
    round_state(env.state)
    key = (_state_key(env.task, env.state), tuple(start.milestones), tuple(start.resources[k] for k in RESOURCE_NAMES))
    hit = _CONTINUATIONS.get(key)
    if hit is None:
        rewards = []
        while not env.state.done:
            rewards.append(env.step(heuristic(env), faithful_by_construction=True).reward)
            round_state(env.state)
        hit = (tuple(rewards), episode_outcome(env.task, start, env.state)["score"])
        cache_put(_CONTINUATIONS, key, hit, CONTINUATION_CACHE_SIZE)
    rewards, outcome = hit
    return episode_reward([first_reward, *rewards], outcome), len(rewards)


def decision_reward(step_reward: float, value: float, reference_value: float, reference_turns: int) -> float:
    """A single decision's reward from its step reward and its episode value, given the
    reference decision's episode value and continuation length (module docstring)."""
    per_decision = reference_value + ADVANTAGE_SCALE * (reference_turns + 1) * (value - reference_value)
    # clipped, and its negative side squashed smoothly above the unparseable fallback, as
    # the step reward is (a schema-valid answer always outscores unparseable text)
    return soft_floor(clip((1.0 - VALUE_SHARE) * step_reward + VALUE_SHARE * per_decision))


def episode_value(task: Task, state: EpisodeState, action: Any,
                  env: LifeStackEnv | None = None) -> tuple[Observation, float | None, int]:
    """Step ``action`` (text, dict or parsed action) at ``state`` in ``env`` (a fresh one
    by default) and play the reference continuation: ``(the step's observation, Q(s, a),
    continuation turns)``; ``Q`` is None when the parser rejects the action."""
    env = env or LifeStackEnv()
    env.restore(task, state, observe=False)
    obs = env.step(action)
    if "error" in obs.metadata["breakdown"]:
        return obs, None, 0
    value, turns = continue_episode(env, state, obs.reward)
    return obs, value, turns


def reference_value(task: Task, state: EpisodeState) -> tuple[float, int]:
    """``(Q(s, h), k_h)``: the episode value of the reference policy's own decision at
    ``state`` and its number of continuation turns (computed once per prompt by callers
    that cache)."""
    env = LifeStackEnv()
    env.restore(task, state, observe=False)
    _, value, turns = episode_value(task, state, heuristic(env), env)
    return value, turns


def score_decision(task: Task, state: EpisodeState, action: Any, reference: tuple[float, int] | None = None,
                   env: LifeStackEnv | None = None) -> dict[str, Any]:
    """Step ``action`` (text, dict or parsed action) at ``state`` and value it.

    Returns ``{"reward": decision reward, "step_reward", "value", "turns", "observation"}``;
    ``reference`` is :func:`reference_value` of the state when the caller cached it. An
    action the parser rejects gets its step reward alone (the fallback) and no value.
    """
    obs, value, turns = episode_value(task, state, action, env)
    if value is None:
        return {"reward": obs.reward, "step_reward": obs.reward, "value": None, "turns": 0, "observation": obs}
    ref_value, ref_turns = reference if reference is not None else reference_value(task, state)
    return {"reward": decision_reward(obs.reward, value, ref_value, ref_turns), "step_reward": obs.reward,
            "value": value, "turns": turns, "observation": obs}
