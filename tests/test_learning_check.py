"""The learning check: its summary logic (fast) and the reduced CPU experiment (slow, in CI)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import learning_check as L  # noqa: E402


def fake(seed: int, before: float, after: float, per_prompt=None, control=None) -> dict:
    """A seed's result; ``per_prompt`` gives each held-out prompt's (before, after) task
    reward (an answer at -0.5 is unparseable), ``control`` the control arm's per prompt."""
    row = dict.fromkeys(L.METRICS, 0.0)
    per_prompt = per_prompt or [(before, after)] * 5
    answers = lambda xs: [[{"task": x, "valid": x > -0.5, "key": ["a", "d", None] if x > -0.5 else None}] * 2  # noqa: E731
                          for x in xs]
    return {"seed": seed, "before": {**row, "reward_task_success_fn": before},
            "after": {**row, "reward_task_success_fn": after}, "frac_reward_zero_std": [0.0, 0.5],
            "answers_before": answers([pa[0] for pa in per_prompt]), "answers_after": answers([pa[1] for pa in per_prompt]),
            "answers_control": answers(control) if control else None}


def test_paired_summary_passes_only_when_the_interval_excludes_zero():
    clear = [(-0.5, -0.2), (-0.3, 0.0), (-0.4, -0.1), (-0.2, 0.2), (-0.5, -0.3), (0.0, 0.3)]
    ok = L.summarise([fake(1, 0, 0, clear), fake(2, 0, 0, clear)])
    assert ok["passed"] and ok["paired"]["task_change"] == pytest.approx(0.3)
    lo, hi = ok["paired"]["task_change_ci95"]
    assert 0 < lo <= 0.3 <= hi
    mixed = [(-0.5, 0.3), (0.2, -0.5), (-0.1, 0.1), (0.1, -0.2), (-0.3, 0.0), (0.3, 0.1)]
    noisy = L.summarise([fake(1, 0, 0, mixed), fake(2, 0, 0, mixed)])
    assert not noisy["passed"] and noisy["paired"]["task_change_ci95"][0] < 0
    # the quick smoke check does not judge the change: it asks that the policy moved
    assert L.summarise([fake(1, 0, 0, mixed)], quick=True)["passed"]
    still = fake(1, 0, 0, mixed)
    still["answers_changed"] = 0.0
    assert not L.summarise([still], quick=True)["passed"]
    assert ok["mean_frac_reward_zero_std"] == pytest.approx(0.25)


def test_paired_summary_separates_validity_from_decision_quality():
    per = [(-0.5, -0.5), (-0.5, 0.2), (0.1, 0.4)]
    refs = [{"oracle": 0.8, "heuristic": 0.7, "heuristic_key": ["a", "d", None]}] * 3
    p = L.summarise([fake(1, 0, 0, per)], refs=refs)["paired"]
    assert p["valid_rate"] == {"before": pytest.approx(1 / 3), "after": pytest.approx(2 / 3)}
    assert p["task_among_valid"]["before"] == pytest.approx(0.1) and p["task_among_valid"]["after"] == pytest.approx(0.3)
    # only the prompt answered validly before and after is a paired decision
    assert p["decision_change"]["prompts"] == 1 and p["decision_change"]["mean"] == pytest.approx(0.3)
    assert p["decision_regret"]["before"] == pytest.approx(0.7) and p["decision_regret"]["after"] == pytest.approx(0.5)
    assert p["imitation"]["after"] == 1.0 and p["heuristic_task"] == pytest.approx(0.7)
    assert p["above_demonstrator"] == {"before": 0.0, "after": 0.0}
    refs_low = [{"oracle": 0.8, "heuristic": 0.25, "heuristic_key": ["x", "d", None]}] * 3
    q = L.summarise([fake(1, 0, 0, per)], refs=refs_low)["paired"]
    assert q["imitation"]["after"] == 0.0 and q["above_demonstrator"] == {"before": 0.0, "after": 0.5}
    assert q["task_by_imitation"]["after"] == {"same": None, "other": pytest.approx(0.3)}


def test_format_gains_alone_do_not_pass():
    """More answers parse (the task reward rises a lot) but the decisions get worse: FAIL."""
    per = [(-0.5, 0.1), (-0.5, 0.0), (0.3, 0.2), (0.4, 0.3), (-0.5, 0.1), (0.5, 0.4)] * 2
    s = L.summarise([fake(1, 0, 0, per), fake(2, 0, 0, per)])
    assert s["paired"]["task_change_ci95"][0] > 0  # the old rule would pass
    assert s["paired"]["decision_change"]["mean"] == pytest.approx(-0.1)
    assert not s["passed"] and s["decision_deltas"] == [pytest.approx(-0.1)] * 2


def test_decisions_must_also_beat_the_control_arm():
    per = [(0.0, 0.3), (0.1, 0.4), (-0.1, 0.2), (0.2, 0.5)] * 2
    better_control = [0.6, 0.7, 0.5, 0.8] * 2
    worse_control = [0.0, 0.1, -0.1, 0.1] * 2
    assert L.summarise([fake(1, 0, 0, per)])["passed"]
    beaten = L.summarise([fake(1, 0, 0, per, control=better_control)])
    assert not beaten["passed"] and beaten["paired"]["control"]["decision_vs_control"]["mean"] == pytest.approx(-0.3)
    ok = L.summarise([fake(1, 0, 0, per, control=worse_control)])
    assert ok["passed"] and ok["paired"]["control"]["decision_vs_control"]["ci95"][0] > 0
    assert "decisions +0.325" in L.format_table(ok, 1)


def test_no_valid_answer_in_one_arm_fails_with_a_clear_line():
    per = [(-0.5, 0.3), (-0.5, 0.2)]
    s = L.summarise([fake(1, 0, 0, per)])
    assert not s["passed"] and s["paired"]["decision_change"]["mean"] is None
    assert "no prompt with valid answers in both arms" in L.format_table(s, 1)


def test_bootstrap_interval_is_deterministic_and_brackets_the_mean():
    xs = [0.1, -0.2, 0.3, 0.05, 0.2, -0.1, 0.15]
    assert L.bootstrap_ci(xs) == L.bootstrap_ci(xs)
    lo, hi = L.bootstrap_ci(xs)
    assert lo < sum(xs) / len(xs) < hi


def test_table_lists_every_metric():
    table = L.format_table(L.summarise([fake(1, 0.0, 0.1)]), 1)
    for m in L.METRICS:
        assert f"| {m} |" in table


@pytest.mark.slow
def test_reduced_learning_check_runs_the_whole_experiment(tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false")
    cmd = [sys.executable, str(ROOT / "scripts" / "learning_check.py"), "--seeds", "1", "--quick",
           "--control=imitation", "--out", str(tmp_path / "lc")]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((tmp_path / "lc" / "learning_check.json").read_text())
    assert result["summary"]["passed"]  # a smoke check: see docs/learning.md for the evidence runs
    seed = result["seeds"][0]
    assert 0 < seed["answers_changed"] <= 1
    assert "paired over 8 held-out prompts" in proc.stdout and "PASS" in proc.stdout
    # closed-loop play (e): the trainer's final evaluation, on the same 10 starts before and after
    assert len(seed["episodes_before"]) == len(seed["episodes_after"]) == 10
    assert all(len(e["turn_rewards"]) == len(e["route_statuses"]) == e["steps"] for e in seed["episodes_after"])
    assert "(e) closed-loop play" in proc.stdout
    # the imitation control: as many supervised steps as GRPO took, scored on the same prompts and starts
    grpo_steps = sum(st["steps"] for st in seed["stages"])
    assert proc.stdout.count(f"[warm start] step {grpo_steps}/{grpo_steps} ") == 1
    assert len(seed["answers_control"]) == 8 and len(seed["episodes_control"]) == 10
    assert "GRPO vs the control arm (more imitation" in proc.stdout
    assert result["settings"]["control"] == "imitation"
    # --from-json judges the saved seeds again without training: the same report
    again = subprocess.run([sys.executable, str(ROOT / "scripts" / "learning_check.py"), "--from-json",
                            str(tmp_path / "lc" / "learning_check.json")], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    report = lambda out: out[out.index("| metric"):]  # noqa: E731
    assert report(again.stdout) == report(proc.stdout)


def episodes(rewards, statuses=("advanced", "completed"), outcome="timeout") -> list[dict]:
    """Closed-loop rows as ``episode_scores`` keeps them: a first decision at 0.5, then one
    later decision making each episode's reward the given mean."""
    return [{"reward": r, "turn_rewards": [0.5, 2 * r - 0.5], "route_statuses": list(statuses), "outcome": outcome}
            for r in rewards]


def test_closed_loop_play_is_paired_over_starts_and_getting_worse_fails_the_check():
    clear = [(-0.5, -0.2), (-0.3, 0.0), (-0.4, -0.1), (-0.2, 0.2), (-0.5, -0.3), (0.0, 0.3)]
    start = [0.3, 0.1, 0.4, 0.2, 0.0, 0.5, 0.3, 0.2]
    worse = [x - 0.2 + 0.02 * (i % 3) for i, x in enumerate(start)]
    seeds = []
    for seed in (1, 2):
        r = fake(seed, 0, 0, clear)
        r["episodes_before"], r["episodes_after"] = episodes(start), episodes(worse, ("wrong_type", "wrong_type"))
        seeds.append(r)
    summary = L.summarise(seeds)
    play = summary["closed_loop"]
    assert play["episodes"] == 8 and play["change"]["mean"] == pytest.approx(statistics.mean(
        w - s for w, s in zip(worse, start)))
    assert play["change"]["ci95"][1] < 0 and not summary["closed_loop_ok"]
    assert summary["paired"]["decision_change"]["ci95"][0] > 0  # decisions improved, ...
    assert not summary["passed"]  # ... but the trainer's own final evaluation got worse: FAIL
    arms = play["arms"]
    assert arms["before"]["first_decision"] == pytest.approx(0.5)
    assert arms["before"]["later_wrong_step"] == 0.0 and arms["after"]["later_wrong_step"] == 1.0
    assert arms["before"]["later_advancing"] == 1.0 and arms["after"]["later_advancing"] == 0.0
    lines = "\n".join(L.format_play(play))
    assert "(e) closed-loop play" in lines and "8 episodes" in lines
    # no worse beyond noise: passes (the rule asks the interval to reach above 0)
    for r in seeds:
        r["episodes_after"] = episodes([x + (0.05 if i % 2 else -0.05) for i, x in enumerate(start)])
    assert L.summarise(seeds)["passed"]
    # the quick smoke check reports it but does not judge it
    seeds[0]["episodes_after"] = episodes(worse)
    assert L.summarise(seeds[:1], quick=True)["passed"]


def test_closed_loop_play_worse_than_the_control_arms_fails_the_check():
    clear = [(-0.5, -0.2), (-0.3, 0.0), (-0.4, -0.1), (-0.2, 0.2), (-0.5, -0.3), (0.0, 0.3)]
    start = [0.3, 0.1, 0.4, 0.2, 0.0, 0.5, 0.3, 0.2]
    after = [x + 0.1 + 0.02 * (i % 3) for i, x in enumerate(start)]  # GRPO improved on its start ...
    seeds = []
    for seed in (1, 2):
        r = fake(seed, 0, 0, clear, control=[b for b, _ in clear])  # ... and beat the control's decisions
        r["episodes_before"], r["episodes_after"] = episodes(start), episodes(after)
        r["episodes_control"] = episodes([x + 0.1 for x in after])  # ... but the control plays better
        seeds.append(r)
    summary = L.summarise(seeds)
    play = summary["closed_loop"]
    assert play["change"]["ci95"][0] > 0 and summary["paired"]["control"]["decision_vs_control"]["ci95"][0] > 0
    assert play["vs_control"]["mean"] == pytest.approx(-0.1) and play["vs_control"]["ci95"][1] < 0
    assert not summary["closed_loop_ok"] and not summary["passed"]
    assert "GRPO must beat the control in closed-loop play: 95% CI above 0 (lower bound" in L.play_rule(summary)
    assert L.play_shortfalls(play) == ["episode reward does not beat the control arm's"]
    for r in seeds:  # the control plays as well as GRPO, give or take noise: GRPO did not beat it, fails
        r["episodes_control"] = episodes([x + (0.05 if i % 2 else -0.05) for i, x in enumerate(after)])
    assert not L.summarise(seeds)["passed"]
    for r in seeds:  # GRPO plays better than the control beyond noise: passes
        r["episodes_control"] = episodes([x - 0.1 + (0.02 if i % 2 else -0.02) for i, x in enumerate(after)])
    assert L.summarise(seeds)["passed"]


def test_closed_loop_success_falling_beyond_noise_fails_even_when_the_reward_rises():
    clear = [(-0.5, -0.2), (-0.3, 0.0), (-0.4, -0.1), (-0.2, 0.2), (-0.5, -0.3), (0.0, 0.3)]
    start = [0.3, 0.1, 0.4, 0.2, 0.0, 0.5, 0.3, 0.2] * 3
    seeds = []
    for seed in (1, 2):
        r = fake(seed, 0, 0, clear)
        r["episodes_before"] = episodes(start, outcome="success")
        r["episodes_after"] = episodes([x + 0.1 for x in start])  # more reward per step, but every success lost
        seeds.append(r)
    summary = L.summarise(seeds)
    play = summary["closed_loop"]
    assert play["change"]["ci95"][0] > 0 and play["success_change"]["mean"] == pytest.approx(-1.0)
    assert L.play_shortfalls(play) == ["the success rate fell"] and not summary["passed"]
    assert "success 100% -> 0% (paired change -100.0%" in "\n".join(L.format_play(play))
    for r in seeds:  # one start in eight lost its success, one won it: noise, passes
        r["episodes_after"] = [dict(e, outcome="success" if i % 8 else "timeout") for i, e in enumerate(r["episodes_after"])]
        r["episodes_before"] = [dict(e, outcome="success" if i % 8 != 1 else "timeout")
                                for i, e in enumerate(r["episodes_before"])]
    assert L.summarise(seeds)["passed"]


def test_per_difficulty_table_lists_every_arm_and_the_references():
    refs = [{"difficulty": 1 + i % 2, "oracle": 0.9, "heuristic": 0.7} for i in range(4)]
    seed = fake(1, 0, 0, [(0.1, 0.5), (0.2, 0.6), (0.1, 0.4), (-0.6, 0.8)], control=[0.2, 0.3, 0.2, 0.3])
    seed["episodes_before"] = [{"difficulty": 1 + i % 2, "reward": 0.0, "outcome": "timeout"} for i in range(4)]
    seed["episodes_after"] = [{"difficulty": 1 + i % 2, "reward": 0.1, "outcome": "success"} for i in range(4)]
    seed["episodes_control"] = seed["episodes_before"]
    play = {"heuristic": [{"difficulty": d, "outcome": "success"} for d in (1, 2)],
            "oracle": [{"difficulty": 1, "outcome": "success"}, {"difficulty": 2, "outcome": "timeout"}]}
    table = L.per_difficulty([seed], refs, play)
    assert sorted(table) == [1, 2] and list(table[1]) == ["before", "after", "control", "heuristic", "oracle"]
    assert table[1]["before"]["decision"] == pytest.approx(0.1) and table[1]["before"]["valid"] == 1.0
    assert table[2]["before"]["valid"] == 0.5 and table[2]["before"]["decision"] == pytest.approx(0.2)
    assert table[1]["after"]["regret"] == pytest.approx(0.9 - 0.45) and table[1]["after"]["success"] == 1.0
    assert table[2]["oracle"]["success"] == 0.0 and table[1]["heuristic"]["regret"] == pytest.approx(0.2)
    lines = "\n".join(L.format_per_difficulty(table))
    assert "| d | warm start | GRPO | control | heuristic | greedy maximiser |" in lines
    assert "| 2 | +0.200 / +0.700 / 50% / 0% |" in lines


def test_reference_play_is_the_heuristic_and_the_greedy_maximiser_on_the_evaluation_starts():
    play = L.reference_play(5)
    assert [g["difficulty"] for g in play["heuristic"]] == [1, 2, 3, 4, 5]
    assert all(g["outcome"] in ("success", "timeout", "failure") for rows in play.values() for g in rows)
    assert play == L.reference_play(5)  # deterministic


@pytest.mark.parametrize("content", ["", "{not json", '{"seeds": []}', "[1, 2]", '{"seeds": [], "settings": {}}',
                                     '{"seeds": [{"seed": 1}], "settings": {}}'])
def test_from_json_rejects_a_file_that_is_not_a_saved_run(tmp_path, capsys, content):
    path = tmp_path / "learning_check.json"
    path.write_text(content)
    assert L.main(["--from-json", str(path)]) == 2
    assert "is not a learning_check.json" in capsys.readouterr().err


def test_runs_without_episodes_are_summarised_as_before():
    clear = [(-0.5, -0.2), (-0.3, 0.0), (-0.4, -0.1), (-0.2, 0.2), (-0.5, -0.3), (0.0, 0.3)]
    summary = L.summarise([fake(1, 0, 0, clear)])
    assert summary["closed_loop"] is None and summary["passed"]


def test_collapse_onto_one_answer_fails_the_check():
    clear = [(-0.5, -0.2), (-0.3, 0.0), (-0.4, -0.1), (-0.2, 0.2), (-0.5, -0.3), (0.0, 0.3)]
    seed = fake(1, 0, 0, clear)
    seed["diversity_after"] = {"flight_crisis": {"answers": 12, "distinct": 1, "collapsed": True}}
    summary = L.summarise([seed, fake(2, 0, 0, clear)])
    assert not summary["passed"] and summary["collapsed"] == ["seed 1: flight_crisis"]


def test_shuffled_reward_keeps_the_values_detaches_them_and_is_the_same_for_all_six():
    f = L.shuffled_reward(lambda completions, **kw: [float(len(c)) for c in completions], str)
    g = L.shuffled_reward(lambda completions, **kw: [float(len(c)) * 10 for c in completions], str)
    batch = ["a" * i for i in range(1, 17)]
    out = f(batch)
    assert sorted(out) == sorted(float(len(c)) for c in batch) and out != [float(len(c)) for c in batch]
    assert [x * 10 for x in out] == g(batch)  # one permutation per batch, for every reward
    assert f(batch) == out  # deterministic


def test_control_arm_is_compared_pairwise_with_grpo():
    clear = [(-0.5, -0.2), (-0.3, 0.0), (-0.4, -0.1), (-0.2, 0.2), (-0.5, -0.3), (0.0, 0.3)]
    seed = fake(1, 0, 0, clear)
    seed["answers_control"] = [[{"task": b, "valid": b > -0.5}] * 2 for b, _ in clear]  # control = no change
    c = L.summarise([seed])["paired"]["control"]
    assert c["task_vs_control"] == pytest.approx(0.3) and c["task_vs_control_ci95"][0] > 0
    assert "GRPO vs the control arm (same compute, rewards shuffled" in L.format_table(L.summarise([seed]), 1)
    assert "GRPO vs the control arm (more imitation" in L.format_table(L.summarise([seed]), 1, "imitation")


def test_control_flag_takes_a_kind_and_defaults_to_imitation(tmp_path, monkeypatch, capsys):
    seen = []

    def stop(seed, out, s, extra, control=None):
        seen.append(control)
        raise SystemExit(0)

    monkeypatch.setattr(L, "run_seed", stop)
    for argv in (["--control"], ["--control=shuffled"], ["--control=none"], [], ["--quick"]):
        with pytest.raises(SystemExit):
            L.main(["--seeds", "1", "--out", str(tmp_path), *argv])
    assert seen == ["imitation", "shuffled", None, "imitation", None]  # the full check runs the imitation control
    with pytest.raises(SystemExit) as err:
        L.main(["--control=unknown", "--out", str(tmp_path)])
    assert err.value.code == 2 and "invalid choice" in capsys.readouterr().err


_task = st.floats(min_value=-0.45, max_value=1.0, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_task, _task), min_size=1, max_size=8), st.data())
def test_unparseable_answers_never_move_decision_quality(per, data):
    """Format is out of (b): adding any number of unparseable answers to any prompt, in
    either arm, leaves the paired decision change exactly as it was."""
    base = fake(1, 0, 0, per)
    spoiled = fake(1, 0, 0, per)
    for arm in ("answers_before", "answers_after"):
        for i, answers in enumerate(spoiled[arm]):
            extra = data.draw(st.integers(min_value=0, max_value=3))
            spoiled[arm][i] = answers + [{"task": -0.5, "valid": False, "key": None}] * extra
    assert L.decision_change([spoiled], "answers_after", "answers_before") == \
        pytest.approx(L.decision_change([base], "answers_after", "answers_before"))


def test_imitation_capacity_script_runs_in_a_tiny_shape(capsys, tmp_path):
    """scripts/imitation_capacity.py (issue #26, item 2): imitate the heuristic in blocks,
    then report valid JSON, decision quality and the heuristic's own on the same prompts."""
    out = tmp_path / "cap.json"
    # its own process: it configures the trainer's module state (feedback store, log dir)
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "imitation_capacity.py"), "--steps", "4", "--every",
                           "2", "--held-out", "3", "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads(out.read_text())
    assert [row["steps"] for row in r["rows"]] == [2, 4]
    assert r["parameters"] == 223_104 and -1.0 <= r["heuristic_quality"] <= 1.0
    assert "[capacity] 4 steps" in proc.stdout


def test_versus_compares_the_grpo_arms_of_two_saved_runs(tmp_path, capsys):
    clear = [(-0.5, -0.2), (-0.3, 0.0), (-0.4, -0.1), (-0.2, 0.2), (-0.5, -0.3), (0.0, 0.3)]
    start = [0.3, 0.1, 0.4, 0.2, 0.0, 0.5, 0.3, 0.2]
    paths = []
    for name, shift in (("a", 0.0), ("b", 0.1)):
        seeds = []
        for seed in (1, 2):
            r = fake(seed, 0, 0, [(b, a + shift) for b, a in clear])
            r["episodes_before"] = episodes(start)
            r["episodes_after"] = episodes([x + shift + (0.01 if i % 2 else -0.01) for i, x in enumerate(start)])
            seeds.append(r)
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"settings": {"overrides": [f"--X={name}"]}, "seeds": seeds}))
        paths.append(str(path))
    assert L.main(["--versus", *paths]) == 0
    out = capsys.readouterr().out
    assert "decision quality B - A: +0.100 (95% CI +0.100 .. +0.100, 6 prompts)" in out
    assert "closed-loop episode reward B - A: +0.100" in out and "training overrides ['--X=b']" in out
    (tmp_path / "c.json").write_text(json.dumps({"seeds": [fake(9, 0, 0)]}))
    assert L.main(["--versus", paths[0], str(tmp_path / "c.json")]) == 2  # no seed in common


def test_held_out_answers_are_sampled_at_one_temperature_whatever_the_recipe_trains_with():
    import train_trl as T

    assert L.EVAL_TEMPERATURE == T.CPU_PROFILE["TEMPERATURE"]  # the default recipe measures itself as before
    hot = T.build_config(["--DEVICE_PROFILE=cpu", "--TEMPERATURE=1.0"], profile="cpu")
    assert hot["TEMPERATURE"] == 1.0
    measured = L.measurement_config(hot)
    assert measured["TEMPERATURE"] == L.EVAL_TEMPERATURE
    assert {k: v for k, v in measured.items() if k != "TEMPERATURE"} == {k: v for k, v in hot.items() if k != "TEMPERATURE"}
    assert hot["TEMPERATURE"] == 1.0  # the training config itself is untouched


def test_rescoring_held_out_answers_neither_logs_nor_counts_them_again(tmp_path):
    """answer_scores re-reads answers evaluate_policy already observed: same scores as the
    reward, nothing written to generations.jsonl, no signature counted."""
    import train_trl as T
    from lifestack.training.evaluation import held_out_prompts
    from lifestack.training.generation_log import GenerationLog
    from lifestack.training.rewards import EVALUATOR

    prompts = held_out_prompts(3, 2, L.HELD_OUT_SEED)
    answers = ['{"action_type": "rest"}', "not json", '{"action_type": "rest", "target_domain": "health"}'] * 2
    saved = (T.RUN.log, T.RUN.log_interval, T.RUN.evaluations, dict(T.RUN.signatures), T.RUN.phase)
    try:
        T.RUN.log, T.RUN.log_interval, T.RUN.evaluations, T.RUN.signatures = GenerationLog(tmp_path), 1, 0, {}
        EVALUATOR.evaluations.clear()
        scores = L.answer_scores(prompts, answers, samples=2)
        assert not (tmp_path / "generations.jsonl").exists()
        assert T.RUN.signatures == {} and T.RUN.phase == saved[4]
        EVALUATOR.evaluations.clear()
        direct = [T.get_lifestack_evaluation(c, p) for p, c in zip([p for p in prompts for _ in range(2)], answers)]
        assert [x["task"] for row in scores for x in row] == [float(ev["reward"]) for ev in direct]
        assert [x["valid"] for row in scores for x in row] == [ev["action"] is not None for ev in direct]
        assert (tmp_path / "generations.jsonl").exists()  # the same answers outside rescore are logged
    finally:
        T.RUN.log.close()
        T.RUN.log, T.RUN.log_interval, T.RUN.evaluations, T.RUN.signatures, _ = saved
        EVALUATOR.evaluations.clear()
