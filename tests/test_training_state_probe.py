"""The state probes: pairs that differ in one thing, and the counts that say whether a
player's answer followed the change."""

from __future__ import annotations

import pytest

from lifestack.policies import heuristic, oracle, random_valid
from lifestack.training import state_probe as P


@pytest.fixture(scope="module")
def pairs():
    return P.probe_pairs(12, 33_000_000)


def test_each_pair_changes_exactly_one_thing(pairs):
    assert {p.probe for p in pairs} == set(P.PROBES)
    for p in pairs:
        b, a = p.before.state, p.after.state
        assert p.before.task is p.after.task and a.step == b.step and a.metrics == b.metrics
        if p.probe == "route_progress":
            assert a.resources == b.resources
            assert a.route_progress[p.route] == [*b.route_progress.get(p.route, []), p.done_step]
            assert {k: v for k, v in a.route_progress.items() if k != p.route} == \
                {k: v for k, v in b.route_progress.items() if k != p.route}
        else:
            assert a.route_progress == b.route_progress
            assert all(a.resources[k] == round(b.resources[k] * P.BUDGET_SHARE, 1) for k in b.resources)


def test_pairs_are_seeded(pairs):
    again = P.probe_pairs(12, 33_000_000)
    assert [(p.probe, p.before.seed, p.route, p.done_step) for p in again] == \
        [(p.probe, p.before.seed, p.route, p.done_step) for p in pairs]


def test_the_oracle_follows_every_change_and_a_constant_answer_follows_none(pairs):
    rows = P.run_probes(P.policy_player(oracle), pairs)
    route = P.summarise(rows)["route_progress"]
    assert route["matches_oracle_before"] == route["matches_oracle_after"] == 1.0
    assert route["changed"] == route["oracle_changed"] > 0 and route["stale"] == 0.0

    # a policy that answers its first answer everywhere: never changes, and goes stale
    first = {}

    def constant(scenarios):
        texts = []
        for sc in scenarios:
            key = (sc.seed, "x")
            first.setdefault(key, oracle(P._env(sc)))
            texts.append(first[key])
        return texts

    stuck = P.summarise(P.run_probes(constant, pairs))["route_progress"]
    assert stuck["changed"] == 0.0 and stuck["changed_when_oracle_did"] == 0.0
    assert stuck["stale"] > 0 and stuck["reward_after"] < route["reward_after"]


def test_unparseable_answers_are_counted_not_fatal(pairs):
    rows = P.run_probes(lambda scs: ["not json"] * len(scs), pairs)
    for m in P.summarise(rows).values():
        assert m["unparseable"] == 1.0 and m["affordable_after"] == 0.0 and m["matches_oracle_after"] == 0.0
    with pytest.raises(ValueError, match="answers for"):
        P.run_probes(lambda scs: [], pairs)


def test_reference_policies_are_ranked_and_the_table_names_them(pairs):
    summary = {name: P.summarise(P.run_probes(P.policy_player(pol), pairs))
               for name, pol in (("random", random_valid), ("heuristic", heuristic))}
    assert summary["heuristic"]["route_progress"]["matches_oracle_after"] > \
        summary["random"]["route_progress"]["matches_oracle_after"]
    table = P.format_table(summary)
    assert table.count("\n") == 4 and "heuristic" in table and "route_progress" in table


def test_the_script_probes_a_saved_model_and_refuses_a_bad_one(tiny_model_dir, tmp_path, capsys):
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    import state_probe as S

    out = tmp_path / "probe.json"
    assert S.main(["--model", str(tiny_model_dir), "--scenarios", "2", "--difficulty", "1",
                   "--max-new-tokens", "8", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "route_progress" in printed and "oracle" in printed
    saved = json.loads(out.read_text())
    model = saved["summary"][str(tiny_model_dir)]
    assert model["budget"]["unparseable"] == 1.0  # a random model writes no JSON in 8 tokens
    assert S.main(["--model", str(tmp_path / "missing"), "--scenarios", "2"]) == 2
    assert "no such folder" in capsys.readouterr().err
