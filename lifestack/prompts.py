"""What the model reads: the prompt of a pre-action state and the environment's turn.

One rendering for every consumer (the GRPO trainer, its evaluation, the episode runner,
the HTTP service), so a policy trained on one reads the same text from the others.

Every rendered state carries a ``<SYSTEM_METADATA>`` block: the JSON that rebuilds the
exact state (``lifestack.scenarios.rebuild_state``). A reward reads only that block, so
a completion cannot change the state it is scored against, and any turn of an episode
can be scored on its own.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Sequence

from .actions import ACTION_TYPES
from .conflicts import ConflictEvent
from .env import EpisodeState, LifeStackEnv
from .metrics import DOMAIN_NAMES, DOMAINS, INVERTED_METRICS, METRIC_PATHS, goodness
from .scenarios import Scenario, scenario_metadata
from .tasks import Task

SYSTEM_PROMPT = (
    "You are LifeStack, a calm planner who resolves life conflicts. Read the situation and reply with "
    "exactly one JSON object (no prose before or after) describing the single best next action."
)
METADATA_OPEN, METADATA_CLOSE = "<SYSTEM_METADATA>", "</SYSTEM_METADATA>"
METADATA_RE = re.compile(re.escape(METADATA_OPEN) + r"(.*?)" + re.escape(METADATA_CLOSE), re.S)
ANSWER_SCHEMA = (
    '{"action_type": "<one of: ' + ", ".join(ACTION_TYPES) + '>", "target_domain": "<one of: '
    + ", ".join(DOMAIN_NAMES) + '>", "route": "<route id or null>", "metric_changes": {"domain.metric": <delta>}, '
    '"resource_cost": {"time": <hours>, "money": <dollars>, "energy": <units>}, "reasoning": "<one or two sentences>"}'
)
RULES = ("Claimed metric improvements must be paid for with time, money or energy; an action you cannot afford fails "
         "(the further over budget, the bigger the penalty); costs are never negative (rest may recover energy).")
NEXT_ANSWER = "Answer with one JSON object for your next action, in the same format."
MAX_CHANGES_SHOWN = 6  # metric changes listed in an environment turn, largest first


def fmt_number(x: float) -> str:
    """One decimal, trailing zeros dropped; large numbers in full."""
    return f"{x:g}" if abs(x) >= 1000 else f"{x:.1f}".rstrip("0").rstrip(".")


def metadata_block(task: Task, conflict: ConflictEvent, state: EpisodeState, difficulty: int, seed: int) -> str:
    meta = scenario_metadata(Scenario(seed, difficulty, task, conflict, state, 0))
    return f"{METADATA_OPEN}{json.dumps(meta, separators=(',', ':'))}{METADATA_CLOSE}"


def state_lines(task: Task, state: EpisodeState) -> list[str]:
    """The part of a prompt that changes from step to step: step and events, the most
    damaged metrics, domain health, budget left and the routes' status."""
    m = state.metrics
    worst = sorted(METRIC_PATHS, key=lambda p: goodness(p, m[p]))[:6]
    metric_lines = [f"  {p}: {fmt_number(m[p])}{' (lower is better)' if p in INVERTED_METRICS else ''}" for p in worst]
    domains = ", ".join(
        f"{d} {sum(goodness(f'{d}.{x}', m[f'{d}.{x}']) for x in ms) / len(ms):.0f}" for d, ms in DOMAINS.items()
    )
    env = LifeStackEnv()
    env.restore(task, state, observe=False)
    open_ids = set(env.open_routes())
    route_lines = []
    for r in task.viable_routes:
        done = state.route_progress.get(r.id, [])
        if r.id in state.closed_routes:
            status = "CLOSED"
        elif len(done) == len(r.required_action_types):
            status = "completed"
        elif r.id not in open_ids:
            status = "unavailable (preconditions not met)"
        else:
            status = "open; next steps: " + ", ".join(a for a in r.required_action_types if a not in done)
        route_lines.append(f"  - {r.id} ({r.name}): {status}. {r.description}")
    events = [e.description for e in task.event_schedule if e.id in state.events_fired]
    res = state.resources
    return [
        f"STEP {state.step + 1} of {task.horizon}. Events so far: {' '.join(events) if events else 'none'}",
        "MOST DAMAGED METRICS (0-100):",
        *metric_lines,
        f"DOMAIN HEALTH (0-100, higher is better): {domains}",
        f"BUDGET LEFT: time {fmt_number(res['time'])} h, money ${fmt_number(res['money'])}, energy {fmt_number(res['energy'])}",
        "ROUTES (name one in \"route\" with one of its next steps as action_type to advance it):",
        *route_lines,
    ]


def facts_line(task: Task, state: EpisodeState) -> str:
    # visible facts as they stand now (an event may have changed one, e.g. the fare)
    return "FACTS: " + ", ".join(f"{k}: {state.world.get(k, v)}" for k, v in task.visible_world.items())


def build_prompt(task: Task, conflict: ConflictEvent, state: EpisodeState, difficulty: int, seed: int) -> list[dict[str, str]]:
    """System + user messages for one pre-action state (no hidden state revealed)."""
    user = "\n".join([
        metadata_block(task, conflict, state, difficulty, seed),
        f"GOAL: {task.goal}",
        f"SITUATION: {conflict.title}. {conflict.story}",
        facts_line(task, state),
        *state_lines(task, state),
        RULES,
        f"Answer with one JSON object: {ANSWER_SCHEMA}",
    ])
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def scenario_prompt(sc: Scenario) -> list[dict[str, str]]:
    """:func:`build_prompt` of a sampled scenario's own state: a training prompt of
    ``generate_dataset``, a held-out prompt, a demonstration's prompt alike."""
    return build_prompt(sc.task, sc.conflict, sc.state, sc.difficulty, sc.seed)


def metric_changes(before: Mapping[str, float], after: Mapping[str, float], limit: int = MAX_CHANGES_SHOWN) -> list[str]:
    """``path before -> after`` for the metrics that moved, largest move first."""
    moved = [(abs(after[p] - before[p]), p) for p in METRIC_PATHS if abs(after[p] - before[p]) >= 0.05]
    moved.sort(key=lambda x: (-x[0], x[1]))
    return [f"{p} {fmt_number(before[p])} -> {fmt_number(after[p])}" for _, p in moved[:limit]]


def render_observation(task: Task, conflict: ConflictEvent, before: EpisodeState, after: EpisodeState,
                       info: Sequence[str], difficulty: int, seed: int) -> str:
    """The environment's turn after an action: what happened, then the new state.

    ``info`` is the step's plain-words messages (``Observation.metadata["info"]``). The
    text ends by asking for the next action; its metadata block describes ``after``.
    """
    changes = metric_changes(before.metrics, after.metrics)
    spent = {k: before.resources[k] - after.resources[k] for k in after.resources}
    spent_text = ", ".join(f"{k} {fmt_number(v)}" for k, v in spent.items() if abs(v) >= 0.05) or "nothing"
    return "\n".join([
        metadata_block(task, conflict, after, difficulty, seed),
        "RESULT OF YOUR ACTION: " + ("; ".join(info) if info else "nothing happened"),
        "METRICS CHANGED: " + (", ".join(changes) if changes else "none"),
        f"RESOURCES USED: {spent_text}",
        facts_line(task, after),
        *state_lines(task, after),
        NEXT_ANSWER,
    ])


def completion_text(completion: Any) -> str:
    """The assistant text of a completion: a string or ``[{"role": ..., "content": ...}]``."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        if len(completion) == 1 and isinstance(completion[0], dict):  # what TRL passes: one assistant message
            m = completion[0]
            content = m.get("content", "")
            if m.get("role", "assistant") == "assistant" and isinstance(content, str):
                return content  # the same object each call: its hash (the cache key) is computed once
        parts = [m.get("content", "") for m in completion if isinstance(m, dict) and m.get("role", "assistant") == "assistant"]
        return "".join(p for p in parts if isinstance(p, str))
    if isinstance(completion, dict):
        content = completion.get("content", "")
        return content if isinstance(content, str) else ""
    return ""


def prompt_text(prompt: Any) -> str:
    """The last user message of a conversational prompt (or the prompt string itself):
    the one that holds the state an answer is scored against."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        for m in reversed(prompt):  # the last user message
            if isinstance(m, dict) and m.get("role") == "user":
                content = m.get("content", "")
                return content if isinstance(content, str) else ""
    return ""


def metadata_spans(text: str):
    """``(start, end, body start, body end)`` of each complete ``<SYSTEM_METADATA>...</SYSTEM_METADATA>``
    block, leftmost first, as ``METADATA_RE`` would match them, found in one linear pass
    (the lazy regex rescans to the end from every unclosed opening tag: a text of many
    opening tags took time in the square of its length)."""
    i, n_open, n_close = 0, len(METADATA_OPEN), len(METADATA_CLOSE)
    while True:
        a = text.find(METADATA_OPEN, i)
        if a < 0:
            return
        b = text.find(METADATA_CLOSE, a + n_open)
        if b < 0:  # no later opening tag can have a closing tag either
            return
        yield a, b + n_close, a + n_open, b
        i = b + n_close


def strip_metadata(text: str) -> str:
    """Remove any <SYSTEM_METADATA> block a completion carries: only the prompt's counts.
    Linear in the text's length."""
    if METADATA_OPEN not in text:
        return text
    parts, i = [], 0
    for start, end, _, _ in metadata_spans(text):
        parts.append(text[i:start])
        i = end
    if i == 0:
        return text
    parts.append(text[i:])
    return "".join(parts)


def read_metadata(text: str) -> dict[str, Any] | str:
    """The metadata object of a rendered state; a reason string when there is none or it
    is not a JSON object."""
    span = next(metadata_spans(text), None)
    if span is None:
        return "prompt has no <SYSTEM_METADATA> block"
    try:
        meta = json.loads(text[span[2]:span[3]])
    except (ValueError, RecursionError) as exc:
        return f"unreadable metadata: {exc}"
    if not isinstance(meta, dict):
        return "unreadable metadata: metadata is not an object"
    return meta
