"""Score one answer against the state its prompt was rendered from, with caches.

A GRPO step scores every completion with six reward functions, and all six read the
same evaluation; a group shares one prompt. So the rebuilt state is cached per prompt
text and the evaluation per (prompt, completion). Both caches are bounded and
insertion-ordered (first in, first out: :func:`lifestack.cache.cache_put`).

Only the prompt's ``<SYSTEM_METADATA>`` block is read (``lifestack.prompts``): a
completion cannot change the state it is scored against, and a metadata block a
completion carries is removed and noted (``injected_metadata``, which costs format).
"""

from __future__ import annotations

import math
import sys
from typing import Any, Callable

from .actions import LifeStackAction, parse_action, with_notes
from .cache import cache_put
from .env import EpisodeState, LifeStackEnv
from .generator import TaskGenerator
from .metrics import pressured_domain
from .prompts import strip_metadata, read_metadata
from .scenarios import rebuild_state, task_from_metadata
from .tasks import Task, missing_task_fields
from .value import reference_value, score_decision

FALLBACK_REWARD = -0.5  # the task reward of an answer that cannot be scored
PROMPT_CACHE_SIZE = 4096
EVAL_CACHE_SIZE = 8192  # six reward functions read one batch: a few hundred entries suffice

Context = tuple[Task, EpisodeState, dict]


def parse_completion(text: str) -> tuple[LifeStackAction | None, str | None]:
    """``parse_action`` of a completion without any metadata block it carries; a block it
    tried to inject is noted (``injected_metadata``, which costs format score)."""
    clean = strip_metadata(text)
    action, reason = parse_action(clean)
    if action is not None and clean is not text:
        action = with_notes(action, action.notes + ("injected_metadata",))
    return action, reason


def fallback(reason: str) -> dict[str, Any]:
    return {"reward": FALLBACK_REWARD, "breakdown": {"error": reason}, "action": None}


def context_from_metadata(meta: dict, generator: TaskGenerator | None = None) -> Context | str:
    """(task, pre-action state, metadata) from a metadata object; a reason string on failure."""
    try:
        task = task_from_metadata(meta, generator)
    except Exception as exc:  # the hardening the reference page documents
        print(f"[reward] Task construction failed: {exc}", file=sys.stderr, flush=True)
        return f"task construction failed: {exc}"
    missing = missing_task_fields(task)
    if missing:
        return f"task lacks required fields: {', '.join(missing)}"
    try:
        state = rebuild_state(meta, task)
    except (ValueError, KeyError, TypeError) as exc:
        return f"state rebuild failed: {exc}"
    # the situation the feedback reward judges an action in (computed once per prompt)
    meta["_situation"] = (str(meta.get("conflict_id")), task.domain, pressured_domain(state.metrics),
                          int(meta.get("difficulty") or 0))
    # the reference decision's episode value, which every answer's value is measured
    # against (lifestack.value; once per prompt, like the rebuilt state)
    meta["_reference"] = reference_value(task, state)
    return task, state, meta


class Evaluator:
    """Scores (prompt text, completion text) pairs; one per process is enough."""

    def __init__(self, prompt_cache_size: int = PROMPT_CACHE_SIZE, eval_cache_size: int = EVAL_CACHE_SIZE) -> None:
        self.prompts: dict[str, Context | str] = {}  # prompt text -> (task, state, meta) or a reason
        self.evaluations: dict[tuple[str, str], dict] = {}  # (prompt, completion) -> evaluation
        self.prompt_cache_size = prompt_cache_size
        self.eval_cache_size = eval_cache_size
        self._generator = TaskGenerator()
        self._env = LifeStackEnv()

    def context(self, text: str) -> Context | str:
        """Rebuild (task, pre-action state, metadata) from a prompt; a reason string on failure."""
        hit = self.prompts.get(text)
        if hit is not None:
            return hit
        meta = read_metadata(text)
        result = meta if isinstance(meta, str) else context_from_metadata(meta, self._generator)
        cache_put(self.prompts, text, result, self.prompt_cache_size)
        return result

    def evaluate(self, ptext: str, ctext: str,
                 on_fresh: Callable[[str, str, dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """``{"reward", "breakdown", "action"}`` (+ ``info``, ``situation`` for a parsed
        action), or the fallback (-0.5, ``breakdown["error"]``). Cached; may raise only
        on a bug (the caller guards). ``on_fresh(ptext, ctext, result)`` is called once
        per evaluation actually computed, never for a cached one (the trainer counts and
        logs what its policy wrote through it)."""
        key = (ptext, ctext)
        hit = self.evaluations.get(key)
        if hit is not None:
            return hit
        ctx = self.context(ptext)
        if isinstance(ctx, str):
            result = fallback(ctx)
        else:
            task, state, meta = ctx
            action, reason = parse_completion(ctext)
            if action is None:
                result = fallback(reason or "unparseable completion")
            else:
                reference = meta["_reference"]
                scored = score_decision(task, state, action, reference, self._env)
                obs = scored["observation"]
                step = obs.reward if math.isfinite(obs.reward) else FALLBACK_REWARD
                reward = scored["reward"] if math.isfinite(scored["reward"]) else FALLBACK_REWARD
                breakdown = obs.metadata["breakdown"]
                breakdown["decision.step_reward"] = step
                breakdown["decision.episode_value"] = scored["value"]
                breakdown["decision.reference_value"] = reference[0]
                breakdown["decision.continuation_turns"] = scored["turns"]
                breakdown["total"] = reward
                result = {"reward": reward, "step_reward": step, "breakdown": breakdown, "action": action,
                          "info": obs.metadata["info"], "situation": meta["_situation"]}
        cache_put(self.evaluations, key, result, self.eval_cache_size)
        if on_fresh is not None:
            on_fresh(ptext, ctext, result)
        return result

    def clear(self) -> None:
        self.prompts.clear()
        self.evaluations.clear()
