"""Tests for lifestack.env: the step semantics, the breakdown, determinism and robustness."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import random
from types import MappingProxyType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lifestack import task_reward as R
from lifestack.actions import ACTION_FIELDS, ACTION_TYPES, MAX_METRIC_DELTA, MAX_REST_RECOVERY
from lifestack.conflicts import get_conflict
from lifestack.env import (
    FREE_EFFECT,
    REST_ENERGY_PER_HOUR,
    EpisodeState,
    LifeStackEnv,
    Observation,
    event_roll,
)
from lifestack.generator import DOMAINS, TaskGenerator
from lifestack.metrics import DOMAIN_NAMES, INVERTED_METRICS, METRIC_PATHS, RESOURCE_NAMES, goodness
from lifestack.hacks import HACK_POLICIES, HACKS, HackContext, honest_action
from lifestack.policies import heuristic, lazy, random_valid


def hack_huge_free_claims(env):
    """+20 on every metric, nothing paid, no route: the claims alone."""
    return HACKS["huge_free_claims"]({**honest_action(env), "route": None}, HackContext(env))


hack_negative_costs = HACK_POLICIES["hack_negative_cost"]
hack_keyword_stuffing = HACK_POLICIES["hack_keyword_stuffing"]

GEN = TaskGenerator()
STRESS = "mental_wellbeing.stress_level"
COMPONENTS = ("component.outcome", "component.milestone", "component.completion", "component.reasoning")
REASONING = "Stress level is high, so I spend two hours of time on this step to bring stress down within budget."


def act(action_type="rest", target="mental_wellbeing", route=None, changes=None, cost=None, reasoning=REASONING) -> str:
    return json.dumps({
        "action_type": action_type, "target_domain": target, "route": route,
        "metric_changes": changes or {}, "resource_cost": cost or {"time": 1.0, "money": 0.0, "energy": 0.0},
        "reasoning": reasoning,
    })


def fresh(domain="flight_crisis", difficulty=1, seed=None, task=None, conflict=None) -> LifeStackEnv:
    """A reset env; with ``task`` given, the episode seed defaults to the task's own seed."""
    if seed is None:
        seed = task.domain_metadata.get("seed", 0) if task is not None else 0
    env = LifeStackEnv()
    env.reset(seed=seed, task=task or GEN.generate(domain, difficulty, seed), conflict=conflict)
    return env


def bd(obs: Observation) -> dict:
    return obs.metadata["breakdown"]


def quiet_seed(domain: str, difficulty: int, steps: int) -> int:
    """A seed whose scheduled events do not fire during the first ``steps`` steps."""
    for seed in range(200):
        t = GEN.generate(domain, difficulty, seed)
        if not any(e.step <= steps and event_roll(seed, e.id) < e.probability for e in t.event_schedule):
            return seed
    raise AssertionError("no quiet seed")


# --- reset and observation ------------------------------------------------------------


def test_reset_builds_disrupted_state_and_observation():
    env = LifeStackEnv()
    obs = env.reset(seed=4, options={"domain": "code_merge_crisis", "difficulty": 2})
    assert env.task.id == "code_merge_crisis-d2-s4"
    assert list(obs.metrics) == list(METRIC_PATHS)
    assert obs.step == 0 and not obs.done and obs.reward == 0.0
    assert obs.resources == dict(env.task.constraints["budget"])
    assert env.state.budget == obs.resources
    for path in env.task.domain_metadata["disruption"]:  # the task's disruption hit: goodness below 70
        assert goodness(path, obs.metrics[path]) < 70
    assert {"breakdown", "info", "events", "outcome", "task_id"} <= set(obs.metadata)
    assert obs.metadata["outcome"] == "running"
    assert env.state.world == dict(env.task.mutable_world)
    assert env.state.hidden == dict(env.task.hidden_state)


def test_reset_default_seed_and_conflict_adds_disruption():
    env = LifeStackEnv()
    env.reset()
    assert env.state.seed == 0 and env.task.id == "flight_crisis-d1-s0"
    plain = fresh().state.metrics
    conflict = get_conflict("forgotten_bill")
    with_conflict = fresh(conflict=conflict).state.metrics
    assert plain != with_conflict
    for path, delta in conflict.primary_disruption.items():
        assert with_conflict[path] != plain[path] or delta == 0


def test_reset_rejects_task_missing_fields():
    task = dataclasses.replace(GEN.generate("flight_crisis", 1, 0), goal="")
    with pytest.raises(ValueError, match="goal"):
        LifeStackEnv().reset(task=task)


def test_step_before_reset_raises():
    with pytest.raises(RuntimeError):
        LifeStackEnv().step(act())


# --- (1) inverted metrics -------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(INVERTED_METRICS))
def test_falling_inverted_metric_is_an_improvement(path):
    cost = {"time": 3.0, "money": 0.0, "energy": 0.0}  # pays for 8 points: both claims are affordable
    down_env, up_env = fresh(), fresh()
    before = down_env.state.metrics[path]
    down = down_env.step(act(changes={path: -5.0}, cost=cost, target=path.split(".")[0]))
    up = up_env.step(act(changes={path: +5.0}, cost=cost, target=path.split(".")[0]))
    assert down_env.state.metrics[path] == pytest.approx(before - 5.0)
    assert up_env.state.metrics[path] == pytest.approx(before + 5.0)
    assert bd(down)["component.outcome"] > bd(up)["component.outcome"]
    assert bd(down)["component.outcome.gain"] > 0 > bd(up)["component.outcome.gain"]
    assert down.reward > up.reward


@pytest.mark.parametrize("path", ["career.satisfaction", "finances.liquidity", "physical_health.sleep_quality"])
def test_rising_plain_metric_is_an_improvement(path):
    cost = {"time": 3.0, "money": 0.0, "energy": 0.0}
    down = fresh().step(act(changes={path: -5.0}, cost=cost))
    up = fresh().step(act(changes={path: +5.0}, cost=cost))
    assert bd(up)["component.outcome"] > bd(down)["component.outcome"]


# --- (2) routes -----------------------------------------------------------------------


def _route_cases():
    for domain in DOMAINS:
        for difficulty in (1, 3):
            seed = quiet_seed(domain, difficulty, 3)
            env = fresh(domain, difficulty, seed)
            for rid in env.open_routes():
                yield pytest.param(domain, difficulty, seed, rid, id=f"{domain}-d{difficulty}-{rid}")


@pytest.mark.parametrize("domain, difficulty, seed, rid", list(_route_cases()))
@pytest.mark.parametrize("order", ["forward", "reversed"])
def test_route_completed_through_action_schema(domain, difficulty, seed, rid, order):
    env = fresh(domain, difficulty, seed)
    route = env.task.route(rid)
    types = list(route.required_action_types)
    if order == "reversed":
        types.reverse()  # any order, each once
    n = len(types)
    for i, action_type in enumerate(types, start=1):
        assert env.next_action_types(rid)[0] in route.required_action_types
        obs = env.step(act(action_type, route=rid))
        b = bd(obs)
        assert env.state.route_progress[rid] == types[:i]
        assert env.state.world[route.progress_key] == i
        if i < n:
            assert b["route_status"] == "advanced"
            assert f"{rid}_step{i}" in env.state.milestones
            assert any("milestone reached" in m for m in obs.metadata["info"])
            assert b["component.milestone"] > 0 and b["component.completion"] > 0
            assert not obs.done
        else:
            assert b["route_status"] == "completed"
            assert f"{rid}_done" in env.state.milestones
            assert any(f"route {rid} completed" in m for m in obs.metadata["info"])
            assert obs.done and obs.metadata["outcome"] == env.state.outcome == "success"
            assert b["component.completion"] == pytest.approx(max(route.final_reward, 0.5), abs=1e-6)
            assert b["milestone_gain"] > 0
            for closed in route.closes_routes:
                assert closed in env.state.closed_routes
            for key, value in route.consequences.items():
                assert env.state.world[key] == value
    all_ms = [m.id for m in env.task.milestones if m.condition_key == route.progress_key]
    assert set(all_ms) <= set(env.state.milestones)


def test_route_milestones_rewarded_and_progress_raises_reward():
    env, other = fresh(), fresh()
    on_route = env.step(act("negotiate", route="rebook_premium"))
    off_route = other.step(act("negotiate"))
    assert bd(on_route)["component.milestone"] == 1.0
    assert bd(off_route)["component.milestone"] == 0.0
    assert on_route.reward > off_route.reward


def test_every_new_milestone_is_announced_in_info():
    env = fresh()
    for action_type in env.task.route("rebook_premium").required_action_types:
        before = list(env.state.milestones)
        obs = env.step(act(action_type, route="rebook_premium"))
        new = [m for m in env.state.milestones if m not in before]
        descriptions = {m.id: m.description for m in env.task.milestones}
        for mid in new:
            assert f"milestone reached: {descriptions[mid]}" in obs.metadata["info"]


def test_wrong_or_repeated_action_type_does_not_advance():
    env = fresh()
    obs = env.step(act("rest", route="rebook_premium"))
    assert bd(obs)["route_status"] == "wrong_type"
    assert "rebook_premium" not in env.state.route_progress
    env.step(act("negotiate", route="rebook_premium"))
    obs = env.step(act("negotiate", route="rebook_premium"))
    assert bd(obs)["route_status"] == "wrong_type"
    assert env.state.route_progress["rebook_premium"] == ["negotiate"]
    assert env.next_action_types("rebook_premium") == ["spend"]


def test_unknown_route_is_a_dead_end():
    env = fresh()
    obs = env.step(act("negotiate", route="teleport"))
    assert bd(obs)["route_status"] == "unknown"
    assert bd(obs)["penalty.dead_end"] == R.P_DEAD_END
    assert any("unknown route" in m for m in obs.metadata["info"])


def test_route_with_failing_precondition_is_a_dead_end():
    seed = next(s for s in range(200) if not GEN.generate("code_merge_crisis", 1, s).mutable_world["flag_exists"])
    env = fresh("code_merge_crisis", 1, seed)
    assert "feature_flag" not in env.open_routes()
    obs = env.step(act("deprioritize", target="career", route="feature_flag"))
    assert bd(obs)["route_status"] == "precondition"
    assert "penalty.dead_end" in bd(obs)
    assert "feature_flag" not in env.state.route_progress


def test_route_closed_by_competing_route_cannot_be_taken():
    # a task whose success needs more than one route, so the episode continues after a completion
    task = dataclasses.replace(GEN.generate("flight_crisis", 1, 0), success_conditions=MappingProxyType({"never": True}))
    env = fresh(task=task)
    env.step(act("reschedule", route="standby_and_work"))  # progress on the competing route first
    env.step(act("negotiate", route="rebook_premium"))
    obs = env.step(act("spend", route="rebook_premium"))
    assert bd(obs)["route_status"] == "completed" and not obs.done
    assert "standby_and_work" in env.state.closed_routes
    assert "standby_and_work" not in env.open_routes()
    obs = env.step(act("communicate", route="standby_and_work"))
    assert bd(obs)["route_status"] == "closed"
    assert bd(obs)["penalty.dead_end"] == R.P_DEAD_END
    assert env.state.route_progress["standby_and_work"] == ["reschedule"]
    assert "standby_and_work_done" not in env.state.milestones
    assert any("closed" in m for m in obs.metadata["info"])


def _fires(task, event_id: str) -> bool:
    ev = next(e for e in task.event_schedule if e.id == event_id)
    return event_roll(task.domain_metadata["seed"], event_id) < ev.probability


def test_route_closed_by_event_cannot_be_taken_and_replanning_scored():
    seed = next(s for s in range(200) if _fires(GEN.generate("flight_crisis", 3, s), "lounge_full"))
    task = GEN.generate("flight_crisis", 3, seed)
    lounge = next(e for e in task.event_schedule if e.id == "lounge_full")
    env = fresh(task=task)
    env.step(act("reschedule", route="standby_and_work"))
    env.step(act("communicate", route="standby_and_work"))
    obs = None
    while env.state.step < lounge.step:
        obs = env.step(act("negotiate", target="finances"))
    assert "lounge_full" in obs.metadata["events"]
    assert any(m.startswith("event: ") for m in obs.metadata["info"])
    assert "standby_and_work" in env.state.closed_routes and env.state.world["lounge_open"] is False
    assert not obs.done
    obs = env.step(act("rest", route="standby_and_work"))
    b = bd(obs)
    assert b["route_status"] == "closed"
    assert b["penalty.dead_end"] == R.P_DEAD_END
    assert b["component.replanning"] == -1.0
    assert env.state.route_progress["standby_and_work"] == ["reschedule", "communicate"]


def test_replanning_rewarded_when_adapting_after_event():
    seed = next(s for s in range(200) if _fires(GEN.generate("code_merge_crisis", 3, s), "cto_asks_eta"))
    env = fresh("code_merge_crisis", 3, seed)
    first = env.step(act("rest"))
    assert "cto_asks_eta" in first.metadata["events"]
    assert "component.replanning" not in bd(first)  # the event fired after this action
    second = env.step(act("communicate", target="career", route="revert_merge"))
    assert bd(second)["component.replanning"] == 1.0


def test_events_fire_by_seeded_roll():
    for seed in range(12):
        task = GEN.generate("flight_crisis", 5, seed)
        env = fresh(task=task)
        while not env.state.done:
            env.step(lazy(env))
        expected = [e.id for e in task.event_schedule
                    if e.step <= env.state.step and event_roll(seed, e.id) < e.probability]
        assert env.state.events_fired == expected


# --- (3) claims are bounded and paid for ----------------------------------------------


def test_free_huge_claims_scaled_and_penalised():
    env = fresh()
    before = dict(env.state.metrics)
    obs = env.step(hack_huge_free_claims(env))
    b = bd(obs)
    assert b["plausibility"] < 0.05
    assert b["penalty.implausible"] < 0
    after = env.state.metrics
    gained = sum(max(goodness(p, after[p]) - goodness(p, before[p]), 0.0) for p in METRIC_PATHS)
    assert gained <= FREE_EFFECT + 1e-6  # only the free effect is real
    assert abs(after[STRESS] - before[STRESS]) < 20.0  # applied change smaller than claimed
    assert any("scaled down" in m for m in obs.metadata["info"])
    assert obs.reward < 0


def test_paid_claims_are_applied_in_full():
    env = fresh()
    before = env.state.metrics[STRESS]
    obs = env.step(act(changes={STRESS: -5.0}, cost={"time": 2.5, "money": 0.0, "energy": 0.0}))  # 2.5 h buy 5 points
    assert bd(obs)["plausibility"] == 1.0
    assert "penalty.implausible" not in bd(obs)
    assert env.state.metrics[STRESS] == pytest.approx(before - 5.0)


def test_claims_bounded_by_envelope_even_when_paid():
    env = fresh()
    before = env.state.metrics[STRESS]
    env.step(act(changes={STRESS: -100.0}, cost={"time": 5.0, "money": 600.0, "energy": 0.0}))
    assert before - env.state.metrics[STRESS] == pytest.approx(MAX_METRIC_DELTA)


def test_unaffordable_action_fails_and_changes_nothing_but_the_step():
    env = fresh()
    before = {"resources": dict(env.state.resources), "metrics": dict(env.state.metrics)}
    obs = env.step(act("spend", changes={STRESS: -5.0}, cost={"time": 1.0, "money": 50_000.0, "energy": 0.0}))
    b = bd(obs)
    assert b["penalty.unaffordable"] == R.P_UNAFFORDABLE
    assert obs.reward < 0
    assert env.state.resources == before["resources"]
    assert env.state.metrics == before["metrics"]
    assert env.state.step == 1
    assert any("unaffordable" in m for m in obs.metadata["info"])


@settings(max_examples=120, deadline=None)
@given(
    action_type=st.sampled_from([t for t in ACTION_TYPES if t != "rest"]),
    cost=st.fixed_dictionaries({k: st.floats(-1e5, 1e5) for k in RESOURCE_NAMES}),
    claim=st.floats(-30, 30),
)
def test_negative_costs_never_add_resources(action_type, cost, claim):
    env = fresh()
    before = dict(env.state.resources)
    obs = env.step(act(action_type, changes={STRESS: claim}, cost=cost))
    assert "error" not in bd(obs)
    for k in RESOURCE_NAMES:
        assert env.state.resources[k] <= before[k]
    if any(v < 0 for v in cost.values()):
        assert "penalty.negative_cost" in bd(obs)


@settings(max_examples=80, deadline=None)
@given(spend=st.floats(0, 40), hours=st.floats(0, 10), recover=st.floats(-100, 0))
def test_rest_recovers_bounded_energy(spend, hours, recover):
    env = fresh()
    budget = env.state.budget["energy"]
    env.step(act("negotiate", target="finances", cost={"time": 0.0, "money": 0.0, "energy": spend}))
    before = dict(env.state.resources)
    env.step(act("rest", cost={"time": hours, "money": 0.0, "energy": recover}))
    after = env.state.resources
    assert after["time"] <= before["time"] and after["money"] <= before["money"]
    gained = after["energy"] - before["energy"]
    assert gained <= min(MAX_REST_RECOVERY, REST_ENERGY_PER_HOUR * hours, -recover) + 1e-9
    assert after["energy"] <= budget + 1e-9


def test_rest_does_recover_spent_energy():
    env = fresh()
    env.step(act("negotiate", target="finances", cost={"time": 0.0, "money": 0.0, "energy": 30.0}))
    before = env.state.resources["energy"]
    env.step(act("rest", cost={"time": 2.0, "money": 0.0, "energy": -20.0}))
    assert env.state.resources["energy"] == pytest.approx(before + 10.0)  # 5 per hour rested


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize("field", ["metric_changes", "resource_cost"])
def test_non_finite_numbers_rejected_with_reason(literal, field):
    env = fresh()
    before = copy.deepcopy(env.state.to_dict())
    if field == "metric_changes":
        text = act(changes={STRESS: "__X__"})
    else:
        text = act(cost={"time": "__X__", "money": 0, "energy": 0})
    obs = env.step(text.replace('"__X__"', literal))
    assert "not finite" in bd(obs)["error"]
    assert obs.reward == R.P_INVALID_ACTION
    assert any("action rejected" in m for m in obs.metadata["info"])
    assert env.state.to_dict() == before


@pytest.mark.parametrize("cost", [{"time": -5.0, "money": -1000.0, "energy": -20.0}, {"time": -5.0, "money": 0.0, "energy": 0.0}])
def test_directly_constructed_action_cannot_gain_resources(cost):
    from lifestack.actions import LifeStackAction

    env = fresh()
    before = dict(env.state.resources)
    env.step(LifeStackAction("negotiate", "finances", None, {}, cost, "refunds"))
    for k in RESOURCE_NAMES:
        assert env.state.resources[k] <= before[k]


# --- (4) the breakdown ----------------------------------------------------------------


def _assert_breakdown_consistent(obs: Observation) -> None:
    b = bd(obs)
    for name in COMPONENTS:
        assert name in b
    assert b["total"] == pytest.approx(obs.reward, abs=1e-6)
    weights = {"outcome": R.W_OUTCOME, "milestone": R.W_MILESTONE, "completion": R.W_COMPLETION,
               "reasoning": R.W_REASONING, "replanning": R.W_REPLAN}
    used = {k: w for k, w in weights.items() if f"component.{k}" in b}
    weighted = sum(w * b[f"component.{k}"] for k, w in used.items()) / sum(used.values())
    penalties = sum(v for k, v in b.items() if k.startswith("penalty."))
    assert obs.reward == pytest.approx(R.soft_floor(R.clip(weighted + penalties)), abs=1e-5)


def _low_metric_env():
    env = fresh()
    snap = env.snapshot()
    snap["metrics"]["finances.liquidity"] = 14.0
    env.restore(env.task, snap)
    return env


PENALTY_CASES = {
    "unaffordable": lambda env: act(cost={"time": 500.0, "money": 0.0, "energy": 0.0}),
    "dead_end": lambda env: act("negotiate", route="teleport"),
    "implausible": hack_huge_free_claims,
    "inaction": lazy,
    "negative_cost": hack_negative_costs,
    "keyword_stuffing": hack_keyword_stuffing,
    "cascade_collapse": lambda env: act("spend", target="career", changes={"career.workload": 20.0}),
}


@pytest.mark.parametrize("penalty", sorted(PENALTY_CASES))
def test_fired_penalties_are_named(penalty):
    env = fresh()
    obs = env.step(PENALTY_CASES[penalty](env))
    assert f"penalty.{penalty}" in bd(obs)
    assert bd(obs)[f"penalty.{penalty}"] < 0
    _assert_breakdown_consistent(obs)


def test_critical_floor_penalty_named():
    env = _low_metric_env()
    obs = env.step(act("spend", target="finances", changes={"finances.liquidity": -10.0}))
    assert "penalty.critical_floor" in bd(obs)
    _assert_breakdown_consistent(obs)


def test_timeout_penalty_named_on_last_step():
    env = fresh()
    observations = []
    while not env.state.done:
        observations.append(env.step(lazy(env)))
    assert env.state.outcome == "timeout" and env.state.step == env.task.horizon
    assert "penalty.timeout" in bd(observations[-1])
    assert all("penalty.timeout" not in bd(o) for o in observations[:-1])
    assert "episode over: timeout" in observations[-1].metadata["info"]


def test_clean_heuristic_step_has_components_and_no_penalties():
    env = fresh()
    obs = env.step(heuristic(env))
    b = bd(obs)
    _assert_breakdown_consistent(obs)
    assert not [k for k in b if k.startswith("penalty.")]
    assert b["component.reasoning"] > 0
    assert obs.reward > 0.6


def test_stepping_after_done_is_a_no_op():
    env = fresh()
    while not env.state.done:
        env.step(lazy(env))
    before = env.state.to_dict()
    obs = env.step(act())
    assert obs.reward == 0.0 and obs.done
    assert "episode is already over" in obs.metadata["info"]
    assert env.state.to_dict() == before


# --- (5) determinism, snapshot, restore -----------------------------------------------


def _rollout(domain, difficulty, seed, policy, conflict=None):
    env = fresh(domain, difficulty, seed, conflict=conflict)
    rng = random.Random(seed * 7 + 1)
    trace = []
    while not env.state.done:
        text = policy(env, rng)
        obs = env.step(text)
        trace.append((text, obs, env.state.to_dict()))
    return trace


@pytest.mark.parametrize("policy", [heuristic, random_valid], ids=["heuristic", "random_valid"])
@pytest.mark.parametrize("domain, difficulty, seed", [("flight_crisis", 1, 3), ("flight_crisis", 5, 8),
                                                      ("code_merge_crisis", 3, 2), ("code_merge_crisis", 5, 11)])
def test_same_seed_same_actions_same_episode(policy, domain, difficulty, seed):
    conflict = get_conflict("forgotten_bill") if seed % 2 else None
    a = _rollout(domain, difficulty, seed, policy, conflict)
    b = _rollout(domain, difficulty, seed, policy, conflict)
    assert len(a) >= 1
    assert a == b  # identical texts, observations (metrics, rewards, infos, breakdowns) and states


def test_rewards_of_rollout_in_range():
    for seed in range(6):
        for policy in (heuristic, random_valid):
            for _, obs, _ in _rollout(DOMAINS[seed % 2], 1 + seed % 5, seed, policy):
                assert math.isfinite(obs.reward) and -1.0 <= obs.reward <= 1.0


def test_snapshot_is_json_safe_and_round_trips():
    env = fresh("flight_crisis", 5, 2)
    env.step(heuristic(env))
    snap = env.snapshot()
    assert json.loads(json.dumps(snap, allow_nan=False)) == snap
    other = LifeStackEnv()
    other.restore(env.task, json.loads(json.dumps(snap)))
    assert other.snapshot() == snap
    assert EpisodeState.from_dict(snap).to_dict() == snap


def test_restore_from_state_steps_identically_and_does_not_alias():
    env = fresh("code_merge_crisis", 5, 4)
    env.step(random_valid(env, random.Random(1)))
    copy_env = LifeStackEnv()
    copy_env.restore(env.task, env.state)
    frozen = env.state.to_dict()
    text = heuristic(env)
    a = copy_env.step(text)
    assert env.state.to_dict() == frozen  # the restored copy does not share state
    b = env.step(text)
    assert a == b
    assert copy_env.state == env.state


def test_restore_from_snapshot_of_rounded_state_steps_identically():
    env = fresh("flight_crisis", 3, 1)
    snap = env.snapshot()
    env.restore(env.task, snap)  # now exactly representable
    other = LifeStackEnv()
    other.restore(env.task, env.snapshot())
    for _ in range(2):
        text = heuristic(env)
        assert env.step(text) == other.step(text)


def test_restore_from_snapshot_is_exact_after_a_step():
    env = fresh("flight_crisis", 1, 1)
    env.step(random_valid(env, random.Random(1)))
    other = LifeStackEnv()
    other.restore(env.task, env.snapshot())
    assert other.state.metrics == env.state.metrics
    text = heuristic(env)
    assert other.step(text) == env.step(text)


def test_snapshot_version_checked():
    env = fresh()
    snap = env.snapshot()
    snap["v"] = 99
    with pytest.raises(ValueError):
        LifeStackEnv().restore(env.task, snap)


# --- gym adapter ------------------------------------------------------------------------


def test_gym_step_five_tuple():
    env = fresh()
    result = env.gym_step(act("negotiate", route="rebook_premium"))
    assert isinstance(result, tuple) and len(result) == 5
    obs, reward, terminated, truncated, info = result
    assert isinstance(obs, Observation) and reward == obs.reward
    assert terminated is False and truncated is False
    assert isinstance(info, dict) and "breakdown" in info
    _, _, terminated, truncated, info = env.gym_step(act("spend", route="rebook_premium"))
    assert terminated is True and truncated is False and info["outcome"] == "success"


def test_gym_step_truncates_on_timeout():
    env = fresh()
    result = None
    while not env.state.done:
        result = env.gym_step(lazy(env))
    assert result[2] is False and result[3] is True


# --- fuzzing ----------------------------------------------------------------------------

FUZZ_TASK = GEN.generate("flight_crisis", 5, 0)
_fuzz_env = LifeStackEnv()
_fuzz_env.reset(seed=0, task=FUZZ_TASK)
_fuzz_env.step(act("negotiate", route="rebook_premium"))
FUZZ_START = _fuzz_env.state.clone()  # mid-episode, an event already fired

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20),
    st.sampled_from(list(METRIC_PATHS) + list(ACTION_TYPES) + list(DOMAIN_NAMES) + list(FUZZ_TASK.route_ids)),
)
json_values = st.recursive(
    json_scalars,
    lambda c: st.lists(c, max_size=5) | st.dictionaries(st.text(max_size=15), c, max_size=5),
    max_leaves=25,
)
numbers = st.one_of(st.floats(), st.integers(-10**12, 10**12), st.sampled_from([float("nan"), float("inf"), -1e308]))


@st.composite
def mutated_action_dicts(draw):
    d = {
        "action_type": draw(st.sampled_from(ACTION_TYPES)),
        "target_domain": draw(st.sampled_from(DOMAIN_NAMES)),
        "route": draw(st.sampled_from([None, *FUZZ_TASK.route_ids, "nope"])),
        "metric_changes": draw(st.dictionaries(st.sampled_from(METRIC_PATHS), st.floats(-30, 30), max_size=5)),
        "resource_cost": draw(st.fixed_dictionaries({k: st.floats(-50, 800) for k in RESOURCE_NAMES})),
        "reasoning": draw(st.text(max_size=60)),
    }
    for name in draw(st.lists(st.sampled_from(ACTION_FIELDS), unique=True, max_size=3)):
        choice = draw(st.integers(0, 2))
        if choice == 0:
            d.pop(name)
        elif choice == 1:
            d[name] = draw(json_values)
        elif name in ("metric_changes", "resource_cost"):
            keys = METRIC_PATHS if name == "metric_changes" else RESOURCE_NAMES
            d[name] = draw(st.dictionaries(st.sampled_from(keys) | st.text(max_size=10), numbers, max_size=4))
    return d


def _check_step(action) -> None:
    env = LifeStackEnv()
    env.restore(FUZZ_TASK, FUZZ_START)
    before = copy.deepcopy(env.state.to_dict())
    obs = env.step(action)
    assert isinstance(obs, Observation)
    assert isinstance(obs.reward, float) and math.isfinite(obs.reward) and -1.0 <= obs.reward <= 1.0
    b = bd(obs)
    assert all(math.isfinite(v) for k, v in b.items() if isinstance(v, float))
    after = env.state.to_dict()
    if "error" in b:
        assert after == before
        assert obs.reward == R.P_INVALID_ACTION
        return
    assert after["step"] == before["step"] + 1
    for name in COMPONENTS:
        assert name in b
    for p, v in env.state.metrics.items():
        assert math.isfinite(v) and 0.0 <= v <= 100.0
    for k in RESOURCE_NAMES:
        assert math.isfinite(env.state.resources[k])
        if k != "energy":
            assert env.state.resources[k] <= before["resources"][k] + 1e-9
    assert env.state.resources["energy"] <= env.state.budget["energy"] + 1e-9


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text())
def test_fuzz_step_arbitrary_text(text):
    _check_step(text)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(max_size=15), json_values, max_size=6))
def test_fuzz_step_arbitrary_dicts(d):
    _check_step(d)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_action_dicts(), st.booleans())
def test_fuzz_step_mutated_valid_actions(d, as_text):
    _check_step(json.dumps(d) if as_text else d)


@pytest.mark.parametrize("payload", ["[" * 100_000, "{" * 50_000, "x" * 1_000_000, None, 42, b"{}"])
def test_step_hostile_payloads(payload):
    _check_step(payload)


# --- the per-task index -----------------------------------------------------------------


def test_restore_without_copy_adopts_the_state():
    env = fresh("flight_crisis", 3, 5)
    state = env.state.clone()
    other = LifeStackEnv()
    other.restore(env.task, state, copy=False)
    assert other.state is state
    text = heuristic(env)
    assert other.step(text) == env.step(text)
    assert state == env.state  # the adopted state is the one that moved


def test_rewards_identical_across_processes_with_different_hash_seeds():
    # string hashing is randomised per process; nothing the reward sums may depend on set order
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import json, random\n"
        "from lifestack.scenarios import sample_scenario\n"
        "from lifestack.env import LifeStackEnv\n"
        "from lifestack.calibrate import POLICIES\n"
        "env, out = LifeStackEnv(), []\n"
        "for seed in range(12):\n"
        "    sc = sample_scenario(seed, 1 + seed % 5)\n"
        "    for name in sorted(POLICIES):\n"
        "        env.restore(sc.task, sc.state)\n"
        "        obs = env.step(POLICIES[name](env, random.Random(seed)))\n"
        "        out.append([obs.reward.hex(), sorted((k, v.hex()) for k, v in obs.metadata['breakdown'].items()"
        " if isinstance(v, float))])\n"
        "print(json.dumps(out))\n"
    )
    root = Path(__file__).resolve().parent.parent
    runs = [subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True,
                           env={**__import__("os").environ, "PYTHONHASHSEED": seed}).stdout
            for seed in ("1", "2", "3")]
    assert runs[0] == runs[1] == runs[2]
    from lifestack.calibrate import POLICIES
    assert len(json.loads(runs[0])) == 12 * len(POLICIES)
