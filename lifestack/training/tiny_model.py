"""The CPU profile's model: a tiny random-weight Qwen2-architecture model and a byte-level
BPE tokenizer trained offline on LifeStack text (no download). Built once per directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lifestack.env import LifeStackEnv
from lifestack.prompts import scenario_prompt
from lifestack.scenarios import sample_scenario


CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


# Small enough that a CPU step takes well under a second on 2 cores with ~900-token prompts,
# large enough to learn the JSON answer format from a warm start (~0.22M parameters).
TINY_MODEL_SHAPE = dict(hidden_size=64, intermediate_size=192, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, max_position_embeddings=4096)


TINY_VOCAB_SIZE = 2048


def tokenizer_corpus(n: int = 300, seed: int = 12345) -> list[str]:
    """LifeStack text for the offline tokenizer: prompts and heuristic answers."""
    from lifestack.policies import heuristic

    texts = []
    env = LifeStackEnv()
    for i in range(n):
        sc = sample_scenario(seed + i, 1 + i % 5)
        messages = scenario_prompt(sc)
        texts.extend(m["content"] for m in messages)
        env.restore(sc.task, sc.state)
        texts.append(heuristic(env))
    return texts


def build_tiny_tokenizer(out_dir: Path, vocab_size: int = TINY_VOCAB_SIZE):
    """A byte-level BPE trained offline on LifeStack text, saved as a Qwen2 tokenizer.

    It is trained with Qwen2's own normaliser (NFC) and regex pre-tokenizer because
    transformers rebuilds a qwen2 tokenizer with those on load: anything else would
    change the token ids after a save/load round trip.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX, Qwen2Tokenizer

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(tokenizer_corpus(), trainer=trainer)
    model = json.loads(tok.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    hf_tok = Qwen2Tokenizer(vocab=model["vocab"], merges=merges, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                            additional_special_tokens=["<|im_start|>", "<|im_end|>"])
    hf_tok.chat_template = CHAT_TEMPLATE
    hf_tok.save_pretrained(out_dir)
    return hf_tok


def model_shape(hidden_size: int, layers: int) -> dict[str, int]:
    """``TINY_MODEL_SHAPE`` resized: ``hidden_size`` (a multiple of its 4 heads' 8), the
    MLP three times as wide, ``layers`` layers; for measuring what a larger CPU model can
    hold (``scripts/imitation_capacity.py --hidden-size --layers``)."""
    if hidden_size < 8 or hidden_size % 8 or layers < 1:
        raise ValueError(f"hidden size {hidden_size} must be a multiple of 8 and layers {layers} at least 1")
    return {**TINY_MODEL_SHAPE, "hidden_size": hidden_size, "intermediate_size": 3 * hidden_size,
            "num_hidden_layers": layers}


def build_tiny_model(out_dir: Path, seed: int, shape: dict[str, int] | None = None) -> None:
    """Build (once) the CPU profile's random-weight Qwen2 model + tokenizer in ``out_dir``
    (``shape``: another shape than ``TINY_MODEL_SHAPE``, :func:`model_shape`)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    if (out_dir / "config.json").exists() and (out_dir / "tokenizer_config.json").exists():
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    tok = build_tiny_tokenizer(out_dir)
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(tok), tie_word_embeddings=True, bos_token_id=None,
                         eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
                         pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"), **(shape or TINY_MODEL_SHAPE))
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    model.save_pretrained(out_dir)


def cpu_banner(cfg: dict[str, Any], base_dir: Path) -> str:
    bar = "=" * 78
    return "\n".join([
        bar,
        "  CPU PROFILE: PIPELINE CHECK, NOT REAL TRAINING",
        f"  No GPU found, so {cfg['MODEL_NAME']} is replaced by a tiny random-weight",
        f"  Qwen2-architecture model built offline in {base_dir}.",
        "  Every stage, checkpoint, log and plot is produced, but the numbers say nothing",
        "  about the real model. To train for real, run this script on a CUDA GPU",
        "  (Colab: see README.md) and, for 4-bit QLoRA, `pip install --no-deps -r requirements-gpu.txt`.",
        bar,
    ])
