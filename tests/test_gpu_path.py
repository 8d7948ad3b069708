"""The trainer's unsloth profile, run for real on CPU under the Unsloth stand-in
(tests/unsloth_standin.py): ``scripts/train_trl.py``'s ``main`` loads the model through
``FastLanguageModel``, trains a GRPO stage with the patched trainer, evaluates held out,
plays the final evaluation and resumes, exactly as on a Colab GPU, with the behaviours of
Unsloth that broke it reproduced.

What must hold (issue: the Colab GPU path):
- every generate call outside GRPO's own pads left and runs in generation mode
  (``for_inference``), whatever padding side Unsloth's ``for_training`` left on the
  shared tokenizer;
- after an evaluation a model that was training is back in training mode through
  ``for_training`` (gradient checkpointing on), not a bare ``train()``;
- episode mode generates through the trainer module's (patched) unwrap, and the replaced
  loss sees the rollout's environment-token mask;
- an Unsloth without the masking fix is refused for HORIZON > 1 before a model loads;
  vLLM under the unsloth profile is refused by the configuration check.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")

from script_run import T, isolated  # noqa: E402,F401  (isolated: autouse, a fresh run context per test)
from unsloth_standin import install  # noqa: E402

from lifestack.training import run_evaluation as EV  # noqa: E402
from lifestack.training.checks import UNSLOTH_MASKING_FIX  # noqa: E402


def argv(tmp: Path, model_dir: Path, *extra: str) -> list[str]:
    return [
        "--DEVICE_PROFILE=unsloth", f"--MODEL_NAME={model_dir}", "--N_STAGES=1", "--N_PROMPTS_PER_STAGE=4",
        "--NUM_GENERATIONS=2", "--PER_DEVICE_BATCH_SIZE=4", "--MAX_COMPLETION_LENGTH=24", "--N_EVAL_PROMPTS=3",
        "--N_EVAL_EPISODES=2", "--INTEGRITY_PROMPTS=0", "--ON_POLICY_STATES=0.5", "--LORA_RANK=4", "--LORA_ALPHA=8",
        "--LEARNING_RATES=[1e-3]", "--SAVE_STEPS=1", "--REPORT_TO=none", f"--OUTPUT_DIR={tmp / 'out'}",
        f"--LOG_DIR={tmp / 'logs'}", f"--PLOT_PATH={tmp / 'curve.png'}", f"--CURVES_PATH={tmp / 'curves.png'}",
        f"--CURRICULUM_PLOT_PATH={tmp / 'curriculum.png'}", f"--FEEDBACK_DB={tmp / 'fb.sqlite3'}", *extra,
    ]


def assert_generation_was_correct(seen) -> None:
    outside = seen.outside_trainer()
    assert outside, "the evaluations generated nothing"
    bad = [g for g in outside if g["side"] not in ("left", "none") or not g["inference"]]
    assert not bad, f"{len(bad)} of {len(outside)} evaluation generate calls were not left-padded in inference mode: {bad[:3]}"
    # the trainer's own generations ran inside Unsloth's unwrap, which leaves the tokenizer right-padded
    assert seen.unwraps > 0 and seen.inside_trainer()


def test_a_grpo_stage_its_evaluations_and_resume_under_unsloth(tmp_path, tiny_model_dir, monkeypatch):
    seen = install(monkeypatch)
    modes = []
    evaluate_policy = EV.evaluate_policy

    def watched(model, tokenizer, *args, **kwargs):
        """The held-out evaluation: what the shared tokenizer says going in, and the mode after."""
        modes.append({"tokenizer_before": tokenizer.padding_side})
        out = evaluate_policy(model, tokenizer, *args, **kwargs)
        modes[-1].update(training_after=model.training, checkpointing_after=model._standin_checkpointing)
        return out

    monkeypatch.setattr(T, "evaluate_policy", watched)
    assert T.main(argv(tmp_path, tiny_model_dir)) == 0
    assert_generation_was_correct(seen)
    state = (tmp_path / "out" / "curriculum_state.json").read_text()
    assert '"finished": true' in state and (tmp_path / "out" / "stage_1" / "adapter_config.json").exists()
    assert modes and all(m["training_after"] is False for m in modes)  # it went in in inference mode

    # resume: stage 2 loads stage_1's adapter through FastLanguageModel and trains on
    before = len(seen.generates)
    assert T.main(argv(tmp_path, tiny_model_dir, "--N_STAGES=2")) == 0
    assert '"next_stage": 3' in (tmp_path / "out" / "curriculum_state.json").read_text()
    resumed = seen.generates[before:]
    assert resumed and all(g["side"] in ("left", "none") and g["inference"]
                           for g in resumed if not g["in_trainer_unwrap"])


def test_an_evaluation_gives_a_training_model_back_through_for_training(tmp_path, tiny_model_dir, monkeypatch):
    """The model mid-training (Unsloth's for_training: right padding, checkpointing on) is
    evaluated; generation pads left in inference mode, and afterwards checkpointing is back."""
    seen = install(monkeypatch)
    from lifestack.training.models import load_model

    cfg = T.build_config(argv(tmp_path, tiny_model_dir), profile="unsloth")
    model, tok = load_model(cfg)
    model.for_training()
    assert tok.padding_side == "right" and model._standin_checkpointing
    result = EV.evaluate_policy(model, tok, EV.held_out_prompts(4, None, 5), cfg, T.RUN)
    assert len(result["completions"]) == 4
    assert seen.generates and all(g["side"] in ("left", "none") and g["inference"] for g in seen.generates)
    assert model.training and model._standin_checkpointing  # for_training, not a bare train()


def test_episode_mode_generates_through_unsloths_unwrap_and_its_loss_masks_the_environment(tmp_path, tiny_model_dir,
                                                                                         monkeypatch):
    seen = install(monkeypatch)
    extra = ("--HORIZON=2", "--N_PROMPTS_PER_STAGE=2", "--PER_DEVICE_BATCH_SIZE=2", "--ON_POLICY_STATES=0.0",
             "--N_EVAL_PROMPTS=2", "--N_EVAL_EPISODES=1")
    assert T.main(argv(tmp_path, tiny_model_dir, *extra)) == 0
    turns = seen.inside_trainer()
    assert turns and all(g["side"] in ("left", "none") and g["inference"] for g in turns)
    masks = [row for m in seen.loss_masks if m is not None for row in m]
    assert masks, "the loss never saw the rollout's env_mask"
    assert any(0 in row for row in masks) and all(1 in row for row in masks)  # environment tokens masked, model's not
    assert_generation_was_correct(seen)


@pytest.mark.parametrize("version,zoo", [("2026.5.8", "2026.10.9"), ("2026.10.9", "2026.5.4")])
def test_an_unsloth_without_the_masking_fix_is_refused_for_episodes_before_a_model_loads(
        tmp_path, tiny_model_dir, monkeypatch, capsys, version, zoo):
    install(monkeypatch, version=version, zoo_version=zoo)

    def must_not_load(*a, **k):
        raise AssertionError("the model loaded")

    monkeypatch.setattr(T, "load_model", must_not_load)
    assert T.main(argv(tmp_path, tiny_model_dir, "--HORIZON=2")) == 2
    err = capsys.readouterr().err
    assert err.startswith("config error: HORIZON=2") and "env_mask" in err
    assert any(f"{name} {first}" in err for name, first in UNSLOTH_MASKING_FIX.items())


def test_vllm_under_the_unsloth_profile_is_refused_by_the_configuration_check(tmp_path, tiny_model_dir, capsys):
    assert T.main(argv(tmp_path, tiny_model_dir, "--USE_VLLM=True")) == 2
    assert capsys.readouterr().err.startswith("config error: USE_VLLM: the unsloth profile cannot use TRL's vLLM")
