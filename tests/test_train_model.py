"""Tests of scripts/train_trl.py that need a real (tiny, random, offline) model: precision
and trainable weights, LoRA adapters saved, reloaded and merged, the base-model evaluation.

The tiny CPU-profile model is built once per module (about 5 s, nothing downloaded); no
test here runs a training loop longer than one optimizer step.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import train_trl as T  # noqa: E402
import lifestack.training.models as MD  # noqa: E402
import lifestack.training.run_evaluation as EV  # noqa: E402
import lifestack.training.warm_start as WS  # noqa: E402
import lifestack.scenarios as SC  # noqa: E402


@pytest.fixture(scope="module")
def tiny_base(tiny_model_dir) -> Path:
    """The session's tiny model (tests/conftest.py); no test here depends on torch's global
    generator, so the order the test files ran in does not matter."""
    return tiny_model_dir


def cfg_for(profile: str, tmp: Path, base: Path, *argv: str) -> dict:
    return T.build_config([f"--OUTPUT_DIR={tmp / 'out'}", f"--LOG_DIR={tmp / 'logs'}", f"--CPU_BASE_DIR={base}", *argv],
                          profile=profile)


def input_batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, 1900, (2, 24), generator=g)


def one_step(model, lr: float, precision: str) -> tuple[list, list]:
    """One AdamW step (TRL's optimizer; weight decay 0, its default) under autocast in
    ``precision``; returns the trainable tensors before and after, and their gradients."""
    params = [p for p in model.parameters() if p.requires_grad]
    before = [p.detach().clone() for p in params]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    ids = input_batch()
    with torch.autocast("cpu", dtype=MD.torch_dtype(precision), enabled=precision != "fp32"):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    return [(b, p.detach(), p.grad) for b, p in zip(before, params)]


def changed_share(steps) -> float:
    """Share of the entries with a non-zero gradient whose value changed."""
    moved = total = 0
    for before, after, grad in steps:
        if grad is None:
            continue
        mask = grad != 0
        total += int(mask.sum())
        moved += int(((after != before) & mask).sum())
    assert total > 0
    return moved / total


# ------------------------------------------------------------------------------------
# precision: trainable weights are fp32, and one step at the configured rate moves them
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_cpu_profile_one_step_moves_every_trainable_weight(tmp_path, tiny_base, lora):
    cfg = cfg_for("cpu", tmp_path, tiny_base, f"--USE_LORA={lora}")
    model, _tok = MD.load_model(cfg, banner=False)
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert trainable and all(p.dtype == torch.float32 for p in trainable)
    assert hasattr(model, "peft_config") == lora
    assert changed_share(one_step(model, cfg["LEARNING_RATES"][0], MD.device_precision(cfg))) == 1.0


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_gpu_profile_loading_on_cpu_one_step_at_5e_6_moves_every_trainable_weight(tmp_path, tiny_base, precision, lora):
    """The peft profile's loading code (run on the CPU device): full fine-tuning loads fp32
    master weights; a LoRA keeps its frozen base in the compute precision and its adapters
    in fp32. At the default rate (5e-6) every trainable entry with a gradient moves."""
    cfg = cfg_for("peft", tmp_path, tiny_base, f"--USE_LORA={lora}")
    lr = cfg["LEARNING_RATES"][0]
    assert lr == 5e-6
    model = MD.load_transformers_model(str(tiny_base), cfg, precision, "cpu")
    trainable = [p for p in model.parameters() if p.requires_grad]
    frozen = [p for p in model.parameters() if not p.requires_grad]
    assert trainable and all(p.dtype == torch.float32 for p in trainable)
    if lora:
        assert frozen and all(p.dtype == MD.torch_dtype(precision) for p in frozen)
    else:
        assert not frozen
    assert changed_share(one_step(model, lr, precision)) == 1.0


def test_bf16_weights_lose_most_updates_at_5e_6(tiny_base):
    """Why trained weights are fp32: the same step on bf16 weights leaves most of them as
    they were (a bf16 weight near 0.02 moves in steps of ~1e-4; Adam's first step is 5e-6)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_base), dtype=torch.bfloat16)
    share = changed_share(one_step(model, 5e-6, "bf16"))
    assert share < 0.2, share  # measured: 0.079


def test_device_precision_uses_the_compute_capability(monkeypatch, tmp_path, tiny_base):
    cfg = cfg_for("peft", tmp_path, tiny_base)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)  # what a T4 answers
    for capability, expected in (((7, 5), "fp16"), ((8, 0), "bf16"), ((9, 0), "bf16")):
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a, c=capability: c)
        assert MD.device_precision(cfg) == expected
    assert MD.device_precision({**cfg, "_PROFILE": "cpu"}) == "fp32"  # the CPU profile, even on a GPU machine
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert MD.device_precision(cfg) == "fp32"


@pytest.mark.parametrize("precision, bf16, fp16", [("fp32", False, False), ("bf16", True, False), ("fp16", False, True)])
def test_grpo_config_autocast_flags_follow_the_precision(monkeypatch, tmp_path, tiny_base, precision, bf16, fp16):
    cfg = cfg_for("cpu", tmp_path, tiny_base)
    monkeypatch.setattr(T, "device_precision", lambda _cfg: precision)
    args = T.grpo_config(cfg, 1, tmp_path / "ckpt")
    assert (args.bf16, args.fp16) == (bf16, fp16)


# ------------------------------------------------------------------------------------
# LoRA on CPU: adapters saved, resumed, merged; the base evaluation without the adapter
# ------------------------------------------------------------------------------------
def lora_model(tmp_path, base):
    """The CPU profile with --USE_LORA=True, adapters moved away from their zero start.
    Both adapter matrices are drawn from this function's own generator, so the adapter is
    the same whichever tests ran before (PEFT initialises lora_A from torch's global one)."""
    cfg = cfg_for("cpu", tmp_path, base, "--USE_LORA=True")
    model, tok = MD.load_model(cfg, banner=False)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_A" in name:
                param.copy_(torch.randn(param.shape, generator=g) / param.shape[-1] ** 0.5)
            elif "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=g) * 0.5)
    return cfg, model, tok


def logits(model):
    model.eval()
    with torch.no_grad():
        return model(input_ids=input_batch(3)).logits.float()


def test_lora_stage_save_resumes_the_same_adapter(tmp_path, tiny_base):
    cfg, model, tok = lora_model(tmp_path, tiny_base)
    stage = tmp_path / "out" / "stage_2"
    MD.save_model(model, tok, stage)
    assert (stage / "adapter_config.json").exists() and (stage / "adapter_model.safetensors").exists()
    assert not (stage / "model.safetensors").exists()  # an adapter, not a full copy
    resumed, _tok = MD.load_model(cfg, init_from=stage, banner=False)
    assert torch.allclose(logits(resumed), logits(model))
    trainable = {n for n, p in resumed.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)


def test_save_merged_loads_with_plain_transformers_and_matches_base_plus_adapter(tmp_path, tiny_base):
    from transformers import AutoModelForCausalLM

    cfg, model, tok = lora_model(tmp_path, tiny_base)
    expected = logits(model)
    assert not torch.allclose(expected, logits(AutoModelForCausalLM.from_pretrained(str(tiny_base))))  # the adapter matters
    assert MD.save_merged(model, tok, tmp_path / "merged", cfg, adapter_dir=tmp_path / "unused") == "merge"
    merged = AutoModelForCausalLM.from_pretrained(str(tmp_path / "merged"))
    assert not hasattr(merged, "peft_config")
    # equal up to float32 rounding: W + BA applied once vs x W + (x A) B, on logits of this scale
    assert torch.allclose(logits(merged), expected, rtol=1e-5, atol=1e-5 * float(expected.abs().max()))
    assert torch.allclose(logits(model), expected)  # the trained model itself still carries its adapter


def test_save_merged_over_a_quantised_base_reloads_the_base_in_16_bit(tmp_path, tiny_base):
    """A 4-bit base cannot be built on CPU; the flag bitsandbytes sets stands in for it."""
    from transformers import AutoModelForCausalLM

    cfg, model, tok = lora_model(tmp_path, tiny_base)
    expected = logits(model)
    MD.save_model(model, tok, tmp_path / "out")  # the final save: the adapter the merge reads
    model.get_base_model().is_loaded_in_4bit = True
    assert MD.merge_method(model) == "reload_16bit"
    assert MD.save_merged(model, tok, tmp_path / "merged", cfg, adapter_dir=tmp_path / "out") == "reload_16bit"
    merged = AutoModelForCausalLM.from_pretrained(str(tmp_path / "merged"))
    assert merged.dtype == torch.float16  # 16-bit weights (fp16: this machine has no bf16 GPU)
    assert torch.allclose(logits(merged.float()), expected, atol=2e-2, rtol=2e-2)


class FakeUnslothModel:
    """What Unsloth returns: a PEFT model that also has save_pretrained_merged."""

    def __init__(self):
        self.calls = []

    def merge_and_unload(self):
        raise AssertionError("an Unsloth model is merged by Unsloth, not by PEFT")

    def save_pretrained_merged(self, directory, tokenizer, save_method):
        self.calls.append((directory, tokenizer, save_method))


class FakePeft:
    def __init__(self, base):
        self.base = base

    def merge_and_unload(self):
        return self.base

    def get_base_model(self):
        return self.base


def test_merge_method_decision_with_fake_models(tmp_path):
    from types import SimpleNamespace

    unsloth = FakeUnslothModel()
    assert MD.merge_method(unsloth) == "unsloth_merged_16bit"
    assert MD.merge_method(SimpleNamespace(module=unsloth)) == "unsloth_merged_16bit"  # DDP-wrapped
    cfg = T.build_config([], profile="unsloth")
    assert MD.save_merged(unsloth, "TOKENIZER", tmp_path / "merged", cfg, tmp_path) == "unsloth_merged_16bit"
    assert unsloth.calls == [(str(tmp_path / "merged"), "TOKENIZER", "merged_16bit")]
    four_bit = SimpleNamespace(is_loaded_in_4bit=True, config=SimpleNamespace())
    eight_bit = SimpleNamespace(is_loaded_in_8bit=True, config=SimpleNamespace())
    bnb_config = SimpleNamespace(config=SimpleNamespace(quantization_config={"load_in_4bit": True}))
    plain = SimpleNamespace(config=SimpleNamespace(quantization_config=None))
    assert [MD.merge_method(FakePeft(b)) for b in (four_bit, eight_bit, bnb_config, plain)] == [
        "reload_16bit", "reload_16bit", "reload_16bit", "merge"]
    full = SimpleNamespace(config=SimpleNamespace())  # full-weight training: no adapter
    assert MD.merge_method(full) is None
    assert MD.save_merged(full, "TOKENIZER", tmp_path / "none", cfg, tmp_path) is None
    assert not (tmp_path / "none").exists()


def test_base_model_evaluation_runs_with_the_adapter_disabled(tmp_path, tiny_base, monkeypatch):
    from transformers import AutoModelForCausalLM

    cfg, model, tok = lora_model(tmp_path, tiny_base)
    cfg.update(PLOT_PATH=str(tmp_path / "curve.png"), CURVES_PATH=str(tmp_path / "curves.png"), N_EVAL_EPISODES=2)
    seen = []

    def fake_episodes(m, _tok, _cfg, n, seed, _run):
        seen.append(logits(m))
        return [{"episode": i, "difficulty": 1, "domain": "flight_crisis", "seed": seed + i, "reward": 0.0, "steps": 1,
                 "outcome": None, "valid_json_rate": 0.0} for i in range(n)]

    monkeypatch.setattr(EV, "run_episodes", fake_episodes)
    monkeypatch.setattr(EV, "load_model", lambda *a, **k: pytest.fail("the base must not be reloaded for a LoRA model"))
    EV.evaluate_and_plot(model, tok, cfg, T.RUN, stages=[])
    trained, base = seen
    assert torch.allclose(trained, logits(model))
    assert torch.allclose(base, logits(AutoModelForCausalLM.from_pretrained(str(tiny_base))), atol=1e-6)
    assert not torch.allclose(trained, base)
    assert torch.allclose(logits(model), trained)  # the adapter is back on afterwards


# ------------------------------------------------------------------------------------
# warm start: the learning check's imitation control continues it on unseen scenarios
# ------------------------------------------------------------------------------------
def test_warm_start_takes_its_batch_size_and_skips_the_first_demonstrations(tmp_path, tiny_base, monkeypatch):
    cfg = cfg_for("cpu", tmp_path, tiny_base, "--WARM_START_SFT_STEPS=3", "--SEED=5")
    model, tok = MD.load_model(cfg, banner=False)
    seeds, widths = [], []
    real = SC.sample_scenario
    monkeypatch.setattr(WS, "sample_scenario", lambda seed, difficulty: seeds.append(seed) or real(seed, difficulty))
    model.register_forward_hook(lambda module, args, kwargs, out: widths.append(kwargs["input_ids"].shape[0]),
                                with_kwargs=True)
    default = WS.warm_start(model, tok, cfg)
    assert len(default) == 3 and sum(widths) == 3 * 4  # on a CPU each demonstration runs alone (unpadded)
    assert seeds == [5 + 5_000_000 + i for i in range(64)]  # at least 64 demonstrations, from the first
    seeds.clear(), widths.clear()
    later = WS.warm_start(model, tok, {**cfg, "WARM_START_SFT_STEPS": 40}, batch_size=8, first_demo=1000)
    assert len(later) == 40 and sum(widths) == 40 * 8
    assert seeds == [5 + 5_000_000 + 1000 + i for i in range(80)]  # 40 x 8 / 4 new scenarios, none the warm start saw
    assert all(math.isfinite(x) for x in default + later)
