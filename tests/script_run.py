"""What the tests of the training script's reward path share: the script's run context
(``T.RUN``) fresh for every test, logging and the feedback database under tmp_path, and
a few held-out prompts with their states. Import ``isolated`` into a test module to make
it autouse there (pytest collects fixtures from a module's namespace)."""

from __future__ import annotations

import functools
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import train_trl as T  # noqa: E402
import lifestack.training.grpo_rewards as RW  # noqa: E402
from lifestack.env import LifeStackEnv  # noqa: E402
from lifestack.prompts import prompt_text  # noqa: E402
from lifestack.training.context import FeedbackSource  # noqa: E402
from lifestack.training.generation_log import GenerationLog  # noqa: E402

GARBAGE = "Honestly I would just wait and see how the week turns out."


def fresh_run_context(monkeypatch, log_dir, feedback_db: str | None = None) -> None:
    """T.RUN as a new run finds it (logging to ``log_dir``); restored after the test."""
    fresh = {"log_interval": T.LOG_INTERVAL, "evaluations": 0, "step": 0, "stage": 0, "difficulty": 0, "phase": "train",
             "episodes": False, "episodes_played": 0, "signatures": {}, "reward_weights": dict(T.REWARD_WEIGHTS),
             "log": GenerationLog(log_dir), "feedback": FeedbackSource(feedback_db)}
    for key, value in fresh.items():
        monkeypatch.setattr(T.RUN, key, value)


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """Logs and feedback DB under tmp_path; caches and run counters fresh for every test."""
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setenv("LIFESTACK_FEEDBACK_DB", str(tmp_path / "fb-env.sqlite3"))
    log_dir = tmp_path / "logs"
    fresh_run_context(monkeypatch, log_dir, str(tmp_path / "fb.sqlite3"))
    RW.EVALUATOR.evaluations.clear()
    RW.EVALUATOR.prompts.clear()
    yield log_dir
    store = T.RUN.feedback._store
    if store is not None and hasattr(store, "close"):
        store.close()
    RW.EVALUATOR.evaluations.clear()
    RW.EVALUATOR.prompts.clear()
    T.RUN.log.close()


@functools.lru_cache(maxsize=None)
def dataset(n: int = 100, difficulty: int | None = None, seed: int = T.SEED):
    return T.generate_dataset(n, difficulty, seed=seed)


@functools.lru_cache(maxsize=None)
def prompts10() -> tuple:
    return tuple(dataset()["prompt"][:10])


def user_text(prompt) -> str:
    return prompt[1]["content"]


def context(prompt):
    ctx = RW.EVALUATOR.context(user_text(prompt))
    assert not isinstance(ctx, str), ctx
    return ctx


def policy_completion(prompt, policy) -> str:
    task, state, _meta = context(prompt)
    env = LifeStackEnv()
    env.restore(task, state)
    return policy(env, random.Random(0))


def heuristic_answers(prompts) -> list[str]:
    """The heuristic's answer on the state each prompt describes (a stand-in policy)."""
    from lifestack.policies import heuristic

    out = []
    for p in prompts:
        task, state, _ = RW.EVALUATOR.context(prompt_text(p))
        env = LifeStackEnv()
        env.restore(task, state, observe=False)
        out.append(heuristic(env))
    return out
