"""On-policy states: training prompts at states the policy's own answers made.

Single-step GRPO trains on :func:`lifestack.scenarios.sample_scenario` states: a crisis
rolled forward 0-2 steps by the heuristic or a random valid action. Played over a whole
episode, the policy then meets states its *own* earlier answers made: a route step it
already took, a budget it spent on a claim. The training prompts rarely show those, and
the CPU learning check measured what follows: GRPO improved the first decision of an
episode while the later ones got worse, mostly by naming a route step already done
(docs/learning.md). :func:`advance_by_policy` moves a share of a stage's scenarios on by
the policy's own answers, so GRPO also trains on the states its play reaches (the state
distribution DAgger trains on, with the environment's reward instead of an expert).

Which scenarios move, and how far, is drawn from ``random.Random(f"on-policy {seed}")``
of each scenario's seed: the same seeds and the same answers give the same states.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Callable, Sequence

from .env import LifeStackEnv, round_state
from .prompts import build_prompt
from .scenarios import Scenario

Answer = Callable[[list[list[dict]]], list[str]]  # a batch of chat prompts -> one answer each


def policy_steps(sc: Scenario, share: float) -> int:
    """How many answers of the policy move ``sc`` on: 0 for about ``1 - share`` of the
    scenarios, otherwise 1 .. the steps left before the task's last decision."""
    rng = random.Random(f"on-policy {sc.seed}")
    room = sc.task.horizon - 1 - sc.state.step
    if rng.random() >= share or room < 1:
        return 0
    return rng.randint(1, room)


def advance_by_policy(scenarios: Sequence[Scenario], answer: Answer, share: float) -> list[Scenario]:
    """``scenarios`` with a share moved on by ``answer``'s own actions, batched per step.

    A step that would end the episode is undone and the scenario stops there (a finished
    episode is no decision to train on); an unparseable answer changes nothing, as in the
    environment (and is not counted as a step taken). The returned scenarios record the
    steps taken in ``roll_forward``.
    """
    steps = [policy_steps(sc, share) for sc in scenarios]
    envs: list[LifeStackEnv | None] = []
    for sc, k in zip(scenarios, steps):
        env = None
        if k:
            env = LifeStackEnv()
            env.restore(sc.task, sc.state, observe=False)
        envs.append(env)
    taken = [0] * len(scenarios)
    stopped = [False] * len(scenarios)
    for _ in range(max(steps, default=0)):
        live = [j for j, k in enumerate(steps) if taken[j] < k and not stopped[j]]
        if not live:
            break
        prompts = [build_prompt(scenarios[j].task, scenarios[j].conflict, envs[j].state, scenarios[j].difficulty,
                                scenarios[j].seed) for j in live]
        texts = answer(prompts)
        if len(texts) != len(live):
            raise ValueError(f"answer returned {len(texts)} answers for {len(live)} prompts")
        for j, text in zip(live, texts):
            env = envs[j]
            snapshot = env.state.clone()
            env.step(text)
            if env.state.done:
                env.state = snapshot
                stopped[j] = True
                continue
            round_state(env.state)
            taken[j] += 1
    out = []
    for sc, env in zip(scenarios, envs):
        moved = 0 if env is None else env.state.step - sc.state.step
        out.append(replace(sc, state=env.state, roll_forward=sc.roll_forward + moved) if moved else sc)
    return out
