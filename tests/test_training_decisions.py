"""lifestack.training.decisions: the one place HORIZON is branched on."""

from __future__ import annotations

import random

import pytest

from lifestack.policies import DEMONSTRATORS
from lifestack.prompts import build_prompt
from lifestack.scenarios import sample_scenario
from lifestack.training.decisions import Episodes, SingleDecisions, decisions


def test_horizon_one_is_single_decisions_and_more_is_episodes():
    assert decisions(1) == SingleDecisions() and not decisions(1).episodes
    assert decisions(3) == Episodes(3) and decisions(3).episodes and decisions(3).horizon == 3
    assert decisions(1).settings() == {} and decisions(4).settings() == {"HORIZON": 4}  # single-step fingerprints hold
    assert decisions(1).trainer_kwargs(lambda p, h: None, lambda *a: None) == {}
    assert callable(decisions(2).trainer_kwargs(lambda p, h: None, lambda *a: None)["rollout_func"])


@pytest.mark.parametrize("horizon", [1, 3])
def test_demonstrations_are_the_demonstrators_answers_in_what_the_model_will_read(horizon):
    sc = sample_scenario(12, 3)
    pairs = decisions(horizon).demonstrations(sc, DEMONSTRATORS["heuristic"], random.Random(0))
    first_prompt = build_prompt(sc.task, sc.conflict, sc.state, sc.difficulty, sc.seed)
    assert pairs[0][0] == first_prompt  # every demonstration starts from the rendered scenario
    if horizon == 1:
        assert len(pairs) == 1
    else:
        assert 1 <= len(pairs) <= horizon
        for k, (messages, _answer) in enumerate(pairs):  # turn k: the conversation so far, ending with a user turn
            assert len(messages) == 2 + 2 * k and messages[-1]["role"] == "user"
    again = decisions(horizon).demonstrations(sc, DEMONSTRATORS["heuristic"], random.Random(0))
    assert again == pairs  # seeded
