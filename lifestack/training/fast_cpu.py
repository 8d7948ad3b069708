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
- **One pass per distinct prompt in the loss** (:func:`share_prompt_prefix`). TRL's loss
  call (``input_ids``, ``attention_mask``, ``logits_to_keep``, ``use_cache=False``) runs
  the model once over each distinct prompt (keeping its keys and values), then over
  every row's completion attending to its prompt's keys and values. Positions, masks
  and logits are the ones the full pass computes, and gradients flow back through the
  shared keys and values into the prompt pass, so the loss and its gradient are equal
  up to float rounding (``tests/test_training_fast_cpu.py``).
- **Grouped attention for one new token** (:data:`DECODE_ATTENTION`). Generating, each
  new token attends to the whole cache. transformers' ``sdpa`` path on a CPU first
  copies the cache's 2 key/value heads out to the 4 query heads (``repeat_kv``), then
  runs the flash kernel for a single query. Here the query's heads are grouped onto
  their key/value head instead (two matrix products and a softmax, no copy); longer
  queries (prefill, the loss) still go to ``sdpa``. The same attention weights up to
  float rounding; the mask is ``sdpa``'s.

Any other call, a batch without a repeated prompt, and a model training under gradient
checkpointing (whose layers drop a cache; the CPU profile trains without it) go to the
model's own ``forward`` / ``generate``. :func:`speed_up` applies all three;
``lifestack.training.models.load_model`` calls it for the CPU profile. The wrappers are
bound methods on the instance, so a deep copy of the model gets its own. torch and
transformers are imported inside the functions.
"""

from __future__ import annotations

import functools
import types
from typing import Any

DECODE_ATTENTION = "lifestack_grouped_decode"
_LOSS_CALL_KEYS = {"input_ids", "attention_mask", "logits_to_keep", "use_cache"}


# =====================================================================================
# The loss: one pass per distinct prompt
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


def shared_prefix_logits(model_forward, config, input_ids, attention_mask, logits_to_keep: int):
    """The logits of the last ``logits_to_keep`` positions, as ``model_forward(input_ids=...,
    attention_mask=..., logits_to_keep=..., use_cache=False).logits`` computes them, with
    each distinct prefix (everything before those positions) run once; None when no
    prefix repeats (the caller runs the full pass).

    The prefix pass keeps its keys and values in a cache whose rows are then copied out to
    every row of the batch (an indexing, so gradients flow back into the prefix pass); the
    suffix pass (the kept positions) continues from it at the same positions under the
    full attention mask."""
    import torch
    from transformers import DynamicCache

    width = input_ids.size(1)
    split = width - logits_to_keep  # prefix [0, split); the suffix [split, width) is every kept position
    if split < 1:
        return None
    rows = distinct_rows(torch.cat([input_ids[:, :split], attention_mask[:, :split]], dim=1))
    if rows is None:
        return None
    first, inverse = rows
    cache = DynamicCache(config=config)
    model_forward(input_ids=input_ids[first, :split], attention_mask=attention_mask[first, :split],
                  past_key_values=cache, use_cache=True, logits_to_keep=1)
    cache.batch_select_indices(inverse)
    return model_forward(input_ids=input_ids[:, split:], attention_mask=attention_mask, past_key_values=cache,
                         use_cache=True).logits


def _shared_prefix_forward_for(cls: type):
    """A ``forward`` for models of class ``cls`` that answers TRL's loss calls with
    :func:`shared_prefix_logits` and passes every other call to ``cls.forward``. Its
    signature is ``cls.forward``'s (TRL reads it to decide whether to pass
    ``logits_to_keep``)."""
    original = cls.forward

    @functools.wraps(original)
    def forward(self, *args, **kwargs):
        keep = kwargs.get("logits_to_keep")
        checkpointing = self.training and getattr(self, "is_gradient_checkpointing", False)  # it drops the cache
        if (not args and not checkpointing and set(kwargs) <= _LOSS_CALL_KEYS and kwargs.get("use_cache") is False
                and isinstance(keep, int) and keep > 1 and kwargs.get("attention_mask") is not None
                and getattr(kwargs.get("input_ids"), "dim", lambda: 0)() == 2):
            logits = shared_prefix_logits(functools.partial(original, self), self.config, kwargs["input_ids"],
                                          kwargs["attention_mask"], keep)
            if logits is not None:
                from transformers.modeling_outputs import CausalLMOutputWithPast

                return CausalLMOutputWithPast(logits=logits)
        return original(self, *args, **kwargs)

    forward.lifestack_shared_prefix = True
    return forward


def share_prompt_prefix(model) -> None:
    """Wrap ``model.forward`` (on the instance, as a bound method: a deep copy of the
    model gets its own) so TRL's loss runs each distinct prompt once."""
    if getattr(getattr(model, "forward", None), "lifestack_shared_prefix", False):
        return
    model.forward = types.MethodType(_shared_prefix_forward_for(type(model)), model)


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


# =====================================================================================
# Generation: grouped attention for one new token
# =====================================================================================
def grouped_decode_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, **kwargs):
    """An attention function (transformers' ``AttentionInterface``): a single query token
    (generation) attends with its heads grouped onto their key/value heads; any longer
    query goes to ``sdpa``. Shapes: query ``(batch, heads, q, dim)``, key and value
    ``(batch, kv_heads, kv, dim)``; returns ``(batch, q, heads, dim)``."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if query.shape[2] != 1 or dropout:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    batch, heads, _, dim = query.shape
    kv_heads, length = key.shape[1], key.shape[2]
    q = query.reshape(batch, kv_heads, heads // kv_heads, dim)  # heads h*g..h*g+g-1 share key/value head h
    scores = torch.matmul(q, key.transpose(-1, -2)) * (dim ** -0.5 if scaling is None else scaling)
    if attention_mask is not None:
        mask = attention_mask[:, :, -1:, :length]  # (batch, 1, 1, kv): this token's row
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    out = torch.matmul(weights, value)  # (batch, kv_heads, group, dim)
    return out.reshape(batch, heads, 1, dim).transpose(1, 2).contiguous(), None


def register_decode_attention() -> str:
    """Register :func:`grouped_decode_attention` (with ``sdpa``'s mask) under
    :data:`DECODE_ATTENTION`; idempotent. Returns the name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(DECODE_ATTENTION, grouped_decode_attention)
    AttentionMaskInterface.register(DECODE_ATTENTION, sdpa_mask)
    return DECODE_ATTENTION


def use_decode_attention(model) -> None:
    """Switch ``model`` to :data:`DECODE_ATTENTION` (an ``sdpa`` model only; the name is
    not saved with the model: a saved config keeps no attention implementation)."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "_attn_implementation", None) != "sdpa":
        return
    register_decode_attention()
    model.set_attn_implementation(DECODE_ATTENTION)


def speed_up(model):
    """All three shortcuts, on a transformers model (the CPU profile's); returns the model."""
    use_decode_attention(model)
    share_generation_prefill(model)
    share_prompt_prefix(model)
    return model
