"""lifestack.training.fast_cpu: the CPU profile's shortcuts compute what the model's own
paths compute, on the tiny random model."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import lifestack.training.fast_cpu as FC  # noqa: E402
from lifestack.rollout import left_padded  # noqa: E402


@pytest.fixture()
def model(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    m = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
    with torch.no_grad():  # random weights far from 0, so that the logits vary
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return m


def test_distinct_rows_finds_first_occurrences_in_order():
    rows = torch.tensor([[1, 2], [3, 4], [1, 2], [5, 6], [3, 4]])
    first, inverse = FC.distinct_rows(rows)
    assert first.tolist() == [0, 1, 3] and inverse.tolist() == [0, 1, 0, 2, 1]
    assert FC.distinct_rows(torch.tensor([[1, 2], [2, 1]])) is None


def test_shared_prefill_samples_what_generate_samples(model, tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in ("The week: flight delayed, review due", "Budget")]
    ids, mask = left_padded([p for p in prompts for _ in range(3)], tok.pad_token_id)
    model.eval()
    kwargs = dict(input_ids=ids, attention_mask=mask, max_new_tokens=10, do_sample=True, temperature=0.7, top_k=0,
                  pad_token_id=tok.pad_token_id, eos_token_id=None)
    torch.manual_seed(3)
    plain = model.generate(**kwargs)
    FC.share_generation_prefill(model)
    FC.share_generation_prefill(model)  # idempotent
    cache = FC.shared_prefill_cache(model.forward, model.config, ids, mask)
    assert cache is not None and cache.get_seq_length() == ids.size(1) - 1
    torch.manual_seed(3)
    shared = model.generate(**kwargs)
    assert torch.equal(plain, shared)
    assert FC.shared_prefill_cache(model.forward, model.config, ids[::3], mask[::3]) is None  # distinct rows


def test_generate_calls_it_cannot_share_go_to_generate(model, monkeypatch):
    FC.share_generation_prefill(model)
    monkeypatch.setattr(FC, "shared_prefill_cache", lambda *a, **k: pytest.fail("not a plain call"))
    ids = torch.tensor([[5, 6, 7], [5, 6, 7]])
    mask = torch.ones_like(ids)
    model.eval()
    model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=2, do_sample=False, num_beams=2,
                   pad_token_id=0, eos_token_id=None)
    model.generate(ids, attention_mask=mask, max_new_tokens=2, do_sample=False, pad_token_id=0, eos_token_id=None)



def test_the_cpu_profiles_trainer_prefills_each_prompt_once(tmp_path, tiny_model_dir, monkeypatch):
    """A real GRPO step of the CPU profile: no gradient checkpointing (TRL's default would
    drop the prefill cache), and generation prefills the group's prompt once."""
    import train_trl as T
    from script_run import fresh_run_context
    from lifestack.training.models import load_model
    from lifestack.training.run_state import RunPaths

    fresh_run_context(monkeypatch, tmp_path / "logs", str(tmp_path / "fb.sqlite3"))
    cfg = T.build_config([f"--OUTPUT_DIR={tmp_path / 'out'}", f"--LOG_DIR={tmp_path / 'logs'}",
                          f"--CPU_BASE_DIR={tiny_model_dir}", "--N_STAGES=1", "--N_PROMPTS_PER_STAGE=1",
                          "--PER_DEVICE_BATCH_SIZE=4", "--MAX_COMPLETION_LENGTH=8", "--REPORT_TO=none"], profile="cpu")
    assert T.grpo_config(cfg, 1, tmp_path / "ck").gradient_checkpointing is False
    model, tok = load_model(cfg, banner=False)
    prefilled = []
    real_prefill = FC.shared_prefill_cache
    monkeypatch.setattr(FC, "shared_prefill_cache", lambda *a, **k: prefilled.append(real_prefill(*a, **k)) or prefilled[-1])
    T.RUN.configure(cfg)
    try:
        trainer = T.stage_trainer(model, tok, cfg, 1, T.generate_dataset(1, 1, seed=3), RunPaths.of(cfg))
        trainer.train()
    finally:
        T.RUN.log.close()
    assert prefilled and all(cache is not None for cache in prefilled)
