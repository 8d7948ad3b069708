"""End-to-end: the real GRPO curriculum on the CPU profile (tiny model, TRL's GRPOTrainer).

Slow (about a minute each); they run in CI. Every run happens in a temporary directory
through the script's command line, exactly as a user starts it.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lifestack.training.run_state import last_checkpoint

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "train_trl.py"
sys.path.insert(0, str(ROOT / "scripts"))
import eval_stages as ES  # noqa: E402
pytestmark = pytest.mark.slow

SMALL = [
    "--DEVICE_PROFILE=cpu", "--N_PROMPTS_PER_STAGE=4", "--N_EVAL_PROMPTS=2", "--N_EVAL_EPISODES=4",
    "--MAX_COMPLETION_LENGTH=24", "--WARM_START_SFT_STEPS=2", "--SAVE_STEPS=2", "--LOG_INTERVAL=3",
    "--PER_DEVICE_BATCH_SIZE=4",
]


def run_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               LIFESTACK_FEEDBACK_DB=str(tmp / "feedback.sqlite3"), PYTHONUNBUFFERED="1")
    return env


def train(tmp: Path, *extra: str, timeout: int = 600) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(SCRIPT), *SMALL, f"--CPU_BASE_DIR={tmp / 'base'}", *extra]
    proc = subprocess.run(cmd, cwd=tmp, env=run_env(tmp), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def read_jsonl(path: Path) -> list[dict]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]  # raises on any invalid line


def test_curriculum_runs_end_to_end_and_resumes_at_next_stage(tmp_path):
    first = train(tmp_path, "--N_STAGES=2")
    out = tmp_path / "lifestack_model"
    assert "CPU PROFILE: PIPELINE CHECK" in first.stdout
    setup = next(line for line in first.stdout.splitlines() if line.startswith("[setup] profile cpu"))
    threads = int(setup.split(" CPU threads")[0].rsplit(" ", 1)[1])
    # only a one-thread CPU run repeats bit for bit: a run with more threads says how to get one
    assert ("repeatable with OMP_NUM_THREADS=1" in setup) == (threads > 1)
    for stage in (1, 2):
        assert (out / f"stage_{stage}" / "config.json").exists()
        assert (out / f"stage_{stage}" / "tokenizer_config.json").exists()
        assert not (out / f"stage_{stage}" / "checkpoints").exists()  # spent step checkpoints removed
    assert (out / "model.safetensors").exists() and (out / "tokenizer_config.json").exists()
    state = json.loads((out / "curriculum_state.json").read_text())
    assert state["finished"] and state["next_stage"] == 3 and len(state["stages"]) == 2
    for decision in state["stages"]:
        assert set(decision["reward_means"]) == {
            "reward_format_fn", "reward_plausibility_fn", "reward_task_success_fn",
            "reward_milestone_fn", "reward_reasoning_fn", "reward_human_feedback_fn"}
        assert decision["advance"] == (decision["mean_task_reward"] > 0.6 and decision["difficulty"] < 5)
        assert decision["steps"] == 4
        integrity = decision["integrity"]  # the reward-integrity watch ran through the real rewards
        assert integrity["margin"] > 0 and integrity["closest_hack"] in integrity["hack_margins"]
        assert integrity["completions"] > 0 and set(integrity["signature_rates"]) >= {"unparseable", "keyword_list"}
        assert all(d["answers"] >= d["distinct"] >= 1 for d in decision["diversity"].values())
    assert "[stage 1] difficulty" in first.stdout and "[stage 2] difficulty" in first.stdout
    assert "[integrity] stage 1 | honest - best hack +" in first.stdout and "[diversity] stage 1 | " in first.stdout

    logs = tmp_path / "training_logs"
    gens = read_jsonl(logs / "generations.jsonl")
    assert gens, "no generation was logged"
    for g in gens:
        assert {"step", "stage", "difficulty", "prompt_head", "completion", "action", "task_reward",
                "task_breakdown", "grpo_reward", "grpo_rewards"} <= set(g)
        assert -1.0 <= g["task_reward"] <= 1.0 and math.isfinite(g["grpo_reward"])
    history = read_jsonl(logs / "train_history.jsonl")
    assert len(history) == 8 and all("rewards/reward_task_success_fn/mean" in h for h in history)
    episodes = read_jsonl(logs / "eval_episodes.jsonl")
    assert sorted({e["model"] for e in episodes}) == ["base", "trained"] and len(episodes) == 8
    assert [e["difficulty"] for e in episodes if e["model"] == "trained"] == [1, 2, 3, 4]

    from PIL import Image

    assert (out / "stage_0" / "config.json").exists()  # the warm-started model GRPO started from
    assert "trained" in first.stdout and "vs warm-started model (GRPO's start)" in first.stdout
    # the paired change printed is the one the run's own episodes give, start for start
    change = ES.paired_rows([e for e in episodes if e["model"] == "base"], [e for e in episodes if e["model"] == "trained"])
    assert f"[eval] trained - start, paired over 4 starts: {ES.paired_line(change)}" in first.stdout
    assert "This model minus warm-started model (GRPO's start), paired over the same 4 starts" in (out / "README.md").read_text()
    for png in ("grpo_reward_curve.png", "grpo_training_curves.png", "grpo_curriculum.png"):
        with Image.open(tmp_path / png) as im:
            im.verify()
            assert im.format == "PNG"

    # A rerun with more stages resumes after stage 2 and trains stage 3 only.
    second = train(tmp_path, "--N_STAGES=3")
    assert "resuming after stage 2" in second.stdout
    assert "[stage 3/3]" in second.stdout and "[stage 1/3]" not in second.stdout
    state = json.loads((out / "curriculum_state.json").read_text())
    assert [d["stage"] for d in state["stages"]] == [1, 2, 3] and state["finished"]

    # scripts/eval_stages.py replays the final evaluation for every saved stage: on the
    # trainer's own evaluation seed it reproduces the [eval] figures of GRPO's start and the final model.
    saved = tmp_path / "stages.json"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "eval_stages.py"), "--seeds", "2", "--json", str(saved),
                           "--", *SMALL, f"--CPU_BASE_DIR={tmp_path / 'base'}"],
                          cwd=tmp_path, env=run_env(tmp_path), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = {ln.split(":")[0]: ln for ln in proc.stdout.splitlines() if ": mean " in ln}
    assert list(lines) == ["stage_0", "stage_1", "stage_2", "stage_3", "final"]
    per_difficulty = [ln for ln in proc.stdout.splitlines() if "successes per difficulty" in ln]
    assert len(per_difficulty) == 5 and all(sum(int(x.split("/")[1]) for x in ln.split(": ")[1].split(", ")) == 8
                                            for ln in per_difficulty)  # 2 seeds of 4 episodes each
    episodes = read_jsonl(logs / "eval_episodes.jsonl")
    for name, model in (("stage_0", "base"), ("final", "trained")):
        mean = sum(e["reward"] for e in episodes if e["model"] == model) / 4
        win = sum(e["outcome"] == "success" for e in episodes if e["model"] == model) / 4
        assert lines[name].split("per seed ")[1].split(",")[0] == f"{mean:+.3f} ({win:.0%})"
    # GRPO's paired change over the 8 starts, and the saved episodes it came from
    doc = json.loads(saved.read_text())
    assert list(doc["models"]) == ["stage_0", "stage_1", "stage_2", "stage_3", "final"]
    change = ES.paired_rows(doc["models"]["stage_0"], doc["models"]["final"])
    assert f"final - stage_0, paired over 8 starts: {ES.paired_line(change)}" in proc.stdout


def test_interrupted_stage_resumes_from_step_checkpoint(tmp_path):
    cmd = [sys.executable, str(SCRIPT), *SMALL, f"--CPU_BASE_DIR={tmp_path / 'base'}", "--N_STAGES=1",
           "--N_PROMPTS_PER_STAGE=8", "--N_EVAL_EPISODES=2"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=run_env(tmp_path), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    ckpts = tmp_path / "lifestack_model" / "stage_1" / "checkpoints"

    def whole_checkpoint_before_the_last_step() -> bool:
        # any of checkpoint-2/4/6: the Trainer keeps one (save_total_limit=1), so waiting for
        # checkpoint-2 alone races the rotation that deletes it when checkpoint-4 is saved
        newest = last_checkpoint(ckpts, quiet=True)  # its state file is written last: the checkpoint is whole
        return newest is not None and int(newest.rsplit("-", 1)[1]) < 8

    deadline = time.time() + 400
    try:
        while time.time() < deadline and proc.poll() is None:
            if whole_checkpoint_before_the_last_step():
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the run ended before it could be interrupted"
        os.killpg(proc.pid, signal.SIGKILL)  # a hard interruption, as a preempted VM would
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    state = json.loads((tmp_path / "lifestack_model" / "curriculum_state.json").read_text())
    assert state["next_stage"] == 1 and state["stages"] == [] and state["fingerprint"]  # written before training

    # and a newer checkpoint the kill cut short while saving (its state file written last, empty)
    whole = int(last_checkpoint(ckpts, quiet=True).rsplit("-", 1)[1])
    torn = ckpts / f"checkpoint-{whole + 1}"
    torn.mkdir(exist_ok=True)
    (torn / "trainer_state.json").write_text("")

    resumed = train(tmp_path, "--N_STAGES=1", "--N_PROMPTS_PER_STAGE=8", "--N_EVAL_EPISODES=2")
    assert resumed.stdout.count(f"{torn.name} is incomplete") == 1  # said once, where the stage resumes
    assert f"resuming from lifestack_model/stage_1/checkpoints/checkpoint-{whole}\n" in resumed.stdout
    # the stage's on-policy prompts are played by GRPO's start again, not by the base model
    assert "[setup] resuming after stage 0 from lifestack_model/stage_0\n" in resumed.stdout
    state = json.loads((tmp_path / "lifestack_model" / "curriculum_state.json").read_text())
    assert state["finished"] and state["stages"][0]["steps"] == 8


def test_two_process_data_parallel_training_with_torchrun(tmp_path):
    """`torchrun --nproc_per_node 2` (gloo on CPU): both ranks train, rank 0 alone writes."""
    torchrun = Path(sys.executable).with_name("torchrun")
    with socket.socket() as s:  # a free port: a fixed one may be held by another run
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [str(torchrun), "--nproc_per_node", "2", "--master_port", str(port), str(SCRIPT), *SMALL,
           f"--CPU_BASE_DIR={tmp_path / 'base'}", "--N_STAGES=1", "--N_PROMPTS_PER_STAGE=4", "--N_EVAL_EPISODES=2"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=run_env(tmp_path), capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "world size 2" in out
    # 4 prompts x 4 generations over 2 ranks of 4 completions each: 2 optimizer steps per rank
    assert "[rank 0] stage 1: 2 optimizer steps done" in out
    assert "[rank 1] stage 1: 2 optimizer steps done" in out
    assert out.count("[stage 1] difficulty") == 1  # the per-stage summary comes from rank 0 only
    state = json.loads((tmp_path / "lifestack_model" / "curriculum_state.json").read_text())
    assert state["finished"] and state["stages"][0]["steps"] == 2
    gens = read_jsonl(tmp_path / "training_logs" / "generations.jsonl")  # one writer: every line intact
    assert gens and len({g["evaluation"] for g in gens}) == len(gens)
    assert (tmp_path / "grpo_reward_curve.png").exists()


def test_lora_on_cpu_saves_adapters_resumes_and_merges(tmp_path):
    """--USE_LORA=True is honoured on CPU: adapter files per stage and at the end, a rerun
    with one more stage resumes from the stage-2 adapter, and SAVE_MERGED writes a plain
    model with the logits of base + adapter. (35 s on the 2-core machine with
    OMP_NUM_THREADS=1, beside another training run.)"""
    lora = ("--USE_LORA=True", "--N_PROMPTS_PER_STAGE=8")
    first = train(tmp_path, *lora, "--N_STAGES=2")
    out = tmp_path / "lifestack_model"
    assert "[setup]   USE_LORA" not in first.stdout  # given on the command line: not replaced by the profile
    for d in (out, out / "stage_1", out / "stage_2"):
        assert (d / "adapter_config.json").exists() and (d / "adapter_model.safetensors").exists(), d
        assert not (d / "model.safetensors").exists(), d  # adapters, not full copies
    state = json.loads((out / "curriculum_state.json").read_text())
    assert [d["steps"] for d in state["stages"]] == [8, 8] and state["settings"]["USE_LORA"] is True
    assert "adapter_model.safetensors" in state["final_files"]

    second = train(tmp_path, *lora, "--N_STAGES=3", "--SAVE_MERGED=True")
    assert f"resuming after stage 2 from {Path('lifestack_model') / 'stage_2'}" in second.stdout
    assert "[stage 3/3]" in second.stdout and "[stage 1/3]" not in second.stdout and "[stage 2/3]" not in second.stdout
    assert "[warm start]" not in second.stdout
    state = json.loads((out / "curriculum_state.json").read_text())
    assert [d["stage"] for d in state["stages"]] == [1, 2, 3] and state["finished"]
    assert (out / "stage_3" / "adapter_model.safetensors").exists()
    assert "merged model (merge) saved to" in second.stdout

    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    ids = torch.tensor([[5, 17, 300, 42, 99, 1000, 7, 64]])
    with torch.no_grad():
        merged = AutoModelForCausalLM.from_pretrained(str(out / "merged")).eval()
        adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(tmp_path / "base")), str(out)).eval()
        assert torch.allclose(merged(input_ids=ids).logits, adapted(input_ids=ids).logits, atol=1e-5)


def test_episode_mode_runs_end_to_end_logs_episodes_and_resumes(tmp_path):
    """--HORIZON=3: every GRPO sample is a closed-loop episode (TRL rollout_func), logged as
    one line with its turns; the final evaluation plays conversations; a rerun resumes."""
    first = train(tmp_path, "--HORIZON=3", "--N_STAGES=1", "--N_PROMPTS_PER_STAGE=8", "--LOG_INTERVAL=2")
    assert "[episodes] HORIZON=3" in first.stdout and "[stage 1] difficulty" in first.stdout
    out, logs = tmp_path / "lifestack_model", tmp_path / "training_logs"
    state = json.loads((out / "curriculum_state.json").read_text())
    assert state["settings"]["HORIZON"] == 3 and state["finished"] and len(state["stages"]) == 1
    decision = state["stages"][0]
    assert decision["steps"] == 8 and all(math.isfinite(v) for v in decision["reward_means"].values())

    gens = read_jsonl(logs / "generations.jsonl")
    assert gens and all("turns" in g for g in gens)  # one line per episode, none per turn
    assert {g["phase"] for g in gens} >= {"train"}
    for g in gens:
        assert 1 <= len(g["turns"]) <= 3 and g["horizon"] == 3
        assert -1.0 <= g["task_reward"] <= 1.0 and math.isfinite(g["grpo_reward"]) and -1 <= g["outcome"]["score"] <= 1
        for t in g["turns"]:
            assert {"prompt_head", "completion", "action", "task_reward", "grpo_rewards", "observation_head"} <= set(t)
        assert all(t["observation_head"] for t in g["turns"][:-1])  # the env answered every turn but the last
    history = read_jsonl(logs / "train_history.jsonl")
    assert len(history) == 8 and all(math.isfinite(h["reward"]) for h in history)
    evals = read_jsonl(logs / "eval_episodes.jsonl")
    assert len(evals) == 8 and all(1 <= e["steps"] <= 3 and len(e["turn_rewards"]) == e["steps"] for e in evals)

    shown = subprocess.run([sys.executable, str(ROOT / "scripts" / "show_generations.py"), "--file",
                            str(logs / "generations.jsonl"), "--last", "1"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "turn 1:" in shown.stdout and "outcome:" in shown.stdout

    second = train(tmp_path, "--HORIZON=3", "--N_STAGES=2", "--N_PROMPTS_PER_STAGE=8", "--LOG_INTERVAL=2")
    assert "resuming after stage 1" in second.stdout and "[stage 2/2]" in second.stdout
    mismatch = subprocess.run([sys.executable, str(SCRIPT), *SMALL, f"--CPU_BASE_DIR={tmp_path / 'base'}",
                               "--N_STAGES=3", "--N_PROMPTS_PER_STAGE=8"], cwd=tmp_path, env=run_env(tmp_path),
                              capture_output=True, text=True, timeout=600)
    assert mismatch.returncode != 0 and "HORIZON" in mismatch.stdout + mismatch.stderr  # single-step can't resume it
