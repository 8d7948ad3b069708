"""Life metrics: the 23 numbers that describe a person's life, and the resource budget.

Every metric is a float in [0, 100]. Five metrics are *inverted* (lower is better); any
code that talks about "better" or "worse" goes through :func:`goodness` so a falling
stress level counts as an improvement everywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping

DOMAINS: dict[str, tuple[str, ...]] = {
    "career": ("satisfaction", "workload", "stability", "growth_trajectory"),
    "finances": ("liquidity", "debt_pressure", "monthly_runway", "long_term_health"),
    "relationships": ("romantic", "family", "social", "professional_network"),
    "physical_health": ("energy", "fitness", "sleep_quality", "nutrition"),
    "mental_wellbeing": ("stress_level", "clarity", "motivation", "emotional_stability"),
    "time": ("free_hours_per_week", "commute_burden", "admin_overhead"),
}
DOMAIN_NAMES: tuple[str, ...] = tuple(DOMAINS)

METRIC_PATHS: tuple[str, ...] = tuple(f"{d}.{m}" for d, ms in DOMAINS.items() for m in ms)
METRIC_INDEX: dict[str, int] = {p: i for i, p in enumerate(METRIC_PATHS)}

INVERTED_METRICS: frozenset[str] = frozenset(
    {
        "career.workload",
        "finances.debt_pressure",
        "mental_wellbeing.stress_level",
        "time.commute_burden",
        "time.admin_overhead",
    }
)

METRIC_MIN = 0.0
METRIC_MAX = 100.0
DEFAULT_GOODNESS = 70.0  # a healthy-but-not-perfect life: every metric at goodness 70


def default_value(path: str) -> float:
    """The starting raw value of a metric: 70, or 30 for an inverted one (goodness 70 either way)."""
    return METRIC_MAX - DEFAULT_GOODNESS if path in INVERTED_METRICS else DEFAULT_GOODNESS


RESOURCE_NAMES: tuple[str, ...] = ("time", "money", "energy")


def domain_of(path: str) -> str:
    """The domain part of a ``"domain.metric"`` path."""
    return path.split(".", 1)[0]


def clamp_metric(value: float) -> float:
    return METRIC_MIN if value < METRIC_MIN else METRIC_MAX if value > METRIC_MAX else value


def goodness(path: str, value: float) -> float:
    """How good a metric value is, 0 (worst) to 100 (best), honouring inversion."""
    return METRIC_MAX - value if path in INVERTED_METRICS else value


def goodness_delta(path: str, delta: float) -> float:
    """A raw change expressed as a change in goodness (negated for inverted metrics)."""
    return -delta if path in INVERTED_METRICS else delta


@dataclass
class LifeMetrics:
    """A full set of 23 metric values keyed by ``"domain.metric"`` path."""

    values: dict[str, float] = field(
        default_factory=lambda: default_metrics()
    )

    def __post_init__(self) -> None:
        unknown = set(self.values) - set(METRIC_INDEX)
        if unknown:
            raise ValueError(f"unknown metric paths: {sorted(unknown)}")
        full = default_metrics()
        for path, value in self.values.items():
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f"metric {path} is not finite: {value!r}")
            full[path] = clamp_metric(value)
        self.values = full

    @classmethod
    def from_flat(cls, flat: Mapping[str, float]) -> "LifeMetrics":
        return cls(dict(flat))

    def flatten(self) -> dict[str, float]:
        """A copy of the values as ``{"domain.metric": value}`` in canonical order."""
        return dict(self.values)

    def get(self, path: str) -> float:
        return self.values[path]

    def goodness(self, path: str) -> float:
        return goodness(path, self.values[path])

    def domain_goodness(self, domain: str) -> float:
        """Mean goodness of one domain's metrics."""
        names = DOMAINS[domain]
        return sum(self.goodness(f"{domain}.{m}") for m in names) / len(names)

    def worst(self, n: int = 3) -> list[str]:
        """The ``n`` metric paths with the lowest goodness (ties in canonical order)."""
        return sorted(METRIC_PATHS, key=lambda p: (self.goodness(p), METRIC_INDEX[p]))[:n]


@dataclass(frozen=True)
class ResourceBudget:
    """What an action may spend: hours, dollars and energy units."""

    time: float = 0.0
    money: float = 0.0
    energy: float = 0.0

    @classmethod
    def from_dict(cls, data: Mapping[str, float]) -> "ResourceBudget":
        return cls(**{k: float(data.get(k, 0.0)) for k in RESOURCE_NAMES})

    def to_dict(self) -> dict[str, float]:
        return {"time": self.time, "money": self.money, "energy": self.energy}

    def scaled(self, factor: float) -> "ResourceBudget":
        return ResourceBudget(self.time * factor, self.money * factor, self.energy * factor)

    def can_afford(self, cost: Mapping[str, float]) -> bool:
        return all(cost.get(k, 0.0) <= getattr(self, k) + 1e-9 for k in RESOURCE_NAMES)


def default_metrics() -> dict[str, float]:
    """All 23 metrics at their default (goodness 70)."""
    return {p: default_value(p) for p in METRIC_PATHS}


def canonical_order(paths: Iterable[str]) -> list[str]:
    return sorted(paths, key=METRIC_INDEX.__getitem__)


def pressured_domain(values: Mapping[str, float]) -> str:
    """The domain in the worst shape: lowest mean goodness of its metrics (ties: first in
    DOMAIN_NAMES order). Part of the *situation* an action is judged in."""
    best_name, best = DOMAIN_NAMES[0], math.inf
    for name, metrics in DOMAINS.items():
        mean = sum(goodness(f"{name}.{m}", values[f"{name}.{m}"]) for m in metrics) / len(metrics)
        if mean < best:
            best_name, best = name, mean
    return best_name
