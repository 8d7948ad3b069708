"""lifestack.training.fast_cpu: the CPU profile's shortcuts compute what the model's own
paths compute (up to float rounding), on the tiny random model."""

from __future__ import annotations

import copy
import inspect
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


def grpo_batch(pad_id: int, groups: int = 3, per_group: int = 4, seed: int = 0):
    """A GRPO-shaped batch: each of ``groups`` prompts (of different lengths, padded left)
    repeated ``per_group`` times, each row with its own completion (padded right), rows
    shuffled as TRL shuffles them."""
    g = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(3, 500, (n,), generator=g).tolist() for n in (37, 29, 41)[:groups]]
    rows = [p for p in prompts for _ in range(per_group)]
    prompt_ids, prompt_mask = left_padded(rows, pad_id)
    width = 11
    lengths = torch.randint(1, width + 1, (len(rows),), generator=g)
    completion = torch.randint(3, 500, (len(rows), width), generator=g)
    completion_mask = (torch.arange(width)[None, :] < lengths[:, None]).long()
    completion = completion.masked_fill(completion_mask == 0, pad_id)
    order = torch.randperm(len(rows), generator=g)
    ids = torch.cat([prompt_ids, completion], 1)[order]
    mask = torch.cat([prompt_mask, completion_mask], 1)[order]
    return ids, mask, width


def per_token_logps(logits, ids, width):
    """TRL's use of the logits: drop the last, keep the completion's, log-softmax."""
    logits = logits[:, :-1][:, -width:]
    return torch.log_softmax(logits.float(), -1).gather(-1, ids[:, -width:].unsqueeze(-1)).squeeze(-1)


def test_distinct_rows_finds_first_occurrences_in_order():
    rows = torch.tensor([[1, 2], [3, 4], [1, 2], [5, 6], [3, 4]])
    first, inverse = FC.distinct_rows(rows)
    assert first.tolist() == [0, 1, 3] and inverse.tolist() == [0, 1, 0, 2, 1]
    assert FC.distinct_rows(torch.tensor([[1, 2], [2, 1]])) is None


def test_the_shared_prefix_loss_and_its_gradient_equal_the_full_pass(model):
    ids, mask, width = grpo_batch(model.config.pad_token_id)
    model.train()
    results = []
    for shared in (False, True):
        model.zero_grad()
        if shared:
            logits = FC.shared_prefix_logits(model.forward, model.config, ids, mask, width + 1)
        else:
            logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=width + 1, use_cache=False).logits
        assert logits.shape == (ids.size(0), width + 1, model.config.vocab_size)
        logps = per_token_logps(logits, ids, width)
        valid = mask[:, -width:].bool()
        loss = -(logps * valid).sum() / valid.sum()
        loss.backward()
        results.append((logps[valid].detach(), [p.grad.clone() for p in model.parameters()]))
    (full, full_grads), (shared, shared_grads) = results
    assert torch.allclose(full, shared, atol=1e-5)
    for a, b in zip(full_grads, shared_grads):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-4)


def test_the_forward_wrapper_answers_trls_loss_call_and_passes_every_other_call(model, monkeypatch):
    signature = inspect.signature(model.forward).parameters
    FC.share_prompt_prefix(model)
    assert inspect.signature(model.forward).parameters.keys() == signature.keys()  # TRL reads logits_to_keep here
    FC.share_prompt_prefix(model)  # idempotent
    calls = []
    real = FC.shared_prefix_logits
    monkeypatch.setattr(FC, "shared_prefix_logits", lambda *a, **k: calls.append(a[-1]) or real(*a, **k))
    ids, mask, width = grpo_batch(model.config.pad_token_id)
    out = model(input_ids=ids, attention_mask=mask, logits_to_keep=width + 1, use_cache=False)
    assert calls == [width + 1] and out.logits.shape[1] == width + 1
    model(input_ids=ids, attention_mask=mask)  # not TRL's loss call: the model's own forward
    model(input_ids=ids, attention_mask=mask, logits_to_keep=width + 1)  # use_cache not False: its own forward
    assert calls == [width + 1]
    twin = copy.deepcopy(model)  # a copy's forward is bound to the copy
    assert twin.forward.__self__ is twin
    with torch.no_grad():
        for p in twin.parameters():
            p.zero_()
    assert not torch.equal(model(input_ids=ids, attention_mask=mask, logits_to_keep=width + 1, use_cache=False).logits,
                           twin(input_ids=ids, attention_mask=mask, logits_to_keep=width + 1, use_cache=False).logits)


def test_distinct_prompts_take_the_full_pass(model, monkeypatch):
    FC.share_prompt_prefix(model)
    ids, mask, width = grpo_batch(model.config.pad_token_id, per_group=1)
    assert FC.shared_prefix_logits(model.forward, model.config, ids, mask, width + 1) is None
    out = model(input_ids=ids, attention_mask=mask, logits_to_keep=width + 1, use_cache=False)
    assert out.logits.shape[1] == width + 1


def test_grouped_decode_attention_equals_sdpa_for_one_token():
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    class Module:
        num_key_value_groups = 2
        is_causal = True

    g = torch.Generator().manual_seed(1)
    query = torch.randn(3, 4, 1, 16, generator=g)
    key, value = torch.randn(3, 2, 9, 16, generator=g), torch.randn(3, 2, 9, 16, generator=g)
    mask = torch.ones(3, 1, 1, 9, dtype=torch.bool)
    mask[0, ..., :4] = False  # left padding
    mask[2, ..., :1] = False
    for m in (mask, None):
        ours, _ = FC.grouped_decode_attention(Module(), query, key, value, m, scaling=0.25)
        theirs, _ = sdpa_attention_forward(Module(), query, key, value, m, scaling=0.25)
        assert ours.shape == theirs.shape == (3, 1, 4, 16)
        assert torch.allclose(ours, theirs, atol=1e-6)


def test_decode_attention_generates_what_sdpa_generates(model, tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    rows = [tok("The week: flight delayed, code review due", add_special_tokens=False)["input_ids"],
            tok("Budget low", add_special_tokens=False)["input_ids"]]
    ids, mask = left_padded(rows, tok.pad_token_id)
    model.eval()
    kwargs = dict(input_ids=ids, attention_mask=mask, max_new_tokens=12, do_sample=False,
                  pad_token_id=tok.pad_token_id, eos_token_id=None)
    with torch.no_grad():
        plain = model.generate(**kwargs)
        scores_plain = model(input_ids=plain, attention_mask=torch.ones_like(plain)).logits
        FC.speed_up(model)
        assert model.config._attn_implementation == FC.DECODE_ATTENTION
        fast = model.generate(**kwargs)
        scores_fast = model(input_ids=plain, attention_mask=torch.ones_like(plain)).logits
    assert torch.equal(plain, fast)
    assert torch.allclose(scores_plain, scores_fast, atol=1e-5)


def test_a_saved_model_keeps_no_custom_attention(model, tmp_path):
    from transformers import AutoModelForCausalLM

    FC.speed_up(model)
    model.save_pretrained(tmp_path / "m")
    again = AutoModelForCausalLM.from_pretrained(str(tmp_path / "m"))
    assert again.config._attn_implementation == "sdpa"


def test_under_gradient_checkpointing_the_model_takes_its_own_full_pass(model, monkeypatch):
    """Checkpointed layers drop a cache (transformers' GradientCheckpointingLayer), so the
    shared prefix would be lost: the wrapper leaves such a model alone."""
    FC.share_prompt_prefix(model)
    model.gradient_checkpointing_enable()
    model.train()
    monkeypatch.setattr(FC, "shared_prefix_logits", lambda *a, **k: pytest.fail("not under checkpointing"))
    ids, mask, width = grpo_batch(model.config.pad_token_id)
    out = model(input_ids=ids, attention_mask=mask, logits_to_keep=width + 1, use_cache=False)
    assert out.logits.shape[1] == width + 1


def test_the_cpu_profiles_trainer_takes_the_shared_prefix_path(tmp_path, tiny_model_dir, monkeypatch):
    """A real GRPO step of the CPU profile: no gradient checkpointing (TRL's default would
    drop the prefix cache), generation prefills the group's prompt once, and the loss runs
    through the shared prefix."""
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
    assert model.config._attn_implementation == FC.DECODE_ATTENTION
    used, prefilled = [], []
    real, real_prefill = FC.shared_prefix_logits, FC.shared_prefill_cache
    monkeypatch.setattr(FC, "shared_prefix_logits", lambda *a, **k: used.append(real(*a, **k)) or used[-1])
    monkeypatch.setattr(FC, "shared_prefill_cache", lambda *a, **k: prefilled.append(real_prefill(*a, **k)) or prefilled[-1])
    T.RUN.configure(cfg)
    try:
        trainer = T.stage_trainer(model, tok, cfg, 1, T.generate_dataset(1, 1, seed=3), RunPaths.of(cfg))
        trainer.train()
    finally:
        T.RUN.log.close()
    assert used and all(logits is not None for logits in used)
    assert prefilled and all(cache is not None for cache in prefilled)


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
