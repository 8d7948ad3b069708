"""Generating with the policy, whatever state training left the model and tokenizer in.

Two rules make every generate call in the repository correct by construction:

- **Left padding, explicit.** A decoder-only model continues a batch from the end of each
  row, so a shorter prompt must be padded on its left. The tokenizer's ``padding_side``
  is mutable shared state: Unsloth keeps a reference to the tokenizer it returned and
  flips it to ``"right"`` in ``for_training`` (unsloth/models/llama.py,
  ``FastLlamaModel.for_training``), which its trainer calls after every GRPO generation.
  So prompts are tokenized unpadded and padded here (:func:`lifestack.rollout.left_padded`),
  never by the tokenizer.
- **One mode switch.** :func:`generation_mode` / :func:`training_mode` put the model into
  generation or training mode for the active profile: Unsloth's ``for_inference`` /
  ``for_training`` when the model has them (they also switch its gradient checkpointing,
  cache and fast generation path), else torch's ``eval()`` / ``train()``.
  :func:`generating` wraps a block in generation mode and restores training mode after it
  when the model was training.

torch is imported inside the functions.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from lifestack.training.distributed import is_main_process


def _mode_owner(model) -> Any:
    """The object that carries Unsloth's mode methods: the model itself, or the model a
    DDP/accelerate wrapper holds in ``.module``."""
    return getattr(model, "module", model)


def generation_mode(model) -> None:
    """Generation mode: Unsloth's ``for_inference()`` where the model has it (gradient
    checkpointing off, cache on, left padding on its tokenizer), else ``eval()``."""
    owner = _mode_owner(model)
    if callable(getattr(owner, "for_inference", None)):
        owner.for_inference()
    else:
        owner.eval()


def training_mode(model) -> None:
    """Training mode: Unsloth's ``for_training()`` where the model has it (gradient
    checkpointing back on as the model was configured), else ``train()``."""
    owner = _mode_owner(model)
    if callable(getattr(owner, "for_training", None)):
        owner.for_training()
    else:
        owner.train()


@contextmanager
def generating(model) -> Iterator[None]:
    """The block runs in generation mode; a model that was training goes back to training
    mode afterwards (through :func:`training_mode`, not a bare ``train()``)."""
    was_training = bool(getattr(_mode_owner(model), "training", False))
    generation_mode(model)
    try:
        yield
    finally:
        if was_training:
            training_mode(model)


def padding_side_of(attention_mask) -> str:
    """Where a batch's padding sits, read from its attention mask: ``"left"``, ``"right"``,
    ``"none"`` (no padding) or ``"mixed"``. What the GPU rehearsal and the Unsloth
    stand-in tests record at every generate call."""
    sides = set()
    for row in attention_mask.tolist():
        if all(row):
            continue
        ones = [i for i, v in enumerate(row) if v]
        if ones and ones == list(range(ones[0], len(row))):
            sides.add("left")
        elif ones and ones == list(range(ones[-1] + 1)):
            sides.add("right")
        else:
            sides.add("mixed")
    if not sides:
        return "none"
    return sides.pop() if len(sides) == 1 else "mixed"


def generate_completions(model, tokenizer, prompts: Sequence[list[dict]], max_new_tokens: int, batch_size: int = 16,
                         temperature: float = 0.0, seed: int = 0, progress: str | None = None) -> list[str]:
    """Completions for conversational prompts: greedy (``temperature=0``), or sampled with
    a fixed torch seed, so evaluations are reproducible either way.

    Batches are padded on the left here, whatever ``tokenizer.padding_side`` says, and the
    model generates in generation mode (:func:`generating`)."""
    import torch

    from lifestack.rollout import left_padded

    sampling: dict[str, Any] = {"do_sample": False}
    if temperature > 0:
        sampling = {"do_sample": True, "temperature": temperature, "top_p": 1.0, "top_k": 0}
        torch.manual_seed(seed)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    out: list[str] = []
    device = next(model.parameters()).device
    from tqdm.auto import tqdm

    with generating(model):
        # ``progress``: a bar (rank 0) with this label over the batches, with the time left
        batches = tqdm(range(0, len(prompts), batch_size), desc=progress, unit="batch", leave=False,
                       disable=progress is None or not is_main_process())
        for i in batches:
            chunk = prompts[i:i + batch_size]
            texts = [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in chunk]
            ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
            input_ids, attention_mask = left_padded(ids, pad_id, device)
            with torch.no_grad():
                gen = model.generate(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=max_new_tokens,
                                     **sampling, pad_token_id=pad_id, eos_token_id=tokenizer.eos_token_id)
            new = gen[:, input_ids.shape[1]:]
            out.extend(tokenizer.batch_decode(new, skip_special_tokens=True))
    return out
