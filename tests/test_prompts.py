"""lifestack.prompts: one rendering of a state for every consumer, with the metadata that
rebuilds it exactly and nothing hidden; the prompts the trainer renders (its dataset's
rows) show the state their metadata rebuilds, are short, and reveal no hidden state."""

from __future__ import annotations

import functools
import json
import re

import pytest
from hypothesis import given, settings, strategies as st

import lifestack.prompts as PR
from lifestack.env import LifeStackEnv
from lifestack.scoring import Evaluator
from lifestack.metrics import DOMAINS, INVERTED_METRICS, METRIC_PATHS, goodness
from lifestack.prompts import (
    ANSWER_SCHEMA, METADATA_OPEN, build_prompt, completion_text, metric_changes, prompt_text, read_metadata,
    render_observation, strip_metadata,
)
from lifestack.policies import heuristic
from lifestack.scenarios import rebuild_state, round_state, sample_scenario, sample_scenarios


@settings(max_examples=40, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10**7), difficulty=st.integers(1, 5))
def test_prompt_metadata_rebuilds_the_state_and_hides_the_hidden(seed, difficulty):
    sc = sample_scenario(seed, difficulty)
    system, user = build_prompt(sc.task, sc.conflict, sc.state, difficulty, sc.seed)
    assert system["role"] == "system" and user["role"] == "user"
    meta = read_metadata(user["content"])
    assert meta["seed"] == sc.seed and meta["difficulty"] == difficulty
    assert rebuild_state(meta, sc.task).to_dict() == sc.state.to_dict()
    visible = strip_metadata(user["content"])
    assert METADATA_OPEN not in visible and ANSWER_SCHEMA in visible
    assert "hidden" not in meta["state"]


def test_observation_describes_the_step_and_its_metadata_the_new_state():
    sc = sample_scenario(21, 3)
    env = LifeStackEnv()
    env.restore(sc.task, sc.state)
    before = env.state.clone()
    obs = env.step(heuristic(env))
    round_state(env.state)
    text = render_observation(sc.task, sc.conflict, before, env.state, obs.metadata["info"], 3, sc.seed)
    assert rebuild_state(read_metadata(text), sc.task).to_dict() == {**env.state.to_dict(), "done": False,
                                                                        "outcome": "running"}
    assert "RESULT OF YOUR ACTION: " + "; ".join(obs.metadata["info"]) in text
    assert f"STEP {env.state.step + 1} of {sc.task.horizon}" in text


def test_metric_changes_lists_the_largest_moves_first():
    base = {p: 50.0 for p in METRIC_PATHS}
    after = dict(base)
    after[METRIC_PATHS[0]] = 60.0
    after[METRIC_PATHS[1]] = 48.0
    after[METRIC_PATHS[2]] = 50.01  # below the shown precision: not a change
    lines = metric_changes(base, after)
    assert lines == [f"{METRIC_PATHS[0]} 50 -> 60", f"{METRIC_PATHS[1]} 50 -> 48"]
    assert len(metric_changes(base, {p: 0.0 for p in METRIC_PATHS}, limit=3)) == 3


def test_read_metadata_names_what_is_wrong():
    assert "no <SYSTEM_METADATA>" in read_metadata("plain text")
    assert read_metadata(f"{METADATA_OPEN}{{broken</SYSTEM_METADATA>").startswith("unreadable metadata")
    assert read_metadata(f"{METADATA_OPEN}[1, 2]</SYSTEM_METADATA>") == "unreadable metadata: metadata is not an object"


def test_text_helpers_read_strings_and_messages():
    assert completion_text([{"role": "assistant", "content": "hi"}]) == "hi"
    assert completion_text({"content": 3}) == "" and completion_text(None) == ""
    assert prompt_text([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                        {"role": "user", "content": "c"}]) == "c"
    assert prompt_text("raw") == "raw" and prompt_text(5) == ""


# --- untrusted text: linear work (issue #28) -------------------------------------------

from lifestack.prompts import METADATA_CLOSE, METADATA_RE  # noqa: E402

_PIECES = st.sampled_from([METADATA_OPEN, METADATA_CLOSE, "<SYSTEM_", "x", "{}", "\n", "</SYSTEM_METADATA", " "])


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(_PIECES, max_size=30))
def test_strip_and_read_metadata_agree_with_the_regex(pieces):
    text = "".join(pieces)
    assert strip_metadata(text) == METADATA_RE.sub("", text)
    match = METADATA_RE.search(text)
    got = read_metadata(text)
    if match is None:
        assert got == "prompt has no <SYSTEM_METADATA> block"
    else:
        assert isinstance(got, (dict, str))


class ScanCountingStr(str):
    """A str that counts the characters its searches read (from ``start`` to the end of
    the match, or to the end of the text): a deterministic measure of the work, where a
    wall-clock bound fails under load."""

    scanned = 0

    def find(self, sub, start=0, *args):
        found = super().find(sub, start, *args)
        ScanCountingStr.scanned += (found + len(sub) if found >= 0 else len(self)) - start
        return found

    def __contains__(self, sub):
        ScanCountingStr.scanned += len(self)
        return super().__contains__(sub)


def test_strip_metadata_is_linear_in_the_text():
    """Many opening tags and no closing one took time in the square of the length
    (a 1 MiB answer: minutes); now the text is searched in a bounded number of passes."""
    small = METADATA_OPEN * 100
    for text, expected in [(METADATA_OPEN * (1_000_000 // len(METADATA_OPEN)), None),
                           ((METADATA_OPEN + "x" + METADATA_CLOSE + "y") * 20_000, "y" * 20_000)]:
        ScanCountingStr.scanned = 0
        counted = ScanCountingStr(text)
        assert strip_metadata(counted) == (expected if expected is not None else text)
        assert isinstance(read_metadata(counted), (str, dict))
        # the two calls search the text (not a regex that rescans from every tag), each
        # in at most 3 passes: linear, where the old scan read the rest from every tag
        assert len(text) <= ScanCountingStr.scanned <= 6 * len(text), (ScanCountingStr.scanned, len(text))
    assert strip_metadata(small) == small


# --- the prompts the trainer renders: what they show, what they carry, what they hide ---
HIDDEN_KEYS = ("seats_left", "true_delay_hours", "root_cause", "fix_hours")
EVALUATOR = Evaluator()


@functools.lru_cache(maxsize=None)
def dataset(n: int = 100, seed: int = 42) -> tuple:
    """The rows of the trainer's dataset (``generate_dataset(n, None, seed)``) without the
    Dataset: each scenario rendered by ``build_prompt``, difficulty cycling 1..5."""
    return tuple({"prompt": build_prompt(sc.task, sc.conflict, sc.state, sc.difficulty, sc.seed),
                  "domain": sc.task.domain, "difficulty": sc.difficulty, "seed": sc.seed}
                 for sc in sample_scenarios(n, None, seed))


def user_text(prompt) -> str:
    return prompt[1]["content"]


def context(prompt):
    """(task, state, metadata) as the reward rebuilds them from the prompt."""
    ctx = EVALUATOR.context(user_text(prompt))
    assert not isinstance(ctx, str), ctx
    return ctx


def test_prompts_are_conversational_short_and_carry_metadata():
    lengths = []
    for row in dataset():
        prompt = row["prompt"]
        assert [m["role"] for m in prompt] == ["system", "user"]
        assert prompt[0]["content"] == PR.SYSTEM_PROMPT
        user = user_text(prompt)
        lengths.append(len(user))
        assert user.count(PR.METADATA_OPEN) == 1 and user.count(PR.METADATA_CLOSE) == 1
        assert user.startswith(PR.METADATA_OPEN)
        meta = json.loads(PR.METADATA_RE.search(user).group(1))
        assert {"v", "domain", "difficulty", "seed", "conflict_id", "state"} <= set(meta)
        assert meta["domain"] == row["domain"] and meta["difficulty"] == row["difficulty"]
        for line in ("GOAL:", "SITUATION:", "BUDGET LEFT:", "ROUTES", "Answer with one JSON object"):
            assert line in user
    print(f"max user message over 100 prompts: {max(lengths)} characters")
    assert max(lengths) < 3200, max(lengths)


_METRIC_LINE = re.compile(r"^  ([a-z_]+\.[a-z_]+): (-?[0-9.]+)( \(lower is better\))?$", re.M)


_BUDGET_LINE = re.compile(r"^BUDGET LEFT: time (\S+) h, money \$(\S+), energy (\S+)$", re.M)


@pytest.mark.parametrize("i", [0, 1, 2, 3, 4, 7, 23, 58])
def test_metadata_rebuilds_the_state_the_prompt_shows(i):
    row = dataset()[i]
    user = user_text(row["prompt"])
    task, state, meta = context(row["prompt"])

    # the rebuilt state is the scenario's own state
    sc = sample_scenario(row["seed"], row["difficulty"])
    assert task.id == sc.task.id
    for name in ("metrics", "resources", "budget", "world", "hidden", "step", "route_progress", "closed_routes",
                 "milestones", "events_fired"):
        assert getattr(state, name) == getattr(sc.state, name), name

    # budget line
    budget = _BUDGET_LINE.search(user)
    assert budget is not None
    shown = dict(zip(("time", "money", "energy"), budget.groups()))
    for k, text in shown.items():
        assert text == PR.fmt_number(state.resources[k])
        assert float(text) == pytest.approx(state.resources[k], abs=0.051)

    # the listed metrics: values and that they are the most damaged ones
    listed = _METRIC_LINE.findall(user)
    assert len(listed) == 6
    for path, value, inverted in listed:
        assert float(value) == pytest.approx(state.metrics[path], abs=0.051)
        assert bool(inverted) == (path in INVERTED_METRICS)
    worst_shown = max(goodness(p, state.metrics[p]) for p, _v, _i in listed)
    others = [goodness(p, state.metrics[p]) for p in METRIC_PATHS if p not in {x[0] for x in listed}]
    assert worst_shown <= min(others) + 1e-9

    # domain health, step and routes
    for d, ms in DOMAINS.items():
        health = sum(goodness(f"{d}.{m}", state.metrics[f"{d}.{m}"]) for m in ms) / len(ms)
        assert f"{d} {health:.0f}" in user
    assert f"STEP {state.step + 1} of {task.horizon}." in user
    env = LifeStackEnv()
    env.restore(task, state)
    for route in env.open_routes():
        assert f"- {route} (" in user
        assert f"open; next steps: {', '.join(env.next_action_types(route))}." in user


def test_prompt_reveals_no_hidden_state():
    ds = dataset()
    seen_domains = set()
    for row in ds:
        user = user_text(row["prompt"])
        task, state, meta = context(row["prompt"])
        seen_domains.add(task.domain)
        assert task.hidden_state  # there is something to hide
        for key in set(task.hidden_state) | set(HIDDEN_KEYS):
            assert key not in user, (row["seed"], key)
        assert "hidden" not in meta["state"]
    assert seen_domains == {"flight_crisis", "code_merge_crisis"}


def test_a_scenario_prompt_is_the_prompt_of_the_scenarios_own_state():
    from lifestack.prompts import build_prompt, scenario_prompt
    from lifestack.scenarios import sample_scenarios

    for sc in sample_scenarios(5, None, 3):
        assert scenario_prompt(sc) == build_prompt(sc.task, sc.conflict, sc.state, sc.difficulty, sc.seed)
