"""scripts/answer_breaks.py: where closed-loop answers stop parsing, by turn, events and
prompt length."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import answer_breaks as B  # noqa: E402

rows = st.lists(st.fixed_dictionaries({"episode": st.integers(0, 4), "turn": st.integers(1, 6), "events": st.integers(0, 3),
                                       "tokens": st.integers(1, 3000), "parsed": st.booleans()}), max_size=40)


@settings(max_examples=80, deadline=None)
@given(rows)
def test_every_decision_is_counted_once_per_table_and_the_quantiles_are_ordered(records):
    s = B.summarise(records)
    for table in ("by_turn", "by_events"):
        assert sum(c[1] for c in s[table].values()) == len(records)
        assert sum(c[0] for c in s[table].values()) == sum(not r["parsed"] for r in records)
        assert all(0 <= c[0] <= c[1] for c in s[table].values())
    assert set(s["by_turn"]) <= {"1", "2", "3", "4+"} and set(s["by_events"]) <= {"0", "1", "2+"}
    assert 0 <= s["stuck"] <= s["with_unparseable"] <= s["episodes"] == len({r["episode"] for r in records})
    for side, parsed in (("parsed", True), ("unparseable", False)):
        q = s["prompt_tokens"][side]
        lengths = [r["tokens"] for r in records if r["parsed"] == parsed]
        assert (q is None) == (not lengths)
        if q:
            assert q == sorted(q) and q[-1] == max(lengths) and min(lengths) <= q[0]


def test_an_episode_is_stuck_when_it_never_gets_past_its_first_unparseable_answer():
    row = lambda episode, turn, parsed: {"episode": episode, "turn": turn, "events": 0, "tokens": 900, "parsed": parsed}  # noqa: E731
    s = B.summarise([row(0, 1, True), row(0, 2, False), row(0, 2, False),  # stuck at turn 2
                     row(1, 1, False), row(1, 1, True), row(1, 2, True),  # broke once, went on
                     row(2, 1, True), row(2, 2, True)])  # never broke
    assert (s["episodes"], s["with_unparseable"], s["stuck"]) == (3, 2, 1)


@settings(max_examples=80, deadline=None)
@given(rows)
def test_each_broken_episode_is_resampled_once_at_its_first_break_beside_as_many_parsed_states(records):
    broken, parsed = B.resampled_states(records)
    episodes_broken = [r["episode"] for r in records if not r["parsed"]]
    assert [records[i]["episode"] for i in broken] == list(dict.fromkeys(episodes_broken))
    for i in broken:  # the episode's first unparseable decision
        assert not records[i]["parsed"] and all(r["parsed"] for r in records[:i] if r["episode"] == records[i]["episode"])
    assert all(records[i]["parsed"] for i in parsed) and len(parsed) <= len(broken)
    assert len({records[i]["episode"] for i in parsed}) == len(parsed)


def test_the_script_plays_a_saved_model_and_refuses_a_bad_argument(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "breaks.json"
    assert B.main(["--model", str(tiny_model_dir), "--episodes", "2", "--demonstrations", "3",
                   "--max-new-tokens", "8", "--samples", "2", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "unparseable by turn:" in printed and "the warm start's demonstrations" in printed
    # sampled again: 2 answers at each of the 2 states the episodes broke at, none parse in
    # 8 tokens; no greedy answer parsed, so no parsed state to compare
    assert "at the 2 states episodes broke at 4/4, at 0 parsed states 0/0" in printed
    model = json.loads(out.read_text())["models"][str(tiny_model_dir)]
    # a random model writes no JSON in 8 tokens: every decision unparseable, each episode
    # its task's horizon of them (a rejected answer does not move the task on)
    assert model["rows"] and not any(r["parsed"] for r in model["rows"])
    assert {r["turn"] for r in model["rows"]} == {1}
    assert model["summary"]["stuck"] == model["summary"]["episodes"] == 2
    assert B.main(["--model", str(tmp_path / "missing")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert B.main(["--model", str(tiny_model_dir), "--episodes", "0"]) == 2
    assert B.main(["--model", str(tiny_model_dir), "--samples", "-1"]) == 2
