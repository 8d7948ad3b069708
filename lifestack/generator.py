"""TaskGenerator: seeded ``flight_crisis`` and ``code_merge_crisis`` tasks.

``TaskGenerator().generate(domain, difficulty, seed)`` is a pure function of its
arguments: all randomness comes from ``random.Random("domain:difficulty:seed")``. String
seeds are hashed with SHA-512 by ``random``, so they are stable across processes and
Python runs (unlike ``hash()``).

Difficulty (1-5) scales: the task's own disruption, the budget (tighter), the horizon
(fewer spare steps), the route length (a third step from difficulty 3), and the events
(more of them, earlier, more likely).
"""

from __future__ import annotations

import random
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Callable

from .tasks import ExoEvent, Milestone, Route, Task

DOMAINS: tuple[str, ...] = ("flight_crisis", "code_merge_crisis")
MIN_DIFFICULTY, MAX_DIFFICULTY = 1, 5
EVENT_COUNT = {1: 0, 2: 1, 3: 2, 4: 2, 5: 3}  # surprise events per difficulty


def _ro(d: dict) -> MappingProxyType:
    """Read-only view: a cached Task is shared, so nobody may mutate its dicts."""
    return MappingProxyType(d)


def _budget(rng: random.Random, difficulty: int) -> dict[str, float]:
    # Tighter with difficulty, jittered so prompts differ; always enough for 2-3 actions.
    return {
        "time": float(round((13 - difficulty) * rng.uniform(0.9, 1.1), 1)),
        "money": float(round((900 - 120 * difficulty) * rng.uniform(0.85, 1.15))),
        "energy": float(round((70 - 7 * difficulty) * rng.uniform(0.9, 1.1))),
    }


def _route_milestones(route: Route, reward_per_step: float) -> list[Milestone]:
    n = len(route.required_action_types)
    out = []
    for k in range(1, n + 1):
        label = "done" if k == n else f"step{k}"
        out.append(
            Milestone(
                id=f"{route.id}_{label}",
                description=f"{route.name}: {'completed' if k == n else f'step {k} of {n} done'}",
                condition_key=route.progress_key,
                condition_value=k,
                reward=reward_per_step,
            )
        )
    return out


def _events(rng: random.Random, difficulty: int, specs: list[dict]) -> tuple[ExoEvent, ...]:
    """The first ``EVENT_COUNT[difficulty]`` of the domain's event specs, earlier from d4."""
    chosen = specs[: EVENT_COUNT[difficulty]]
    events = []
    for i, spec in enumerate(chosen):
        step = max(1, spec["step"] - (1 if difficulty >= 4 else 0)) + i
        prob = min(0.95, 0.35 + 0.12 * difficulty + rng.uniform(-0.05, 0.05))
        events.append(
            ExoEvent(
                step=step,
                probability=round(prob, 3),
                id=spec["id"],
                description=spec["description"],
                world_mutation=_ro(dict(spec.get("world", {}))),
                hidden_state_mutation=_ro(dict(spec.get("hidden", {}))),
                closes_routes=tuple(spec.get("closes", ())),
            )
        )
    return tuple(events)


def _flight_crisis(rng: random.Random, difficulty: int, seed: int) -> Task:
    origin, destination = rng.sample(["Chicago", "Denver", "Boston", "Atlanta", "Seattle", "Austin"], 2)
    fare = int(rng.uniform(380, 520) * (1 + 0.1 * difficulty))
    three = difficulty >= 3
    routes = (
        Route(
            id="rebook_premium",
            name="Rebook on a premium fare",
            description="Argue for a seat on the next flight and pay the premium fare.",
            required_action_types=("negotiate", "spend") + (("communicate",) if three else ()),
            preconditions={"premium_seats_available": True},
            consequences={"rebooked": True, "goal_met": True},
            closes_routes=("standby_and_work",),
            milestones_unlocked=("rebook_premium_done",),
            final_reward=1.0,
        ),
        Route(
            id="standby_and_work",
            name="Fly standby, work from the lounge",
            description="Reschedule Monday's prep, wait in the lounge and keep the client informed.",
            required_action_types=("reschedule", "communicate") + (("rest",) if three else ()),
            preconditions={"lounge_open": True},
            consequences={"rebooked": True, "goal_met": True},
            closes_routes=("rebook_premium",),
            milestones_unlocked=("standby_and_work_done",),
            final_reward=0.8,
        ),
        Route(
            id="attend_remotely",
            name="Attend the meeting remotely",
            description="Ask a colleague to present in person and join by video.",
            required_action_types=("delegate", "communicate"),
            preconditions={"colleague_available": True},
            consequences={"meeting_covered": True, "goal_met": True},
            closes_routes=(),
            milestones_unlocked=("attend_remotely_done",),
            final_reward=0.6,
        ),
    )
    world = {
        "premium_seats_available": True,
        "lounge_open": True,
        "colleague_available": difficulty <= 3 or rng.random() < 0.5,
        "premium_fare": fare,
        "standby_queue": rng.randint(4, 8 + 4 * difficulty),
        "rebooked": False,
        "meeting_covered": False,
        "goal_met": False,
        "stranded": False,
    }
    event_specs = [
        {"id": "price_surge", "step": 2, "description": "Premium fares just jumped; the last seats are selling out.",
         "world": {"premium_fare": int(fare * 1.6)}, "hidden": {"seats_left": 1}},
        {"id": "lounge_full", "step": 2, "description": "The lounge is at capacity and closes its doors to standby passengers.",
         "world": {"lounge_open": False}, "closes": ("standby_and_work",)},
        {"id": "premium_sold_out", "step": 3, "description": "The premium cabin sold out.",
         "world": {"premium_seats_available": False}, "closes": ("rebook_premium",)},
    ]
    disruption = {
        "mental_wellbeing.stress_level": 6.0 + 3.0 * difficulty,
        "time.free_hours_per_week": -(4.0 + 2.0 * difficulty),
        "career.stability": -(2.0 + 1.5 * difficulty),
    }
    return _assemble(
        rng, difficulty, seed, "flight_crisis",
        goal=f"Get from {origin} to the Monday client meeting in {destination} after your flight was cancelled.",
        routes=routes, world=world, event_specs=event_specs, disruption=disruption,
        visible={"origin": origin, "destination": destination, "cancelled_flight": f"LS{rng.randint(100, 999)}",
                 "meeting": "Monday 09:00", "premium_fare": fare},
        hidden={"seats_left": rng.randint(2, 5), "true_delay_hours": rng.randint(3, 14)},
    )


def _code_merge_crisis(rng: random.Random, difficulty: int, seed: int) -> Task:
    service = rng.choice(["payments-api", "search", "checkout", "auth-gateway", "billing"])
    three = difficulty >= 3
    routes = (
        Route(
            id="revert_merge",
            name="Revert the merge",
            description="Revert the bad merge, tell the team, move the feature to the next release.",
            required_action_types=("communicate", "reschedule") + (("negotiate",) if three else ()),
            preconditions={"revert_possible": True},
            consequences={"main_green": True, "goal_met": True},
            closes_routes=("patch_forward",),
            milestones_unlocked=("revert_merge_done",),
            final_reward=0.9,
        ),
        Route(
            id="patch_forward",
            name="Patch forward",
            description="Pair with the author on a fix and negotiate a short freeze extension.",
            required_action_types=("delegate", "negotiate") + (("spend",) if three else ()),
            preconditions={"author_online": True},
            consequences={"main_green": True, "feature_shipped": True, "goal_met": True},
            closes_routes=("revert_merge",),
            milestones_unlocked=("patch_forward_done",),
            final_reward=1.0,
        ),
        Route(
            id="feature_flag",
            name="Disable behind a feature flag",
            description="Drop the risky work for tonight and switch the feature off by flag.",
            required_action_types=("deprioritize", "communicate"),
            preconditions={"flag_exists": True},
            consequences={"main_green": True, "goal_met": True},
            closes_routes=(),
            milestones_unlocked=("feature_flag_done",),
            final_reward=0.7,
        ),
    )
    world = {
        "revert_possible": True,
        "author_online": difficulty <= 2 or rng.random() < 0.7,
        "flag_exists": rng.random() < 0.75,
        "failing_tests": rng.randint(3, 10 * difficulty),
        "cto_waiting": False,
        "main_green": False,
        "feature_shipped": False,
        "goal_met": False,
        "data_loss": False,
    }
    event_specs = [
        {"id": "cto_asks_eta", "step": 1, "description": "The CTO asks in the incident channel for an ETA.",
         "world": {"cto_waiting": True}},
        {"id": "second_regression", "step": 2, "description": "A second regression appears: the patch-forward branch no longer applies.",
         "world": {"author_online": False}, "closes": ("patch_forward",)},
        {"id": "migration_ran", "step": 3, "description": "A schema migration already ran in production; a plain revert is no longer safe.",
         "world": {"revert_possible": False}, "closes": ("revert_merge",)},
    ]
    disruption = {
        "career.workload": 6.0 + 3.0 * difficulty,
        "mental_wellbeing.stress_level": 5.0 + 3.0 * difficulty,
        "physical_health.sleep_quality": -(2.0 + 2.0 * difficulty),
    }
    return _assemble(
        rng, difficulty, seed, "code_merge_crisis",
        goal=f"Get main green again for {service} before the release freeze after a bad merge broke production.",
        routes=routes, world=world, event_specs=event_specs, disruption=disruption,
        visible={"service": service, "release_freeze": "tonight 22:00", "on_call": "you"},
        hidden={"root_cause": rng.choice(["migration", "race condition", "config drift"]),
                "fix_hours": rng.randint(2, 8)},
    )


def _assemble(rng: random.Random, difficulty: int, seed: int, domain: str, *, goal: str, routes: tuple[Route, ...],
              world: dict, event_specs: list[dict], disruption: dict, visible: dict, hidden: dict) -> Task:
    longest = max(len(r.required_action_types) for r in routes)
    horizon = longest + max(1, 4 - difficulty)  # fewer spare steps as difficulty rises
    budget = _budget(rng, difficulty)
    milestones: list[Milestone] = []
    for r in routes:
        milestones.extend(_route_milestones(r, round(r.final_reward / len(r.required_action_types), 3)))
    return Task(
        id=f"{domain}-d{difficulty}-s{seed}",
        domain=domain,
        goal=goal,
        constraints=_ro({"budget": _ro(budget), "horizon_steps": horizon}),
        hidden_state=_ro(hidden),
        mutable_world=_ro(world),
        visible_world=_ro(visible),
        success_conditions=_ro({"goal_met": True}),
        failure_conditions=_ro({"stranded": True} if domain == "flight_crisis" else {"data_loss": True}),
        event_schedule=_events(rng, difficulty, event_specs),
        viable_routes=routes,
        milestones=tuple(milestones),
        horizon=horizon,
        difficulty=difficulty,
        domain_metadata=_ro({"disruption": _ro({k: round(v * rng.uniform(0.9, 1.1), 2) for k, v in disruption.items()}),
                             "seed": seed}),
    )


_BUILDERS: dict[str, Callable[[random.Random, int, int], Task]] = {
    "flight_crisis": _flight_crisis,
    "code_merge_crisis": _code_merge_crisis,
}


def _check_args(domain: Any, difficulty: Any, seed: Any) -> None:
    if domain not in _BUILDERS:
        raise ValueError(f"unknown task domain {domain!r}; known: {', '.join(DOMAINS)}")
    if isinstance(difficulty, bool) or not isinstance(difficulty, int) or not MIN_DIFFICULTY <= difficulty <= MAX_DIFFICULTY:
        raise ValueError(f"difficulty must be an int in 1..5, got {difficulty!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an int, got {seed!r}")


@lru_cache(maxsize=8192)
def _generate_cached(domain: str, difficulty: int, seed: int) -> Task:
    rng = random.Random(f"{domain}:{difficulty}:{seed}")
    return _BUILDERS[domain](rng, difficulty, seed)


class TaskGenerator:
    """Builds tasks; the same ``(domain, difficulty, seed)`` always gives an identical task.

    Tasks are immutable, so results are cached (``cache=False`` rebuilds every time, as
    the tests use it; ``scripts/bench_rewards.py`` clears the cache to time the cold cost).
    """

    domains = DOMAINS

    def __init__(self, cache: bool = True) -> None:
        self.cache = cache

    def generate(self, domain: str, difficulty: int, seed: int) -> Task:
        _check_args(domain, difficulty, seed)
        if self.cache:
            return _generate_cached(domain, difficulty, seed)
        return _generate_cached.__wrapped__(domain, difficulty, seed)
