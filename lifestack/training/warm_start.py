"""The warm start: a short supervised pass on demonstrations before GRPO, so that a tiny
model writes the answer format at all (the CPU profile). torch is imported inside."""

from __future__ import annotations

import random
from typing import Any, Callable

from lifestack.policies import DEMONSTRATORS
from lifestack.scenarios import sample_scenario
from lifestack.training import seeds
from lifestack.training.decisions import decisions
from lifestack.training.distributed import is_main_process, log
from lifestack.training.generation import training_mode


def warm_start(model, tokenizer, cfg: dict[str, Any], *, batch_size: int = 4, first_demo: int = 0,
               demonstrator: Callable | None = None, timings: dict[str, float] | None = None) -> list[float]:
    """A short supervised pass on demonstrations so a tiny model emits JSON.

    WARM_START_SFT_STEPS steps of ``batch_size`` demonstrations at WARM_START_LR, written
    by ``lifestack.policies.DEMONSTRATORS[WARM_START_POLICY]``: ``format`` (random
    decisions in the right form, honest costs: the format an instruction model brings,
    so every decision gain is GRPO's), ``rules`` (the same, following the prompt's routing
    rule) or ``heuristic`` (the near-optimal decisions themselves). Loss is on the completion tokens only. In episode mode the
    demonstrations are the demonstrator's turns of played episodes, each after its
    conversation so far (so the model has seen environment turns). ``first_demo`` skips that many demonstration scenarios
    (``scripts/imitation_capacity.py`` continues each block on scenarios the earlier blocks never saw).
    ``demonstrator``: another teacher (a ``lifestack.policies.HONEST`` policy) for a
    measurement such as ``scripts/imitation_capacity.py --policy oracle``; the trainer uses
    WARM_START_POLICY's.
    Each demonstration is tokenized once, the first time a batch draws it, and the model's
    output layer runs only over the answer positions the loss reads; on a CPU each
    demonstration of a batch runs unpadded (:func:`unpadded_answer_loss`), elsewhere the
    batch runs padded (:func:`answer_loss`). ``timings`` (optional) gets the seconds spent writing the
    demonstrations (``demonstrations``), tokenizing (``tokenize``) and in the model,
    backward pass and optimizer (``model``). Returns the loss per step.
    """
    import time

    import torch

    steps = cfg["WARM_START_SFT_STEPS"]
    if steps <= 0:
        return []
    clock = {"demonstrations": 0.0, "tokenize": 0.0, "model": 0.0}
    t0 = time.perf_counter()
    demonstrator = demonstrator or DEMONSTRATORS[cfg["WARM_START_POLICY"]]
    rng = random.Random(cfg["SEED"] + seeds.WARM_START_BATCHES)
    mode = decisions(cfg["HORIZON"])  # single decisions: one pair; episodes: every turn in its conversation so far
    pairs = []
    for i in range(first_demo, first_demo + max(64, steps * batch_size // 4)):
        sc = sample_scenario(cfg["SEED"] + seeds.WARM_START_SCENARIOS + i, 1 + i % 5)
        demo_rng = random.Random(cfg["SEED"] + seeds.WARM_START_DEMONSTRATIONS + i)  # Random(seed + index), as every generated item
        pairs += mode.demonstrations(sc, demonstrator, demo_rng)
    clock["demonstrations"] += time.perf_counter() - t0
    tokenized: dict[int, tuple[list[int], list[int]]] = {}

    def tokens(index: int) -> tuple[list[int], list[int]]:
        if index not in tokenized:
            messages, answer = pairs[index]
            p = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            tokenized[index] = (tokenizer(p, add_special_tokens=False)["input_ids"],
                                tokenizer(answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id])
        return tokenized[index]

    device = next(model.parameters()).device
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg["WARM_START_LR"])
    training_mode(model)  # Unsloth's for_training where it applies (checkpointing on)
    keep_logits = accepts_logits_to_keep(model)
    losses = []
    from tqdm.auto import tqdm

    # a bar with the time left (rank 0), besides the log line every 20 steps
    for step in tqdm(range(steps), desc="[warm start]", unit="step", disable=not is_main_process(), leave=False):
        t0 = time.perf_counter()
        batch = [tokens(i) for i in rng.sample(range(len(pairs)), min(batch_size, len(pairs)))]  # the pairs rng.sample(pairs) drew
        t1 = time.perf_counter()
        if keep_logits and device.type == "cpu":
            loss = unpadded_answer_loss(model, batch, device)
        else:
            ids = [p_ids + a_ids for p_ids, a_ids in batch]
            labels = [[-100] * len(p_ids) + a_ids for p_ids, a_ids in batch]
            width = max(len(x) for x in ids)
            pad = tokenizer.pad_token_id
            input_ids = torch.tensor([[pad] * (width - len(x)) + x for x in ids], device=device)
            label_t = torch.tensor([[-100] * (width - len(x)) + x for x in labels], device=device)
            mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in ids], device=device)
            if keep_logits:
                loss = answer_loss(model, input_ids, mask, label_t, max(len(a_ids) for _, a_ids in batch))
            else:
                loss = model(input_ids=input_ids, attention_mask=mask, labels=label_t).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        losses.append(float(loss.detach()))
        clock["tokenize"] += t1 - t0
        clock["model"] += time.perf_counter() - t1
        if step % 20 == 0 or step == steps - 1:
            log(f"[warm start] step {step + 1}/{steps} loss {losses[-1]:.3f}")
    if timings is not None:
        for key, seconds in clock.items():
            timings[key] = timings.get(key, 0.0) + seconds
    return losses


def accepts_logits_to_keep(model) -> bool:
    """Whether ``model``'s forward takes ``logits_to_keep`` (every transformers causal LM
    of this era; TRL asks the same before passing it)."""
    import inspect

    core = model.get_base_model() if hasattr(model, "get_base_model") else model  # a PEFT model: its base's forward
    try:
        return "logits_to_keep" in inspect.signature(core.forward).parameters
    except (TypeError, ValueError):
        return False


def unpadded_answer_loss(model, rows: list[tuple[list[int], list[int]]], device):
    """The loss :func:`answer_loss` computes for a batch of ``(prompt ids, answer ids)``
    rows (the mean cross-entropy over all the batch's answer tokens), with each row run
    alone: no padding, so no attention mask, and attention skips what the causal mask
    hides; the output layer runs over each row's answer positions only. On a CPU a batch
    of conversations of very different lengths (episode mode: 1,000 to 3,000 tokens) runs
    several times faster this way than padded to its longest row."""
    import torch

    total = sum(len(a_ids) for _, a_ids in rows)
    loss = None
    for p_ids, a_ids in rows:
        input_ids = torch.tensor([p_ids + a_ids], device=device)
        logits = model(input_ids=input_ids, logits_to_keep=len(a_ids) + 1, use_cache=False).logits
        row = torch.nn.functional.cross_entropy(logits[0, :-1].float(), torch.tensor(a_ids, device=device), reduction="sum")
        loss = row if loss is None else loss + row
    return loss / total


def answer_loss(model, input_ids, attention_mask, labels, answer_width: int):
    """The causal-LM loss of a left-padded batch whose labels are -100 except on each
    row's answer, its last tokens: the mean cross-entropy over the answer tokens, as
    ``model(..., labels=labels).loss`` computes it, with the output layer run only over
    the last ``answer_width + 1`` positions (the only ones whose predictions the labels
    read) instead of every position of the ~900-token prompts."""
    import torch

    keep = min(answer_width + 1, input_ids.size(1))
    logits = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=keep, use_cache=False).logits
    targets = labels[:, labels.size(1) - keep + 1:]  # the token each kept position but the last predicts
    return torch.nn.functional.cross_entropy(logits[:, :-1].float().reshape(-1, logits.size(-1)), targets.reshape(-1),
                                             ignore_index=-100)
