"""Pure reward components and the task reward.

Everything here is a pure function of a :class:`StepOutcome` (what one env step did),
so the components are easy to test and to reuse in the trainer's reward functions.
Weights and penalties are named constants; docs/rewards.md explains each one and holds
the calibration table measured with ``python -m lifestack.calibrate``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Mapping, Sequence

from .actions import LifeStackAction
from .metrics import METRIC_PATHS, goodness

# --- component weights (renormalised over the components that apply to a step) ---------
W_OUTCOME = 0.30  # local outcome: goodness gained, cascade contained, efficiency, relationships
W_MILESTONE = 0.25  # milestone progress made by this action
W_COMPLETION = 0.25  # progress towards completing the task (route fraction x route value)
W_REPLAN = 0.10  # only after a surprise event: does the action adapt?
W_REASONING = 0.10  # planning coherence of the reasoning text

# --- local outcome mix ----------------------------------------------------------------
OUTCOME_MIX = {"gain": 0.4, "containment": 0.25, "efficiency": 0.2, "relationships": 0.15}
GAIN_SCALE = 15.0  # goodness points for tanh(gain / scale) ~ 0.76
DAMAGED_BELOW = 62.0  # a metric whose goodness is below this counts as damaged
EFFICIENCY_POINTS_PER_BUDGET = 30.0  # points expected for spending the whole budget

# --- named penalties (added to the weighted sum, then the total is clipped) ------------
# Every penalty that depends on a number the model writes grows continuously with it (a
# ramp, never a switch), so a hair's change of one number moves the reward by a hair.
P_INVALID_ACTION = -0.5  # unparseable / rejected completion (the fallback reward)
P_UNAFFORDABLE = -0.5  # in full once the overspend reaches UNAFFORDABLE_FULL_AT of a budget
P_DEAD_END = -0.3  # named a closed or unknown route, or one whose preconditions fail
P_INACTION = -0.4  # no route progress and no net gain; fades out over INACTION_RAMP points
P_IMPLAUSIBLE = -0.5  # grows with the unpaid goodness points; in full at UNPAID_FULL_AT
P_NEGATIVE_COST = -0.2  # tried to book a negative cost (a rule the prompt states)
P_CRITICAL_FLOOR = -0.3  # pushed a metric below goodness 10; in full at CRITICAL_RAMP points below
P_CASCADE_COLLAPSE = -0.3  # goodness the action's own cascade took; in full at COLLAPSE_HARM points
P_KEYWORD_STUFFING = -0.3  # reasoning is a bag of domain words
P_TIMEOUT = -0.2  # horizon reached without success
P_FAILURE = -0.5  # a failure condition holds
CRITICAL_GOODNESS = 10.0
UNAFFORDABLE_FULL_AT = 0.25  # overspend, as a share of the starting budget, that costs the full penalty
INACTION_RAMP = 4.0  # net goodness points over which the inaction penalty fades to 0
CRITICAL_RAMP = 4.0  # goodness points below CRITICAL_GOODNESS at which critical_floor is in full
UNPAID_FULL_AT = 10.0  # unpaid claimed goodness points at which implausible is in full
COLLAPSE_HARM = 6.0  # goodness points lost by cascaded metrics at which cascade_collapse is in full
# A schema-valid action always scores above an unparseable one (P_INVALID_ACTION): the
# negative side of its total is squashed smoothly into (VALID_FLOOR, 0].
VALID_FLOOR = -0.45
RELATIONSHIP_METRICS = frozenset(p for p in METRIC_PATHS if p.startswith("relationships."))


@dataclass(slots=True)
class StepOutcome:
    """Everything the reward needs to know about one env step."""

    action: LifeStackAction
    before: Mapping[str, float]
    after: Mapping[str, float]
    budget_fraction_spent: float = 0.0
    affordable: bool = True
    claimed_gain: float = 0.0  # goodness points the action claimed (positive part)
    plausibility: float = 1.0  # share of the claimed gain that was paid for, in [0, 1]
    route_status: str = "none"  # none|advanced|completed|closed|unknown|precondition|wrong_type
    route_fraction: float = 0.0  # progress of the named route after the step, in [0, 1]
    route_value: float = 0.0  # the route's final_reward
    milestone_gain: float = 0.0  # sum of milestone rewards achieved this step
    best_step_reward: float = 1.0  # largest milestone reward per step among open routes
    success: bool = False
    failure: bool = False
    timeout: bool = False
    replan_applicable: bool = False  # an event fired before this action
    cascade_harm: float = 0.0  # goodness points the action's own cascade took from other metrics
    overspend: float = 0.0  # unaffordable: largest overshoot as a share of that resource's budget
    reasoning_score: float = 0.0
    stuffing: bool = False
    # Fast path, filled by the env: goodness deltas of the metrics that changed, and the
    # metrics that were damaged before the action. Derived from before/after when None.
    changes: Mapping[str, float] | None = None
    damaged: frozenset[str] | None = None

    def goodness_changes(self) -> Mapping[str, float]:
        if self.changes is None:
            self.changes = {p: d for p in METRIC_PATHS if (d := goodness_change(self.before, self.after, p))}
        return self.changes

    def unpaid_gain(self) -> float:
        """Claimed goodness points that were not paid for (an amount: continuous in the claims)."""
        return self.claimed_gain * (1.0 - self.plausibility) if self.claimed_gain > 0 else 0.0

    def damaged_before(self) -> frozenset[str]:
        if self.damaged is None:
            self.damaged = frozenset(p for p in METRIC_PATHS if goodness(p, self.before[p]) < DAMAGED_BELOW)
        return self.damaged


@dataclass(slots=True)
class RewardResult:
    total: float
    components: dict[str, float] = field(default_factory=dict)
    penalties: dict[str, float] = field(default_factory=dict)

    def breakdown(self) -> dict[str, float]:
        out = {_COMPONENT_KEYS.get(k) or f"component.{k}": v for k, v in self.components.items()}
        for k, v in self.penalties.items():
            out[_PENALTY_KEYS.get(k) or f"penalty.{k}"] = v
        out["total"] = self.total
        return out


# breakdown key names, built once (the step builds a breakdown for every completion)
_COMPONENT_KEYS = {k: f"component.{k}" for k in (
    "outcome", "milestone", "completion", "reasoning", "replanning",
    "outcome.gain", "outcome.containment", "outcome.efficiency", "outcome.relationships")}
_PENALTY_KEYS = {k: f"penalty.{k}" for k in (
    "unaffordable", "dead_end", "inaction", "implausible", "negative_cost", "critical_floor",
    "cascade_collapse", "keyword_stuffing", "timeout", "failure")}


def ramp(x: float, full_at: float) -> float:
    """``x / full_at`` clipped to [0, 1]: a penalty's share, continuous in ``x``."""
    return 0.0 if x <= 0.0 else 1.0 if x >= full_at else x / full_at


def soft_floor(x: float) -> float:
    """``x`` above 0; below it, squashed smoothly (slope 1 at 0) into (VALID_FLOOR, 0)."""
    return x if x >= 0.0 else VALID_FLOOR * math.tanh(x / VALID_FLOOR)


def clip(x: float, lo: float = -1.0, hi: float = 1.0) -> float:
    if x != x:  # NaN never leaves this module
        return 0.0
    return lo if x < lo else hi if x > hi else x


def goodness_change(before: Mapping[str, float], after: Mapping[str, float], path: str) -> float:
    return goodness(path, after[path]) - goodness(path, before[path])


def local_outcome(o: StepOutcome) -> dict[str, float]:
    """The four local-outcome sub-scores, each in [-1, 1].

    One pass over the metrics that moved (the rest changed by 0): this runs once per
    completion in training.
    """
    changes = o.goodness_changes()
    damaged = o.damaged_before()
    gain, containment, rel_min = 0, 0, 0.0
    for p, d in changes.items():
        gain += d
        if p in damaged:
            containment += clip(d / 4.0)
        if d < rel_min and p in RELATIONSHIP_METRICS:
            rel_min = d
    gain_score = math.tanh(gain / GAIN_SCALE)
    if damaged:
        # credit for touching damaged metrics at all: the mean is diluted by many of them
        containment = clip(containment / len(damaged) * min(3.0, len(damaged)))
    else:
        containment = gain_score
    expected = max(3.0, EFFICIENCY_POINTS_PER_BUDGET * o.budget_fraction_spent)
    efficiency = clip(gain / expected)
    relationships = 1.0 if rel_min >= 0 else clip(1.0 + rel_min / 5.0)
    return {"gain": gain_score, "containment": containment, "efficiency": efficiency, "relationships": relationships}


assert tuple(OUTCOME_MIX) == ("gain", "containment", "efficiency", "relationships")  # outcome_score spells them out
_MIX_GAIN, _MIX_CONTAINMENT, _MIX_EFFICIENCY, _MIX_RELATIONSHIPS = OUTCOME_MIX.values()


def outcome_score(sub: Mapping[str, float]) -> float:
    # the OUTCOME_MIX sum written out, in its order (this runs once per completion)
    return 0.0 + _MIX_GAIN * sub["gain"] + _MIX_CONTAINMENT * sub["containment"] \
        + _MIX_EFFICIENCY * sub["efficiency"] + _MIX_RELATIONSHIPS * sub["relationships"]


def milestone_score(o: StepOutcome) -> float:
    """Milestone reward earned this step relative to the best available per step."""
    if o.milestone_gain <= 0:
        return 0.0
    return clip(o.milestone_gain / max(o.best_step_reward, 1e-6), 0.0, 1.0)


def completion_score(o: StepOutcome) -> float:
    if o.success:
        return clip(max(o.route_value, 0.5), 0.0, 1.0)
    if o.route_status in ("advanced", "completed"):
        return clip(o.route_fraction * o.route_value, 0.0, 1.0)
    return 0.0


def replan_score(o: StepOutcome) -> float:
    if o.route_status in ("advanced", "completed"):
        return 1.0
    if o.route_status in ("closed", "unknown", "precondition"):
        return -1.0
    return 0.0


# total weight with and without the replanning component, summed in component order
_WEIGHT_SUM = W_OUTCOME + W_MILESTONE + W_COMPLETION + W_REASONING
_WEIGHT_SUM_REPLAN = _WEIGHT_SUM + W_REPLAN


def task_reward(o: StepOutcome) -> RewardResult:
    """The task reward in [-1, 1] with every component and fired penalty named."""
    sub = local_outcome(o)
    status = o.route_status
    progressed = status == "advanced" or status == "completed"
    components = {"outcome": outcome_score(sub), "milestone": milestone_score(o), "completion": completion_score(o),
                  "reasoning": o.reasoning_score}
    # the weighted mean over the components that apply, summed in component order
    weighted = W_OUTCOME * components["outcome"] + W_MILESTONE * components["milestone"] \
        + W_COMPLETION * components["completion"] + W_REASONING * components["reasoning"]
    if o.replan_applicable:
        components["replanning"] = replan_score(o)
        weighted = (weighted + W_REPLAN * components["replanning"]) / _WEIGHT_SUM_REPLAN
    else:
        weighted = weighted / _WEIGHT_SUM

    penalties: dict[str, float] = {}
    if not o.affordable:
        penalties["unaffordable"] = P_UNAFFORDABLE * ramp(o.overspend, UNAFFORDABLE_FULL_AT)
    if status in ("closed", "unknown", "precondition"):
        penalties["dead_end"] = P_DEAD_END
    changes = o.goodness_changes()
    if not progressed:
        net_gain = sum(changes.values())
        if net_gain < INACTION_RAMP:
            penalties["inaction"] = P_INACTION * (1.0 - ramp(net_gain, INACTION_RAMP))
    unpaid = o.unpaid_gain()
    if unpaid > 0:
        penalties["implausible"] = P_IMPLAUSIBLE * ramp(unpaid, UNPAID_FULL_AT)
    if o.action.notes and any(n.startswith("negative_cost") for n in o.action.notes):
        penalties["negative_cost"] = P_NEGATIVE_COST
    below = 0.0  # goodness points this action pushed a metric below CRITICAL_GOODNESS
    for p, d in changes.items():
        if d < 0:
            g = goodness(p, o.after[p])
            if g < CRITICAL_GOODNESS:
                below = max(below, min(-d, CRITICAL_GOODNESS - g))
    if below > 0:
        penalties["critical_floor"] = P_CRITICAL_FLOOR * ramp(below, CRITICAL_RAMP)
    if o.cascade_harm > 0:
        penalties["cascade_collapse"] = P_CASCADE_COLLAPSE * ramp(o.cascade_harm, COLLAPSE_HARM)
    if o.stuffing:
        penalties["keyword_stuffing"] = P_KEYWORD_STUFFING
    if o.timeout and not o.success:
        penalties["timeout"] = P_TIMEOUT
    if o.failure:
        penalties["failure"] = P_FAILURE

    components["outcome.gain"] = sub["gain"]
    components["outcome.containment"] = sub["containment"]
    components["outcome.efficiency"] = sub["efficiency"]
    components["outcome.relationships"] = sub["relationships"]
    return RewardResult(soft_floor(clip(weighted + sum(penalties.values()))), components, penalties)


# --- reasoning coherence ----------------------------------------------------------------
_WORD = re.compile(r"[a-z]+")
_EMPTY: frozenset[str] = frozenset()
RESOURCE_WORDS = frozenset({"time", "hours", "hour", "money", "budget", "cost", "costs", "energy", "spend", "pay", "dollars"})
MIN_REASONING_WORDS = 8
MAX_REASONING_WORDS = 120
# Explanations are sentences: they hold the small words that join facts into a reason.
# A bare list of the words this scorer looks for holds none, so its score is cut by the
# prose factor: min(1, share of these words / PROSE_SHARE) * min(1, distinct ones / PROSE_DISTINCT).
FUNCTION_WORDS = frozenset("""
a an the and or but so because since as if then than to of in on at by for from with without into onto
over under after before while until about against between through during i we my our me us it its this
that these those is are was were be been being will would can could should must may might do does did
not no nor more most less least first next now only also too very just both each either keep keeps
instead which who what when where why how here there all any some such own same other once
""".split())
PROSE_SHARE = 0.15
PROSE_DISTINCT = 3
# ... and they do not string scorer words together: a run of more than MAX_KEYWORD_RUN
# scorer words in a row (numbers and other words break a run) scales the prose factor by
# MAX_KEYWORD_RUN / run, so a keyword list appended to a good sentence still costs.
MAX_KEYWORD_RUN = 4
_RUN_TOKEN = re.compile(r"[a-z]+|[0-9]+")


def words_of(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _path_words(path: str) -> set[str]:
    domain, metric = path.split(".")
    return {w for w in metric.split("_") if len(w) > 3} | {domain.split("_")[0]}


PATH_WORDS: dict[str, frozenset[str]] = {p: frozenset(_path_words(p)) for p in METRIC_PATHS}
# Every word that names a domain or metric: the vocabulary a stuffer would spray.
VOCABULARY: frozenset[str] = frozenset(w for p in METRIC_PATHS for w in PATH_WORDS[p])


def vocabulary_of(paths) -> frozenset[str]:
    """The domain and metric words of ``paths`` (what a reasoning may cite about them)."""
    return _vocabulary(tuple(paths))


@lru_cache(maxsize=4096)
def _vocabulary(paths: tuple[str, ...]) -> frozenset[str]:
    out: set[str] = set()
    for p in paths:
        out |= PATH_WORDS[p]
    return frozenset(out)


@lru_cache(maxsize=4096)
def _action_vocabulary(paths: tuple[str, ...], domain: str) -> frozenset[str]:
    """What an action's own reasoning may cite: its metrics' words and its domain."""
    return _vocabulary(paths) | {domain.split("_")[0]}


@lru_cache(maxsize=8192)
def _lens(relevant: frozenset[str], damaged: frozenset[str], chosen_route: frozenset[str],
          other_routes: frozenset[str], event_words: frozenset[str]) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """``(signal, noise, scorer)`` vocabularies of a reasoning for one action in one state.

    Signal: words that match the action, the damage, the chosen route or a recent event.
    Noise: domain words that match neither the action nor the damage, and the words of
    routes other than the chosen one. Scorer: every word the scorer reads (signal, noise
    and resource words), whose runs the prose factor limits. Cached: the sets depend only
    on frozensets that the env and the parser reuse across completions.
    """
    signal = relevant | damaged | chosen_route | event_words
    # what an action spends (hours, energy) is never noise, though those words name metrics too
    # a word that is evidence (an event's word that also names another route) is not noise
    noise = ((VOCABULARY - RESOURCE_WORDS) | other_routes) - signal
    return signal, noise, signal | noise | RESOURCE_WORDS  # the last: every word the scorer reads


_SENTENCE_END = re.compile(r"[.!?;\n]+")


def _sentence_novelty(text: str) -> float:
    """Distinct sentences / sentences: 1.0 unless a sentence is said again (padding)."""
    sentences = [" ".join(words_of(part)) for part in _SENTENCE_END.split(text)]
    sentences = [x for x in sentences if x]
    return len(set(sentences)) / len(sentences) if len(sentences) > 1 else 1.0


def longest_keyword_run(text: str, keywords: frozenset[str]) -> int:
    """The most scorer words in a row in ``text`` (a number or any other word ends a run)."""
    best = run = 0
    for token in _RUN_TOKEN.findall(text.lower()):
        if token in keywords:
            run += 1
            if run > best:
                best = run
        else:
            run = 0
    return best


def reasoning_coherence(
    reasoning: str,
    action: LifeStackAction,
    *,
    damaged: Sequence[str],
    route_words: Mapping[str, frozenset[str]],
    event_words: frozenset[str] = frozenset(),
    damaged_vocab: frozenset[str] | None = None,
    other_route_words: frozenset[str] | None = None,
) -> tuple[float, bool]:
    """Score how well the reasoning explains *this* action in *this* state.

    Returns ``(score in [0, 1], stuffing)``. Evidence counts only when it matches the
    action and state (its domain and metrics, its route, the damaged metrics, the
    resources it spends, a recent event); domain words that match nothing are noise, and
    a high noise share or heavy repetition marks keyword stuffing.
    ``damaged_vocab`` and ``other_route_words`` (the words of every route but the chosen
    one) are derived from ``damaged`` and ``route_words`` when not given.
    """
    tokens = words_of(reasoning)
    if not tokens:
        return 0.0, False
    distinct = set(tokens)
    relevant_vocab = _action_vocabulary(tuple(action.metric_changes), action.target_domain)
    if damaged_vocab is None:
        damaged_vocab = vocabulary_of(damaged)
    chosen_route = route_words.get(action.route or "", _EMPTY)
    if other_route_words is None:
        other_route_words = frozenset().union(*route_words.values()) - chosen_route
    signal_vocab, noise_vocab, scorer_vocab = _lens(relevant_vocab, damaged_vocab, chosen_route, other_route_words,
                                                    event_words)

    # evidence: does the reasoning cite the action's metrics, the damage, the resources,
    # the chosen route (when one is named), a recent event (when one fired)?
    cited = (not distinct.isdisjoint(relevant_vocab)) + (not distinct.isdisjoint(RESOURCE_WORDS))
    kinds = 2
    if damaged_vocab:  # with nothing damaged there is no damage to cite
        cited += not distinct.isdisjoint(damaged_vocab)
        kinds += 1
    if action.route:
        cited += not distinct.isdisjoint(chosen_route)
        kinds += 1
    if event_words:
        cited += not distinct.isdisjoint(event_words)
        kinds += 1
    coverage = cited / kinds

    signal = distinct & signal_vocab
    noise = distinct & noise_vocab
    precision = len(signal) / (len(signal) + len(noise)) if signal or noise else 0.0
    n = len(tokens)
    length = min(1.0, n / MIN_REASONING_WORDS) * min(1.0, MAX_REASONING_WORDS / n)
    repetition = min(1.0, (len(distinct) / n) / 0.4) * _sentence_novelty(reasoning)
    glue = [t for t in tokens if t in FUNCTION_WORDS]
    prose = min(1.0, len(glue) / n / PROSE_SHARE) * min(1.0, len(set(glue)) / PROSE_DISTINCT)
    run = longest_keyword_run(reasoning, scorer_vocab)
    if run > MAX_KEYWORD_RUN:
        prose *= MAX_KEYWORD_RUN / run
    stuffing = len(noise) >= 6 and precision < 0.5 or (n >= 20 and len(distinct) / n < 0.25)
    score = coverage * (0.3 + 0.7 * precision) * length * repetition * prose
    return clip(score, 0.0, 1.0), stuffing
