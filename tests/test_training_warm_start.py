"""lifestack.training.warm_start: its loss is the causal-LM loss on the answer tokens,
however it is computed, and each demonstration is tokenized once."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import train_trl as T  # noqa: E402
import lifestack.training.warm_start as WS  # noqa: E402
from lifestack.training.models import load_model  # noqa: E402


def rows_and_model(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
    g = torch.Generator().manual_seed(2)
    rows = [(torch.randint(3, 500, (n,), generator=g).tolist(), torch.randint(3, 500, (a,), generator=g).tolist())
            for n, a in ((40, 7), (13, 9), (27, 3))]
    return model, rows


def padded(rows, pad):
    ids = [p + a for p, a in rows]
    labels = [[-100] * len(p) + a for p, a in rows]
    width = max(map(len, ids))
    return (torch.tensor([[pad] * (width - len(x)) + x for x in ids]),
            torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in ids]),
            torch.tensor([[-100] * (width - len(x)) + x for x in labels]))


def test_the_three_ways_to_compute_the_loss_agree(tiny_model_dir, tmp_path):
    model, rows = rows_and_model(tiny_model_dir, tmp_path)
    model.train()
    input_ids, mask, labels = padded(rows, model.config.pad_token_id)
    results = []
    for compute in (lambda: model(input_ids=input_ids, attention_mask=mask, labels=labels).loss,
                    lambda: WS.answer_loss(model, input_ids, mask, labels, max(len(a) for _, a in rows)),
                    lambda: WS.unpadded_answer_loss(model, rows, torch.device("cpu"))):
        model.zero_grad()
        loss = compute()
        loss.backward()
        results.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
    (reference, grads), *others = results
    for loss, other in others:
        assert torch.allclose(loss, reference, atol=1e-6)
        for a, b in zip(grads, other):
            assert torch.allclose(a, b, atol=1e-6, rtol=1e-4)


def test_each_demonstration_is_tokenized_once_and_the_time_is_split(tiny_model_dir, tmp_path, monkeypatch):
    cfg = T.build_config([f"--OUTPUT_DIR={tmp_path / 'out'}", f"--LOG_DIR={tmp_path / 'logs'}",
                          f"--CPU_BASE_DIR={tiny_model_dir}", "--WARM_START_SFT_STEPS=40", "--SEED=3"], profile="cpu")
    model, tok = load_model(cfg, banner=False)
    rendered = []
    real = type(tok).apply_chat_template
    monkeypatch.setattr(type(tok), "apply_chat_template", lambda self, m, **k: rendered.append(m) or real(self, m, **k))
    timings = {}
    losses = WS.warm_start(model, tok, cfg, timings=timings)
    assert len(losses) == 40
    drawn = {id(m) for m in rendered}
    assert len(rendered) == len(drawn) < 40 * 4  # 160 draws from 64 demonstrations: each rendered once
    assert set(timings) == {"demonstrations", "tokenize", "model"} and all(v >= 0 for v in timings.values())


def test_a_seeded_warm_start_repeats_bit_for_bit_and_another_seed_does_not(tiny_model_dir, tmp_path):
    """Same seed and the same thread count: the same losses and weights, bit for bit (the
    docs promise no more: another thread count sums in another order)."""
    def run(seed):
        cfg = T.build_config([f"--OUTPUT_DIR={tmp_path / 'out'}", f"--LOG_DIR={tmp_path / 'logs'}",
                              f"--CPU_BASE_DIR={tiny_model_dir}", "--WARM_START_SFT_STEPS=12", f"--SEED={seed}"],
                             profile="cpu")
        model, tok = load_model(cfg, banner=False)
        losses = WS.warm_start(model, tok, cfg)
        return losses, [p.detach().clone() for p in model.parameters()]

    (losses, weights), (again, weights_again), (other, weights_other) = run(5), run(5), run(6)
    assert losses == again
    assert all(torch.equal(a, b) for a, b in zip(weights, weights_again))
    assert losses != other and not all(torch.equal(a, b) for a, b in zip(weights, weights_other))
