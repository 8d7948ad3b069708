"""scripts/play.py: one seeded episode turn by turn, by a model, a policy or a person."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import play as P  # noqa: E402
from lifestack.policies import heuristic  # noqa: E402


def test_a_policy_episode_shows_each_turn_and_ends():
    out = io.StringIO()
    result = P.play(lambda env, messages: heuristic(env), seed=3, difficulty=2, family="code_merge_crisis", out=out)
    text = out.getvalue()
    assert result["outcome"] in ("success", "failure", "timeout") and result["rewards"]
    assert text.count(">>> answer:") == len(result["rewards"])
    assert "GOAL:" in text and "<SYSTEM_METADATA>" not in text  # the prompt as the model reads it, minus metadata
    assert "step reward" in text and "parts:" in text and f"episode over: {result['outcome']}" in text


def test_a_person_gets_a_reason_and_another_try_for_bad_input():
    lines = iter(["", "not json", '{"action_type": "rest"}', "quit"])
    out = io.StringIO()
    answer = P.human_answer(lambda prompt: next(lines), out)
    result = P.play(answer, seed=1, difficulty=1, family="flight_crisis", out=out)
    text = out.getvalue()
    assert "Answer with one JSON object" in text  # the empty line shows the schema
    assert text.count("not a valid action:") == 2 and "no JSON object found" in text
    assert result["rewards"] == [] and "(stopped)" in text


def test_a_valid_human_action_is_played_and_end_of_input_stops():
    action = ('{"action_type": "rest", "target_domain": "mental_wellbeing", "route": null, "metric_changes": {}, '
              '"resource_cost": {"time": 1, "money": 0, "energy": 0}, "reasoning": "I rest for an hour."}')
    lines = iter([action])

    def read(prompt):
        try:
            return next(lines)
        except StopIteration:
            raise EOFError from None

    out = io.StringIO()
    result = P.play(P.human_answer(read, out), seed=1, difficulty=1, family="flight_crisis", out=out)
    assert len(result["rewards"]) == 1 and "(stopped)" in out.getvalue()


@pytest.fixture
def tiny(tiny_model_dir) -> Path:
    return tiny_model_dir  # tests/conftest.py


def test_a_model_plays_and_a_bad_model_is_exit_2(tiny, tmp_path, capsys):
    assert P.main(["--model", str(tiny), "--max-new-tokens", "16", "--difficulty", "1"]) == 0
    assert "episode over:" in capsys.readouterr().out
    assert P.main(["--model", str(tmp_path / "nothing")]) == 2
    assert "no such folder" in capsys.readouterr().err
