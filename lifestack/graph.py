"""The dependency graph: how a change in one metric spills over into others.

Edges are kept as a data table of ``(source, target, weight)`` in *raw value* space:
``workload -> stress_level +0.7`` means a rising workload raises stress. ``cascade``
applies a disruption and spreads it breadth-first; it is pure, deterministic and stops
on the cyclic graph because every hop multiplies the impact by ``|weight| * dampening``
(< 1), small impacts are dropped, and the number of metrics a cascade may touch is capped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, NamedTuple

from .metrics import METRIC_INDEX, clamp_metric

# (source, target, weight). About 30 edges; the two cycles (energy <-> fitness, and
# satisfaction -> motivation -> growth trajectory -> satisfaction) are intended: real lives
# have feedback loops.
EDGES: tuple[tuple[str, str, float], ...] = (
    ("career.workload", "mental_wellbeing.stress_level", 0.7),
    ("career.workload", "time.free_hours_per_week", -0.8),
    ("career.workload", "physical_health.sleep_quality", -0.3),
    ("career.satisfaction", "mental_wellbeing.motivation", 0.5),
    ("career.stability", "finances.monthly_runway", 0.4),
    ("career.stability", "mental_wellbeing.emotional_stability", 0.3),
    ("career.growth_trajectory", "career.satisfaction", 0.4),
    ("finances.liquidity", "finances.monthly_runway", 0.9),
    ("finances.liquidity", "mental_wellbeing.stress_level", -0.4),
    ("finances.debt_pressure", "mental_wellbeing.stress_level", 0.65),
    ("finances.debt_pressure", "finances.long_term_health", -0.5),
    ("finances.monthly_runway", "finances.long_term_health", 0.3),
    ("relationships.romantic", "mental_wellbeing.emotional_stability", 0.45),
    ("relationships.family", "mental_wellbeing.emotional_stability", 0.35),
    ("relationships.social", "mental_wellbeing.motivation", 0.3),
    ("relationships.professional_network", "career.stability", 0.35),
    ("relationships.professional_network", "career.growth_trajectory", 0.3),
    ("physical_health.energy", "physical_health.fitness", 0.4),
    ("physical_health.fitness", "physical_health.energy", 0.3),
    ("physical_health.energy", "mental_wellbeing.motivation", 0.35),
    ("physical_health.sleep_quality", "mental_wellbeing.clarity", 0.6),
    ("physical_health.sleep_quality", "physical_health.energy", 0.5),
    ("physical_health.nutrition", "physical_health.energy", 0.3),
    ("mental_wellbeing.stress_level", "physical_health.sleep_quality", -0.55),
    ("mental_wellbeing.stress_level", "relationships.romantic", -0.3),
    ("mental_wellbeing.stress_level", "mental_wellbeing.clarity", -0.4),
    ("mental_wellbeing.clarity", "career.satisfaction", 0.25),
    ("mental_wellbeing.motivation", "career.growth_trajectory", 0.3),
    ("time.free_hours_per_week", "relationships.family", 0.3),
    ("time.free_hours_per_week", "physical_health.fitness", 0.25),
    ("time.commute_burden", "time.free_hours_per_week", -0.5),
    ("time.admin_overhead", "mental_wellbeing.stress_level", 0.3),
)

DEFAULT_DAMPENING = 0.6  # each hop keeps 60% of the weighted impact
DEFAULT_THRESHOLD = 0.5  # impacts smaller than half a point are dropped
DEFAULT_MAX_AFFECTED = 3  # distinct metrics one cascade may touch beyond the primaries
CASCADE_FLOOR = 10.0  # a value reached only by cascade never drops below this
MAX_HOPS = 8  # belt and braces: termination does not depend on it


class CascadeResult(NamedTuple):
    values: dict[str, float]  # all metrics after the disruption and its cascade
    primary: dict[str, float]  # raw deltas actually applied to the primary metrics
    spread: dict[str, float]  # raw deltas applied to metrics reached only by cascade


@dataclass(frozen=True)
class DependencyGraph:
    """A weighted directed graph over metric paths with a bounded cascade."""

    edges: tuple[tuple[str, str, float], ...] = EDGES
    dampening: float = DEFAULT_DAMPENING
    threshold: float = DEFAULT_THRESHOLD
    max_affected: int = DEFAULT_MAX_AFFECTED

    def __post_init__(self) -> None:
        for src, dst, w in self.edges:
            if src not in METRIC_INDEX or dst not in METRIC_INDEX:
                raise ValueError(f"edge {src} -> {dst} names an unknown metric")
            if not -1.0 <= w <= 1.0:
                raise ValueError(f"edge {src} -> {dst} weight {w} outside [-1, 1]")
        if not 0.0 < self.dampening < 1.0:
            raise ValueError("dampening must be in (0, 1)")
        adjacency: dict[str, list[tuple[str, float]]] = {}
        for src, dst, w in self.edges:
            adjacency.setdefault(src, []).append((dst, w))
        # frozen dataclass: set the derived lookup table once
        object.__setattr__(self, "_adjacency", {k: tuple(v) for k, v in adjacency.items()})

    def neighbours(self, path: str) -> tuple[tuple[str, float], ...]:
        return self._adjacency.get(path, ())  # type: ignore[attr-defined]

    def cascade(self, metrics: Mapping[str, float], disruption: Mapping[str, float]) -> CascadeResult:
        """Apply ``disruption`` (raw deltas) to ``metrics`` and spread it breadth-first.

        ``metrics`` may be a dict of path -> value or a :class:`LifeMetrics`. The input is
        never modified.
        """
        values = dict(metrics.flatten() if hasattr(metrics, "flatten") else metrics)
        primary: dict[str, float] = {}
        frontier: list[tuple[str, float]] = []
        for path, delta in disruption.items():
            if path not in METRIC_INDEX:
                raise ValueError(f"unknown metric path in disruption: {path!r}")
            if not math.isfinite(delta):
                raise ValueError(f"disruption of {path} is not finite: {delta!r}")
            old = values[path]
            new = clamp_metric(old + delta)
            values[path] = new
            applied = new - old
            primary[path] = primary.get(path, 0.0) + applied
            if applied:
                frontier.append((path, applied))

        spread = self._propagate(values, frontier, primary, soft=False)
        return CascadeResult(values, primary, spread)

    def spread_from(self, metrics: Mapping[str, float], sources: Mapping[str, float]) -> dict[str, float]:
        """Spread ``sources`` (raw deltas already applied to their metrics) through the graph.

        The continuous cascade an action's changes use: every impact loses the threshold
        instead of being dropped below it, and no cap on the metrics reached, so the
        result moves continuously with the source deltas (a cap or a cut-off would let a
        hair's change of one delta switch a whole metric's impact on or off). ``metrics``
        (a dict) is updated in place; returns the raw deltas applied to metrics reached
        only by the cascade (the sources themselves are never changed).
        """
        frontier = [(p, d) for p, d in sources.items() if d]
        return self._propagate(metrics, frontier, sources, soft=True)

    def _propagate(self, values: dict[str, float], frontier: list[tuple[str, float]],
                   primary: Mapping[str, float], soft: bool) -> dict[str, float]:
        """Breadth-first spread of ``frontier`` over ``values`` (in place); the deltas spread."""
        spread: dict[str, float] = {}
        adjacency = self._adjacency  # type: ignore[attr-defined]
        threshold, cap = self.threshold, None if soft else self.max_affected
        for _hop in range(MAX_HOPS):
            if not frontier:
                break
            next_frontier: list[tuple[str, float]] = []
            for src, delta in frontier:
                for dst, weight in adjacency.get(src, ()):
                    impact = delta * weight * self.dampening
                    if dst in primary:
                        continue
                    if abs(impact) < threshold:
                        continue
                    if soft:
                        impact = math.copysign(abs(impact) - threshold, impact)
                        if not impact:
                            continue
                    elif dst not in spread and len(spread) >= cap:
                        continue
                    old = values[dst]
                    new = clamp_metric(old + impact)
                    if impact < 0 and new < CASCADE_FLOOR:
                        new = min(old, CASCADE_FLOOR)
                    values[dst] = new
                    applied = new - old
                    spread[dst] = spread.get(dst, 0.0) + applied
                    if applied:
                        next_frontier.append((dst, applied))
            frontier = next_frontier
        return spread


DEFAULT_GRAPH = DependencyGraph()
