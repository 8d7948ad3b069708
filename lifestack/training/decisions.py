"""Single decisions or closed-loop episodes: the one place that says what ``HORIZON``
changes in the trainer.

``HORIZON = 1`` (:class:`SingleDecisions`, the seed's contract): every GRPO sample is one
prompt and one answer, scored as a decision at the state the prompt was written from.
``HORIZON > 1`` (:class:`Episodes`): every sample is a closed-loop episode of up to
``horizon`` turns, the environment's replies masked from the loss. :func:`decisions` picks
one from ``HORIZON``; the rest of the package asks it what differs: the warm start's
demonstrations, how held-out prompts are played and scored, the trainer's rollout, what
the run's settings record, how a final evaluation's reward reads.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from lifestack.env import LifeStackEnv
from lifestack.episodes import Episode, play, play_many
from lifestack.prompts import scenario_prompt
from lifestack.scenarios import Scenario

Answer = Callable[[list[list[dict[str, str]]]], list[str]]  # conversations -> one answer each


@dataclass(frozen=True)
class SingleDecisions:
    """``HORIZON = 1``: one prompt, one answer, one decision scored."""

    horizon: int = 1
    episodes = False
    final_reward = "the mean step task reward of the episode"

    def settings(self) -> dict[str, Any]:
        """Nothing: single-decision runs keep the fingerprint they had before episode mode."""
        return {}

    def demonstrations(self, sc: Scenario, demonstrator: Callable, rng: random.Random) -> list[tuple[list, str]]:
        """One (prompt, answer) pair: the demonstrator's answer at the scenario's state."""
        env = LifeStackEnv()
        env.restore(sc.task, sc.state)
        return [(scenario_prompt(sc), demonstrator(env, rng))]

    def play_prompts(self, prompts: Sequence[Any], answer: Answer, run: Any,
                     make_episode: Callable[[Any, int], Any]) -> tuple[list[dict[str, float]], list[str], list[Any]]:
        """Answer every prompt; ``(the six rewards of each, the completions, the prompts)``."""
        completions = answer(list(prompts))
        return [run.vector(c, p) for c, p in zip(completions, prompts)], completions, list(prompts)

    def trainer_kwargs(self, make_episode: Callable[[Any, int], Any], on_rollout: Callable) -> dict[str, Any]:
        """Nothing: TRL's own single-turn generation."""
        return {}


@dataclass(frozen=True)
class Episodes:
    """``HORIZON > 1``: closed-loop episodes of up to ``horizon`` turns."""

    horizon: int
    episodes = True
    final_reward = "the episode task reward (turn mean blended with the outcome)"

    def settings(self) -> dict[str, Any]:
        return {"HORIZON": self.horizon}

    def demonstrations(self, sc: Scenario, demonstrator: Callable, rng: random.Random) -> list[tuple[list, str]]:
        """Every turn of an episode the demonstrator plays, each after its conversation so
        far (so the model has seen environment turns)."""
        ep = play(Episode.from_scenario(sc, self.horizon), lambda e: demonstrator(e.env, rng))
        return [(ep.messages[:2 + 2 * k], t.completion) for k, t in enumerate(ep.turns)]

    def play_prompts(self, prompts: Sequence[Any], answer: Answer, run: Any,
                     make_episode: Callable[[Any, int], Any]) -> tuple[list[dict[str, float]], list[str], list[Any]]:
        """Each prompt starts an episode (``make_episode``: in-process or on the ENV_URL
        server), played in lockstep and logged; ``(the six rewards of each episode, as
        training aggregates them, every turn's completion, every turn's prompt)``."""
        episodes = play_many([make_episode(p, self.horizon) for p in prompts], answer)
        for ep in episodes:
            run.log_episode(ep)
        turns = [t for ep in episodes for t in ep.turns]
        return [run.episode_vector(ep) for ep in episodes], [t.completion for t in turns], [t.prompt for t in turns]

    def trainer_kwargs(self, make_episode: Callable[[Any, int], Any], on_rollout: Callable) -> dict[str, Any]:
        """TRL's ``rollout_func``: each prompt played as an episode (lifestack.rollout)."""
        from lifestack.rollout import make_rollout_func

        return {"rollout_func": make_rollout_func(self.horizon, make_episode=make_episode, on_rollout=on_rollout)}


def decisions(horizon: int) -> SingleDecisions | Episodes:
    """What ``HORIZON`` makes of a GRPO sample: the one place that branches on it."""
    return SingleDecisions() if horizon == 1 else Episodes(horizon)
