"""Tests for lifestack.calibrate: the ordering the curriculum threshold relies on."""

from __future__ import annotations

import copy
import json

import pytest

from lifestack.calibrate import DIFFICULTIES, MARGIN, THRESHOLD, calibrate, check_ordering, format_table, main
from lifestack.calibrate import POLICIES
from lifestack.hacks import HACK_POLICIES as HACKS


@pytest.fixture(scope="module")
def table():
    return calibrate(n_states=3)


def test_calibration_ordering_holds(table):
    """The calibration-in-the-suite requirement (small: 3 states per difficulty)."""
    assert set(table) == set(DIFFICULTIES)
    for row in table.values():
        assert set(row) == set(POLICIES)
        assert all(-1.0 <= v <= 1.0 for v in row.values())
    assert check_ordering(table) == []
    for d, row in table.items():
        assert row["oracle"] > THRESHOLD + MARGIN
        assert row["oracle"] >= row["heuristic"]
        for name in ["random", "lazy", *HACKS]:
            assert row[name] < THRESHOLD and row[name] < row["heuristic"], (d, name)


def test_calibrate_deterministic(table):
    assert calibrate(n_states=3) == table


@pytest.mark.parametrize(
    "doctor, expected",
    [
        (lambda t: t[3].__setitem__("oracle", THRESHOLD), "d3: oracle"),
        (lambda t: t[1].__setitem__("hack_keyword_stuffing", 0.99), "d1: hack_keyword_stuffing"),
        (lambda t: t[5].__setitem__("random", THRESHOLD + 0.01), "d5: random"),
        (lambda t: t[2].__setitem__("lazy", t[2]["heuristic"]), "d2: lazy"),
    ],
)
def test_check_ordering_detects_violation(table, doctor, expected):
    doctored = copy.deepcopy(table)
    doctor(doctored)
    problems = check_ordering(doctored)
    assert problems and any(p.startswith(expected) for p in problems)


def test_check_ordering_hack_above_heuristic_below_threshold():
    row = {name: -0.5 for name in POLICIES}
    row.update(oracle=0.9, heuristic=0.2, hack_free_claims=0.3)  # below 0.6 but above the heuristic
    problems = check_ordering({1: row})
    assert any("hack_free_claims" in p and "heuristic" in p for p in problems)
    assert not any(p.startswith("d1: oracle") for p in problems)


def test_format_table(table):
    text = format_table(table)
    lines = text.splitlines()
    assert len(lines) == 2 + len(DIFFICULTIES)
    for name in POLICIES:
        assert name in lines[0]
    assert lines[2].startswith("| 1 |")


def test_main_prints_table_and_returns_zero(capsys, tmp_path):
    out_json = tmp_path / "cal.json"
    assert main(["--states", "2", "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "| difficulty |" in out and "oracle" in out and "ordering holds" in out
    data = json.loads(out_json.read_text())
    assert set(data) == {str(d) for d in DIFFICULTIES}


def test_closed_loop_table_orders_the_honest_policies(capsys, tmp_path):
    from lifestack.calibrate import closed_loop, format_closed_loop
    from lifestack.policies import HONEST

    loop = closed_loop(n_episodes=2, seed=2000)
    assert set(loop) == set(DIFFICULTIES)
    for d, row in loop.items():
        assert set(row) == set(HONEST)
        assert row["rollout"]["success"] >= row["heuristic"]["success"] - 0.5  # 2 episodes: one may differ
        assert row["lazy"]["success"] == 0.0 and row["lazy"]["episode_reward"] < row["heuristic"]["episode_reward"]
    text = format_closed_loop(loop, 2)
    assert "rollout" in text.splitlines()[0] and "/2, " in text
    out_json = tmp_path / "cal.json"
    assert main(["--states", "1", "--episodes", "1", "--json", str(out_json)]) == 0
    assert "closed loop" in capsys.readouterr().out
    assert "closed_loop" in json.loads(out_json.read_text())


def test_main_rejects_bad_states(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--states", "0"])
    assert exc.value.code == 2
