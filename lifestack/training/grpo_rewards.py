"""What the six GRPO reward functions of ``scripts/train_trl.py`` share, apart from the
functions themselves: their names (REWARD_WEIGHTS chooses and weights them by name), the
graded format score, the wrapper that clips, times and (in episode mode) aggregates each
of them per episode, and the helpers that score one completion or one played episode
with all six. (The task reward they are built on is ``lifestack.task_reward``.)

The reward functions live in the training script, where a reader changes them; this
module never imports it: whoever needs the six gets them as a list.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from typing import Any, Callable, Mapping, Sequence

from lifestack.actions import ACTION_FIELDS, LifeStackAction, find_json_object
from lifestack.episodes import Episode
from lifestack.scoring import EVAL_CACHE_SIZE, PROMPT_CACHE_SIZE, Evaluator, parse_completion
from lifestack.prompts import strip_metadata
from lifestack.value import episode_reward

REWARD_NAMES = (  # the order of REWARD_FUNCS; the names REWARD_WEIGHTS chooses and weights by
    "reward_format_fn",
    "reward_plausibility_fn",
    "reward_task_success_fn",
    "reward_milestone_fn",
    "reward_reasoning_fn",
    "reward_human_feedback_fn",
)
# In episode mode (HORIZON > 1) this reward also carries the trajectory's outcome
# (lifestack.value.episode_reward); the other five are the mean over the turns.
OUTCOME_REWARD = "reward_task_success_fn"
EPISODE_FIELDS = ("turns", "episode_outcome", "episode")  # what the episode rollout adds to a reward call

# The process's evaluator: prompt text -> (task, state, metadata), and (prompt, completion)
# -> evaluation, so the six rewards of one completion cost one environment step.
EVALUATOR = Evaluator(PROMPT_CACHE_SIZE, EVAL_CACHE_SIZE)

REFUSAL_RE = re.compile(r"\b(i can(?:no|')t|i am unable|i'm unable|as an ai|i won't|sorry)\b", re.I)
# What a forgiven note costs the format score (any other note: FORMAT_NOTE_COST). A
# clamped delta costs nothing here (the claim envelope is economics, not format, and a
# deduction would make 19.9 and 20.1 score apart).
FORMAT_NOTE_COST = 0.1
FORMAT_COSTS = {"missing": 0.15, "trailing_text": 0.2, "clamped": 0.0}


def format_score(text: str) -> float:
    """Graded JSON compliance: empty/refusal < unparseable < partial < complete.

    Unparseable text scores at most -0.1 and a parsed action at least +0.1, so format
    alone already ranks every schema-valid answer above every unparseable one.
    """
    action, _reason = parse_completion(text)
    text = strip_metadata(text)
    if action is None and (not text.strip() or ("{" not in text and REFUSAL_RE.search(text))):
        return -1.0
    if action is None:
        obj, error, _ = find_json_object(text)
        if error is not None or not isinstance(obj, dict):
            return -0.6
        present = sum(1 for f in ACTION_FIELDS if f in obj) / len(ACTION_FIELDS)
        return -0.4 + 0.3 * present  # a partial object: closer to the schema, less bad
    return valid_format_score(action)


def valid_format_score(action: LifeStackAction) -> float:
    """The format score of a parsed action: 1, less what the parser had to forgive (>= 0.1)."""
    score = 1.0
    for note in action.notes:
        score -= FORMAT_COSTS.get(note.split(":", 1)[0], FORMAT_NOTE_COST)
    return max(score, 0.1)


def clip(values: Sequence[Any]) -> list[float]:
    """Each value as a float in [-1, 1]; NaN becomes 0 (min(1.0, nan) would silently make
    it the best possible reward)."""
    return [0.0 if x != x else max(-1.0, min(1.0, x)) for x in map(float, values)]


def per_episode(fn: Callable, kwargs: dict) -> list[float]:
    """``fn`` on every turn of every episode (each turn against the state it answered),
    aggregated per episode."""
    turns, outcomes = kwargs["turns"], kwargs.get("episode_outcome")
    rest = {k: v for k, v in kwargs.items() if k not in EPISODE_FIELDS and k not in ("prompts", "completions", "prompt")}
    flat = [pair for episode in turns for pair in episode]
    # per_turn: each turn is scored by what it did; the played continuation and the
    # outcome below are the episode's own (lifestack.value: nothing is counted twice)
    values = clip(fn([c for _, c in flat], prompts=[p for p, _ in flat], per_turn=True, **rest))
    out, i = [], 0
    for k, episode in enumerate(turns):
        outcome = outcomes[k] if outcomes is not None and fn.__name__ == OUTCOME_REWARD else None
        out.append(episode_reward(values[i:i + len(episode)], outcome))
        i += len(episode)
    return out


_CALLS = threading.local()  # how deep this thread is in reward calls (the outermost one is timed)


def reward_function(timer: Any) -> Callable[[Callable], Callable]:
    """Decorator of the six reward functions: the result clipped to [-1, 1]
    (:func:`clip`); in episode mode (a call with ``turns``) each turn scored and
    aggregated per episode (:func:`per_episode`); the wall time spent added to
    ``timer.reward_seconds`` (the run context: reported per stage) by the outermost call
    only: a reward call that scores a logged line calls the rewards again inside it, and
    that time is already inside its own."""
    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            _CALLS.depth = getattr(_CALLS, "depth", 0) + 1
            try:
                if kwargs.get("turns") is not None:
                    out = per_episode(fn, kwargs)
                else:
                    out = fn(*args, **{k: v for k, v in kwargs.items() if k not in EPISODE_FIELDS})
            finally:
                _CALLS.depth -= 1
                if _CALLS.depth == 0:
                    timer.reward_seconds += time.perf_counter() - t0
            return clip(out)

        return wrapper

    return wrap


def component_reward(component: str, penalty: str, penalty_value: float) -> Callable[[dict], float]:
    """The score of a reward that is one component of the task reward's breakdown: the
    component's value, or ``penalty_value`` when ``penalty`` fired (for a parsed answer;
    the reward function decides what unparseable text gets)."""
    def score(evaluation: dict) -> float:
        b = evaluation["breakdown"]
        return penalty_value if penalty in b else float(b.get(component, 0.0))

    return score


def reward_vector(funcs: Sequence[Callable], completion: Any, prompt: Any) -> dict[str, float]:
    """All reward functions ``funcs`` for one completion: ``{name: reward}``."""
    return {f.__name__: f([completion], prompts=[prompt])[0] for f in funcs}


def episode_reward_vector(funcs: Sequence[Callable], episode: Episode) -> dict[str, float]:
    """All reward functions of a played episode, aggregated as GRPO sees them in episode mode."""
    turns = [[[t.prompt, t.completion] for t in episode.turns]]
    outcome = [episode.outcome()["score"]]
    return {f.__name__: f([""], prompts=[""], turns=turns, episode_outcome=outcome)[0] for f in funcs}


def weighted_reward(rewards: dict[str, float], weights: Mapping[str, float]) -> float:
    """The total GRPO optimises for one completion: the sum of weight x reward over the
    rewards REWARD_WEIGHTS names."""
    return sum(w * rewards[name] for name, w in weights.items())


def chosen_rewards(funcs: Sequence[Callable], weights: Mapping[str, float]) -> list[Callable]:
    """The reward functions REWARD_WEIGHTS names, in REWARD_NAMES order: what GRPO optimises."""
    return [f for f in funcs if f.__name__ in weights]
