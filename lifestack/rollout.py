"""Closed-loop episodes as GRPO samples: the ``rollout_func`` of TRL's GRPOTrainer.

TRL 1.14 offers two multi-turn interfaces. ``environment_factory`` exposes an env's
methods as *tools*: the model must write tool calls in its chat template's format and
TRL parses them. Our model answers with one bare JSON action (the seed's contract), and
the 1.5B Qwen starts from a prompt that asks for exactly that, so we use ``rollout_func``:
we generate each turn, step the environment, append its reply as the next user turn,
and hand TRL the token ids with an ``env_mask`` that is 1 on the model's tokens and 0 on
the environment's. TRL multiplies the loss mask by it (``tool_mask`` inside the trainer),
so the environment's tokens get no gradient; optimisation, clipping, logging and
checkpoints stay TRL's own.

One GRPO sample = one episode = ``prompt_ids`` (the first prompt) + ``completion_ids``
(turn 1 answer, environment reply, turn 2 answer, ...). Generation uses the trainer's
own generation config and its unwrapped model, as its single-turn path does.

torch is imported inside the functions: ``lifestack`` stays importable without it.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from .episodes import IDLE_ANSWER, Episode
from .heuristic import heuristic
from .scenarios import sample_scenario


def chat_ids(tokenizer, messages: Sequence[dict[str, str]], generation_prompt: bool) -> list[int]:
    text = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=generation_prompt)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _assistant_closing(tokenizer) -> str:
    """What the chat template writes after an assistant message's content (Qwen:
    ``<|im_end|>\\n``); a generation that stopped at EOS has already written its start."""
    marker = "\x00LIFESTACK-CONTENT\x00"
    text = tokenizer.apply_chat_template([{"role": "user", "content": "x"}, {"role": "assistant", "content": marker}],
                                         tokenize=False, add_generation_prompt=False)
    return text[text.index(marker) + len(marker):]


def env_turn_text(tokenizer, messages: Sequence[dict[str, str]], ended_with: str | None,
                  closing: str | None = None) -> str:
    """The text between the model's last answer and its next one: the end of the
    assistant turn (what EOS did not already write), the environment's user message,
    and the generation prompt. ``messages`` ends with that user message; ``ended_with``
    is the decoded stop token the answer ended with (None when it was cut off);
    ``closing`` is ``_assistant_closing(tokenizer)`` when the caller has it already."""
    before = tokenizer.apply_chat_template(list(messages[:-1]), tokenize=False, add_generation_prompt=False)
    after = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    if not after.startswith(before):
        raise ValueError("the chat template does not render a conversation as a prefix of its continuation; "
                         "episode mode needs one that does (every Qwen/Llama-style template does)")
    if closing is None:
        closing = _assistant_closing(tokenizer)
    if ended_with and closing.startswith(ended_with):
        closing = closing[len(ended_with):]
    # `before` ends with the content and the full closing; the generated ids hold the
    # content and (when it stopped at EOS) the closing's first token
    return closing + after[len(before):]


def _stop_ids(tokenizer, generation_config) -> set[int]:
    ids = getattr(generation_config, "eos_token_id", None)
    ids = [ids] if isinstance(ids, int) else list(ids or [])
    if tokenizer.eos_token_id is not None:
        ids.append(tokenizer.eos_token_id)
    return set(ids)


def left_padded(contexts: Sequence[list[int]], pad_id: int, device: Any = None):
    """``(input_ids, attention_mask)`` tensors of token ``contexts`` padded on the LEFT, the
    only side a decoder-only model can continue a batch from. Built here, never by the
    tokenizer, whose ``padding_side`` other code (Unsloth's ``for_training``) flips."""
    import torch

    width = max(len(c) for c in contexts)
    input_ids = torch.tensor([[pad_id] * (width - len(c)) + list(c) for c in contexts], device=device)
    mask = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in contexts], device=device)
    return input_ids, mask


def generate_turn(model, tokenizer, contexts: Sequence[list[int]], generation_config, pad_id: int) -> list[list[int]]:
    """One sampled answer per token context (left-padded batch); each answer is cut
    after its first stop token, which it keeps."""
    import torch

    input_ids, mask = left_padded(contexts, pad_id, next(model.parameters()).device)
    with torch.no_grad():
        out = model.generate(input_ids=input_ids, attention_mask=mask, generation_config=generation_config)
    stops = _stop_ids(tokenizer, generation_config)
    answers = []
    for row in out[:, input_ids.shape[1]:].tolist():
        cut = next((i + 1 for i, t in enumerate(row) if t in stops), len(row))
        answers.append(row[:cut])
    return answers


def trainer_unwrap_for_generation():
    """The ``unwrap_model_for_generation`` GRPOTrainer itself calls: the one in TRL's
    trainer module, read at call time. Unsloth replaces that module attribute with its own
    (unsloth/models/rl.py, ``PatchRL``: ``for_inference`` on entry, ``for_training`` with
    the model's checkpointing mode on exit); ``trl.models``' original would bypass it and
    toggle gradient checkpointing its own way."""
    from trl.trainer import grpo_trainer

    return grpo_trainer.unwrap_model_for_generation


def rollout_episodes(episodes: Sequence[Episode], tokenizer, generate: Callable[[list[list[int]]], list[list[int]]],
                     stop_ids: set[int]) -> dict[str, list]:
    """Play ``episodes`` to the end in lockstep with ``generate`` (token contexts -> answer
    ids) and return what TRL's ``rollout_func`` must: ``prompt_ids``, ``completion_ids``,
    ``env_mask`` (1 = the model's token), plus per-episode fields for the rewards."""
    prompt_ids = [chat_ids(tokenizer, e.messages, True) for e in episodes]
    closing = _assistant_closing(tokenizer)  # the same for every turn: rendered once per rollout
    completion_ids: list[list[int]] = [[] for _ in episodes]
    env_mask: list[list[int]] = [[] for _ in episodes]
    while True:
        live = [i for i, e in enumerate(episodes) if not e.done]
        if not live:
            break
        answers = generate([prompt_ids[i] + completion_ids[i] for i in live])
        for i, ids in zip(live, answers):
            ep = episodes[i]
            completion_ids[i] += ids
            env_mask[i] += [1] * len(ids)
            ep.step(tokenizer.decode(ids, skip_special_tokens=True))
            if not ep.done:
                ended = tokenizer.decode(ids[-1:]) if ids and ids[-1] in stop_ids else None
                reply = tokenizer(env_turn_text(tokenizer, ep.messages, ended, closing),
                                  add_special_tokens=False)["input_ids"]
                completion_ids[i] += reply
                env_mask[i] += [0] * len(reply)
    return {
        "prompt_ids": prompt_ids, "completion_ids": completion_ids, "env_mask": env_mask,
        "turns": [[[t.prompt, t.completion] for t in e.turns] for e in episodes],
        "episode_outcome": [e.outcome()["score"] for e in episodes],
        "episode": [e.record() for e in episodes],
    }


def episode_tokens(tokenizer, horizon: int, max_new_tokens: int, scenarios: int = 12, seed: int = 0) -> int:
    """About how many tokens the longest of ``scenarios`` episodes takes with this
    tokenizer, counting ``horizon`` answers at ``max_new_tokens`` each: what a
    sequence-length limit must hold (prompt, answers and environment turns). Each scenario
    is played three ways, and the longest counts: by the heuristic (which often finishes
    the task in 2-3 turns), by an answer that changes nothing (``IDLE_ANSWER``: every turn
    played, as a weak policy's), and by an unparseable answer (every turn played, and each
    reply repeats the answer format)."""
    players = (heuristic, lambda _env: IDLE_ANSWER, lambda _env: "no action")
    longest = 0
    for i in range(scenarios):
        sc = sample_scenario(seed + i, 1 + i % 5)  # an episode copies its start: one scenario serves all three
        for play in players:
            ep = Episode.from_scenario(sc, horizon)
            while not ep.done:
                ep.step(play(ep.env))
            n = len(chat_ids(tokenizer, ep.messages, False))
            answers = sum(len(tokenizer(t.completion, add_special_tokens=False)["input_ids"]) for t in ep.turns)
            longest = max(longest, n - answers + horizon * max_new_tokens)
    return longest


def make_rollout_func(horizon: int, make_episode: Callable[[Any, int], Episode] | None = None,
                      on_rollout: Callable[[list[Episode], dict, int], None] | None = None) -> Callable:
    """A ``rollout_func(prompts, trainer)`` for ``GRPOTrainer`` that plays each prompt as
    a closed-loop episode of at most ``horizon`` turns.

    ``make_episode(prompt, horizon)`` builds the episode (default: rebuilt in-process from
    the prompt's metadata; a remote episode can be swapped in). TRL hands the rollout one
    prompt per sample (a GRPO group is its prompt repeated), so each gets its own episode.
    ``on_rollout(episodes, result, step)`` sees the played episodes (logging) and the
    trainer's step (its ``global_step``, as the reward functions read it: TRL calls them
    after the rollout, so the rollout cannot take the step from them).
    """
    make = make_episode or (lambda prompt, h: Episode.from_prompt(prompt, h))

    def rollout_func(prompts: list, trainer) -> dict[str, list]:
        unwrap_model_for_generation = trainer_unwrap_for_generation()
        tok = trainer.processing_class
        tok = getattr(tok, "tokenizer", tok)  # a processor wraps its tokenizer
        config = trainer.generation_config
        stops = _stop_ids(tok, config)

        def generate(contexts: list[list[int]]) -> list[list[int]]:
            with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator,
                                             gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
                                             generation_kwargs=trainer.generation_kwargs) as model:
                return generate_turn(model, tok, contexts, config, tok.pad_token_id)

        episodes = [make(p, horizon) for p in prompts]
        out = rollout_episodes(episodes, tok, generate, stops)
        out["logprobs"] = None  # no importance-sampling correction: the trainer's own model sampled
        if on_rollout is not None:
            on_rollout(episodes, out, trainer.state.global_step)
        return out

    return rollout_func
