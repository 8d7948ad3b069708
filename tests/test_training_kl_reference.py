"""lifestack.training.kl_reference: with BETA > 0 the KL reference of every stage's
trainer is GRPO's start (stage_0 when the warm start saved it, else the base model), for
a LoRA model and for full weights; a second stage's trainer builds (TRL's "ref" adapter
of the first used to stop it); saves leave the reference out. Real GRPOTrainers over the
CPU profile's tiny model."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import train_trl as T  # noqa: E402
from script_run import isolated  # noqa: E402,F401  (autouse)

from lifestack.training.kl_reference import REF, load_checkpoint_policy  # noqa: E402
from lifestack.training.models import load_model, save_model, unwrap  # noqa: E402
from lifestack.training.run_state import RunPaths  # noqa: E402

torch = pytest.importorskip("torch")


def config(tmp_path, tiny_model_dir, *extra: str) -> dict:
    return T.build_config([f"--OUTPUT_DIR={tmp_path / 'out'}", f"--LOG_DIR={tmp_path / 'logs'}",
                           f"--CPU_BASE_DIR={tiny_model_dir}", "--N_PROMPTS_PER_STAGE=1", "--PER_DEVICE_BATCH_SIZE=4",
                           "--MAX_COMPLETION_LENGTH=8", "--REPORT_TO=none", *extra], profile="cpu")


def nudge(model, names: str, seed: int) -> None:
    """Move every trainable weight whose name holds ``names`` (as training would)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if names in name:
                p.add_(torch.randn(p.shape, generator=g) * 0.01)


def weights(model, part: str, strip: str = "") -> dict[str, torch.Tensor]:
    return {n.replace(strip, ""): p.detach().clone() for n, p in model.named_parameters() if part in n}


def stage_trainer(model, tok, cfg, stage: int):
    T.RUN.configure(cfg)
    return T.stage_trainer(model, tok, cfg, stage, T.generate_dataset(1, 1, seed=3), RunPaths.of(cfg))


def test_a_lora_models_reference_is_grpos_start_in_every_stage(tmp_path, tiny_model_dir):
    cfg = config(tmp_path, tiny_model_dir, "--USE_LORA=True", "--BETA=0.04")
    model, tok = load_model(cfg, banner=False)
    nudge(model, "lora_B", seed=1)  # the warm start
    paths = RunPaths.of(cfg)
    save_model(model, tok, paths.stage(0))
    start = weights(model, ".default.", strip=".default")
    for stage in (1, 2):  # the second stage's trainer used to stop on the first's "ref" adapter
        nudge(model, "lora_", seed=10 + stage)  # the stage before trained the policy on
        trainer = stage_trainer(model, tok, cfg, stage)
        core = unwrap(trainer.model)
        ref = weights(core, f".{REF}.", strip=f".{REF}")
        assert ref.keys() == start.keys() and ref
        assert all(torch.equal(ref[k], start[k]) for k in start)  # GRPO's start, not this stage's
        assert not all(torch.equal(ref[k], v) for k, v in weights(core, ".default.", strip=".default").items())
        assert not any(p.requires_grad for n, p in core.named_parameters() if f".{REF}." in n)
    save_model(core, tok, tmp_path / "saved")
    assert not (tmp_path / "saved" / REF).exists()  # the policy alone is saved, not its reference
    from safetensors.torch import load_file

    saved = load_file(str(tmp_path / "saved" / "adapter_model.safetensors"))
    assert saved and not any(REF in k for k in saved)


def test_a_lora_model_without_a_warm_start_is_held_to_the_base_model(tmp_path, tiny_model_dir):
    cfg = config(tmp_path, tiny_model_dir, "--USE_LORA=True", "--BETA=0.04")
    model, tok = load_model(cfg, banner=False)
    assert RunPaths.of(cfg).grpo_start() is None
    nudge(model, "lora_", seed=2)
    core = unwrap(stage_trainer(model, tok, cfg, 1).model)
    ref_b = [p for n, p in core.named_parameters() if f".{REF}." in n and "lora_B" in n]
    assert ref_b and all(not p.any() for p in ref_b)  # B = 0: the adapter adds nothing to the base model


def test_full_weights_reference_is_the_warm_start_not_the_random_base(tmp_path, tiny_model_dir):
    cfg = config(tmp_path, tiny_model_dir, "--BETA=0.04")
    model, tok = load_model(cfg, banner=False)
    name_before = model.config._name_or_path
    nudge(model, "", seed=3)  # the warm start, in memory only
    paths = RunPaths.of(cfg)
    save_model(model, tok, paths.stage(0))
    start = weights(model, "")
    nudge(model, "", seed=4)
    trainer = stage_trainer(model, tok, cfg, 2)
    ref = weights(trainer.ref_model, "")
    assert ref.keys() == start.keys()
    assert all(torch.allclose(ref[k], start[k]) for k in start)
    assert model.config._name_or_path == name_before  # pointed at stage_0 only while the trainer was built


def test_full_weights_without_a_warm_start_hold_to_the_base_model(tmp_path, tiny_model_dir):
    cfg = config(tmp_path, tiny_model_dir, "--BETA=0.04")
    model, tok = load_model(cfg, init_from=None, banner=False)
    base = weights(model, "")
    model.config._name_or_path = str(tmp_path / "out" / "stage_3")  # as after a resume from stage 3
    nudge(model, "", seed=5)
    ref = weights(stage_trainer(model, tok, cfg, 4).ref_model, "")
    assert all(torch.allclose(ref[k], base[k]) for k in base)


def test_beta_zero_builds_no_reference(tmp_path, tiny_model_dir):
    cfg = config(tmp_path, tiny_model_dir, "--USE_LORA=True")
    model, tok = load_model(cfg, banner=False)
    trainer = stage_trainer(model, tok, cfg, 1)
    assert trainer.ref_model is None and REF not in unwrap(trainer.model).peft_config


def test_a_lora_checkpoint_with_the_reference_resumes_its_trained_adapter(tmp_path, tiny_model_dir):
    """A step checkpoint holds the "ref" adapter in a subfolder, and transformers then loads
    only the subfolders on resume: the trained adapter must come back all the same."""
    from lifestack.training.run_state import last_checkpoint

    cfg = config(tmp_path, tiny_model_dir, "--USE_LORA=True", "--BETA=0.1", "--N_PROMPTS_PER_STAGE=2",
                 "--SAVE_STEPS=1", "--LEARNING_RATES=[0.01]", "--ON_POLICY_STATES=0.0")
    paths = RunPaths.of(cfg)
    model, tok = load_model(cfg, banner=False)
    nudge(model, "lora_B", seed=6)
    save_model(model, tok, paths.stage(0))
    start = weights(model, ".default.", strip=".default")
    trainer = stage_trainer(model, tok, cfg, 1)
    trainer.train()
    nudge(unwrap(trainer.model), ".default.", seed=7)  # a random model's rewards tie, so GRPO moved nothing: move it
    trainer._save_checkpoint(trainer.model, trial=None)  # the step checkpoint, as save_steps writes it
    trained = weights(unwrap(trainer.model), ".default.")
    checkpoint = last_checkpoint(paths.checkpoints(1), quiet=True)
    assert (Path(checkpoint) / REF).is_dir()  # the reference travels in the checkpoint's subfolder

    again, tok2 = load_model(cfg, init_from=paths.stage(0), banner=False)  # as main() resumes inside stage 1
    resumed = stage_trainer(again, tok2, cfg, 1)
    load_checkpoint_policy(resumed, checkpoint)
    resumed._load_from_checkpoint(checkpoint)  # what trainer.train(resume_from_checkpoint=...) does first
    after = weights(unwrap(resumed.model), ".default.")
    assert all(torch.equal(after[k], trained[k]) for k in trained)
    ref = weights(unwrap(resumed.model), f".{REF}.", strip=f".{REF}")
    assert ref.keys() == start.keys() and all(torch.equal(ref[k], start[k]) for k in start)  # still GRPO's start

