"""Tests for lifestack/training/generation_log.py through the reward path that writes it:
every LOG_INTERVAL-th fresh evaluation, only on the main process, and a log that cannot
be written changes no reward."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from script_run import GARBAGE, T, isolated, policy_completion, prompts10  # noqa: F401  (isolated: autouse)
import lifestack.prompts as PR
import lifestack.training.grpo_rewards as RW
from lifestack.actions import ACTION_TYPES
from lifestack.policies import heuristic, lazy
from lifestack.training.generation_log import GenerationLog


def _fresh_completions(n: int = 12):
    pairs = []
    for prompt in prompts10():
        pairs.append((policy_completion(prompt, heuristic), prompt))
    for prompt in prompts10()[: n - 10]:
        pairs.append((policy_completion(prompt, lazy), prompt))
    return pairs[:n]


def test_generation_log_every_interval(isolated):
    T.RUN.log_interval, T.RUN.stage, T.RUN.difficulty = 5, 2, 3
    pairs = _fresh_completions(12)
    rewards = T.reward_task_success_fn([c for c, _ in pairs], prompts=[p for _, p in pairs],
                                       trainer_state=SimpleNamespace(global_step=11))
    path = isolated / "generations.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2  # evaluations 5 and 10
    for line, idx in zip(lines, (4, 9)):
        rec = json.loads(line)
        assert {"step", "stage", "difficulty", "prompt_head", "completion", "action", "task_reward",
                "task_breakdown", "grpo_reward", "grpo_rewards", "grpo_weights"} <= set(rec)
        assert "reward" not in rec  # named for what it is: task_reward vs the weighted grpo_reward
        assert rec["step"] == 11 and rec["stage"] == 2 and rec["difficulty"] == 3
        assert rec["completion"] == pairs[idx][0]
        assert rec["task_reward"] == pytest.approx(rewards[idx])
        assert rec["grpo_rewards"]["reward_task_success_fn"] == pytest.approx(rewards[idx])
        assert list(rec["grpo_rewards"]) == list(RW.REWARD_NAMES)
        vec = T.RUN.vector(pairs[idx][0], pairs[idx][1])
        assert rec["grpo_reward"] == pytest.approx(sum(w * vec[k] for k, w in T.REWARD_WEIGHTS.items()))
        assert rec["action"]["action_type"] in ACTION_TYPES
        assert isinstance(rec["task_breakdown"], dict) and "total" in rec["task_breakdown"]
        assert PR.METADATA_OPEN not in rec["prompt_head"] and rec["prompt_head"].startswith("GOAL:")
    # cached pairs are not fresh evaluations: nothing new is logged
    for fn in T.REWARD_FUNCS:
        fn([c for c, _ in pairs], prompts=[p for _, p in pairs])
    assert len(path.read_text(encoding="utf-8").splitlines()) == 2
    # a fallback is logged too, as valid JSON with a null action
    for i in range(5):
        T.get_lifestack_evaluation(f"{GARBAGE} #{i}", prompts10()[0])
    rec = json.loads(path.read_text(encoding="utf-8").splitlines()[-1])
    assert rec["action"] is None and rec["task_reward"] == -0.5 and "error" in rec["task_breakdown"]


def test_generation_log_only_on_the_main_process(isolated, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    T.RUN.log_interval = 1
    pairs = _fresh_completions(3)
    T.reward_task_success_fn([c for c, _ in pairs], prompts=[p for _, p in pairs])
    assert not (isolated / "generations.jsonl").exists()


def test_unwritable_log_dir_changes_no_reward(tmp_path, capsys):
    pairs = _fresh_completions(12)
    completions, prompts = [c for c, _ in pairs], [p for _, p in pairs]
    T.RUN.log_interval = 1
    expected = [fn(completions, prompts=prompts) for fn in T.REWARD_FUNCS]

    RW.EVALUATOR.evaluations.clear()
    RW.EVALUATOR.prompts.clear()
    blocker = tmp_path / "blocker"
    blocker.write_text("a regular file, not a directory")
    T.RUN.log, T.RUN.evaluations = GenerationLog(blocker / "logs"), 0
    capsys.readouterr()
    got = [fn(completions, prompts=prompts) for fn in T.REWARD_FUNCS]
    assert got == expected
    err = capsys.readouterr().err
    assert err.count("[log] could not write generations.jsonl") == 1
    assert blocker.read_text() == "a regular file, not a directory"


def test_generation_log_survives_deletion_and_follows_the_log_dir(isolated, tmp_path):
    T.RUN.log_interval = 1
    pairs = _fresh_completions(6)
    T.reward_task_success_fn([c for c, _ in pairs[:2]], prompts=[p for _, p in pairs[:2]])
    path = isolated / "generations.jsonl"
    assert len(path.read_text(encoding="utf-8").splitlines()) == 2
    path.unlink()  # e.g. a fresh run clearing its logs while this process keeps going
    T.reward_task_success_fn([c for c, _ in pairs[2:4]], prompts=[p for _, p in pairs[2:4]])
    assert len(path.read_text(encoding="utf-8").splitlines()) == 2
    other = tmp_path / "other-logs"
    T.RUN.log.open(other)
    T.reward_task_success_fn([c for c, _ in pairs[4:]], prompts=[p for _, p in pairs[4:]])
    assert len((other / "generations.jsonl").read_text(encoding="utf-8").splitlines()) == 2
    assert len(path.read_text(encoding="utf-8").splitlines()) == 2
    T.RUN.log.close()
    assert not T.RUN.log.is_open
