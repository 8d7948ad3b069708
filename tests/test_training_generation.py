"""lifestack.training.generation: generation that does not depend on the tokenizer's or
the model's mutable state. Tiny offline model; nothing downloaded."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

torch = pytest.importorskip("torch")

from lifestack.rollout import left_padded  # noqa: E402
from lifestack.scenarios import sample_scenarios  # noqa: E402
from lifestack.prompts import build_prompt  # noqa: E402
from lifestack.training import generation as G  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lifestack.training.models import prepare_tokenizer

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir), prepare_tokenizer(AutoTokenizer.from_pretrained(tiny_model_dir))


def prompts(n: int = 6) -> list:
    """Prompts of different lengths (difficulty 1..5 and both families), so a batch pads."""
    return [build_prompt(sc.task, sc.conflict, sc.state, sc.difficulty, sc.seed) for sc in sample_scenarios(n, None, 11)]


@pytest.mark.parametrize("side", ["left", "right"])
def test_a_batch_generates_what_each_prompt_generates_alone_whatever_the_tokenizers_padding_side(tiny, side):
    """Unsloth's for_training flips the shared tokenizer to right padding; a batch
    generated right-padded continues from pad tokens (5 of 6 answers changed before)."""
    model, tok = tiny
    ps = prompts()
    tok.padding_side = side
    try:
        batched = G.generate_completions(model, tok, ps, max_new_tokens=12)
        alone = [G.generate_completions(model, tok, [p], max_new_tokens=12)[0] for p in ps]
    finally:
        tok.padding_side = "left"
    lengths = {len(tok.apply_chat_template(p, tokenize=False, add_generation_prompt=True)) for p in ps}
    assert len(lengths) > 1  # the batch really pads
    assert batched == alone


class ModeRecorder:
    """A model with Unsloth's mode methods (or without them), recording what was called."""

    def __init__(self, unsloth: bool, training: bool) -> None:
        self.calls: list[str] = []
        self.training = training
        if unsloth:
            self.for_inference = lambda: self._set("for_inference", False)
            self.for_training = lambda: self._set("for_training", True)

    def _set(self, name: str, training: bool) -> None:
        self.calls.append(name)
        self.training = training

    def eval(self):
        self._set("eval", False)

    def train(self):
        self._set("train", True)


@pytest.mark.parametrize("unsloth", [True, False])
@pytest.mark.parametrize("training", [True, False])
def test_generating_uses_the_profiles_switch_and_restores_training_only_when_it_was_training(unsloth, training):
    model = ModeRecorder(unsloth, training)
    with G.generating(model):
        assert model.training is False
    into, back = ("for_inference", "for_training") if unsloth else ("eval", "train")
    assert model.calls == ([into, back] if training else [into])
    assert model.training is training


def test_the_switch_reaches_through_a_ddp_style_wrapper():
    inner = ModeRecorder(unsloth=True, training=True)
    wrapper = type("DDP", (), {"module": inner})()
    G.generation_mode(wrapper)
    G.training_mode(wrapper)
    assert inner.calls == ["for_inference", "for_training"]


def test_generating_restores_training_mode_even_when_generation_fails():
    model = ModeRecorder(unsloth=True, training=True)
    with pytest.raises(RuntimeError):
        with G.generating(model):
            raise RuntimeError("out of memory")
    assert model.calls == ["for_inference", "for_training"] and model.training


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=6), st.integers(min_value=0, max_value=50))
def test_left_padded_batches_read_as_left_and_their_mirror_as_right(lengths, pad):
    contexts = [list(range(100, 100 + n)) for n in lengths]
    ids, mask = left_padded(contexts, pad)
    assert ids.shape == mask.shape == (len(lengths), max(lengths))
    assert [row[len(row) - n:] for row, n in zip(ids.tolist(), lengths)] == contexts
    expected = "none" if len(set(lengths)) == 1 else "left"
    assert G.padding_side_of(mask) == expected
    assert G.padding_side_of(mask.flip(1)) == ("none" if expected == "none" else "right")


def test_padding_side_of_names_a_mixed_batch():
    assert G.padding_side_of(torch.tensor([[0, 1, 1], [1, 1, 0]])) == "mixed"
    assert G.padding_side_of(torch.tensor([[0, 1, 0]])) == "mixed"
