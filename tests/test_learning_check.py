"""scripts/learning_check.py, the command: its flags, the saved-run modes (--from-json,
--versus) and the reduced CPU experiment (slow, in CI); also scripts/imitation_capacity.py,
which measures on the check's held-out prompts. The arms are tested in
test_training_learning_check.py, the rule and its tables in test_training_learning_rule.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import learning_check as L  # noqa: E402
from learning_runs import episodes, fake  # noqa: E402


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


@pytest.mark.parametrize("content", ["", "{not json", '{"seeds": []}', "[1, 2]", '{"seeds": [], "settings": {}}',
                                     '{"seeds": [{"seed": 1}], "settings": {}}'])
def test_from_json_rejects_a_file_that_is_not_a_saved_run(tmp_path, capsys, content):
    path = tmp_path / "learning_check.json"
    path.write_text(content)
    assert L.main(["--from-json", str(path)]) == 2
    assert "not learning_check.json files of one recipe" in capsys.readouterr().err


def saved_run(tmp_path, name, seeds, **settings):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"settings": {"control": None, "overrides": [], **settings},
                                "seeds": [fake(s, 0.2, 0.4) for s in seeds]}))
    return str(path)


def test_from_json_pools_seeds_trained_apart_into_one_report(tmp_path, capsys, monkeypatch):
    import lifestack.training.learning_rule as R

    judged = []
    monkeypatch.setattr(R, "report", lambda T, results, s, quick, control, teacher: judged.append(
        ([r["seed"] for r in results], s, teacher)) or {"passed": True})
    a, b = saved_run(tmp_path, "a", [1], beyond_teacher=True), saved_run(tmp_path, "b", [2, 3], beyond_teacher=True)
    assert L.main(["--from-json", a, b]) == 0
    assert judged == [([1, 2, 3], {"control": None, "overrides": [], "beyond_teacher": True}, True)]
    assert "3 saved seeds from" in capsys.readouterr().out


@pytest.mark.parametrize("other", [dict(seeds=[1]), dict(seeds=[2], overrides=["--LEARNING_RATES=[5e-5]"]),
                                   dict(seeds=[2], control="imitation"), dict(seeds=[2], beyond_teacher=True)])
def test_from_json_refuses_to_pool_a_seed_twice_or_another_recipe(tmp_path, capsys, other):
    a = saved_run(tmp_path, "a", [1])
    seeds = other.pop("seeds")
    b = saved_run(tmp_path, "b", seeds, **other)
    assert L.main(["--from-json", a, b]) == 2
    err = capsys.readouterr().err
    assert "not learning_check.json files of one recipe" in err
    assert ("appears twice" in err) if not other else (f"differ in {next(iter(other))}" in err)


def first_run_seed_calls(monkeypatch, argvs: list[list[str]], pick) -> list:
    """``pick(out=, extra=, control=)`` of run_seed's first call for each argv: run_seed is
    stubbed to stop there, so nothing trains."""
    seen = []

    def stop(T, seed, out, s, extra, control=None):
        seen.append(pick(out=out, extra=extra, control=control))
        raise SystemExit(0)

    monkeypatch.setattr(L, "run_seed", stop)
    for argv in argvs:
        with pytest.raises(SystemExit):
            L.main(argv)
    return seen


def test_control_flag_takes_a_kind_and_defaults_to_imitation(tmp_path, monkeypatch, capsys):
    argvs = [["--seeds", "1", "--out", str(tmp_path), *a]
             for a in (["--control"], ["--control=shuffled"], ["--control=none"], [], ["--quick"])]
    seen = first_run_seed_calls(monkeypatch, argvs, lambda control, **_: control)
    assert seen == ["imitation", "shuffled", None, "imitation", None]  # the full check runs the imitation control
    with pytest.raises(SystemExit) as err:
        L.main(["--control=unknown", "--out", str(tmp_path)])
    assert err.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_each_seed_range_works_in_its_own_folder_by_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default folder is relative to where the command runs
    argvs = [["--seeds", "1", "--first-seed", "10"], ["--seeds", "1", "--first-seed", "11"],
             ["--seeds", "3", "--first-seed", "4"], ["--seeds", "1", "--first-seed", "10", "--out", "mine"]]
    outs = first_run_seed_calls(monkeypatch, argvs, lambda out, **_: Path(out))
    base = Path("training_logs/learning_check")
    assert outs == [base / "seed_10", base / "seed_11", base / "seeds_4-6", Path("mine")]


def test_beyond_teacher_warm_starts_on_the_heuristic_and_an_explicit_override_wins(tmp_path, monkeypatch):
    argvs = [["--seeds", "1", "--out", str(tmp_path), *a]
             for a in (["--beyond-teacher"], ["--beyond-teacher", "--", "--WARM_START_POLICY=rules"], [])]
    seen = first_run_seed_calls(monkeypatch, argvs, lambda extra, **_: list(extra))
    assert seen == [["--WARM_START_POLICY=heuristic"], ["--WARM_START_POLICY=heuristic", "--WARM_START_POLICY=rules"], []]


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


def test_imitation_capacity_sizes_the_model_up_on_request(tmp_path):
    """--hidden-size/--layers: the same measurement on a larger model (issue #37, item 1:
    size the CPU model up until it can finish tasks); a shape the heads cannot split is refused."""
    out = tmp_path / "cap.json"
    script = [sys.executable, str(ROOT / "scripts" / "imitation_capacity.py")]
    proc = subprocess.run([*script, "--steps", "2", "--every", "2", "--held-out", "2", "--hidden-size", "96",
                           "--layers", "3", "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads(out.read_text())
    assert (r["parameters"], r["hidden_size"], r["layers"]) == (519_360, 96, 3)
    assert "519,360 parameters (hidden size 96, 3 layers)" in proc.stdout
    bad = subprocess.run([*script, "--hidden-size", "90"], capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2 and "multiple of 8" in bad.stderr


def test_imitation_capacity_plays_the_model_and_its_teacher_on_the_same_closed_loop_starts(tmp_path):
    """--policy oracle --episodes: imitate the reward's greedy maximiser, then play both,
    per difficulty; the teacher finishes more tasks than a model trained for 2 steps."""
    out = tmp_path / "cap.json"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "imitation_capacity.py"), "--steps", "2", "--every",
                           "2", "--held-out", "2", "--policy", "oracle", "--episodes", "1", "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads(out.read_text())
    assert r["policy"] == "oracle" and set(r["closed_loop"]) == {"model", "oracle"}
    assert set(r["closed_loop"]["model"]) == {"1", "2", "3", "4", "5", "all"}
    assert r["closed_loop"]["oracle"]["all"]["success"] > r["closed_loop"]["model"]["all"]["success"]
    assert "[capacity] closed loop, difficulty all (5 episodes)" in proc.stdout


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


def test_the_imitation_control_spends_the_grpo_arms_own_rate_and_batch(monkeypatch):
    """The control gets GRPO's compute as the GRPO arm ran it: a learning rate or batch given
    after ``--`` reaches the control too (it once read the CPU profile's, so a recipe at a
    quarter of the rate was compared with imitation at four times its rate)."""
    from lifestack.training import learning_check as LC

    seen = {}
    monkeypatch.setattr(LC, "warm_start", lambda model, tok, cfg, batch_size: seen.update(
        lr=cfg["WARM_START_LR"], steps=cfg["WARM_START_SFT_STEPS"], batch=batch_size))
    cfg = {"LEARNING_RATES": [5e-5], "N_STAGES": 5, "PER_DEVICE_BATCH_SIZE": 8, "GRAD_ACCUM_STEPS": 2,
           "WARM_START_LR": 2e-3, "WARM_START_SFT_STEPS": 1000}
    LC.imitation_arm(None, "model", "tok", cfg, grpo_steps=120)
    assert seen == {"lr": 5e-5, "steps": 120, "batch": 16}
    # per-stage rates: the mean of those the stages used (the last repeats)
    assert LC.grpo_compute({**cfg, "LEARNING_RATES": [4e-5, 2e-5], "N_STAGES": 3})[0] == pytest.approx(8e-5 / 3)
