"""LifeStackEnv: a thin, deterministic layer over the pure pieces of the package.

``reset`` builds the pre-crisis life, applies the task's and the conflict's disruptions
through the dependency graph, and returns an :class:`Observation`. ``step`` takes a
:class:`LifeStackAction` (or text / a dict, parsed with :func:`parse_action`). Same seed
and same actions give identical observations, rewards and infos.

``snapshot()`` returns a small JSON-safe dict of the episode state. ``restore(task,
state)`` continues from an ``EpisodeState``: the trainer's reward code rebuilds the state
a prompt was written from out of the prompt's metadata (``scenarios.rebuild_state``) and
restores it here.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any, Mapping, NamedTuple

from .actions import LifeStackAction, with_notes, parse_action
from .conflicts import ConflictEvent
from .faithfulness import faithfulness
from .generator import TaskGenerator
from .graph import DEFAULT_GRAPH, DependencyGraph
from .metrics import METRIC_PATHS, RESOURCE_NAMES, clamp_metric, default_metrics, goodness, goodness_delta
from .task_reward import (
    DAMAGED_BELOW,
    P_INVALID_ACTION,
    StepOutcome,
    reasoning_coherence,
    task_reward,
    vocabulary_of,
)
from .task_index import TaskIndex, task_index
from .tasks import (
    Task,
    all_hold,
    any_holds,
    condition_holds,
    missing_task_fields,
)

# --- the economics of an action ----------------------------------------------------------
# Claimed improvements are only real when paid for: each resource buys goodness points.
FREE_EFFECT = 0.0  # points an action may claim unpaid: none (a free allowance lets tiny claims win for free)
POINTS_PER_HOUR = 2.0
POINTS_PER_DOLLAR = 1.0 / 50.0
POINTS_PER_ENERGY = 0.4
# Paying also costs the life: money drains liquidity, hours drain free time, energy drains
# physical energy. These are applied as ordinary metric changes.
LIQUIDITY_PER_DOLLAR = 1.0 / 100.0
FREE_HOURS_PER_HOUR = 0.5
ENERGY_METRIC_PER_UNIT = 0.2
MAX_INTRINSIC = 12.0  # cap on any one intrinsic cost, in raw points
REST_ENERGY_PER_HOUR = 5.0  # rest recovers at most this much energy per hour rested
CASCADE_TRIGGER = 6.0  # the part of an applied change beyond this many points spreads through the graph
SNAPSHOT_VERSION = 1


@dataclass(slots=True)
class Observation:
    metrics: dict[str, float]
    resources: dict[str, float]
    step: int
    done: bool
    reward: float
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class EpisodeState:
    seed: int
    metrics: dict[str, float]
    resources: dict[str, float]
    budget: dict[str, float]  # the starting budget (efficiency and rest caps use it)
    world: dict[str, Any]
    hidden: dict[str, Any]
    step: int = 0
    route_progress: dict[str, list[str]] = field(default_factory=dict)
    closed_routes: list[str] = field(default_factory=list)
    milestones: list[str] = field(default_factory=list)
    events_fired: list[str] = field(default_factory=list)
    done: bool = False
    outcome: str = "running"  # running | success | failure | timeout
    # Facts derived from this exact state (damaged metrics, ...), cached because the
    # trainer scores many completions against one pre-action state. Never serialised;
    # dropped whenever the state changes.
    derived: tuple[str, StateContext] | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready snapshot (every field but ``derived``; floats unrounded: JSON floats
        round-trip exactly); inverse of :meth:`from_dict`."""
        return {"v": SNAPSHOT_VERSION, **{name: copy(getattr(self, name)) for name, copy, _ in _STATE_FIELDS}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EpisodeState:
        if d.get("v") != SNAPSHOT_VERSION:
            raise ValueError(f"unsupported snapshot version {d.get('v')!r}")
        return cls(*[read(d[name]) for name, _, read in _STATE_FIELDS])

    def clone(self) -> EpisodeState:
        return EpisodeState(*[copy(getattr(self, name)) for name, copy, _ in _STATE_FIELDS], self.derived)


def _state_field_codecs() -> tuple[tuple[str, Any, Any], ...]:
    """(name, copy, read) for each snapshot field of EpisodeState, in order, from its
    annotations: ``copy`` makes an independent copy (clone, to_dict), ``read`` checks and
    converts a JSON value back (from_dict; metrics and resources must have every key)."""
    keys = {"metrics": METRIC_PATHS, "resources": RESOURCE_NAMES, "budget": RESOURCE_NAMES}
    by_type = {
        "int": (int, int), "bool": (bool, bool), "str": (str, str),
        "dict[str, Any]": (dict, dict), "list[str]": (list, list),
        "dict[str, list[str]]": (lambda v: {k: list(x) for k, x in v.items()},
                                 lambda v: {str(k): list(x) for k, x in v.items()}),
    }
    out = []
    for f in fields(EpisodeState):
        if f.name == "derived":
            continue
        if f.name in keys:
            names = keys[f.name]
            out.append((f.name, dict, lambda v, names=names: {k: float(v[k]) for k in names}))
        else:
            copy, read = by_type[f.type]
            out.append((f.name, (lambda v: v) if copy in (int, bool, str) else copy, read))
    return tuple(out)


_STATE_FIELDS = _state_field_codecs()


def round_state(state: EpisodeState) -> None:
    """Round ``state``'s metrics and resources to two decimals, in place."""
    # Rounded once per rendered state (a sampled scenario, and after each episode step),
    # so the prompt, the metadata and the rebuilt state agree exactly.
    state.metrics = {p: round(v, 2) for p, v in state.metrics.items()}
    state.resources = {k: round(v, 2) for k, v in state.resources.items()}
    state.derived = None  # facts derived from the unrounded values no longer apply


class Acted(NamedTuple):
    """What acting did (LifeStackEnv._act): an unaffordable action did nothing."""

    affordable: bool
    spent_fraction: float = 0.0
    route_status: str = "none"
    route_fraction: float = 0.0
    route_value: float = 0.0
    claimed_gain: float = 0.0
    plausibility: float = 1.0
    cascade_harm: float = 0.0
    good_changes: dict[str, float] = {}  # read-only here: never mutated
    overspend: float = 0.0


class StateContext(NamedTuple):
    """What the reward needs to know about a pre-action state, computed once per state."""

    damaged: frozenset[str]  # metrics with goodness below DAMAGED_BELOW
    damaged_top: tuple[str, ...]  # the worst four of them (what a reasoning should cite)
    damaged_vocab: frozenset[str]
    event_words: frozenset[str]  # words of the events seen before acting
    best_step_reward: float


def initial_state(task: Task, conflict: ConflictEvent | None, seed: int, graph: DependencyGraph = DEFAULT_GRAPH) -> EpisodeState:
    """The pre-action state: a goodness-70-everywhere life hit by the task's and conflict's disruptions."""
    metrics = default_metrics()
    disruption: dict[str, float] = dict(task.domain_metadata.get("disruption", {}))
    if conflict is not None:
        for path, delta in conflict.primary_disruption.items():
            disruption[path] = disruption.get(path, 0.0) + delta
    metrics = graph.cascade(metrics, disruption).values
    budget = {k: float(task.constraints["budget"][k]) for k in RESOURCE_NAMES}
    return EpisodeState(
        seed=seed, metrics=metrics, resources=dict(budget), budget=budget,
        world=dict(task.mutable_world), hidden=dict(task.hidden_state),
    )


@lru_cache(maxsize=65536)
def event_roll(seed: int, event_id: str) -> float:
    """The episode's deterministic roll for one event (stable across processes)."""
    return random.Random(f"{seed}:{event_id}").random()


class LifeStackEnv:
    """Gymnasium-flavoured environment over a :class:`Task`.

    ``reset(seed=..., task=..., conflict=..., options=...)`` starts an episode;
    ``step(action)`` returns an :class:`Observation` whose ``metadata`` holds
    ``breakdown`` (every reward component and fired penalty by name), ``info`` (messages
    in plain words), ``events`` (fired this step) and ``outcome``.
    """

    def __init__(self, graph: DependencyGraph = DEFAULT_GRAPH) -> None:
        self.graph = graph
        self.task: Task | None = None
        self.state: EpisodeState | None = None
        self._index: TaskIndex | None = None

    # -- episode control -------------------------------------------------------------
    def reset(self, *, seed: int | None = None, task: Task | None = None, conflict: ConflictEvent | None = None,
              options: Mapping[str, Any] | None = None) -> Observation:
        options = dict(options or {})
        seed = 0 if seed is None else int(seed)
        if task is None:
            task = TaskGenerator().generate(options.get("domain", "flight_crisis"), int(options.get("difficulty", 1)), seed)
        missing = missing_task_fields(task)
        if missing:
            raise ValueError(f"task {getattr(task, 'id', '?')!r} lacks required fields: {', '.join(missing)}")
        self._set_task(task)
        self.state = initial_state(task, conflict, seed, self.graph)
        return self._observation(0.0, {}, ["episode started"], [])

    def restore(self, task: Task, snapshot: Mapping[str, Any] | EpisodeState, observe: bool = True,
                copy: bool = True) -> Observation | None:
        """Continue from a snapshot taken with :meth:`snapshot` on the same task.

        ``observe=False`` skips building the observation (the reward hot path).
        ``copy=False`` adopts an :class:`EpisodeState` instead of cloning it, for a
        caller that built the state for this one episode and will not reuse it.
        """
        self._set_task(task)
        if isinstance(snapshot, EpisodeState):
            if copy:
                self._context(snapshot)  # cache on the source, so every restore of it shares the work
                self.state = snapshot.clone()
            else:
                self.state = snapshot
        else:
            self.state = EpisodeState.from_dict(snapshot)
        return self._observation(0.0, {}, ["state restored"], []) if observe else None

    def snapshot(self) -> dict[str, Any]:
        return self._require_state().to_dict()

    def _set_task(self, task: Task) -> None:
        if task is not self.task:
            self.task = task
            self._index = task_index(task)

    def context(self) -> StateContext:
        """What the reward reads about the current pre-action state (damaged metrics, the
        words a reasoning may cite, events seen); computed once per state."""
        return self._context(self._require_state())

    def _context(self, s: EpisodeState) -> StateContext:
        if s.derived is not None and s.derived[0] == self.task.id:
            return s.derived[1]
        m = s.metrics
        hurt = []  # (goodness, path) of the damaged metrics
        for p in METRIC_PATHS:
            g = goodness(p, m[p])
            if g < DAMAGED_BELOW:
                hurt.append((g, p))
        hurt.sort()
        top = tuple(p for _, p in hurt[:4])
        seen = frozenset(w for e in s.events_fired for w in e.split("_") if len(w) > 2)
        ctx = StateContext(frozenset(p for _, p in hurt), top, vocabulary_of(top), seen, self._best_step_reward(s))
        s.derived = (self.task.id, ctx)
        return ctx

    def _require_state(self) -> EpisodeState:
        if self.state is None or self.task is None:
            raise RuntimeError("call reset() before step()")
        return self.state

    # -- queries used by prompts and policies ------------------------------------------
    def open_routes(self) -> list[str]:
        """Routes that are neither closed nor completed, whose preconditions hold now."""
        s, t = self._require_state(), self.task
        out = []
        for r in t.viable_routes:
            done = len(s.route_progress.get(r.id, ())) >= len(r.required_action_types)
            if r.id not in s.closed_routes and not done and all_hold(s.world, s.hidden, r.preconditions):
                out.append(r.id)
        return out

    def next_action_types(self, route_id: str) -> list[str]:
        s, r = self._require_state(), self.task.route(route_id)
        if r is None:
            return []
        done = s.route_progress.get(route_id, [])
        return [a for a in r.required_action_types if a not in done]

    # -- the step ------------------------------------------------------------------------
    def step(self, action: LifeStackAction | str | Mapping[str, Any], *, faithful_by_construction: bool = False) -> Observation:
        """One decision: read the action, act (pay, advance the route, apply the metric
        changes), let time pass (events, milestones, the end), score it.

        ``faithful_by_construction`` skips checking that the reasoning is true of the
        action, for callers whose answers are faithful by construction (the reference
        continuation of ``lifestack.value``, which plays the heuristic: a test holds that
        checking would score exactly the same)."""
        s = self._require_state()
        action_or_reason = self._read_action(action)
        if isinstance(action_or_reason, str):  # a rejected action changes nothing, not even the step counter
            return self._observation(P_INVALID_ACTION, {"error": action_or_reason, "total": P_INVALID_ACTION},
                                     [f"action rejected: {action_or_reason}"], [])
        action = action_or_reason
        if s.done:
            return self._observation(0.0, {"total": 0.0}, ["episode is already over"], [])
        info: list[str] = []
        ctx = self._context(s)
        s.derived = None  # the state is about to change
        before, resources_before, milestones_before = s.metrics, s.resources, len(s.milestones)
        acted = self._act(s, action, info)
        fired, milestone_gain, success, failure, timeout = self._pass_time(s, action.route, acted.route_status,
                                                                                 milestones_before, info)
        r_score, stuffing, faithful = self._reasoning(s, action, ctx, resources_before, faithful_by_construction)
        outcome = StepOutcome(
            action=action, before=before, after=s.metrics, budget_fraction_spent=acted.spent_fraction,
            affordable=acted.affordable, claimed_gain=acted.claimed_gain, plausibility=acted.plausibility,
            route_status=acted.route_status, route_fraction=acted.route_fraction, route_value=acted.route_value,
            milestone_gain=milestone_gain, best_step_reward=ctx.best_step_reward,
            success=success, failure=failure, timeout=timeout,
            replan_applicable=bool(ctx.event_words), cascade_harm=acted.cascade_harm, overspend=acted.overspend,
            reasoning_score=r_score, stuffing=stuffing, changes=acted.good_changes, damaged=ctx.damaged,
        )
        result = task_reward(outcome)
        breakdown = result.breakdown()
        breakdown["plausibility"] = acted.plausibility
        breakdown["claimed_gain"] = acted.claimed_gain
        breakdown["milestone_gain"] = milestone_gain
        breakdown["route_status"] = acted.route_status  # type: ignore[assignment]
        breakdown["reasoning.faithfulness"] = faithful
        return self._observation(result.total, breakdown, info, fired)

    @staticmethod
    def _read_action(action: LifeStackAction | str | Mapping[str, Any]) -> LifeStackAction | str:
        """The validated action, or the reason it was rejected."""
        notes: tuple[str, ...] = ()
        if isinstance(action, LifeStackAction) and not action.validated:
            # Built by hand: it gets the same checks as text (negative costs, NaN, envelopes).
            action, notes = action.to_dict(), action.notes
        if isinstance(action, LifeStackAction):
            return action
        parsed, reason = parse_action(dict(action) if isinstance(action, Mapping) else action)
        if parsed is None:
            return reason
        return parsed if not notes else with_notes(parsed, notes + parsed.notes)

    def _act(self, s: EpisodeState, action: LifeStackAction, info: list[str]) -> Acted:
        """Pay, advance the route, apply the metric changes (and their cascade); an action
        the resources cannot pay for does nothing."""
        cost, res = action.resource_cost, s.resources
        if not all(cost[k] <= res[k] + 1e-9 for k in RESOURCE_NAMES):
            short = [k for k in RESOURCE_NAMES if cost[k] > res[k] + 1e-9]
            info.append(f"unaffordable: not enough {', '.join(short)}; nothing happened")
            # how far over: the largest overshoot as a share of that resource's starting budget
            overspend = max((cost[k] - res[k]) / max(s.budget[k], 1.0) for k in short)
            return Acted(affordable=False, good_changes={}, overspend=overspend)
        spent_fraction, energy_cost = self._pay(s, cost)
        route_status, route_fraction, route_value = "none", 0.0, 0.0
        if action.route:
            route_status, route_fraction, route_value = self._advance_route(s, action, info)
        claimed_gain, plausibility, cascade_harm, good_changes = self._apply_changes(s, action, energy_cost, info)
        return Acted(True, spent_fraction, route_status, route_fraction, route_value, claimed_gain, plausibility,
                     cascade_harm, good_changes)

    def _pass_time(self, s: EpisodeState, route: str | None, route_status: str, milestones_before: int,
                   info: list[str]) -> tuple[list[str], float, bool, bool, bool]:
        """Time passes: scheduled events fire, milestones are reached, the episode may end.
        ``(events fired, milestone reward gained since ``milestones_before`` (the route may
        have reached some), success, failure, timeout)``."""
        task = self.task
        s.step += 1
        fired = self._fire_events(s, info)
        # Milestones, success and failure read only the world and hidden state, which only
        # routes and events change: when neither did, nothing new can hold (hot path).
        milestone_gain, success, failure = 0.0, False, False
        if fired or route_status == "advanced" or route_status == "completed":
            world, hidden, reached = s.world, s.hidden, s.milestones
            # events may touch any key: then every milestone is checked
            for m in task.milestones if fired else self._index.milestones_by_route[route]:
                if m.id not in reached and condition_holds(world, hidden, m.condition_key, m.condition_value):
                    reached.append(m.id)
                    info.append(f"milestone reached: {m.description}")
            if len(reached) > milestones_before:
                new_milestones = reached[milestones_before:]
                milestone_gain = sum(m.reward for m in task.milestones if m.id in new_milestones)
            success = all_hold(world, hidden, task.success_conditions)
            failure = not success and any_holds(world, hidden, task.failure_conditions)
        timeout = not success and not failure and s.step >= task.horizon
        if success or failure or timeout:
            s.done = True
            s.outcome = "success" if success else "failure" if failure else "timeout"
            info.append(f"episode over: {s.outcome}")
        return fired, milestone_gain, success, failure, timeout

    def _reasoning(self, s: EpisodeState, action: LifeStackAction, ctx: StateContext,
                   resources_before: Mapping[str, float], faithful_by_construction: bool) -> tuple[float, bool, float]:
        """``(reasoning score, keyword stuffing, faithfulness)``: is the reasoning coherent with
        the state, the action and its route, and is it true of the action (the numbers,
        type, route and metrics it states)? The score is coherence x faithfulness."""
        index = self._index
        r_score, stuffing = reasoning_coherence(action.reasoning, action, damaged=ctx.damaged_top,
                                                route_words=index.route_words, event_words=ctx.event_words,
                                                damaged_vocab=ctx.damaged_vocab,
                                                other_route_words=index.other_route_words.get(action.route or "", index.all_route_words))
        faithful = 1.0
        if r_score > 0.0 and not faithful_by_construction:
            truths = {k: (resources_before[k], s.resources[k], s.budget[k]) for k in RESOURCE_NAMES}
            faithful, _ = faithfulness(action.reasoning, action, routes=index.route_names, truths=truths,
                                       scale=s.budget, facts=self._facts(s))
            r_score *= faithful
        return r_score, stuffing, faithful

    def _facts(self, s: EpisodeState) -> tuple[float, ...]:
        """The numbers the prompt's FACTS line shows (a fare, ...): true for a reasoning to state."""
        out = []
        for k in self.task.visible_world:
            v = s.world.get(k, self.task.visible_world[k])
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out.append(float(v))
        return tuple(out)

    @staticmethod
    def _pay(s: EpisodeState, cost: Mapping[str, float]) -> tuple[float, float]:
        """Take the cost from the resources; ``(share of the budget spent, energy cost)``.

        Rest (a negative energy cost) recovers energy, bounded by the hours rested and
        the starting budget.
        """
        res, budget = s.resources, s.budget
        c_time, c_money, energy_cost = cost["time"], cost["money"], cost["energy"]
        if energy_cost < 0:
            energy_cost = -min(-energy_cost, REST_ENERGY_PER_HOUR * c_time, budget["energy"] - res["energy"])
        s.resources = {"time": res["time"] - c_time, "money": res["money"] - c_money, "energy": res["energy"] - energy_cost}
        spent = (max(c_time, 0.0) / max(budget["time"], 1e-9) + max(c_money, 0.0) / max(budget["money"], 1e-9)
                 + max(cost["energy"], 0.0) / max(budget["energy"], 1e-9)) / 3.0
        return spent, energy_cost

    def _apply_changes(self, s: EpisodeState, action: LifeStackAction, energy_cost: float,
                       info: list[str]) -> tuple[float, float, float, dict[str, float]]:
        """Apply the action's metric changes, scaled down to what was paid for, plus the
        intrinsic cost of paying; big changes cascade through the graph.

        Returns ``(claimed gain, plausibility, goodness the cascade took from other metrics, goodness
        changes of the metrics that moved)``; the goodness changes keep a fixed order
        (the reward sums them).
        """
        cost = action.resource_cost
        paid_time, paid_money, paid_energy = max(cost["time"], 0.0), max(cost["money"], 0.0), max(cost["energy"], 0.0)
        changes = dict(action.metric_changes)
        claimed_gain, plausibility = 0.0, 1.0
        for p, d in changes.items():
            g = goodness_delta(p, d)
            if g > 0.0:
                claimed_gain += g
        capacity = FREE_EFFECT + POINTS_PER_HOUR * paid_time + POINTS_PER_DOLLAR * paid_money + POINTS_PER_ENERGY * paid_energy
        if claimed_gain > capacity + 1e-9:  # float rounding of an exactly paid claim is not a claim
            plausibility = capacity / claimed_gain
            info.append(f"claimed gains of {claimed_gain:.1f} points but paid for {capacity:.1f}; scaled down")
            changes = {p: d * plausibility if goodness_delta(p, d) > 0 else d for p, d in changes.items()}
        # paying costs the life too: money drains liquidity, hours free time, effort energy
        for path, drain in (("finances.liquidity", paid_money * LIQUIDITY_PER_DOLLAR),
                            ("time.free_hours_per_week", paid_time * FREE_HOURS_PER_HOUR),
                            ("physical_health.energy", energy_cost * ENERGY_METRIC_PER_UNIT)):
            d = -min(MAX_INTRINSIC, drain)
            if d:
                changes[path] = changes.get(path, 0.0) + d

        before = s.metrics
        after = dict(before)
        sources: dict[str, float] = {}
        for p, d in changes.items():
            new = clamp_metric(after[p] + d)
            applied = new - after[p]
            after[p] = new
            # Only the part of a change beyond the trigger spreads: a change of 6.01 spreads
            # 0.01, not 6.01 (a cut-off would make -6.00 and -5.99 different actions).
            if applied >= CASCADE_TRIGGER:
                sources[p] = applied - CASCADE_TRIGGER
            elif applied <= -CASCADE_TRIGGER:
                sources[p] = applied + CASCADE_TRIGGER
            else:
                sources[p] = 0.0
        harm, spread = 0.0, {}
        if any(sources.values()):
            spread = self.graph.spread_from(after, sources)
            for p, d in spread.items():
                g = goodness_delta(p, d)
                if g < 0.0:
                    harm -= g
        good: dict[str, float] = {}
        for group in (changes, spread):
            for p in group:
                d = after[p] - before[p]
                if d:
                    good[p] = goodness_delta(p, d)
        s.metrics = after
        return claimed_gain, plausibility, harm, good

    def _advance_route(self, s: EpisodeState, action: LifeStackAction, info: list[str]) -> tuple[str, float, float]:
        if not action.route:
            return "none", 0.0, 0.0
        route = self._index.routes.get(action.route)
        if route is None:
            info.append(f"unknown route {action.route!r}; routes: {', '.join(self.task.route_ids)}")
            return "unknown", 0.0, 0.0
        required = route.required_action_types
        n = len(required)
        done = s.route_progress.get(route.id, [])
        if route.id in s.closed_routes:
            info.append(f"route {route.id} is closed")
            return "closed", len(done) / n, route.final_reward
        if not all_hold(s.world, s.hidden, route.preconditions):
            info.append(f"route {route.id} is not available: its preconditions do not hold")
            return "precondition", len(done) / n, route.final_reward
        if action.action_type not in required or action.action_type in done:
            info.append(f"{action.action_type} does not advance {route.id}; it still needs "
                        f"{', '.join(a for a in required if a not in done) or 'nothing'}")
            return "wrong_type", len(done) / n, route.final_reward
        done = done + [action.action_type]
        s.route_progress[route.id] = done
        s.world[route.progress_key] = len(done)
        if len(done) < n:
            info.append(f"route {route.id} advanced ({len(done)}/{n})")
            return "advanced", len(done) / n, route.final_reward
        s.world.update(route.consequences)
        for rid in route.closes_routes:
            if rid not in s.closed_routes:
                s.closed_routes.append(rid)
        for mid in route.milestones_unlocked:
            if mid not in s.milestones:
                s.milestones.append(mid)
                m = self._index.milestones_by_id.get(mid)
                info.append(f"milestone reached: {m.description if m else mid}")
        info.append(f"route {route.id} completed")
        return "completed", 1.0, route.final_reward

    def _fire_events(self, s: EpisodeState, info: list[str]) -> list[str]:
        fired = []
        for ev in self._index.events_by_step.get(s.step, ()):
            if ev.id not in s.events_fired and event_roll(s.seed, ev.id) < ev.probability:
                s.world.update(ev.world_mutation)
                s.hidden.update(ev.hidden_state_mutation)
                for rid in ev.closes_routes:
                    if rid not in s.closed_routes:
                        s.closed_routes.append(rid)
                s.events_fired.append(ev.id)
                fired.append(ev.id)
                info.append(f"event: {ev.description}")
        return fired

    def _best_step_reward(self, s: EpisodeState) -> float:
        """The largest milestone reward per step any still-usable route offers."""
        best = 0.0
        for r in self.task.viable_routes:
            if r.id not in s.closed_routes or r.id in s.route_progress:
                best = max(best, r.final_reward / len(r.required_action_types))
        return best or 1.0

    def _observation(self, reward: float, breakdown: dict, info: list[str], fired: list[str]) -> Observation:
        s = self.state
        return Observation(
            metrics=dict(s.metrics), resources=dict(s.resources), step=s.step, done=s.done, reward=reward,
            metadata={"breakdown": breakdown, "info": info, "events": fired, "outcome": s.outcome,
                      "task_id": self.task.id},
        )

    # -- Gymnasium-style adapter ---------------------------------------------------------
    def gym_step(self, action: Any) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        """The 5-tuple ``(obs, reward, terminated, truncated, info)`` of Gymnasium."""
        obs = self.step(action)
        truncated = obs.metadata["outcome"] == "timeout"
        terminated = obs.done and not truncated
        return obs, obs.reward, terminated, truncated, dict(obs.metadata)
