"""Turn groups: GiGPO's step groups (turns of one group from an identical state), counted
on played episodes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lifestack.policies import heuristic, random_honest
from lifestack.scenarios import sample_scenarios
from lifestack.training import turn_groups as T


@pytest.fixture(scope="module")
def starts():
    return sample_scenarios(10, None, 45_000_000)


def test_a_deterministic_policy_never_parts_and_gives_no_per_turn_signal(starts):
    m = T.summarise(T.play_groups(T.policy_answerer(heuristic), starts, 3))
    assert m["1"]["turns"] == 30 and m["2+"]["turns"] > 0
    for key in m:
        assert m[key]["in_step_group"] == 1.0 and m[key]["same_progress"] == 1.0
        assert m[key]["informative"] == 0.0 and m[key]["distinct_decisions"] == 1.0


def test_random_play_parts_at_once_and_the_first_turn_is_one_group(starts):
    rows = T.play_groups(T.policy_answerer(random_honest, seed=3), starts, 4)
    m = T.summarise(rows)
    assert m["1"]["in_step_group"] == 1.0 and m["1"]["same_progress"] == 1.0
    assert m["2+"]["in_step_group"] == 0.0  # free numbers: no two random answers leave the same world
    assert 0.0 < m["2+"]["same_progress"] < 1.0
    again = T.play_groups(T.policy_answerer(random_honest, seed=3), starts, 4)
    assert again == rows  # seeded: the same groups, turn for turn
    assert T.play_groups(T.policy_answerer(random_honest, seed=4), starts, 4) != rows


def test_the_same_answer_gives_the_same_state_and_a_step_group_forms(starts):
    """Members 0 and 1 play the heuristic, the others random answers: the pair stays in
    one step group at every turn (same state, same answer, same world), and a group whose
    returns differ is informative."""
    fixed = T.policy_answerer(heuristic)
    noisy = T.policy_answerer(random_honest, seed=1)

    def answer(live):
        return [fixed([(m, ep)])[0] if m < 2 else noisy([(m, ep)])[0] for m, ep in live]

    rows = T.play_groups(answer, starts, 4)
    for r in rows:
        pair = [k for m, k in zip(r["members"], r["exact"]) if m < 2]
        assert len(pair) in (0, 2) and len(set(pair)) <= 1  # together to the end
    later = [r for r in rows if r["turn"] > 1 and 0 in r["members"]]
    assert later and all(sum(1 for k in r["exact"] if k == r["exact"][r["members"].index(0)]) >= 2 for r in later)
    m = T.summarise(rows)
    assert 0.0 < m["2+"]["in_step_group"] < 1.0 and m["1"]["informative"] > 0.0


def test_unparseable_answers_waste_turns_alike(starts):
    """Every answer garbage: time passes the same way for each member, so they stay in
    one state, with equal returns (no per-turn signal)."""
    rows = T.play_groups(lambda live: ["not json"] * len(live), starts, 2)
    m = T.summarise(rows)
    assert all(v["in_step_group"] == 1.0 and v["informative"] == 0.0 for v in m.values())
    assert all(d is None for r in rows for d in r["decisions"])


def test_bad_groups_and_answer_counts_are_refused(starts):
    with pytest.raises(ValueError, match="at least 2"):
        T.play_groups(lambda live: [], starts, 1)
    with pytest.raises(ValueError, match="answers for"):
        T.play_groups(lambda live: ["x"], starts, 2)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from("xy"), st.sampled_from([0.0, 0.5, 1.0])),
                min_size=2, max_size=8))
def test_shares_count_members_of_groups_of_two_or_more(members):
    row = {"exact": [e for e, _, _ in members], "progress": [p for _, p, _ in members],
           "returns": [r for _, _, r in members]}
    exact, informative, progress = T._shares(row)
    keys = [e for e, _, _ in members]
    assert exact == sum(1 for k in keys if keys.count(k) > 1)
    assert 0 <= informative <= exact <= len(members) and 0 <= progress <= len(members)
    if len({r for _, _, r in members}) == 1:
        assert informative == 0


def test_the_table_names_each_player_and_turn(starts):
    rows = T.play_groups(T.policy_answerer(heuristic), starts, 2)
    table = T.format_table({"heuristic": T.summarise(rows)})
    assert "heuristic" in table and " 2+ " in table and "in step group" in table


def test_the_script_plays_two_saved_models_from_the_same_starts(tiny_model_dir, tmp_path, capsys):
    import json
    import shutil
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    import turn_groups

    other = tmp_path / "other"
    shutil.copytree(tiny_model_dir, other)
    out = tmp_path / "turns.json"
    assert turn_groups.main(["--model", str(tiny_model_dir), "--compare", str(other), "--starts", "2", "--group", "2",
                             "--max-new-tokens", "8", "--json", str(out)]) == 0
    assert "[turn groups] 2 starts" in capsys.readouterr().out
    saved = json.loads(out.read_text())
    assert set(saved["rows"]) == {str(tiny_model_dir), str(other), "random_honest", "heuristic"}
    # the untrained model writes no JSON in 8 tokens: every turn wasted alike
    assert saved["summary"][str(tiny_model_dir)]["1"]["in_step_group"] == 1.0
    assert turn_groups.main(["--model", str(tiny_model_dir), "--group", "1"]) == 2


def test_the_exact_key_tells_apart_what_the_progress_key_does_not(starts):
    a, b = starts[0].state.clone(), starts[0].state.clone()
    assert T.exact_key(a) == T.exact_key(b) and len(T.exact_key(a)) == 16
    b.metrics[next(iter(b.metrics))] += 0.1  # another world, the same progress
    assert T.exact_key(a) != T.exact_key(b) and T.progress_key(a) == T.progress_key(b)
    b.step += 1
    assert T.progress_key(a) != T.progress_key(b)
