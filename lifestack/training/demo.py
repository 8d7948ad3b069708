"""What the demo page (``scripts/demo.py``) shows, without the page: episodes played by a
model, a reference policy or a person, one turn at a time, and each turn as display data
and HTML.

The episode is :class:`lifestack.episodes.Episode` (the engine the trainer's episode
mode, the evaluation and the server share): an answer that does not parse is a wasted
turn, time passes. A person's answer is parsed first and a bad one is refused with the
parser's reason, so it costs no turn. Every turn is scored by the environment (the task
reward and its breakdown) and by the six GRPO reward functions, handed in as a list
(:class:`Scorer`: this module never imports the training script), on the state the turn
answered, as a single decision is scored in training. An episode's reward is
``lifestack.value.episode_reward``: the turns' mean task reward blended with the
episode's outcome, as ``scripts/evaluate.py`` reports it.

Gradio is imported by ``lifestack.training.demo_app``, torch inside
:func:`stream_completion` only; everything else here is plain Python and HTML strings.
"""

from __future__ import annotations

import contextlib
import html
import json
import random
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator, Mapping, Sequence

from lifestack.actions import ACTION_TYPES
from lifestack.env import LifeStackEnv
from lifestack.generator import DOMAINS
from lifestack.episodes import MAX_HORIZON, Episode
from lifestack.scoring import parse_completion
from lifestack.metrics import DOMAIN_NAMES, INVERTED_METRICS, METRIC_PATHS, goodness
from lifestack.policies import HONEST, worst_metrics
from lifestack.prompts import ANSWER_SCHEMA, build_prompt, fmt_number, strip_metadata
from lifestack.scenarios import sample_scenario
from lifestack.training.grpo_rewards import REWARD_NAMES, reward_vector
from lifestack.value import episode_reward

FAMILIES = DOMAINS  # the task families, in the generator's order
REFERENCE_PLAYERS = ("heuristic", "rollout", "oracle", "random")  # lifestack.policies.HONEST names
COMPARISON_PLAYER = "heuristic"  # what plays the same episode beside the chosen player
MODEL_PLAYER = "model"
CONTEXTS = ("fresh", "conversation")  # what a model reads each turn (see model_messages)
MAX_SEED = 2**31 - 1
PRESSURED_SHOWN = 6  # metrics listed as under pressure, worst first (as the prompt lists them)
REWARD_LABELS = {
    "reward_format_fn": "format",
    "reward_plausibility_fn": "plausibility",
    "reward_task_success_fn": "task success",
    "reward_milestone_fn": "milestone",
    "reward_reasoning_fn": "reasoning",
    "reward_human_feedback_fn": "human feedback",
}
# The environment and the reward caches are shared by every visitor of the page: one turn
# is stepped and scored at a time (generation, the slow part, runs outside this lock).
WORLD_LOCK = threading.RLock()


# -- scoring ---------------------------------------------------------------------------
@dataclass
class Scorer:
    """The six GRPO reward functions (``scripts/train_trl.py``'s ``REWARD_FUNCS``, in
    REWARD_NAMES order) and their weights; ``quiet`` is a context in which calling them
    neither counts nor logs anything (the training script's ``RUN.in_phase("rescore")``)."""

    funcs: Sequence[Callable]
    weights: Mapping[str, float]  # REWARD_WEIGHTS: the rewards GRPO optimises, by name
    quiet: Callable[[], ContextManager] = contextlib.nullcontext

    def __post_init__(self) -> None:
        names = tuple(f.__name__ for f in self.funcs)
        if names != REWARD_NAMES:
            raise ValueError(f"expected the six reward functions {REWARD_NAMES}, got {names}")
        unknown = set(self.weights) - set(REWARD_NAMES)
        if unknown:
            raise ValueError(f"weights for unknown rewards: {', '.join(sorted(unknown))}")

    def vector(self, completion: str, prompt: Any) -> dict[str, float]:
        with self.quiet():
            return reward_vector(self.funcs, completion, prompt)

    def total(self, rewards: dict[str, float]) -> float:
        return sum(w * rewards[name] for name, w in self.weights.items())


# -- what a turn shows -------------------------------------------------------------------
@dataclass
class Situation:
    """A state as a person reads it: the pressured metrics, the budget, the routes, the events."""

    step: int  # 1-based, as the prompt says it
    horizon: int
    pressured: list[tuple[str, float, bool]]  # (path, value, lower is better), worst first
    budget: dict[str, float]  # what is left
    start_budget: dict[str, float]
    routes: list[dict[str, Any]]  # id, name, status, next (the next action types of an open route)
    events: list[str]
    facts: dict[str, Any]


@dataclass
class TurnView:
    """One played turn, as the page shows it."""

    number: int  # 1-based
    situation: Situation  # before the answer
    model_input: str  # the state as the model reads it (the user message, without its metadata block)
    completion: str  # the answer, exactly as written
    action: dict[str, Any] | None  # what the parser made of it (None: rejected)
    notes: list[str]  # what the parser forgave
    error: str | None  # why it was rejected
    info: list[str]  # what the environment answered
    task_reward: float
    parts: list[tuple[str, float]]  # the task reward's non-zero components and penalties
    rewards: dict[str, float]  # the six GRPO rewards
    total: float  # their weighted sum (what GRPO optimises)
    budget_after: dict[str, float]


@dataclass
class Summary:
    """A finished (or stopped) episode."""

    player: str
    turns: int
    outcome: str  # success | failure | timeout | running
    episode_reward: float | None  # None before the first turn
    mean_step_reward: float | None
    milestones: list[str]
    resources_kept: float


def situation(env: LifeStackEnv) -> Situation:
    s, task = env.state, env.task
    open_ids = set(env.open_routes())
    routes = []
    for r in task.viable_routes:
        done = s.route_progress.get(r.id, [])
        nxt: list[str] = []
        if r.id in s.closed_routes:
            status = "closed"
        elif len(done) >= len(r.required_action_types):
            status = "completed"
        elif r.id not in open_ids:
            status = "unavailable"
        else:
            status, nxt = "open", env.next_action_types(r.id)
        routes.append({"id": r.id, "name": r.name, "status": status, "next": nxt,
                       "progress": f"{len(done)}/{len(r.required_action_types)}"})
    return Situation(
        step=s.step + 1, horizon=task.horizon,
        pressured=[(p, s.metrics[p], p in INVERTED_METRICS) for p in worst_metrics(env, PRESSURED_SHOWN)],
        budget=dict(s.resources), start_budget=dict(s.budget), routes=routes,
        events=[e.description for e in task.event_schedule if e.id in s.events_fired],
        facts={k: s.world.get(k, v) for k, v in task.visible_world.items()},
    )


def breakdown_parts(breakdown: dict[str, Any]) -> list[tuple[str, float]]:
    """The task reward's components and penalties that are not 0, in the breakdown's order."""
    return [(k, float(v)) for k, v in breakdown.items()
            if k.startswith(("component.", "penalty.")) and isinstance(v, (int, float)) and abs(v) > 1e-9]


# -- playing -----------------------------------------------------------------------------
def resolve_seed(seed: Any, random_seed: bool) -> int:
    """The seed to play: a fresh one when asked for, else ``seed`` as an int in [0, MAX_SEED]."""
    if random_seed:
        return secrets.randbelow(MAX_SEED)
    try:
        value = int(float(seed))
    except (TypeError, ValueError):
        raise ValueError(f"seed must be a whole number, got {seed!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise ValueError(f"seed must lie in 0..{MAX_SEED}, got {value}")
    return value


def new_episode(family: str, difficulty: int, seed: int) -> Episode:
    """The seeded episode every player of the page meets (``sample_scenario``), up to the
    task's horizon of turns."""
    if family not in FAMILIES:
        raise ValueError(f"task family must be one of {', '.join(FAMILIES)}, got {family!r}")
    if int(difficulty) not in range(1, 6):
        raise ValueError(f"difficulty must lie in 1..5, got {difficulty!r}")
    sc = sample_scenario(int(seed), int(difficulty), family)
    return Episode.from_scenario(sc, min(sc.task.horizon, MAX_HORIZON))


def decision_prompt(ep: Episode) -> list[dict[str, str]]:
    """The current state as a fresh prompt: what a HORIZON = 1 model is trained on."""
    return build_prompt(ep.task, ep.conflict, ep.env.state, ep.difficulty, ep.seed)


def model_messages(ep: Episode, context: str) -> list[dict[str, str]]:
    """What a model reads this turn: ``fresh`` (the current state as one prompt, as the
    single-decision trainer and ``evaluate.py --horizon 1`` ask) or ``conversation`` (the
    episode so far, as episode mode and ``evaluate.py --horizon H`` ask)."""
    if context not in CONTEXTS:
        raise ValueError(f"context must be one of {CONTEXTS}, got {context!r}")
    return decision_prompt(ep) if context == "fresh" else [dict(m) for m in ep.messages]


def play_turn(ep: Episode, completion: str, scorer: Scorer, read: Sequence[Mapping[str, str]] | None = None) -> TurnView:
    """Step ``completion`` through the episode and score it; the turn as the page shows it.
    ``read``: the messages the player answered (``model_messages``), whose last one the page
    shows as what it read; by default the current state as a fresh prompt."""
    with WORLD_LOCK:
        before = situation(ep.env)
        seen = strip_metadata((read or decision_prompt(ep))[-1]["content"]).strip()
        turn = ep.step(completion)
        rewards = scorer.vector(turn.completion, turn.prompt)  # the state the turn answered (its metadata)
        parsed, _reason = parse_completion(completion)
    return TurnView(
        number=len(ep.turns), situation=before, model_input=seen, completion=completion, action=turn.action,
        notes=list(parsed.notes) if parsed is not None else [],
        error=None if turn.action is not None else str(turn.breakdown.get("error", "unparseable")),
        info=list(turn.info), task_reward=float(turn.reward), parts=breakdown_parts(turn.breakdown),
        rewards=rewards, total=scorer.total(rewards), budget_after=dict(ep.env.state.resources),
    )


def summary(ep: Episode, player: str) -> Summary:
    outcome = ep.outcome()
    rewards = [t.reward for t in ep.turns]
    return Summary(player=player, turns=len(rewards), outcome=ep.env.state.outcome,
                   episode_reward=episode_reward(rewards, outcome["score"]) if rewards else None,
                   mean_step_reward=sum(rewards) / len(rewards) if rewards else None,
                   milestones=list(outcome["milestones_reached"]), resources_kept=float(outcome["resources_kept"]))


def policy_answer(name: str, seed: int) -> Callable[[Episode], str]:
    """A reference policy of ``lifestack.policies.HONEST`` as a player of one episode (one
    ``random.Random(seed)`` for the whole episode: the same seed plays the same answers)."""
    if name not in REFERENCE_PLAYERS:
        raise ValueError(f"policy must be one of {', '.join(REFERENCE_PLAYERS)}, got {name!r}")
    policy, rng = HONEST[name], random.Random(seed)
    return lambda ep: policy(ep.env, rng)


def play_policy(name: str, family: str, difficulty: int, seed: int, scorer: Scorer) -> Iterator[tuple[Episode, TurnView]]:
    """A reference policy plays the seeded episode to its end, one turn per item."""
    ep = new_episode(family, difficulty, seed)
    answer = policy_answer(name, seed)
    while not ep.done:
        with WORLD_LOCK:
            text = answer(ep)
        yield ep, play_turn(ep, text, scorer)


def stream_completion(model, tokenizer, messages: list[dict[str, str]], max_new_tokens: int,
                      lock: threading.Lock | None = None) -> Iterator[tuple[str, bool]]:
    """A greedy answer of ``model`` to ``messages``, as ``(text so far, finished)`` while it
    generates; the last item holds the whole answer (the generated tokens decoded as
    ``lifestack.training.generation.generate_completions`` decodes them). Padded on the
    left by ``lifestack.rollout.left_padded`` and generated in generation mode
    (``lifestack.training.generation.generation_mode``), as every generate call is.

    ``lock``: held by the generating thread for the whole ``generate`` call, so the page's
    visitors share one model one answer at a time while everything else (a reference
    policy's episode, a person's turn) runs beside it. The worker thread holds it, not this
    generator: a visitor who leaves mid-answer closes the generator, but the generation
    goes on to its end and the next one waits for it."""
    import torch
    from transformers import TextIteratorStreamer

    from lifestack.rollout import left_padded
    from lifestack.training.generation import generation_mode

    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    input_ids, attention_mask = left_padded([tokenizer(text, add_special_tokens=False)["input_ids"]], pad,
                                            next(model.parameters()).device)
    streamer = TextIteratorStreamer(tokenizer, skip_prompt=True, skip_special_tokens=True)
    result: dict[str, Any] = {}

    def generate() -> None:
        try:
            with lock or contextlib.nullcontext(), torch.no_grad():
                generation_mode(model)  # the page only generates: the model stays in generation mode
                result["ids"] = model.generate(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=max_new_tokens,
                                               do_sample=False, streamer=streamer, pad_token_id=pad,
                                               eos_token_id=tokenizer.eos_token_id)
        except BaseException as exc:  # reported below, in the caller's thread
            result["error"] = exc
            streamer.end()

    worker = threading.Thread(target=generate, name="demo-generate", daemon=True)
    worker.start()
    so_far = ""
    for piece in streamer:
        so_far += piece
        yield so_far, False
    worker.join()
    if "error" in result:
        raise result["error"]
    new = result["ids"][0, input_ids.shape[1]:]
    yield tokenizer.decode(new, skip_special_tokens=True), True


# -- a person's answer ---------------------------------------------------------------------
def _number_or_text(value: str) -> Any:
    try:
        x = float(value)
    except ValueError:
        return value  # the parser says what is wrong with it
    return int(x) if x.is_integer() and "." not in value and "e" not in value.lower() else x


def parse_changes(text: str) -> Any:
    """The metric changes a person typed: a JSON object, or one ``domain.metric: delta``
    (or ``=``) per line. Kept as typed where it is not a number: the action parser, not
    this form, says what is wrong."""
    text = (text or "").strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            return json.loads(text)
        except ValueError:
            return text
    out: dict[str, Any] = {}
    for line in text.replace(",", "\n").splitlines():
        line = line.strip()
        if not line:
            continue
        m = re.match(r"^([^:=\s]+)\s*[:=]\s*(.*)$", line)
        key, value = (m.group(1), m.group(2)) if m else (line, "")
        out[key] = _number_or_text(value)
    return out


def form_problem(changes: str) -> str | None:
    """Why the form's metric changes cannot be what the person meant, before any turn is
    played: a name that is no ``domain.metric`` (a misspelling, a missing colon, a decimal
    comma such as ``1,5`` read as two entries). None when every name is a metric; the
    values are left to the action parser."""
    parsed = parse_changes(changes)
    if not isinstance(parsed, dict):
        return None  # not an object: the parser's own message says so
    unknown = [k for k in parsed if k not in METRIC_PATHS]
    if not unknown:
        return None
    return (f"unknown metric {unknown[0]!r} in the metric changes: write one 'domain.metric: delta' per line, "
            f"e.g. 'mental_wellbeing.stress_level: -5' (a decimal point, not a comma)")


def form_action(action_type: Any, target_domain: Any, route: Any, changes: str, time_cost: Any, money: Any,
                energy: Any, reasoning: Any) -> str:
    """The JSON answer a person's form stands for (``route`` "" or "none": no route)."""
    route = None if route in (None, "", "none", "(none)") else route
    return json.dumps({
        "action_type": action_type, "target_domain": target_domain, "route": route,
        "metric_changes": parse_changes(changes),
        "resource_cost": {"time": time_cost, "money": money, "energy": energy},
        "reasoning": reasoning or "",
    })


@dataclass
class HumanGame:
    """A person's episode on the page: the episode and the turns played so far."""

    episode: Episode
    turns: list[TurnView] = field(default_factory=list)

    @classmethod
    def start(cls, family: str, difficulty: int, seed: int) -> HumanGame:
        return cls(new_episode(family, difficulty, seed))

    def answer(self, text: str, scorer: Scorer) -> tuple[TurnView | None, str | None]:
        """Play a person's answer: ``(turn, None)``, or ``(None, reason)`` when the parser
        rejects it (the episode does not move on) or the episode is over."""
        if self.episode.done:
            return None, "the episode is over: start a new one"
        action, reason = parse_completion(text)
        if action is None:
            return None, reason or "not a valid action"
        view = play_turn(self.episode, text, scorer)
        self.turns.append(view)
        return view, None


# -- a training run's folder -------------------------------------------------------------------
def is_run_folder(path: str | Path | None) -> bool:
    """A training output folder (``OUTPUT_DIR``): a model card or a curriculum state in it."""
    if not path:
        return False
    p = Path(path)
    return p.is_dir() and ((p / "README.md").is_file() or (p / "curriculum_state.json").is_file())


def card_tables(markdown: str) -> str:
    """The model card's tables, each under its heading with the lines that introduce it,
    and its warnings (quoted blocks); the YAML metadata and the prose left out."""
    lines = markdown.splitlines()
    if lines and lines[0].strip() == "---":  # the hub's metadata block
        end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), 0)
        lines = lines[end + 1:]
    out: list[str] = []
    heading: str | None = None
    paragraph: list[str] = []  # the last paragraph seen: it introduces the table after it
    ended = True
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading, paragraph, ended = line, [], True
        elif line.startswith(">"):
            out.append(line)
            if i + 1 < len(lines) and not lines[i + 1].startswith(">"):
                out.append("")
        elif line.startswith("|"):
            table = []
            while i < len(lines) and lines[i].startswith("|"):
                table.append(lines[i])
                i += 1
            if heading is not None:
                out += [heading, ""]
                heading = None
            out += paragraph + ([""] if paragraph else []) + table + [""]
            paragraph, ended = [], True
            continue
        elif not line.strip():
            ended = True
        else:
            paragraph = [line] if ended else paragraph + [line]
            ended = False
        i += 1
    return "\n".join(out).strip()


def run_plots(path: str | Path) -> list[Path]:
    """The plots a run copied next to its model card (PNG files), sorted by name."""
    return sorted(Path(path).glob("*.png"))


# -- HTML -----------------------------------------------------------------------------------
def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def signed(x: float | None) -> str:
    """How every reward on the page is written: a sign and three decimals."""
    return "n/a" if x is None else f"{x:+.3f}"


def _budget(b: dict[str, float]) -> str:
    return f"{fmt_number(b['time'])} h, ${fmt_number(b['money'])}, energy {fmt_number(b['energy'])}"


def situation_html(s: Situation) -> str:
    rows = "".join(
        f"<tr><td>{_e(p)}</td><td class='ls-num'>{_e(fmt_number(v))}</td>"
        f"<td class='ls-bar'><span style='width:{goodness(p, v):.0f}%'></span></td>"
        f"<td class='ls-dim'>{'lower is better' if inv else ''}</td></tr>" for p, v, inv in s.pressured)
    routes = "".join(
        f"<li class='ls-route ls-route-{_e(r['status'])}'><b>{_e(r['id'])}</b> ({_e(r['name'])}): {_e(r['status'])}"
        + (f", next step <code>{_e(r['next'][0])}</code>" if r["next"] else "") + f" [{_e(r['progress'])}]</li>"
        for r in s.routes)
    events = "".join(f"<li>{_e(e)}</li>" for e in s.events) or "<li class='ls-dim'>none yet</li>"
    return (f"<div class='ls-situation'><div class='ls-step'>step {s.step} of {s.horizon}</div>"
            f"<div class='ls-cols'><div><div class='ls-label'>under pressure (0-100; the bar: how healthy)</div>"
            f"<table class='ls-metrics'>{rows}</table></div>"
            f"<div><div class='ls-label'>budget left</div><div class='ls-budget'>{_e(_budget(s.budget))}"
            f" <span class='ls-dim'>of {_e(_budget(s.start_budget))}</span></div>"
            f"<div class='ls-label'>routes</div><ul class='ls-routes'>{routes}</ul>"
            f"<div class='ls-label'>events</div><ul class='ls-events'>{events}</ul></div></div></div>")


def _answer_text(completion: str) -> str:
    """The answer as written; a bare JSON object pretty-printed (same keys, same values)."""
    try:
        obj = json.loads(completion)
    except ValueError:
        return completion
    return json.dumps(obj, indent=2) if isinstance(obj, dict) else completion


def rewards_html(view: TurnView, weights: Mapping[str, float] | None = None) -> str:
    rows = "".join(
        f"<tr data-reward='{_e(name)}'><td>{_e(REWARD_LABELS[name])}</td>"
        + (f"<td class='ls-dim'>x{w:g}</td>" if weights is not None else "")
        + f"<td class='ls-num ls-grpo-value'>{signed(view.rewards[name])}</td></tr>"
        for name, w in ((n, weights.get(n, 0.0) if weights is not None else None) for n in REWARD_NAMES))
    return (f"<table class='ls-grpo'><tr><th colspan='3'>six GRPO rewards</th></tr>{rows}"
            f"<tr class='ls-grpo-total'><td>weighted total</td>{'<td></td>' if weights is not None else ''}"
            f"<td class='ls-num'>{signed(view.total)}</td></tr></table>")


def turn_html(view: TurnView, weights: Mapping[str, float] | None = None, show_state: bool = True) -> str:
    parts = "".join(f"<tr><td>{_e(k.split('.', 1)[1])}</td><td class='ls-num'>{signed(v)}</td></tr>"
                    for k, v in view.parts) or "<tr><td class='ls-dim'>none</td></tr>"
    info = "".join(f"<li>{_e(m)}</li>" for m in view.info) or "<li class='ls-dim'>nothing happened</li>"
    error = (f"<div class='ls-error'>not a valid action: {_e(view.error)} (a wasted turn: time passed)</div>"
             if view.error else "")
    notes = (f"<div class='ls-dim'>the parser forgave: {_e(', '.join(view.notes))}</div>" if view.notes else "")
    state = ""
    if show_state:
        state = (situation_html(view.situation)
                 + f"<details><summary>the state as the model reads it</summary><pre class='ls-prompt'>"
                 f"{_e(view.model_input)}</pre></details>")
    return (f"<div class='ls-turn' data-turn='{view.number}'><div class='ls-turn-head'>turn {view.number}</div>{state}"
            f"<div class='ls-label'>answer</div><pre class='ls-action'>{_e(_answer_text(view.completion))}</pre>"
            f"{error}{notes}<div class='ls-label'>the environment answered</div><ul class='ls-info'>{info}</ul>"
            f"<div class='ls-scores'><div><div class='ls-reward'>task reward <b class='ls-task-reward'>"
            f"{signed(view.task_reward)}</b></div><table class='ls-parts'>{parts}</table>"
            f"<div class='ls-dim'>budget left: {_e(_budget(view.budget_after))}</div></div>"
            f"<div>{rewards_html(view, weights)}</div></div></div>")


def pending_html(number: int, text: str, started: float) -> str:
    """A model's turn while it generates: the answer so far and the time it has taken."""
    return (f"<div class='ls-turn ls-pending' data-turn='{number}'><div class='ls-turn-head'>turn {number}: "
            f"generating... {time.monotonic() - started:.0f} s, {len(text)} characters</div>"
            f"<pre class='ls-action'>{_e(text) or '...'}</pre></div>")


def summary_html(s: Summary) -> str:
    return (f"<div class='ls-summary' data-player='{_e(s.player)}'><b>{_e(s.player)}</b>: "
            f"<span class='ls-outcome'>{_e(s.outcome)}</span> after <span class='ls-turns'>{s.turns}</span> turns; "
            f"episode reward <b class='ls-episode-reward'>{signed(s.episode_reward)}</b> "
            f"(mean step reward {signed(s.mean_step_reward)}, {len(s.milestones)} milestones, "
            f"{s.resources_kept:.0%} of the budget kept)</div>")


def comparison_html(summaries: Sequence[Summary]) -> str:
    rows = "".join(
        f"<tr data-player='{_e(s.player)}'><td>{_e(s.player)}</td><td class='ls-outcome'>{_e(s.outcome)}</td>"
        f"<td class='ls-num ls-turns'>{s.turns}</td><td class='ls-num ls-episode-reward'>{signed(s.episode_reward)}</td>"
        f"<td class='ls-num'>{signed(s.mean_step_reward)}</td><td class='ls-num'>{len(s.milestones)}</td>"
        f"<td class='ls-num'>{s.resources_kept:.0%}</td></tr>" for s in summaries)
    return ("<table class='ls-comparison'><tr><th>player</th><th>outcome</th><th>turns</th><th>episode reward</th>"
            f"<th>mean step reward</th><th>milestones</th><th>budget kept</th></tr>{rows}</table>")


def episode_html(player: str, views: Sequence[TurnView], weights: Mapping[str, float] | None = None,
                 done: Summary | None = None, pending: str = "") -> str:
    body = "".join(turn_html(v, weights) for v in views) + pending
    tail = summary_html(done) if done is not None else ""
    return f"<div class='ls-episode' data-player='{_e(player)}'><h3>{_e(player)}</h3>{body}{tail}</div>"


def scenario_html(ep: Episode, family: str) -> str:
    c, t = ep.conflict, ep.task
    return (f"<div class='ls-scenario' data-seed='{ep.seed}'><b>{_e(c.title)}</b> "
            f"<span class='ls-dim'>({_e(family)}, difficulty {ep.difficulty}, seed <span class='ls-seed'>{ep.seed}"
            f"</span>, at most {ep.horizon} turns)</span><div>{_e(c.story)}</div><div><b>goal:</b> {_e(t.goal)}</div>"
            f"</div>")


def message_html(text: str, kind: str = "error") -> str:
    return f"<div class='ls-{_e(kind)}'>{_e(text)}</div>"


def schema_text() -> str:
    return f"One JSON object: {ANSWER_SCHEMA}"


ACTION_CHOICES = tuple(ACTION_TYPES)
DOMAIN_CHOICES = tuple(DOMAIN_NAMES)

CSS = """
.ls-turn { border: 1px solid #d0d4dc; border-radius: 8px; padding: 8px 10px; margin: 8px 0; }
.ls-pending { border-style: dashed; }
.ls-turn-head { font-weight: 600; margin-bottom: 4px; }
.ls-label { font-size: 0.8em; text-transform: uppercase; letter-spacing: 0.04em; color: #667; margin-top: 6px; }
.ls-dim { color: #778; font-size: 0.9em; }
.ls-cols, .ls-scores { display: flex; gap: 16px; flex-wrap: wrap; }
.ls-cols > div, .ls-scores > div { flex: 1 1 220px; }
.ls-turn table, .ls-turn tbody, .ls-turn tr, .ls-situation table, .ls-situation tbody, .ls-situation tr {
  border: none !important; border-collapse: collapse; margin: 2px 0; }
.ls-turn td, .ls-turn th, .ls-situation td { padding: 1px 6px !important; font-size: 0.9em; white-space: nowrap; border: none !important;
  border-bottom: 1px solid #eceef2 !important; }
.ls-num { text-align: right; font-variant-numeric: tabular-nums; }
.ls-bar { width: 80px; } .ls-bar span { display: block; height: 8px; background: #e07a5f; border-radius: 4px; }
pre.ls-action, pre.ls-prompt { white-space: pre-wrap; word-break: break-word; font-size: 0.85em;
  background: #f4f5f8; color: #222; padding: 6px; border-radius: 6px; margin: 2px 0; }
.ls-error { color: #9b1c1c; background: #fde8e8; border-radius: 6px; padding: 6px 8px; margin: 4px 0; }
.ls-info-box { background: #e8f0fd; border-radius: 6px; padding: 6px 8px; margin: 4px 0; }
.ls-reward { font-size: 1.05em; } .ls-grpo-total td { font-weight: 600; border-top: 1px solid #ccd; }
.ls-summary { margin: 8px 0; padding: 6px 8px; background: #eef7ee; border-radius: 6px; }
.ls-comparison td, .ls-comparison th { padding: 2px 8px; }
.ls-routes, .ls-events, .ls-info { margin: 2px 0 2px 18px; padding: 0; }
.ls-route-closed, .ls-route-unavailable { color: #889; }
"""
