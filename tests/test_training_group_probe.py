"""Group probes: what a sampled group holds at on-policy states, counted against the
reward's greedy maximiser."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lifestack.policies import heuristic, random_valid
from lifestack.training import group_probe as G
from lifestack.training import state_probe as P
from test_onpolicy import policy_answer  # a batch of prompts answered by a reference policy


@pytest.fixture(scope="module")
def states():
    return G.probe_states(10, 44_000_000)


def oracle_greedy(states):
    return [P.oracle_answer(sc) for sc in states]


def test_states_are_seeded_and_move_on_by_the_players_own_answers(states):
    again = G.probe_states(10, 44_000_000)
    assert [(s.seed, s.difficulty, s.state.step) for s in again] == [(s.seed, s.difficulty, s.state.step) for s in states]
    assert sorted({s.difficulty for s in states}) == [1, 2, 3, 4, 5]
    moved = G.probe_states(10, 44_000_000, policy_answer(heuristic))
    assert [s.seed for s in moved] == [s.seed for s in states]
    assert all(m.state.step >= s.state.step for m, s in zip(moved, states))
    assert sum(m.state.step > s.state.step for m, s in zip(moved, states)) >= 5
    assert {s.difficulty for s in G.probe_states(4, 44_000_000, difficulty=3)} == {3}
    again = G.probe_states(10, 44_000_000, policy_answer(heuristic))
    assert [(s.state.step, s.state.resources, s.state.route_progress) for s in again] == \
        [(s.state.step, s.state.resources, s.state.route_progress) for s in moved]


def test_the_oracle_holds_itself_everywhere_and_a_mixed_group_is_counted(states):
    rows = G.run_groups(lambda scs, g: [a for a in oracle_greedy(scs) for _ in range(g)], oracle_greedy, states, 4)
    m = G.summarise(rows)["all"]
    assert m["states"] == 10 and m["holds_oracle"] == m["oracle_share"] == m["greedy_is_oracle"] == 1.0
    assert m["mixed"] == 0.0 and m["between"] == 0.0 and m["unparseable"] == 0.0
    assert m["greedy_reward"] == pytest.approx(m["oracle_reward"]) == pytest.approx(m["sampled_reward"])

    # half the group the oracle, half a random valid answer: mixed wherever they differ
    def half(scs, g):
        out = []
        for sc in scs:
            out += [P.oracle_answer(sc)] * (g // 2)
            out += [random_valid(P._env(sc), random.Random(sc.seed + k)) for k in range(g - g // 2)]
        return out

    mixed = G.summarise(G.run_groups(half, oracle_greedy, states, 4))["all"]
    assert mixed["holds_oracle"] == 1.0 and 0.5 <= mixed["oracle_share"] < 1.0 and mixed["mixed"] > 0
    assert mixed["sampled_reward"] < m["sampled_reward"] and mixed["between"] > 0.5


def test_unparseable_answers_are_counted_and_wrong_counts_refused(states):
    rows = G.run_groups(lambda scs, g: ["not json"] * (g * len(scs)), lambda scs: ["{"] * len(scs), states, 2)
    m = G.summarise(rows)["all"]
    assert m["unparseable"] == 1.0 and m["holds_oracle"] == 0.0 and m["greedy_is_oracle"] == 0.0
    assert m["between"] == 0.0  # every answer scores the same: no spread to share out
    with pytest.raises(ValueError, match="sampled and"):
        G.run_groups(lambda scs, g: ["x"], oracle_greedy, states, 2)
    with pytest.raises(ValueError, match="at least 2"):
        G.run_groups(lambda scs, g: [], oracle_greedy, states, 1)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.floats(-1, 1)), min_size=2, max_size=8))
def test_the_between_share_is_a_share_and_is_whole_when_decisions_fix_the_reward(group):
    decisions, rewards = [d for d, _ in group], [r for _, r in group]
    share = G._between_share([{"decisions": decisions, "rewards": rewards}])
    assert 0.0 <= share <= 1.0
    fixed = {"a": 0.9, "b": -0.2, "c": 0.1, None: -1.0}
    by_decision = G._between_share([{"decisions": decisions, "rewards": [fixed[d] for d in decisions]}])
    assert by_decision == pytest.approx(1.0 if len(set(decisions)) > 1 else 0.0)
    assert G._between_share([{"decisions": ["a"] * len(rewards), "rewards": rewards}]) == 0.0


def test_a_reference_policy_samples_its_one_answer(states):
    from lifestack.policies import heuristic

    rows = G.run_groups(G.policy_sampler(heuristic), P.policy_player(heuristic), states, 3)
    m = G.summarise(rows)["all"]
    assert m["mixed"] == 0.0 and m["unparseable"] == 0.0 and m["greedy_is_oracle"] >= 0.5
    assert m["holds_oracle"] == m["oracle_share"] == m["greedy_is_oracle"]


def test_the_table_names_each_player_and_difficulty(states):
    rows = G.run_groups(lambda scs, g: [a for a in oracle_greedy(scs) for _ in range(g)], oracle_greedy, states, 2)
    table = G.format_table({"oracle": G.summarise(rows)})
    assert table.count("\n") == 8 and "oracle" in table and " all " in table and " 3-5 " in table


def group_probe_script():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    import group_probe

    return group_probe


def test_the_script_probes_two_saved_models_at_the_same_states(tiny_model_dir, tmp_path, capsys):
    import json
    import shutil

    other = tmp_path / "other"
    shutil.copytree(tiny_model_dir, other)
    out = tmp_path / "groups.json"
    assert group_probe_script().main(["--model", str(tiny_model_dir), "--compare", str(other), "--states", "2",
                                      "--group", "2", "--max-new-tokens", "8", "--json", str(out)]) == 0
    assert "[groups] 2 states" in capsys.readouterr().out
    saved = json.loads(out.read_text())
    where = {name: [(r["seed"], r["step"]) for r in rows] for name, rows in saved["rows"].items()}
    assert len(where) == 3 and where[str(tiny_model_dir)] == where[str(other)] == where["heuristic"]
    assert saved["summary"]["heuristic"]["all"]["unparseable"] == 0.0
    # a random model writes no JSON in 8 tokens
    assert all(saved["summary"][name]["all"]["unparseable"] == 1.0 and saved["summary"][name]["all"]["states"] == 2
               for name in (str(tiny_model_dir), str(other)))


@pytest.mark.parametrize("argv, message", [(["--model", "no/such/folder/here"], "no such folder"),
                                           (["--group", "1"], "--group at least 2"),
                                           (["--temperature", "0"], "--temperature in (0, 5]"),
                                           (["--difficulty", "6"], "--difficulty 0-5")])
def test_the_script_refuses_a_bad_argument_with_status_2(tiny_model_dir, argv, message, capsys):
    argv = ["--model", str(tiny_model_dir), "--states", "1", *argv]
    assert group_probe_script().main(argv) == 2
    assert message in capsys.readouterr().err
