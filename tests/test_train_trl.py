"""Tests for scripts/train_trl.py's own functions that need no model: main's configuration
errors and import order, generate_dataset, get_lifestack_evaluation, the six reward
functions, grpo_config and episode mode. What the script builds on is tested per module:
build_config in test_training_config.py, the precision rule in test_training_models.py,
the prompts in test_prompts.py, the on-policy advance in test_training_evaluation.py, the
reward wrapper in test_training_rewards.py, the evaluator's caches in test_evaluation.py,
the constants' table in test_docs_tables.py; the generation log, the integrity watch and
the pre-flight checks have their own files (test_training_generation_log.py,
test_training_watch.py, test_training_checks.py); the shared set-up is tests/script_run.py.

Nothing here builds, downloads or loads a model (the end-to-end training run lives in
another test file). Every test points the generation log and the feedback database at
tmp_path, so neither the repository nor the user's home directory is touched.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import train_trl as T  # noqa: E402
from script_run import (  # noqa: E402,F401  (isolated: autouse)
    GARBAGE, context, dataset, heuristic_answers, isolated, policy_completion, prompts10, user_text,
)
import lifestack.training.grpo_rewards as RW  # noqa: E402
import lifestack.prompts as PR  # noqa: E402

from lifestack.actions import ACTION_TYPES, LifeStackAction, parse_action  # noqa: E402
from lifestack.generator import DOMAINS as TASK_DOMAINS  # noqa: E402
from lifestack.generator import TaskGenerator  # noqa: E402
from lifestack.metrics import DOMAIN_NAMES, METRIC_PATHS  # noqa: E402
from lifestack.feedback import FeedbackStore  # noqa: E402
from lifestack.hacks import HACK_POLICIES as HACKS  # noqa: E402
from lifestack.policies import heuristic, lazy  # noqa: E402
from lifestack.scenarios import sample_scenario  # noqa: E402

FUZZ = settings(max_examples=100, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
DEFAULTS = T.default_config()


# ------------------------------------------------------------------------------------
# shared data (the isolation fixture and the prompt helpers: tests/script_run.py)
# ------------------------------------------------------------------------------------


def action_json(action_type="rest", target="mental_wellbeing", route=None, changes=None, cost=None, reasoning="x"):
    return json.dumps({"action_type": action_type, "target_domain": target, "route": route,
                       "metric_changes": changes or {}, "resource_cost": cost or {"time": 0, "money": 0, "energy": 0},
                       "reasoning": reasoning})


def mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs)


def with_metadata(prompt, meta: dict):
    """The prompt with its metadata block replaced by ``meta``."""
    text = PR.METADATA_RE.sub(lambda _m: PR.METADATA_OPEN + json.dumps(meta) + PR.METADATA_CLOSE, user_text(prompt))
    return [prompt[0], {"role": "user", "content": text}]


def _route_ids() -> list[str]:
    gen = TaskGenerator()
    return sorted({r for dom in TASK_DOMAINS for d in range(1, 6) for s in range(3) for r in gen.generate(dom, d, s).route_ids})


ROUTE_IDS = _route_ids()


# ------------------------------------------------------------------------------------
# hypothesis strategies: untrusted completions
# ------------------------------------------------------------------------------------
_number = st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                    st.none(), st.text(max_size=5))
_action_dicts = st.fixed_dictionaries({}, optional={
    "action_type": st.one_of(st.sampled_from(ACTION_TYPES), st.text(max_size=10), st.integers()),
    "target_domain": st.one_of(st.sampled_from(DOMAIN_NAMES), st.text(max_size=10)),
    "route": st.one_of(st.none(), st.sampled_from(ROUTE_IDS), st.text(max_size=20), st.integers()),
    "metric_changes": st.one_of(st.dictionaries(st.one_of(st.sampled_from(METRIC_PATHS), st.text(max_size=10)), _number,
                                                max_size=6), st.lists(st.integers(), max_size=2), st.none()),
    "resource_cost": st.one_of(st.dictionaries(st.sampled_from(["time", "money", "energy", "gold"]), _number, max_size=4),
                               st.text(max_size=5), st.none()),
    "reasoning": st.one_of(st.text(max_size=200), st.integers(), st.lists(st.text(max_size=5), max_size=3)),
})
_json_texts = st.tuples(st.sampled_from(["", "```json\n", "Sure! ", "<SYSTEM_METADATA>{}</SYSTEM_METADATA>"]), _action_dicts,
                        st.sampled_from(["", "\n```", " Done.", "}", "{"])).map(lambda t: t[0] + json.dumps(t[1]) + t[2])
TEXTS = st.one_of(st.text(max_size=300), _json_texts,
                  st.sampled_from(["", "   ", "{", "}", "{{}}", "[1, 2]", "null", '{"action_type": "rest"', "I'm sorry, I can't."]))
COMPLETIONS = st.one_of(
    TEXTS,
    TEXTS.map(lambda t: [{"role": "assistant", "content": t}]),
    st.lists(st.dictionaries(st.sampled_from(["role", "content"]), st.one_of(st.text(max_size=20), st.integers(), st.none()),
                             max_size=2), max_size=3),
    st.none(), st.integers(), st.floats(),
    st.dictionaries(st.text(max_size=5), st.one_of(st.text(max_size=20), st.integers()), max_size=3),
)
PROMPT_INDEX = st.integers(0, 9)


# ====================================================================================
# main: a configuration error, and Unsloth imported before transformers, trl and peft
# ====================================================================================
def test_main_config_error_returns_2_with_one_line(capsys):
    assert T.main(["--BOGUS=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("config error:")
    assert "BOGUS" in err and err.count("\n") == 1
    assert T.main(["--N_STAGES=2.5"]) == 2
    assert capsys.readouterr().err.startswith("config error: N_STAGES")


def test_main_config_error_imports_no_model_stack(tmp_path):
    code = ("import sys; sys.path.insert(0, {scripts!r}); import train_trl as T; rc = T.main(['--BOGUS=1']); "
            "print(rc, *(m in sys.modules for m in ('torch', 'transformers', 'trl', 'datasets')))").format(
        scripts=str(ROOT / "scripts"))
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "LIFESTACK_FEEDBACK_DB": str(tmp_path / "fb.sqlite3")})
    assert proc.stdout.split() == ["2", "False", "False", "False", "False"], proc.stdout + proc.stderr
    assert proc.stderr.startswith("config error: BOGUS")
    assert list(tmp_path.iterdir()) == []  # nothing written


FAKE_UNSLOTH = """
import json, os, sys
with open(os.environ["FAKE_UNSLOTH_RECORD"], "w") as fh:  # what was imported before Unsloth
    json.dump([m for m in ("transformers", "trl", "peft") if m in sys.modules], fh)

class FastLanguageModel:
    @staticmethod
    def from_pretrained(*args, **kwargs):
        raise SystemExit("fake unsloth: stop before loading a model")
"""


@pytest.mark.parametrize("how", ["explicit", "auto_with_gpu"])
def test_main_imports_unsloth_before_transformers_trl_and_peft(tmp_path, how):
    """A fake ``unsloth`` on the path records which of transformers/trl/peft were already
    imported when it was; a fresh interpreter per case, so the import state is clean."""
    fake = tmp_path / "fake"
    (fake / "unsloth").mkdir(parents=True)
    (fake / "unsloth" / "__init__.py").write_text(FAKE_UNSLOTH)
    record = tmp_path / "record.json"
    argv = [f"--OUTPUT_DIR={tmp_path / 'out'}", f"--LOG_DIR={tmp_path / 'logs'}"]
    if how == "explicit":
        argv.append("--DEVICE_PROFILE=unsloth")
        patch = ""
    else:  # DEVICE_PROFILE=auto on a machine with a GPU (faked) and Unsloth importable
        patch = ("import torch; torch.cuda.is_available = lambda: True; "
                 "torch.cuda.get_device_capability = lambda *a: (8, 0); ")
    code = (f"import sys; {patch}sys.path.insert(0, {str(ROOT / 'scripts')!r}); import train_trl as T; "
            f"sys.exit(T.main({argv!r}))")
    env = {**os.environ, "PYTHONPATH": str(fake), "FAKE_UNSLOTH_RECORD": str(record),
           "LIFESTACK_FEEDBACK_DB": str(tmp_path / "fb.sqlite3"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert "fake unsloth: stop before loading a model" in proc.stderr, proc.stdout + proc.stderr
    assert json.loads(record.read_text()) == []


def test_main_without_the_unsloth_profile_never_imports_unsloth(tmp_path):
    fake = tmp_path / "fake"
    (fake / "unsloth").mkdir(parents=True)
    (fake / "unsloth" / "__init__.py").write_text(FAKE_UNSLOTH)
    record = tmp_path / "record.json"
    argv = ["--DEVICE_PROFILE=peft", f"--OUTPUT_DIR={tmp_path / 'out'}", f"--LOG_DIR={tmp_path / 'logs'}"]
    code = f"import sys; sys.path.insert(0, {str(ROOT / 'scripts')!r}); import train_trl as T; sys.exit(T.main({argv!r}))"
    env = {**os.environ, "PYTHONPATH": str(fake), "FAKE_UNSLOTH_RECORD": str(record),
           "LIFESTACK_FEEDBACK_DB": str(tmp_path / "fb.sqlite3"), "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert "DEVICE_PROFILE=peft needs a CUDA GPU" in proc.stderr, proc.stdout + proc.stderr
    assert not record.exists()


# ====================================================================================
# Dataset
# ====================================================================================
def test_generate_dataset_is_deterministic_per_seed():
    a = T.generate_dataset(15, None, seed=7)
    b = T.generate_dataset(15, None, seed=7)
    c = T.generate_dataset(15, None, seed=1007)
    assert a.to_list() == b.to_list()
    assert a["prompt"] != c["prompt"]
    visible = lambda p: PR.METADATA_RE.sub("", user_text(p))  # noqa: E731
    differ = sum(visible(x) != visible(y) for x, y in zip(a["prompt"], c["prompt"]))
    assert differ >= 12, differ  # the visible situation changes, not only the seed in the metadata


def test_generate_dataset_columns_and_difficulty_cycle():
    ds = dataset()
    assert set(ds.column_names) == {"prompt", "difficulty", "domain", "seed"}
    assert len(ds) == 100
    assert ds["difficulty"] == [1 + i % 5 for i in range(100)]
    assert ds["seed"] == [T.SEED + i for i in range(100)]
    assert set(ds["domain"]) == {"flight_crisis", "code_merge_crisis"}
    fixed = T.generate_dataset(10, 3, seed=5)
    assert fixed["difficulty"] == [3] * 10
    for row in fixed:
        meta = json.loads(PR.METADATA_RE.search(user_text(row["prompt"])).group(1))
        assert meta["difficulty"] == 3 and meta["seed"] == row["seed"] and meta["domain"] == row["domain"]


def test_generate_dataset_renders_the_scenarios_advance_returns():
    from lifestack.onpolicy import advance_by_policy

    answer = heuristic_answers
    plain = T.generate_dataset(20, None, seed=11)
    moved = T.generate_dataset(20, None, seed=11, advance=lambda scs: advance_by_policy(scs, answer, 1.0))
    assert moved["seed"] == plain["seed"] and moved["difficulty"] == plain["difficulty"]
    assert moved["domain"] == plain["domain"]
    steps = lambda ds: [json.loads(PR.METADATA_RE.search(user_text(p)).group(1))["state"]["step"] for p in ds["prompt"]]  # noqa: E731
    assert all(b >= a for a, b in zip(steps(plain), steps(moved))) and sum(steps(moved)) > sum(steps(plain))
    for p in moved["prompt"]:  # every moved prompt is scoreable: the reward rebuilds its state
        assert T.get_lifestack_evaluation(answer([p])[0], p)["action"] is not None


def test_generate_dataset_prompts_are_distinct():
    ds = T.generate_dataset(50, seed=T.SEED)
    texts = [user_text(p) for p in ds["prompt"]]
    assert len(set(texts)) == 50
    visible = {PR.METADATA_RE.sub("", t) for t in texts}
    assert len(visible) >= 45


# ====================================================================================
# get_lifestack_evaluation
# ====================================================================================
def test_evaluation_of_the_heuristic_is_good():
    rewards = []
    for prompt in prompts10():
        ev = T.get_lifestack_evaluation(policy_completion(prompt, heuristic), prompt)
        assert {"reward", "breakdown", "action"} <= set(ev)
        # a decision is valued by the episode it starts, which may fail even after a good
        # first step: each is positive, and they are good on average
        assert isinstance(ev["reward"], float) and ev["reward"] > 0.0
        rewards.append(ev["reward"])
        assert isinstance(ev["action"], LifeStackAction)
        assert "error" not in ev["breakdown"]
        assert ev["breakdown"]["total"] == pytest.approx(ev["reward"], abs=1e-5)
        # a plain-string prompt (its user message) is scored identically
        RW.EVALUATOR.evaluations.clear()
        again = T.get_lifestack_evaluation(policy_completion(prompt, heuristic), user_text(prompt))
        assert again["reward"] == ev["reward"]
    assert sum(rewards) / len(rewards) > 0.6


@pytest.mark.parametrize("completion", [GARBAGE, "", "{not json", '{"action_type": "fly", "target_domain": "career"}',
                                        None, 42, [{"role": "assistant", "content": "nope"}]])
def test_evaluation_fallback_is_exact(completion):
    ev = T.get_lifestack_evaluation(completion, prompts10()[0])
    assert set(ev) == {"reward", "breakdown", "action"}
    assert ev["reward"] == -0.5 and ev["action"] is None
    assert set(ev["breakdown"]) == {"error"}
    assert isinstance(ev["breakdown"]["error"], str) and ev["breakdown"]["error"]


def test_unknown_domain_in_metadata_logs_task_construction_failure(capsys):
    prompt = prompts10()[0]
    meta = dict(context(prompt)[2])
    meta["domain"] = "moon_landing"
    RW.EVALUATOR.prompts.clear()
    ev = T.get_lifestack_evaluation(policy_completion(prompt, heuristic), with_metadata(prompt, meta))
    assert ev["reward"] == -0.5 and ev["action"] is None and set(ev["breakdown"]) == {"error"}
    assert "task construction failed" in ev["breakdown"]["error"]
    assert "[reward] Task construction failed:" in capsys.readouterr().err


@pytest.mark.parametrize("mutate", [
    lambda text: PR.METADATA_RE.sub("", text),  # no metadata at all
    lambda text: PR.METADATA_RE.sub(PR.METADATA_OPEN + "{broken" + PR.METADATA_CLOSE, text),
    lambda text: PR.METADATA_RE.sub(PR.METADATA_OPEN + "[1, 2]" + PR.METADATA_CLOSE, text),
    lambda text: PR.METADATA_RE.sub(PR.METADATA_OPEN + '{"v": 1, "domain": "flight_crisis", "difficulty": 1, "seed": 1}'
                                    + PR.METADATA_CLOSE, text),  # no state
    lambda text: "",
])
def test_missing_or_bad_metadata_falls_back(mutate):
    prompt = prompts10()[0]
    good = policy_completion(prompt, heuristic)
    bad_prompt = [prompt[0], {"role": "user", "content": mutate(user_text(prompt))}]
    ev = T.get_lifestack_evaluation(good, bad_prompt)
    assert ev == {"reward": -0.5, "breakdown": {"error": ev["breakdown"]["error"]}, "action": None}


def test_evaluation_cache_returns_the_same_object():
    prompt = prompts10()[1]
    text = policy_completion(prompt, heuristic)
    a = T.get_lifestack_evaluation(text, prompt)
    assert T.get_lifestack_evaluation(text, prompt) is a
    assert T.get_lifestack_evaluation([{"role": "assistant", "content": text}], prompt) is a
    assert user_text(prompt) in RW.EVALUATOR.prompts  # the rebuilt state is cached per prompt
    g = T.get_lifestack_evaluation(GARBAGE, prompt)
    assert T.get_lifestack_evaluation(GARBAGE, prompt) is g


def test_evaluations_do_not_leak_state_between_completions():
    prompt = prompts10()[2]
    task, state, _ = context(prompt)
    before = state.to_dict()
    first = policy_completion(prompt, heuristic)
    ref = T.get_lifestack_evaluation(first, prompt)
    others = [policy_completion(prompt, lazy)] + [policy_completion(prompt, h) for h in HACKS.values()]
    for text in others:
        T.get_lifestack_evaluation(text, prompt)
    assert state.to_dict() == before
    RW.EVALUATOR.evaluations.clear()
    again = T.get_lifestack_evaluation(first, prompt)
    assert again is not ref
    assert again["reward"] == ref["reward"] and again["breakdown"] == ref["breakdown"]


@FUZZ
@given(completion=COMPLETIONS, index=PROMPT_INDEX)
def test_evaluation_never_raises_fuzz(completion, index):
    ev = T.get_lifestack_evaluation(completion, prompts10()[index])
    assert isinstance(ev, dict) and {"reward", "breakdown", "action"} <= set(ev)
    assert isinstance(ev["reward"], float) and math.isfinite(ev["reward"]) and -1.0 <= ev["reward"] <= 1.0
    if ev["action"] is None:
        assert ev["reward"] == -0.5 and "error" in ev["breakdown"]
    else:
        assert isinstance(ev["action"], LifeStackAction)


@FUZZ
@given(completion=COMPLETIONS, prompt=st.one_of(st.none(), st.integers(), st.text(max_size=100),
                                               st.lists(st.dictionaries(st.sampled_from(["role", "content"]),
                                                                        st.one_of(st.text(max_size=30), st.integers())),
                                                        max_size=3)))
def test_evaluation_never_raises_on_junk_prompts(completion, prompt):
    ev = T.get_lifestack_evaluation(completion, prompt)
    assert ev["reward"] == -0.5 and ev["action"] is None


def test_fake_metadata_in_the_completion_changes_nothing():
    scored = [f for f in T.REWARD_FUNCS if f is not T.reward_format_fn]  # trailing text costs format a little
    for prompt in prompts10()[:5]:
        task, state, meta = context(prompt)
        honest = policy_completion(prompt, heuristic)
        fake = json.loads(json.dumps(meta))
        fake.update(difficulty=1, seed=meta["seed"] + 4242)
        fake["state"]["resources"] = [1000.0, 1e6, 1000.0]
        fake["state"]["budget"] = [1000.0, 1e6, 1000.0]
        block = PR.METADATA_OPEN + json.dumps(fake) + PR.METADATA_CLOSE

        base = T.get_lifestack_evaluation(honest, prompt)
        after = T.get_lifestack_evaluation(honest + "\n" + block, prompt)
        assert after["reward"] == base["reward"]
        assert after["breakdown"] == base["breakdown"]
        assert after["action"].to_dict() == base["action"].to_dict()
        for fn in scored:
            assert fn([honest + "\n" + block], prompts=[prompt]) == fn([honest], prompts=[prompt]), fn.__name__

        # in front of the answer the fake block is the first JSON object: it cannot score higher
        before = T.get_lifestack_evaluation(block + "\n" + honest, prompt)
        assert before["reward"] <= base["reward"]
        for fn in T.REWARD_FUNCS:
            assert fn([block + "\n" + honest], prompts=[prompt])[0] <= fn([honest], prompts=[prompt])[0], fn.__name__

        # the budget is the prompt's, not the completion's
        over = action_json("spend", "career", None, {}, {"time": 0, "money": state.resources["money"] + 100, "energy": 0},
                           "Pay for it.")
        for text in (over, over + "\n" + block):
            ev = T.get_lifestack_evaluation(text, prompt)
            assert "penalty.unaffordable" in ev["breakdown"]
        assert context(prompt)[1].resources == state.resources


# ====================================================================================
# The six reward functions
# ====================================================================================
def test_reward_function_registry():
    assert tuple(f.__name__ for f in T.REWARD_FUNCS) == RW.REWARD_NAMES
    assert len(T.REWARD_FUNCS) == 6 == len(T.REWARD_WEIGHTS) == len(DEFAULTS["REWARD_WEIGHTS"])
    assert list(T.REWARD_WEIGHTS) == [f.__name__ for f in T.REWARD_FUNCS]  # every reward chosen by default


def _mixed_batch():
    completions, prompts = [], []
    for i, prompt in enumerate(prompts10()[:4]):
        for text in (policy_completion(prompt, heuristic), policy_completion(prompt, lazy), GARBAGE,
                     policy_completion(prompt, list(HACKS.values())[i])):
            completions.append(text)
            prompts.append(prompt)
    return completions, prompts


@pytest.mark.parametrize("fn", T.REWARD_FUNCS, ids=RW.REWARD_NAMES)
def test_reward_functions_contract(fn):
    completions, prompts = _mixed_batch()
    out = fn(completions, prompts=prompts)
    assert isinstance(out, list) and len(out) == len(completions)
    assert all(type(x) is float and math.isfinite(x) and -1.0 <= x <= 1.0 for x in out)
    # conversational completions give identical results
    as_messages = [[{"role": "assistant", "content": c}] for c in completions]
    assert fn(as_messages, prompts=prompts) == out
    # TRL's extra keyword arguments are ignored
    extra = dict(trainer_state=SimpleNamespace(global_step=7), log_extra=lambda *a, **k: None,
                 log_metric=lambda *a, **k: None, difficulty=[1] * len(completions), seed=[0] * len(completions),
                 completion_ids=[[1, 2, 3]] * len(completions), domain=["flight_crisis"] * len(completions))
    assert fn(completions=completions, prompts=prompts, **extra) == out
    # a string prompt (the user message) scores the same as the message list
    assert fn(completions, prompts=[user_text(p) for p in prompts]) == out
    assert fn([], prompts=[]) == []


def test_trainer_state_step_is_recorded():
    prompt = prompts10()[0]
    T.reward_task_success_fn([GARBAGE], prompts=[prompt], trainer_state=SimpleNamespace(global_step=17))
    assert T.RUN.step == 17


SEPARATION = {
    "reward_format_fn": ("garbage", "empty", "hack_nan_inf"),
    "reward_plausibility_fn": ("garbage", "hack_free_claims", "hack_negative_cost"),
    "reward_task_success_fn": ("garbage", "lazy", "hack_free_claims"),
    "reward_milestone_fn": ("garbage", "lazy", "hack_nan_inf"),
    "reward_reasoning_fn": ("garbage", "lazy", "hack_keyword_stuffing"),
}


def _bad_completion(prompt, name):
    if name == "garbage":
        return GARBAGE
    if name == "empty":
        return ""
    if name == "lazy":
        return policy_completion(prompt, lazy)
    return policy_completion(prompt, HACKS[name])


@pytest.mark.parametrize("name", list(SEPARATION))
def test_each_reward_separates_good_from_bad(name):
    fn = getattr(T, name)
    prompts = list(prompts10())
    good = fn([policy_completion(p, heuristic) for p in prompts], prompts=prompts)
    for bad_name in SEPARATION[name]:
        bad = fn([_bad_completion(p, bad_name) for p in prompts], prompts=prompts)
        assert mean(good) > mean(bad), (bad_name, good, bad)
    assert len(set(good + bad)) >= 2


def test_human_feedback_reward_varies_with_the_action(tmp_path):
    flight = [p for p in dataset()["prompt"][:20] if context(p)[1] is not None and context(p)[0].domain == "flight_crisis"]
    prompt = flight[0]
    values = set()
    for action_type in ACTION_TYPES:
        for target in ("career", "time", "finances"):
            out = T.reward_human_feedback_fn([action_json(action_type, target)], prompts=[prompt])
            assert len(out) == 1 and -1.0 <= out[0] <= 1.0
            values.add(out[0])
    assert len(values) >= 2, values
    # unparseable text takes every reward's lowest score
    assert T.reward_human_feedback_fn([GARBAGE, "", "{"], prompts=[prompt] * 3) == [-1.0, -1.0, -1.0]
    # a situation with no records at all scores 0.0: every answer, against a database without records
    empty = tmp_path / "empty.sqlite3"
    FeedbackStore(empty, seed=False).close()
    T.RUN.feedback.store().close()
    T.RUN.feedback.configure(str(empty))
    answers = [action_json(action_type, "career") for action_type in ACTION_TYPES]
    assert T.reward_human_feedback_fn(answers, prompts=[prompt] * len(answers)) == [0.0] * len(answers)


def test_human_feedback_reward_with_unreadable_database(tmp_path):
    bad = tmp_path / "broken.sqlite3"
    bad.write_text("this is not an sqlite database " * 20)
    prompt = prompts10()[0]
    T.RUN.feedback.configure(str(bad), "zero")
    assert T.reward_human_feedback_fn([policy_completion(prompt, heuristic), GARBAGE], prompts=[prompt] * 2) == [0.0, 0.0]
    T.RUN.feedback.configure(str(bad), "raise")
    with pytest.raises(Exception) as err:
        T.reward_human_feedback_fn([policy_completion(prompt, heuristic)], prompts=[prompt])
    assert "broken.sqlite3" in str(err.value)


@FUZZ
@given(batch=st.lists(st.tuples(COMPLETIONS, PROMPT_INDEX), min_size=1, max_size=6))
def test_reward_functions_fuzz(batch):
    completions = [c for c, _ in batch]
    prompts = [prompts10()[i] for _, i in batch]
    for fn in T.REWARD_FUNCS:
        out = fn(completions, prompts=prompts)
        assert len(out) == len(completions), fn.__name__
        assert all(type(x) is float and math.isfinite(x) and -1.0 <= x <= 1.0 for x in out), (fn.__name__, out)


@FUZZ
@given(text=TEXTS, index=PROMPT_INDEX)
def test_string_and_message_completions_agree_fuzz(text, index):
    prompt = prompts10()[index]
    for fn in T.REWARD_FUNCS:
        assert fn([text], prompts=[prompt]) == fn([[{"role": "assistant", "content": text}]], prompts=[prompt])


@FUZZ
@given(text=TEXTS, index=PROMPT_INDEX)
def test_plausibility_never_positive_when_unparseable(text, index):
    assume(parse_action(text)[0] is None)
    out = T.reward_plausibility_fn([text], prompts=[prompts10()[index]])
    assert out[0] <= 0.0


def test_hacks_rank_below_the_heuristic_on_task_success():
    prompts = list(prompts10())
    honest = mean(T.reward_task_success_fn([policy_completion(p, heuristic) for p in prompts], prompts=prompts))
    for name, hack in HACKS.items():
        hacked = mean(T.reward_task_success_fn([policy_completion(p, hack) for p in prompts], prompts=prompts))
        assert hacked < honest, (name, hacked, honest)


def test_format_reward_is_graded():
    prompt = prompts10()[0]
    complete = policy_completion(prompt, heuristic)
    f = lambda text: T.reward_format_fn([text])[0]  # noqa: E731
    empty, blank = f(""), f("   \n")
    refusal = f("I'm sorry, but as an AI I can't help with that.")
    no_json = f("Let me think about the flights and the meeting first.")
    broken = f('{"action_type": "negotiate", "target_domain": ')
    partial_1 = f('{"action_type": "negotiate"}')
    partial_6 = f('{"action_type": "fly", "target_domain": "moon", "route": null, "metric_changes": {}, '
                  '"resource_cost": {}, "reasoning": ""}')
    minimal_valid = f('{"action_type": "negotiate", "target_domain": "career"}')
    full = f(complete)
    fenced = f("```json\n" + complete + "\n```")
    trailing = f(complete + "\nHope this helps!")
    assert empty == blank == refusal
    assert refusal < no_json
    assert broken == no_json
    assert no_json < partial_1 < partial_6 < minimal_valid < full
    assert full == 1.0 and fenced == full
    assert minimal_valid < trailing < full and full - trailing <= 0.25
    assert T.reward_format_fn([GARBAGE, complete, ""]) == [no_json, full, empty]


def _format_variants(text: str) -> list[str]:
    return [text, "```json\n" + text + "\n```", text + "\nHope this helps!", text[: len(text) // 2], "",
            PR.METADATA_OPEN + '{"v": 1}' + PR.METADATA_CLOSE + text, text.replace('"route"', '"rout"', 1),
            text.replace('"reasoning"', '"why"', 1), GARBAGE]


@FUZZ
@given(data=st.data())
def test_format_reward_with_prompts_equals_the_text_only_score(data):
    # with prompts, the format reward reuses the evaluation's parse; it must score exactly
    # as the text-only path does, for every kind of completion and prompt
    prompts = list(prompts10()) + ["a prompt without any metadata"]
    prompt = data.draw(st.sampled_from(prompts))
    base = policy_completion(prompt, heuristic) if isinstance(prompt, list) else policy_completion(prompts10()[0], lazy)
    texts = _format_variants(base) + [data.draw(st.text(max_size=200))]
    completions = [[{"role": "assistant", "content": t}] for t in texts]
    batch_prompts = [prompt] * len(texts)
    RW.EVALUATOR.evaluations.clear()
    with_prompts = T.reward_format_fn(completions, prompts=batch_prompts)
    assert with_prompts == T.reward_format_fn(completions)
    assert with_prompts == T.reward_format_fn(texts, prompt=batch_prompts)  # TRL's other keyword
    assert T.reward_format_fn(completions, prompts=batch_prompts[:-1]) == with_prompts  # mismatched lengths


def test_reasoning_reward_punishes_keyword_stuffing():
    prompts = list(prompts10())
    stuffed = T.reward_reasoning_fn([policy_completion(p, HACKS["hack_keyword_stuffing"]) for p in prompts], prompts=prompts)
    honest = T.reward_reasoning_fn([policy_completion(p, heuristic) for p in prompts], prompts=prompts)
    assert stuffed == [-0.4] * len(prompts)  # above unparseable text (-0.5), far below honest
    assert all(h > 0 for h in honest)


# ====================================================================================
# The TRL config
# ====================================================================================


def test_grpo_config_maps_vllm_server_mode(tmp_path):
    cfg = T.build_config(["--USE_VLLM=True", "--VLLM_MODE=server", "--VLLM_SERVER_PORT=8123"], profile="peft")
    cfg["_PROFILE"] = "cpu"  # build the TRL config on this CPU machine; the vLLM fields are what matter
    args = T.grpo_config(cfg, 1, tmp_path)
    assert args.use_vllm and args.vllm_mode == "server" and args.vllm_server_port == 8123


@pytest.mark.parametrize("profile", ["cpu", "peft", "unsloth"])
def test_grpo_config_states_what_unsloth_would_change(tmp_path, profile):
    """Unsloth's GRPOConfig replaces TRL's defaults (8-bit AdamW, weight decay 0.001, 10 %
    warmup, loss "bnpo" or dapo's extras, top_k from the model): the trainer states them, so
    every profile trains alike."""
    cfg = T.build_config([], profile=profile)
    cfg["_PROFILE"] = "cpu"  # build the TRL config on this CPU machine
    args = T.grpo_config(cfg, 2, tmp_path)
    value = lambda x: getattr(x, "value", x)  # noqa: E731  (transformers' enums)
    assert (value(args.optim), args.weight_decay, args.warmup_steps, value(args.lr_scheduler_type)) == (
        "adamw_torch_fused", 0.0, 0, "linear")
    assert (args.loss_type, args.top_k, args.top_p) == ("bnpo", 0, 1.0)
    assert not args.mask_truncated_completions and args.epsilon_high is None
    assert args.learning_rate == T.config.stage_learning_rate(cfg, 2) and args.seed == cfg["SEED"] + 2


# ------------------------------------------------------------------------------------
# episode mode (HORIZON > 1)
# ------------------------------------------------------------------------------------


def played_episode(seed: int, horizon: int = 3):
    from lifestack.episodes import Episode, play

    rng = random.Random(seed)
    return play(Episode.from_scenario(sample_scenario(seed, 1 + seed % 5), horizon),
                lambda e: GARBAGE if rng.random() < 0.3 else heuristic(e.env, rng))


def test_episode_rewards_are_each_turn_scored_alone_then_aggregated():
    from lifestack.value import episode_reward

    episodes = [played_episode(s) for s in range(6)]
    turns = [[[t.prompt, t.completion] for t in ep.turns] for ep in episodes]
    outcomes = [ep.outcome()["score"] for ep in episodes]
    for fn in T.REWARD_FUNCS:
        got = fn(["whole trajectory text"] * 6, prompts=[[{"role": "user", "content": "x"}]] * 6, turns=turns,
                 episode_outcome=outcomes, episode=[ep.record() for ep in episodes])
        for k, ep in enumerate(episodes):
            per_turn = [fn([t.completion], prompts=[t.prompt], per_turn=True)[0] for t in ep.turns]
            outcome = outcomes[k] if fn.__name__ == RW.OUTCOME_REWARD else None
            assert got[k] == pytest.approx(episode_reward(per_turn, outcome)), fn.__name__
            assert -1.0 <= got[k] <= 1.0
    # the task reward of a played turn is the env's own reward for that step: the episode's
    # continuation and outcome are its own, so the decision value is not counted again
    for ep in episodes:
        assert [T.reward_task_success_fn([t.completion], prompts=[t.prompt], per_turn=True)[0] for t in ep.turns] == \
            pytest.approx([t.reward for t in ep.turns])
        alone = [T.reward_task_success_fn([t.completion], prompts=[t.prompt])[0] for t in ep.turns]
        assert alone == pytest.approx([T.get_lifestack_evaluation(t.completion, t.prompt)["reward"] for t in ep.turns])


def test_episode_reward_vector_matches_the_reward_call():
    ep = played_episode(3)
    vec = T.RUN.episode_vector(ep)
    assert list(vec) == list(RW.REWARD_NAMES)
    turns = [[[t.prompt, t.completion] for t in ep.turns]]
    assert vec["reward_format_fn"] == T.reward_format_fn([""], turns=turns, episode_outcome=[0.0])[0]


def test_episode_log_line_lists_turns_with_their_rewards(isolated, monkeypatch):
    T.RUN.log_interval = 1
    ep = played_episode(5)
    T.RUN.log_episode(ep)
    T.RUN.log.close()
    [line] = [json.loads(x) for x in (isolated / "generations.jsonl").read_text().splitlines()]
    assert line["horizon"] == 3 and len(line["turns"]) == len(ep.turns) and line["episode"] == 1
    assert line["task_reward"] == pytest.approx(T.RUN.episode_vector(ep)[RW.OUTCOME_REWARD])
    for logged, turn in zip(line["turns"], ep.turns):
        assert logged["completion"] == turn.completion and logged["task_reward"] == turn.reward
        assert set(logged["grpo_rewards"]) == set(RW.REWARD_NAMES) and PR.METADATA_OPEN not in logged["prompt_head"]
    assert line["outcome"] == ep.outcome()


def test_per_turn_evaluations_are_not_logged_in_episode_mode(isolated, monkeypatch):
    T.RUN.log_interval = 1
    T.RUN.episodes = True
    prompt = dataset(3)[0]["prompt"]
    T.get_lifestack_evaluation(GARBAGE, prompt)
    T.RUN.log.close()
    assert not (isolated / "generations.jsonl").exists()


def test_rewards_are_chosen_and_weighted_by_name(tmp_path):
    """REWARD_WEIGHTS names the rewards GRPO optimises: one left out is not passed to TRL,
    and the weights follow the names, whatever order they are written in."""
    import lifestack.training.run_state as RS
    from lifestack.training.grpo_rewards import chosen_rewards

    cfg = T.build_config(["--REWARD_WEIGHTS={'reward_task_success_fn': 2.0, 'reward_format_fn': 0.5}"], profile="cpu")
    chosen = chosen_rewards(T.REWARD_FUNCS, cfg["REWARD_WEIGHTS"])
    assert [f.__name__ for f in chosen] == ["reward_format_fn", "reward_task_success_fn"]  # REWARD_NAMES order
    assert T.grpo_config(cfg, 1, tmp_path).reward_weights == [0.5, 2.0]
    settings = RS.run_settings(cfg)
    assert settings["REWARD_WEIGHTS"] == [0.5, 0.0, 2.0, 0.0, 0.0, 0.0]
    assert settings["REWARD_FUNCTIONS"] == ["reward_format_fn", "reward_task_success_fn"]
    default = RS.run_settings(T.build_config([], profile="cpu"))
    assert default["REWARD_WEIGHTS"] == [1.0, 0.5, 2.0, 1.0, 0.5, 0.5]  # as recorded when it was a list: runs resume
