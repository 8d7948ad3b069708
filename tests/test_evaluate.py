"""scripts/evaluate.py and lifestack.training.episode_play: any model on seeded episodes,
against the reference policies, on the tiny CPU model (no download)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import evaluate as E  # noqa: E402
import lifestack.training.episode_play as M  # noqa: E402
from lifestack.env import LifeStackEnv  # noqa: E402


@pytest.fixture
def tiny(tiny_model_dir) -> Path:
    return tiny_model_dir  # tests/conftest.py


def test_difficulties_parse_ranges_lists_and_refuse_the_rest():
    assert M.parse_difficulties("1-5") == [1, 2, 3, 4, 5]
    assert M.parse_difficulties("3") == [3] and M.parse_difficulties("1,3-4") == [1, 3, 4]
    for bad in ("0-2", "4-2", "x", "6", ""):
        with pytest.raises(ValueError):
            M.parse_difficulties(bad)


def test_references_play_the_same_paired_episodes_and_the_oracle_has_no_regret():
    starts = M.episode_starts(2, [1, 4], seed=5)
    assert [sc.difficulty for sc in starts] == [1, 1, 4, 4]
    assert [sc.task.domain for sc in starts] == ["flight_crisis", "code_merge_crisis"] * 2
    played = {name: M.play_episodes(M.policy_player(p), starts) for name, p in M.REFERENCES.items()}
    assert all([p.seed for p in rows] == [sc.seed for sc in starts] for rows in played.values())
    assert all(r == 0.0 for p in played["oracle"] for r in p.regret)
    table = {name: M.by_difficulty(rows) for name, rows in played.items()}
    assert table["oracle"]["all"]["episode_reward"]["mean"] > table["random"]["all"]["episode_reward"]["mean"]
    assert table["heuristic"]["1"]["valid_json"]["mean"] == 1.0
    text = M.format_table(table)
    assert "difficulty 4 (2 episodes" in text and "| oracle | " in text
    assert played == {name: M.play_episodes(M.policy_player(p), starts) for name, p in M.REFERENCES.items()}


def test_starts_from_the_crisis_are_the_same_scenarios_before_any_roll_forward():
    rolled = M.episode_starts(3, [2, 5], seed=11)
    crisis = M.episode_starts(3, [2, 5], seed=11, from_crisis=True)
    assert [(s.seed, s.difficulty, s.task, s.conflict) for s in crisis] == [(s.seed, s.difficulty, s.task, s.conflict)
                                                                          for s in rolled]
    assert all(s.roll_forward == 0 for s in crisis) and any(s.roll_forward > 0 for s in rolled)
    for sc in crisis:  # the state LifeStackEnv.reset builds: no step taken yet
        env = LifeStackEnv()
        env.reset(seed=sc.seed, task=sc.task, conflict=sc.conflict)
        assert sc.state == env.state and sc.state.step == 0


def test_evaluate_a_model_folder_writes_the_table_json_and_plot(tiny, tmp_path, capsys):
    out, png = tmp_path / "eval.json", tmp_path / "eval.png"
    rc = E.main(["--model", str(tiny), "--episodes", "1", "--difficulties", "1-2", "--max-new-tokens", "24",
                 "--json", str(out), "--plot", str(png), "--quiet", "--compare", str(tiny)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "difficulty 1 (1 episodes" in printed and "| heuristic |" in printed and f"| {tiny} |" in printed
    data = json.loads(out.read_text())
    assert set(data["results"]) == {str(tiny), "random", "heuristic", "oracle"}  # --compare of itself: one name
    assert data["paired"]["episode_reward"]["mean"] == 0.0  # the same model, greedy: the same episodes
    assert png.stat().st_size > 1000
    for name, rows in data["episodes"].items():
        assert [r["difficulty"] for r in rows] == [1, 2], name


def test_evaluate_plays_conversations_with_a_horizon(tiny, tmp_path):
    out = tmp_path / "h2.json"
    assert E.main(["--model", str(tiny), "--episodes", "1", "--difficulties", "2", "--horizon", "2",
                   "--max-new-tokens", "16", "--json", str(out), "--quiet", "--no-references"]) == 0
    rows = json.loads(out.read_text())["episodes"][str(tiny)]
    assert len(rows) == 1 and 1 <= len(rows[0]["rewards"]) <= 2


def test_bad_models_are_one_line_and_exit_2(tiny, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    no_template = tmp_path / "no_template"
    shutil.copytree(tiny, no_template)
    cfg = json.loads((no_template / "tokenizer_config.json").read_text())
    cfg.pop("chat_template", None)
    (no_template / "tokenizer_config.json").write_text(json.dumps(cfg))
    (no_template / "chat_template.jinja").unlink(missing_ok=True)
    cases = {str(tmp_path / "missing"): "no such folder", str(empty): "no model in this folder",
             str(no_template): "no chat template", str(tiny / "config.json"): "not a folder"}
    for model, why in cases.items():
        assert E.main(["--model", model, "--quiet"]) == 2, model
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and why in err, (model, err)
    for argv, why in ((["--difficulties", "0-9"], "1..5"), (["--episodes", "0"], "--episodes"), (["--horizon", "9"], "--horizon")):
        assert E.main(["--model", str(tiny), *argv]) == 2
        assert why in capsys.readouterr().err


def saved_evaluation(path: Path, starts_seed: int, policy_seed: int, **override) -> Path:
    """An evaluation's JSON as ``evaluate.py --json`` writes it, played by the references:
    random as the "--model", the heuristic as the "--compare"."""
    starts = M.episode_starts(2, [1, 3], seed=starts_seed)
    played = {name: M.play_episodes(M.policy_player(M.REFERENCES[name], policy_seed), starts)
              for name in ("random", "heuristic", "oracle")}
    doc = {"model": "random", "compare": "heuristic", "horizon": 1, "from_crisis": False,
           "episodes": {name: [p.to_dict() for p in rows] for name, rows in played.items()}, **override}
    path.write_text(json.dumps(doc))
    return path


def test_saved_evaluations_pool_with_each_start_counted_once(tmp_path, capsys):
    a = saved_evaluation(tmp_path / "a.json", starts_seed=5, policy_seed=1)
    b = saved_evaluation(tmp_path / "b.json", starts_seed=5, policy_seed=2)  # the same starts, other random draws
    c = saved_evaluation(tmp_path / "c.json", starts_seed=9, policy_seed=1)  # other starts
    docs = {p: json.loads(p.read_text()) for p in (a, b, c)}

    def diffs(doc, key):
        return [(h["seed"], h["difficulty"], float(h[key] == "success") - float(r[key] == "success") if key == "outcome"
                 else h[key] - r[key]) for r, h in zip(doc["episodes"]["random"], doc["episodes"]["heuristic"])]

    one = E.pool_saved([("a", docs[a])])[1]
    assert one["episode_reward"]["mean"] == pytest.approx(sum(d for *_k, d in diffs(docs[a], "episode_reward")) / 4)
    rows, same, shared = E.pool_saved([("a", docs[a]), ("b", docs[b])])
    # the --model and --compare rows become "model" and "compare"; the other reference keeps its name
    assert shared == {"horizon": 1, "from_crisis": False} and len(rows["model"]) == 8
    assert set(rows) == {"model", "compare", "oracle"}
    per_start = [(x + y) / 2 for (*_k, x), (*_j, y) in zip(diffs(docs[a], "outcome"), diffs(docs[b], "outcome"))]
    assert same["success"]["starts"] == 4 and same["success"]["mean"] == pytest.approx(sum(per_start) / 4)
    other = E.pool_saved([("a", docs[a]), ("c", docs[c])])[1]
    assert other["episode_reward"]["starts"] == 8

    out = tmp_path / "pooled.json"
    assert E.main(["--from-json", str(a), str(b), str(c), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "3 evaluations pooled" in printed and "paired over 8 starts" in printed and "| compare |" in printed
    assert json.loads(out.read_text())["paired"]["success"]["starts"] == 8


def test_evaluations_on_adjacent_seeds_pool_as_different_starts(tmp_path):
    """--seed 5 and --seed 6 reuse scenario seeds (seed + 1000 d + i) with the other task
    family: different starts, which a key of seed and difficulty alone would merge."""
    a = json.loads(saved_evaluation(tmp_path / "a.json", starts_seed=5, policy_seed=1).read_text())
    b = json.loads(saved_evaluation(tmp_path / "b.json", starts_seed=6, policy_seed=1).read_text())
    seeds_a = {(r["seed"], r["difficulty"]) for r in a["episodes"]["random"]}
    assert seeds_a & {(r["seed"], r["difficulty"]) for r in b["episodes"]["random"]}  # the scenario seeds overlap
    assert E.pool_saved([("a", a), ("b", b)])[1]["success"]["starts"] == 8  # yet all 8 starts count
    old = {**a, "episodes": {k: [{f: v for f, v in r.items() if f != "domain"} for r in rows]
                             for k, rows in a["episodes"].items()}}
    assert E.pool_saved([("old", old)])[1]["success"]["starts"] == 4  # a file saved before domains still reads


def test_saved_evaluations_that_do_not_pool_are_one_line_and_exit_2(tmp_path, capsys):
    good = saved_evaluation(tmp_path / "good.json", 5, 1)
    doc = json.loads(good.read_text())
    bad = {"horizon": saved_evaluation(tmp_path / "h.json", 5, 1, horizon=3),
           "crisis": saved_evaluation(tmp_path / "x.json", 5, 1, from_crisis=True),
           "missing": tmp_path / "nowhere.json", "text": tmp_path / "t.json", "model": tmp_path / "m.json",
           "nan": tmp_path / "nan.json", "bool": tmp_path / "bool.json", "short": tmp_path / "short.json",
           "empty": tmp_path / "empty.json"}
    bad["empty"].write_text(json.dumps({**doc, "episodes": {"random": [], "heuristic": []}}))
    bad["text"].write_text("not json")
    bad["model"].write_text(json.dumps({**doc, "model": ["a"]}))
    bad["nan"].write_text(json.dumps({**doc, "episodes": {**doc["episodes"], "random": [
        {**doc["episodes"]["random"][0], "episode_reward": float("nan")}, *doc["episodes"]["random"][1:]]}}))
    bad["bool"].write_text(json.dumps({**doc, "episodes": {**doc["episodes"], "random": [
        {**r, "seed": True} for r in doc["episodes"]["random"]]}}))
    bad["short"].write_text(json.dumps({**doc, "episodes": {**doc["episodes"], "random": doc["episodes"]["random"][1:]}}))
    for why, path in bad.items():
        assert E.main(["--from-json", str(good), str(path)]) == 2, why
        err = capsys.readouterr().err
        assert err.startswith("evaluate: --from-json") and err.count("\n") == 1, (why, err)
    with pytest.raises(SystemExit):
        E.main(["--from-json", str(good), "--model", "x"])


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4)),
       st.sampled_from(M.Played.SAVED))
@settings(max_examples=200, deadline=None)
def test_a_saved_episode_row_is_read_back_or_refused(value, field):
    """Whatever a file holds in a row (or in one of its fields), reading it gives a Played
    with finite numbers or a ValueError, never another exception."""
    row = M.Played(start=0, difficulty=1, seed=3, rewards=[0.5], valid=[True], decision=[0.1], regret=[0.0],
                   outcome="success", episode_reward=0.4).to_dict()
    for candidate in (value, {**row, field: value}):
        try:
            p = M.Played.from_dict(candidate)
        except ValueError:
            continue
        assert all(isinstance(x, (int, float)) for x in (p.episode_reward, *p.rewards, *p.decision, *p.regret))
