"""lifestack.training.run_state: where a run's files live, the curriculum state on disk,
resume and its checks, archiving a previous run, step checkpoints."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import train_trl as T  # noqa: E402  (the trainer's constants: the defaults a state records)
import lifestack.training.grpo_rewards as RW  # noqa: E402
import lifestack.training.run_state as RS  # noqa: E402


def run_cfg(tmp_path, *argv, profile="cpu"):
    return T.build_config([f"--OUTPUT_DIR={tmp_path / 'out'}", f"--LOG_DIR={tmp_path / 'logs'}", *argv], profile=profile)


def make_old_run(out: Path, logs: Path, cfg) -> None:
    """A finished 5-stage run as the script leaves it, plus things that are not the run's."""
    for d in ("stage_1/checkpoints/checkpoint-2", "stage_2", "stage_5", "merged", "cpu_base_model", "previous_run_x",
              "stage_x"):
        (out / d).mkdir(parents=True)
    for f in ("adapter_model.safetensors", "adapter_config.json", "tokenizer.json", "notes.txt"):
        (out / f).write_text(f)
    (logs).mkdir(parents=True)
    for f in ("generations.jsonl", "train_history.jsonl", "eval_episodes.jsonl", "other.jsonl"):
        (logs / f).write_text("{}\n")
    state = {**RS.fresh_state(cfg), "next_stage": 6, "stages": [{"stage": i} for i in range(1, 6)], "finished": True,
             "final_files": ["adapter_model.safetensors", "adapter_config.json", "tokenizer.json", "../escape", "a/b", ""]}
    RS.write_json_atomic(out / "curriculum_state.json", state)


def _cfg(**kw):
    cfg = T.default_config()
    cfg.update(kw)
    return cfg


def test_write_json_atomic_replaces_the_file(tmp_path):
    path = tmp_path / "state" / "curriculum_state.json"
    RS.write_json_atomic(path, {"next_stage": 1, "stages": []})
    assert json.loads(path.read_text(encoding="utf-8")) == {"next_stage": 1, "stages": []}
    inode = path.stat().st_ino
    RS.write_json_atomic(path, {"next_stage": 2, "stages": [{"stage": 1, "advance": True}]})
    assert json.loads(path.read_text(encoding="utf-8")) == {"next_stage": 2, "stages": [{"stage": 1, "advance": True}]}
    assert path.stat().st_ino != inode  # a new file renamed over the old one, not rewritten in place
    assert sorted(p.name for p in path.parent.iterdir()) == ["curriculum_state.json"]



def test_write_json_atomic_failure_keeps_the_old_file(tmp_path):
    path = tmp_path / "curriculum_state.json"
    RS.write_json_atomic(path, {"next_stage": 3})
    with pytest.raises(TypeError):
        RS.write_json_atomic(path, {"next_stage": object()})
    assert json.loads(path.read_text(encoding="utf-8")) == {"next_stage": 3}



def test_write_json_atomic_failure_leaves_no_tmp_file(tmp_path):
    path = tmp_path / "curriculum_state.json"
    RS.write_json_atomic(path, {"next_stage": 3})
    with pytest.raises(TypeError):
        RS.write_json_atomic(path, {"next_stage": object()})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["curriculum_state.json"]



def save_checkpoint(ckpts: Path, step: int) -> Path:
    """A step checkpoint as the Trainer leaves it once saved: its state file written last."""
    ckpt = ckpts / f"checkpoint-{step}"
    ckpt.mkdir(parents=True, exist_ok=True)
    (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": []}, indent=2))
    return ckpt


def test_last_checkpoint_picks_the_highest_number(tmp_path):
    assert RS.last_checkpoint(tmp_path / "missing") is None
    ckpts = tmp_path / "checkpoints"
    ckpts.mkdir()
    assert RS.last_checkpoint(ckpts) is None
    for step in (2, 10, 9):
        save_checkpoint(ckpts, step)
    for name in ("checkpoint-final", "checkpoint-", "runs"):
        (ckpts / name).mkdir()
    assert RS.last_checkpoint(ckpts) == str(ckpts / "checkpoint-10")
    save_checkpoint(ckpts, 100)
    assert RS.last_checkpoint(ckpts) == str(ckpts / "checkpoint-100")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=0, max_value=80), garbage=st.sampled_from([None, b"\xff\xfe", b"[]", b"{}", b"null"]))
def test_a_checkpoint_killed_while_saving_is_skipped(tmp_path_factory, cut, garbage):
    """A run killed while the Trainer writes a checkpoint leaves its state file missing,
    empty, cut short or unreadable: resume takes the newest checkpoint before it (or
    none), never one that would fail inside ``Trainer.train``."""
    ckpts = tmp_path_factory.mktemp("ckpts")
    save_checkpoint(ckpts, 2)
    state_file = save_checkpoint(ckpts, 4) / "trainer_state.json"
    text = state_file.read_bytes()
    state_file.write_bytes(garbage if garbage is not None else text[:cut])
    complete = garbage is None and cut >= len(text)
    assert RS.checkpoint_is_complete(state_file.parent) is complete
    assert RS.last_checkpoint(ckpts) == str(ckpts / ("checkpoint-4" if complete else "checkpoint-2"))
    (ckpts / "checkpoint-2" / "trainer_state.json").unlink()  # the older one never finished either
    assert RS.last_checkpoint(ckpts) == (str(ckpts / "checkpoint-4") if complete else None)


def test_fingerprint_covers_what_is_trained_and_not_n_stages(tmp_path):
    cfg = run_cfg(tmp_path)
    base = RS.config_fingerprint(RS.run_settings(cfg))
    for change in [{"N_STAGES": 9}, {"OUTPUT_DIR": "elsewhere"}, {"LOG_DIR": "x"}, {"N_EVAL_EPISODES": 3},
                   {"SAVE_STEPS": 7}, {"RESUME": False}, {"RESUME_ANY_CONFIG": True}, {"LOG_INTERVAL": 5},
                   {"PER_DEVICE_BATCH_SIZE": 8, "GRAD_ACCUM_STEPS": 2}]:  # 8 x 2 = 16 x 1: the same steps
        assert RS.config_fingerprint(RS.run_settings({**cfg, **change})) == base, change
    changes = {"MODEL_NAME": "org/other", "_PROFILE": "peft", "USE_LORA": True, "LORA_RANK": 8, "LORA_ALPHA": 16,
               "LOAD_IN_4BIT": False, "SEED": 7, "START_DIFFICULTY": 2, "N_PROMPTS_PER_STAGE": 17,
               "ADVANCE_THRESHOLD": 0.5, "N_EVAL_PROMPTS": 9, "LEARNING_RATES": [1e-5], "NUM_GENERATIONS": 8,
               "MAX_COMPLETION_LENGTH": 99, "TEMPERATURE": 0.9, "BETA": 0.1, "REWARD_WEIGHTS": {name: 1.0 for name in RW.REWARD_NAMES},
               "WARM_START_SFT_STEPS": 1, "WARM_START_LR": 1e-4, "PER_DEVICE_BATCH_SIZE": 8,
               "RETREAT_THRESHOLD": 0.1, "WARM_START_POLICY": "rules"}
    assert set(changes) >= set(RS.RUN_SETTING_KEYS)
    for key, value in changes.items():
        assert RS.config_fingerprint(RS.run_settings({**cfg, key: value})) != base, key
    assert RS.run_settings(cfg)["REWARD_FUNCTIONS"] == list(RW.REWARD_NAMES)



def test_resume_refuses_a_state_of_another_configuration(tmp_path, capsys):
    cfg = run_cfg(tmp_path)
    path = tmp_path / "out" / "curriculum_state.json"
    state = {**RS.fresh_state(cfg), "next_stage": 3, "stages": [{"stage": 1}, {"stage": 2}]}
    RS.write_json_atomic(path, state)
    assert RS.load_curriculum_state(path, run_cfg(tmp_path, "--N_STAGES=8")) == state  # N_STAGES extends a run
    with pytest.raises(SystemExit) as err:
        RS.load_curriculum_state(path, run_cfg(tmp_path, "--LEARNING_RATES=[1e-4]", "--SEED=7"))
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(str(path))
    assert "LEARNING_RATES [5e-05] -> [0.0001]" in msg and "SEED 42 -> 7" in msg
    assert "--RESUME=False" in msg and "--RESUME_ANY_CONFIG=True" in msg
    assert "TEMPERATURE" not in msg  # only what differs
    fresh = RS.load_curriculum_state(path, run_cfg(tmp_path, "--SEED=7", "--RESUME=False"))
    assert fresh["next_stage"] == 1 and fresh["stages"] == []
    capsys.readouterr()
    other = run_cfg(tmp_path, "--SEED=7", "--RESUME_ANY_CONFIG=True")
    resumed = RS.load_curriculum_state(path, other)
    assert resumed["next_stage"] == 3 and resumed["fingerprint"] == RS.config_fingerprint(RS.run_settings(other))
    assert "RESUME_ANY_CONFIG: resuming" in capsys.readouterr().out



def test_resume_refuses_a_state_without_settings(tmp_path):
    cfg = run_cfg(tmp_path)
    path = tmp_path / "curriculum_state.json"
    RS.write_json_atomic(path, {"version": 1, "next_stage": 2, "difficulty": 1, "stages": [{"stage": 1}], "finished": False})
    with pytest.raises(SystemExit, match="records no settings"):
        RS.load_curriculum_state(path, cfg)
    assert RS.load_curriculum_state(path, {**cfg, "RESUME_ANY_CONFIG": True})["next_stage"] == 2



def test_archive_previous_run_moves_the_run_and_nothing_else(tmp_path):
    out, logs = tmp_path / "out", tmp_path / "logs"
    make_old_run(out, logs, run_cfg(tmp_path))
    (tmp_path / "escape").write_text("outside the output directory")
    dest = RS.archive_previous_run(out, logs, stamp="20260101-000000")
    assert dest == out / "previous_run_20260101-000000"
    assert sorted(p.name for p in dest.iterdir()) == sorted([
        "curriculum_state.json", "stage_1", "stage_2", "stage_5", "merged", "adapter_model.safetensors",
        "adapter_config.json", "tokenizer.json", "logs"])
    assert (dest / "stage_1" / "checkpoints" / "checkpoint-2").is_dir()
    assert sorted(p.name for p in (dest / "logs").iterdir()) == ["eval_episodes.jsonl", "generations.jsonl",
                                                                 "train_history.jsonl"]
    assert sorted(p.name for p in out.iterdir()) == ["cpu_base_model", "notes.txt", dest.name, "previous_run_x", "stage_x"]
    assert sorted(p.name for p in logs.iterdir()) == ["other.jsonl"]
    assert (tmp_path / "escape").exists()
    assert RS.archive_previous_run(out, logs, stamp="20260101-000000") is None  # nothing left to move
    (out / "stage_1").mkdir()
    assert RS.archive_previous_run(out, logs, stamp="20260101-000000") == out / "previous_run_20260101-000000_1"



def test_killed_fresh_run_is_not_mistaken_for_the_old_run(tmp_path, capsys):
    """--RESUME=False over a finished run, killed inside stage 1, then a plain rerun: the
    rerun continues the new run (stage 1), not the old one (all 5 stages done)."""
    out, logs = tmp_path / "out", tmp_path / "logs"
    make_old_run(out, logs, run_cfg(tmp_path))
    state = RS.start_run(run_cfg(tmp_path, "--RESUME=False"))
    assert "RESUME=False: the previous run" in capsys.readouterr().out
    assert state["next_stage"] == 1 and state["stages"] == []
    assert json.loads((out / "curriculum_state.json").read_text()) == state  # recorded before any training
    assert not any(out.glob("stage_[0-9]*")) and not (out / "adapter_model.safetensors").exists()
    save_checkpoint(out / "stage_1" / "checkpoints", 2)  # killed after one step checkpoint
    rerun = RS.start_run(run_cfg(tmp_path))
    assert rerun["next_stage"] == 1 and rerun["stages"] == []
    assert RS.last_checkpoint(out / "stage_1" / "checkpoints") == str(out / "stage_1" / "checkpoints" / "checkpoint-2")
    with pytest.raises(SystemExit, match="different configuration"):
        RS.start_run(run_cfg(tmp_path, "--SEED=1"))  # and a resume inside stage 1 checks the settings too



def test_horizon_one_keeps_the_single_step_fingerprint():
    cfg = T.build_config([], profile="cpu")
    assert "HORIZON" not in RS.run_settings(cfg)  # runs recorded before episode mode still resume
    episodic = T.build_config(["--HORIZON=3"], profile="cpu")
    assert RS.run_settings(episodic)["HORIZON"] == 3
    assert RS.config_fingerprint(RS.run_settings(cfg)) != RS.config_fingerprint(RS.run_settings(episodic))
    recorded = RS.fresh_state(episodic)
    assert "HORIZON 3 -> '(not recorded)'" in RS.settings_mismatch(recorded, cfg)



def test_run_paths_spell_every_file_of_a_run_once(tmp_path):
    paths = RS.RunPaths.of(run_cfg(tmp_path))
    assert paths.state == tmp_path / "out" / "curriculum_state.json"
    assert paths.stage(0) == tmp_path / "out" / "stage_0" and paths.checkpoints(3) == tmp_path / "out" / "stage_3" / "checkpoints"
    assert paths.merged == tmp_path / "out" / "merged"
    assert [paths.generations, paths.train_history, paths.eval_episodes] == [tmp_path / "logs" / n for n in RS.RUN_LOGS]
    assert paths.tensorboard(2) == tmp_path / "logs" / "tensorboard" / "stage_2"


def test_a_quiet_lookup_skips_a_torn_checkpoint_without_a_line(tmp_path, capsys):
    """main() asks once whether a stage was begun (quiet) and the stage asks again to
    resume: the skipped checkpoint is reported once, by the second."""
    save_checkpoint(tmp_path, 2)
    (save_checkpoint(tmp_path, 4) / "trainer_state.json").write_text("")
    assert RS.last_checkpoint(tmp_path, quiet=True) == str(tmp_path / "checkpoint-2")
    assert "incomplete" not in capsys.readouterr().out
    assert RS.last_checkpoint(tmp_path) == str(tmp_path / "checkpoint-2")
    assert capsys.readouterr().out.count("checkpoint-4 is incomplete") == 1
