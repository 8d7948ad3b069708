"""Exact shortcuts for the CPU profile's tiny model, where a GRPO step's time goes
(``scripts/bench_cpu_step.py`` measures it): the same mathematics, less work.

A GRPO batch holds each prompt ``NUM_GENERATIONS`` times (one row per completion), and a
prompt (about 900 tokens) is ~8 times longer than an answer, so most of the work on a
batch repeats itself.

- **One prefill per distinct prompt** (:func:`share_generation_prefill`). A plain
  ``generate`` call on a batch with repeated rows gets a cache of every row's prompt
  (but its last token), computed once per distinct row at the positions ``generate``
  itself derives from the attention mask, and copied out to the copies; ``generate``
  then samples exactly as it would have.

Any other call, a batch without a repeated prompt, and a model training under gradient
checkpointing (whose layers drop a cache; the CPU profile trains without it) go to the
model's own ``generate``. :func:`speed_up` applies it;
``lifestack.training.models.load_model`` calls it for the CPU profile. The wrapper is a
bound method on the instance, so a deep copy of the model gets its own. torch and
transformers are imported inside the functions.
"""

from __future__ import annotations

import functools
import types
from typing import Any


# =====================================================================================
# Repeated rows
# =====================================================================================
def distinct_rows(prefix) -> tuple[Any, Any] | None:
    """``(first, inverse)`` for the rows of a 2-D tensor: ``first`` the index of each
    distinct row's first occurrence (in order of appearance), ``inverse`` the position in
    ``first`` of every row's copy. None when every row is distinct."""
    import torch

    _, inverse = torch.unique(prefix, dim=0, return_inverse=True)
    seen: dict[int, int] = {}
    first, remap = [], []
    for i, key in enumerate(inverse.tolist()):
        if key not in seen:
            seen[key] = len(first)
            first.append(i)
        remap.append(seen[key])
    if len(first) == len(remap):
        return None
    device = prefix.device
    return torch.tensor(first, device=device), torch.tensor(remap, device=device)


# =====================================================================================
# Generation: one prefill per distinct prompt
# =====================================================================================
def _plain_generate_call(args, kwargs) -> bool:
    """A call ``generate(input_ids=..., attention_mask=..., [generation_config=...],
    [other sampling settings])`` that starts from nothing (no cache, no embeddings) and
    returns one sequence per row: TRL's and the rollout's."""
    if args or "past_key_values" in kwargs or "inputs_embeds" in kwargs:
        return False
    ids, mask = kwargs.get("input_ids"), kwargs.get("attention_mask")
    if ids is None or mask is None or ids.dim() != 2 or ids.size(1) < 2:
        return False
    config = kwargs.get("generation_config")
    for name in ("num_beams", "num_return_sequences", "cache_implementation", "assistant_model"):
        value = kwargs.get(name, getattr(config, name, None))
        if value not in (None, 1):
            return False
    return True


def shared_prefill_cache(model_forward, config, input_ids, attention_mask):
    """A cache of every row's prompt but its last token, as ``generate`` would fill it,
    computed once per distinct row (positions from the attention mask, as ``generate``
    derives them) and copied out to the rows; None when every row is distinct."""
    import torch
    from transformers import DynamicCache

    rows = distinct_rows(torch.cat([input_ids, attention_mask], dim=1))
    if rows is None:
        return None
    first, inverse = rows
    positions = (attention_mask.long().cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)
    cache = DynamicCache(config=config)
    with torch.no_grad():
        model_forward(input_ids=input_ids[first, :-1], attention_mask=attention_mask[first, :-1],
                      position_ids=positions[first, :-1], past_key_values=cache, use_cache=True, logits_to_keep=1)
    cache.batch_select_indices(inverse)
    return cache


def _shared_prefill_generate_for(cls: type):
    """A ``generate`` for models of class ``cls``: a plain call (:func:`_plain_generate_call`)
    on a batch with repeated prompts gets :func:`shared_prefill_cache` as its cache (the
    GRPO group's copies of a prompt are prefilled once); any other call is ``cls.generate``'s."""
    original = cls.generate

    @functools.wraps(original)
    def generate(self, *args, **kwargs):
        checkpointing = self.training and getattr(self, "is_gradient_checkpointing", False)  # it drops the cache
        if not checkpointing and _plain_generate_call(args, kwargs):
            cache = shared_prefill_cache(self.forward, self.config, kwargs["input_ids"], kwargs["attention_mask"])
            if cache is not None:
                kwargs = {**kwargs, "past_key_values": cache}
        return original(self, *args, **kwargs)

    generate.lifestack_shared_prefill = True
    return generate


def share_generation_prefill(model) -> None:
    """Wrap ``model.generate`` (on the instance, as a bound method) so a batch that repeats
    its prompts prefills each distinct prompt once."""
    if getattr(getattr(model, "generate", None), "lifestack_shared_prefill", False):
        return
    model.generate = types.MethodType(_shared_prefill_generate_for(type(model)), model)


def speed_up(model):
    """The shortcuts, on a transformers model (the CPU profile's); returns the model."""
    share_generation_prefill(model)
    return model
