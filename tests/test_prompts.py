"""lifestack.prompts: one rendering of a state for every consumer, with the metadata that
rebuilds it exactly and nothing hidden."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from lifestack.env import LifeStackEnv
from lifestack.metrics import METRIC_PATHS
from lifestack.prompts import (
    ANSWER_SCHEMA, METADATA_OPEN, build_prompt, completion_text, metric_changes, prompt_text, read_metadata,
    render_observation, strip_metadata,
)
from lifestack.policies import heuristic
from lifestack.scenarios import rebuild_state, round_state, sample_scenario


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
import time  # noqa: E402

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


def test_strip_metadata_is_linear_in_the_text():
    """Many opening tags and no closing one took time in the square of the length
    (a 1 MiB answer: minutes); now it is one pass."""
    small = METADATA_OPEN * 100
    huge = METADATA_OPEN * (1_000_000 // len(METADATA_OPEN))
    t0 = time.perf_counter()
    assert strip_metadata(huge) == huge and isinstance(read_metadata(huge), str)
    elapsed = time.perf_counter() - t0
    assert elapsed < 0.5, elapsed
    mixed = (METADATA_OPEN + "x" + METADATA_CLOSE + "y") * 20_000
    assert strip_metadata(mixed) == "y" * 20_000
    assert strip_metadata(small) == small
