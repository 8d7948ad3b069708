"""Reward integrity: no way to score above an honest answer without being a better answer.

One family of tests per known hack (docs/rewards.md, "Reward integrity"), each on a
seeded set of 60 prompts over all difficulties and both task families, scored through
the trainer's six real reward functions weighted with REWARD_WEIGHTS (what GRPO sees);
plus hypothesis properties for continuity and for the order valid > unparseable.
"""

from __future__ import annotations

import functools
import json
import math
import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import reward_integrity as RI  # noqa: E402
import train_trl as T  # noqa: E402
from lifestack.training.context import FeedbackSource  # noqa: E402
from lifestack.training.generation_log import GenerationLog  # noqa: E402
import lifestack.training.grpo_rewards as RW  # noqa: E402
import lifestack.prompts as PR  # noqa: E402
import lifestack.scoring as LE  # noqa: E402

from lifestack import hacks as H  # noqa: E402
from lifestack.actions import ACTION_TYPES, parse_action  # noqa: E402
from lifestack.env import CASCADE_TRIGGER, LifeStackEnv  # noqa: E402
from lifestack.feedback import FeedbackStore, OutcomeFeedback  # noqa: E402
from lifestack.metrics import DOMAIN_NAMES, METRIC_PATHS  # noqa: E402
from lifestack.heuristic import heuristic, raw_delta  # noqa: E402
from lifestack.scenarios import sample_scenario  # noqa: E402

PER_DIFFICULTY = 12  # 60 prompts
SEED = 5000
# A 1 % change of one number the model writes moves the weighted GRPO total (REWARD_WEIGHTS,
# range about +-5.5) by at most this much, unless it crosses the budget (a rule the prompt
# states). docs/rewards.md, "Continuity", gives the measured worst case.
CONTINUITY_BOUND = 0.1
PROPS = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.function_scoped_fixture])


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """The seeded feedback database in tmp_path; fresh caches."""
    monkeypatch.setenv("LIFESTACK_FEEDBACK_DB", str(tmp_path / "fb.sqlite3"))
    monkeypatch.setattr(T.RUN, "log", GenerationLog(tmp_path / "logs"))
    monkeypatch.setattr(T.RUN, "feedback", FeedbackSource())
    RW.EVALUATOR.evaluations.clear()
    yield
    T.RUN.log.close()


@functools.lru_cache(maxsize=None)
def cases() -> tuple:
    """(prompt, scenario) for 60 seeded prompts, 12 per difficulty."""
    out = []
    for d in range(1, 6):
        for i in range(PER_DIFFICULTY):
            sc = sample_scenario(SEED + 1000 * d + i, d)
            out.append((PR.build_prompt(sc.task, sc.conflict, sc.state, d, sc.seed), sc))
    return tuple(out)


def env_at(sc) -> LifeStackEnv:
    env = LifeStackEnv()
    env.restore(sc.task, sc.state)
    return env


def total(text, prompt) -> float:
    return T.RUN.weighted(T.RUN.vector(text, prompt))


def honest(sc) -> dict:
    return json.loads(heuristic(env_at(sc)))


# --- the whole battery -----------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def battery_rows() -> tuple:
    rows, table = RI.integrity_rows(PER_DIFFICULTY, SEED)
    return tuple(rows), tuple(table)


def test_prompt_set_covers_every_difficulty_and_both_task_families():
    rows, _ = battery_rows()
    assert len(rows) >= 60
    assert {r["difficulty"] for r in rows} == {1, 2, 3, 4, 5}
    assert {r["domain"] for r in rows} == {"flight_crisis", "code_merge_crisis"}


@pytest.mark.parametrize("hack", list(H.HACKS))
def test_every_hack_scores_below_honest_on_every_prompt(hack):
    rows, _ = battery_rows()
    losses = [r["scores"]["honest"]["total"] - r["scores"][hack]["total"] for r in rows]
    assert min(losses) > 0, (hack, min(losses))


def test_integrity_table_prints_and_passes(capsys):
    assert RI.main(["--per-difficulty", "2"]) == 0
    out = capsys.readouterr().out
    assert "| keyword_list |" in out and "every hack scores below the honest answer" in out


def test_honest_answer_clears_the_threshold_on_average():
    rows, _ = battery_rows()
    task = [r["scores"]["honest"]["rewards"]["reward_task_success_fn"] for r in rows]
    assert sum(task) / len(task) > T.ADVANCE_THRESHOLD


# --- 1. keyword-stuffed reasoning -------------------------------------------------------
@pytest.mark.parametrize("hack", ["keyword_list", "keyword_list_glued", "keyword_list_all_vocabulary"])
def test_keyword_list_lowers_the_reasoning_and_the_task_reward(hack):
    for prompt, sc in cases():
        env = env_at(sc)
        a = honest(sc)
        text = H.HACKS[hack](dict(a), H.HackContext(env))
        h, k = T.RUN.vector(json.dumps(a), prompt), T.RUN.vector(text, prompt)
        assert k["reward_reasoning_fn"] < h["reward_reasoning_fn"] - 0.2, (sc.seed, h, k)
        assert k["reward_task_success_fn"] < h["reward_task_success_fn"], sc.seed


@PROPS
@given(data=st.data())
def test_any_list_of_scorer_words_scores_below_the_honest_sentence(data):
    prompt, sc = data.draw(st.sampled_from(cases()))
    env = env_at(sc)
    a = honest(sc)
    words = H.HackContext(env).signal_words(a)
    picked = data.draw(st.lists(st.sampled_from(words), min_size=4, max_size=40))
    sep = data.draw(st.sampled_from([" ", ", ", "; ", " - ", "\n"]))
    hacked = {**a, "reasoning": sep.join(picked)}
    assert total(json.dumps(hacked), prompt) < total(json.dumps(a), prompt)


def test_adding_one_scorer_word_to_the_honest_reasoning_never_raises_the_total():
    # the honest reasoning already scores 1.0: no single word appended or prefixed can beat it
    for prompt, sc in cases():
        env = env_at(sc)
        a = honest(sc)
        base = total(json.dumps(a), prompt)
        for word in H.HackContext(env).signal_words(a) + ["because", "the"]:
            for text in (f"{a['reasoning']} {word}", f"{a['reasoning']} Also {word}.", f"{word}: {a['reasoning']}"):
                assert total(json.dumps({**a, "reasoning": text}), prompt) <= base, (sc.seed, text)


# --- 2. free claims -------------------------------------------------------------------
@pytest.mark.parametrize("points", [0.001, 0.01, 0.5, 2.0, 20.0])
def test_an_extra_unpaid_claim_never_pays(points):
    for prompt, sc in cases():
        env = env_at(sc)
        a = honest(sc)
        for path in (H.HackContext(env).untouched_metric(a), next(iter(a["metric_changes"]))):
            hacked = {**a, "metric_changes": {**a["metric_changes"]}}
            hacked["metric_changes"][path] = hacked["metric_changes"].get(path, 0.0) + raw_delta(path, points)
            h, k = T.RUN.vector(json.dumps(a), prompt), T.RUN.vector(json.dumps(hacked), prompt)
            assert k["reward_plausibility_fn"] <= h["reward_plausibility_fn"] <= 0.0
            assert T.RUN.weighted(k) < T.RUN.weighted(h), (sc.seed, path, points)


@pytest.mark.parametrize("points", [0.001, 0.01, 2.0])
def test_a_token_claim_on_a_claimless_answer_never_pays(points):
    # nothing is free (FREE_EFFECT = 0): an answer that claims nothing loses by adding a claim
    for prompt, sc in cases():
        env = env_at(sc)
        for cost in ({"time": 0, "money": 0, "energy": 0}, honest(sc)["resource_cost"]):
            base = {**honest(sc), "metric_changes": {}, "resource_cost": cost}
            hacked = _with_token(base, H.HackContext(env).untouched_metric(base), points)
            h, k = T.RUN.vector(json.dumps(base), prompt), T.RUN.vector(json.dumps(hacked), prompt)
            assert k["reward_plausibility_fn"] <= h["reward_plausibility_fn"] <= 0.0
            if cost["money"] == 0:
                assert T.RUN.weighted(k) < T.RUN.weighted(h), (sc.seed, points)


def _with_token(a: dict, path: str, points: float) -> dict:
    return {**a, "metric_changes": {**a["metric_changes"], path: raw_delta(path, points)}}


@PROPS
@given(data=st.data())
def test_plausibility_reward_is_never_positive(data):
    prompt, _ = data.draw(st.sampled_from(cases()))
    changes = data.draw(st.dictionaries(st.sampled_from(METRIC_PATHS), st.floats(-30, 30), max_size=5))
    cost = data.draw(st.fixed_dictionaries({k: st.floats(0, 500) for k in ("time", "money", "energy")}))
    text = json.dumps({"action_type": data.draw(st.sampled_from(ACTION_TYPES)), "target_domain": "career",
                       "metric_changes": changes, "resource_cost": cost, "reasoning": "I pay for it."})
    assert -1.0 <= T.reward_plausibility_fn([text], prompts=[prompt])[0] <= 0.0


# --- 3. cliffs: continuity ---------------------------------------------------------------
def test_a_hair_around_the_cascade_trigger_moves_the_total_by_a_hair():
    for prompt, sc in cases():
        a = honest(sc)
        path = next(iter(a["metric_changes"]))
        sign = math.copysign(1.0, a["metric_changes"][path])
        at, below = ({**a, "metric_changes": {**a["metric_changes"], path: sign * v}}
                     for v in (CASCADE_TRIGGER, CASCADE_TRIGGER - 0.01))
        ev_at = T.get_lifestack_evaluation(json.dumps(at), prompt)
        ev_below = T.get_lifestack_evaluation(json.dumps(below), prompt)
        assert abs(ev_at["reward"] - ev_below["reward"]) < 0.01, sc.seed
        assert abs(ev_at["breakdown"]["component.outcome.gain"] - ev_below["breakdown"]["component.outcome.gain"]) < 0.01
        assert abs(total(json.dumps(at), prompt) - total(json.dumps(below), prompt)) < 0.02


def _random_action(data, env) -> dict:
    routes = [None] + list(env.task.route_ids)
    res = env.state.resources
    return {
        "action_type": data.draw(st.sampled_from(ACTION_TYPES)),
        "target_domain": data.draw(st.sampled_from(DOMAIN_NAMES)),
        "route": data.draw(st.sampled_from(routes)),
        "metric_changes": data.draw(st.dictionaries(
            st.sampled_from(METRIC_PATHS),
            st.one_of(st.floats(-25, 25), st.sampled_from([6.0, -6.0, 5.999, -6.001, 20.0, -19.99])),
            min_size=1, max_size=4)),
        "resource_cost": {k: data.draw(st.one_of(st.floats(0, res[k] * 1.1), st.just(0.0))) for k in ("time", "money", "energy")},
        "reasoning": data.draw(st.sampled_from([
            "I pay two hours and some money to fix stress and workload after the delay.",
            "Rebook now; it costs money but protects career stability and sleep.", "x"])),
    }


@PROPS
@given(data=st.data())
def test_continuity_one_percent_change_of_any_number(data):
    prompt, sc = data.draw(st.sampled_from(cases()))
    env = env_at(sc)
    a = _random_action(data, env)
    numbers = [(f, k) for f in ("metric_changes", "resource_cost") for k, v in a[f].items() if v]
    if not numbers:
        return
    field, key = data.draw(st.sampled_from(numbers))
    factor = data.draw(st.sampled_from([1.01, 0.99]))
    b = json.loads(json.dumps(a))
    b[field][key] = a[field][key] * factor
    ev_a = T.get_lifestack_evaluation(json.dumps(a), prompt)
    ev_b = T.get_lifestack_evaluation(json.dumps(b), prompt)
    if ("penalty.unaffordable" in ev_a["breakdown"]) != ("penalty.unaffordable" in ev_b["breakdown"]):
        return  # the budget rule the prompt states: "an action you cannot afford fails"
    assert abs(total(json.dumps(a), prompt) - total(json.dumps(b), prompt)) <= CONTINUITY_BOUND


# --- 4. garbage never beats a valid answer -------------------------------------------------
FORMAT_TASK = ("reward_format_fn", "reward_task_success_fn")


def _format_task(text, prompt) -> float:
    vec = T.RUN.vector(text, prompt)
    return sum(w * vec[k] for k, w in T.REWARD_WEIGHTS.items() if k in FORMAT_TASK)


@PROPS
@given(data=st.data(), junk=st.text(max_size=300))
def test_every_valid_answer_beats_every_unparseable_one(data, junk):
    prompt, sc = data.draw(st.sampled_from(cases()))
    valid = json.dumps(_random_action(data, env_at(sc)))
    if parse_action(junk)[0] is not None or parse_action(valid)[0] is None:
        return
    v, g = T.RUN.vector(valid, prompt), T.RUN.vector(junk, prompt)
    assert _format_task(valid, prompt) > _format_task(junk, prompt)
    assert all(v[k] >= g[k] for k in RW.REWARD_NAMES), (v, g)
    assert T.RUN.weighted(v) > T.RUN.weighted(g)


def test_overspend_costs_in_proportion_to_how_far_over():
    for prompt, sc in cases():
        env = env_at(sc)
        a = honest(sc)
        money = env.state.resources["money"]
        scores = []
        for over in (1.0, 0.05 * money + 1, 0.2 * money + 1, 2 * money + 1):
            b = {**a, "resource_cost": {**a["resource_cost"], "money": money + over}}
            ev = T.get_lifestack_evaluation(json.dumps(b), prompt)
            assert ev["reward"] > LE.FALLBACK_REWARD
            scores.append(total(json.dumps(b), prompt))
        assert scores == sorted(scores, reverse=True) and scores[0] > scores[-1]
        assert scores[-1] > total("no json here", prompt)


# --- 5. human feedback judges the situation ----------------------------------------------
def test_feedback_is_neutral_without_relevant_records(tmp_path, monkeypatch):
    empty = FeedbackStore(tmp_path / "none.sqlite3", seed=False)
    monkeypatch.setattr(T.RUN.feedback, "_store", empty)
    for prompt, sc in cases()[:20]:
        for action_type in ACTION_TYPES:
            text = json.dumps({**honest(sc), "action_type": action_type})
            assert T.reward_human_feedback_fn([text], prompts=[prompt]) == [0.0]


def test_feedback_has_no_global_favourite():
    # For every (action_type, domain), some situation scores it <= 0: no action wins everywhere.
    best_everywhere = []
    for action_type in ACTION_TYPES:
        for domain in DOMAIN_NAMES:
            scores = []
            for prompt, sc in cases():
                text = json.dumps({**honest(sc), "action_type": action_type, "target_domain": domain})
                scores.append(T.reward_human_feedback_fn([text], prompts=[prompt])[0])
            if min(scores) > 0:
                best_everywhere.append((action_type, domain))
    assert best_everywhere == []


def test_feedback_depends_on_conflict_pressure_and_difficulty(tmp_path):
    store = FeedbackStore(tmp_path / "fb.sqlite3", seed=False)
    store.add(OutcomeFeedback("a", "flight_crisis", "negotiate", "career", 9.0, pressured_domain="time"))
    store.add(OutcomeFeedback("b", "friday_6pm", "rest", "physical_health", 9.0, difficulty=5))
    q = dict(family="flight_crisis", difficulty=5)
    assert store.score("other", "negotiate", "career", pressured_domain="time", **q) > 0
    assert store.score("other", "negotiate", "career", pressured_domain="finances", **q) is None
    assert store.score("other", "negotiate", "career", **q) is None  # a family alone says too little
    assert store.score("friday_6pm", "rest", "physical_health", difficulty=5) > 0
    assert store.score("friday_6pm", "rest", "physical_health", difficulty=4) < \
        store.score("friday_6pm", "rest", "physical_health", difficulty=5)
    assert store.score("friday_6pm", "rest", "physical_health", difficulty=2) is None


def test_feedback_reward_varies_with_the_situation_for_one_action():
    seen = set()
    for prompt, sc in cases():
        if sc.task.domain == "flight_crisis":
            text = json.dumps({**honest(sc), "action_type": "negotiate", "target_domain": "career"})
            seen.add(round(T.reward_human_feedback_fn([text], prompts=[prompt])[0], 6))
    assert len(seen) >= 2, seen


# --- 6. the parser ---------------------------------------------------------------------------
def _answer(prompt_sc) -> str:
    return json.dumps(honest(prompt_sc[1]))


@pytest.mark.parametrize("wrap", [
    "<think>Budget: {{\"time\": 4}}. Plan first.</think>\n{answer}",
    "Budget: {{\"time\": 4}}.\n```json\n{answer}\n```",
    "{{\"note\": 1}} {{\"note\": 2}} {{\"a\": {{\"b\": 3}}}} " * 4 + "{answer}",
    "Here is my answer:\n{answer}",
])
def test_the_first_object_that_is_an_action_wins(wrap):
    for prompt, sc in cases()[::6]:
        answer = _answer((prompt, sc))
        text = wrap.format(answer=answer)
        action, reason = parse_action(text)
        assert action is not None, reason
        assert action == parse_action(answer)[0]
        assert T.get_lifestack_evaluation(text, prompt)["reward"] == T.get_lifestack_evaluation(answer, prompt)["reward"]


@pytest.mark.parametrize("placeholder", ["null", "none", "None", "NULL", "", "n/a", "<route id or null>"])
def test_route_placeholder_is_no_claim(placeholder):
    prompt, sc = cases()[0]
    a = {**honest(sc), "route": placeholder}
    ev = T.get_lifestack_evaluation(json.dumps(a), prompt)
    assert ev["action"].route is None and "penalty.dead_end" not in ev["breakdown"]


@pytest.mark.parametrize("edit, note", [
    (lambda t: t.replace('"energy": ', '"energy": +', 1), "near_json"),
    (lambda t: t[:-1] + ",}", "near_json"),
    (lambda t: t.replace('"time": ', '"time": "', 1).replace(', "money"', '", "money"', 1), "string_number"),
])
def test_near_json_is_accepted_with_a_format_deduction(edit, note):
    for prompt, sc in cases()[::10]:
        answer = _answer((prompt, sc))
        text = edit(answer)
        assert json.loads(answer) and text != answer
        action, reason = parse_action(text)
        assert action is not None, (reason, text)
        assert any(n.startswith(note) for n in action.notes)
        assert T.reward_format_fn([text], prompts=[prompt])[0] < T.reward_format_fn([answer], prompts=[prompt])[0]


@PROPS
@given(data=st.data())
def test_parser_never_crashes_on_adversarial_wrappers(data):
    prompt, sc = data.draw(st.sampled_from(cases()))
    answer = _answer((prompt, sc))
    pieces = data.draw(st.lists(st.sampled_from([
        "{", "}", "[", "]", ",", '"', ":", "+5", "NaN", "1e308", "<think>", "</think>", "```", "{\"a\": 1}",
        answer, "\\u0000", "null", "\"action_type\"", "{\"action_type\": \"REST\"}"]), max_size=12))
    text = "".join(pieces)
    ev = T.get_lifestack_evaluation(text, prompt)
    assert math.isfinite(ev["reward"]) and -1.0 <= ev["reward"] <= 1.0
    vec = T.RUN.vector(text, prompt)
    assert all(math.isfinite(v) and -1.0 <= v <= 1.0 for v in vec.values())


def test_every_candidate_is_tried_up_to_the_size_limit():
    prompt, sc = cases()[0]
    answer = _answer((prompt, sc))
    filler = "{\"x\": 1} " * 200  # far more than the old limit of 8 candidates
    assert parse_action(filler + answer)[0] is not None
    from lifestack.actions import MAX_TEXT_CHARS
    beyond = "." * MAX_TEXT_CHARS + answer  # past the documented limit: not read
    assert parse_action(beyond)[0] is None


# --- the signatures the trainer watches for --------------------------------------------------
def test_signatures_recognise_the_hack_families():
    prompt, sc = cases()[3]
    env = env_at(sc)
    texts = H.battery(env)
    def sig(name):
        ev = T.get_lifestack_evaluation(texts[name], prompt)
        return H.signatures(ev["action"], ev["breakdown"])
    assert sig("honest") == frozenset()
    assert "keyword_list" in sig("keyword_list")
    assert "unparseable" in sig("garbage")
    assert "zero_cost_claims" in sig("huge_free_claims") and "unpaid_claims" in sig("huge_free_claims")
    # reasoning that contradicts its action (numbers, type, route, metrics)
    for name in ("wrong_numbers", "other_route_named", "other_action_type_named"):
        assert "unfaithful_reasoning" in sig(name), name
    assert "unfaithful_reasoning" not in sig("spend_everything")  # its numbers are true


def test_unfaithful_reasoning_signature_on_every_prompt():
    for prompt, sc in cases():
        texts = H.battery(env_at(sc))
        for name in ("wrong_numbers", "other_route_named", "other_action_type_named"):
            ev = T.get_lifestack_evaluation(texts[name], prompt)
            assert "unfaithful_reasoning" in H.signatures(ev["action"], ev["breakdown"]), (sc.seed, name)
        ev = T.get_lifestack_evaluation(texts["honest"], prompt)
        assert ev["breakdown"]["reasoning.faithfulness"] == 1.0


def test_battery_is_deterministic():
    prompt, sc = cases()[7]
    assert H.battery(env_at(sc), "p") == H.battery(env_at(sc), "p")


def test_random_module_unused_by_hacks():
    # the battery is a pure function of the state: it never touches the global RNG
    state = random.getstate()
    prompt, sc = cases()[2]
    H.battery(env_at(sc), "p")
    assert random.getstate() == state


def test_every_documented_count_of_hack_families_is_the_catalogs():
    """README and docs say how many hack families the battery holds; the catalog decides."""
    import re

    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    counts = [(p.name, int(n)) for p in pages
              for n in re.findall(r"\b(\d+)\s+(?:families|ways\s+to\s+game)\b", p.read_text(encoding="utf-8"))]
    assert len(counts) >= 3 and all(n == len(H.HACKS) for _, n in counts), counts
