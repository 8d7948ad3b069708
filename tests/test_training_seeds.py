"""lifestack.training.seeds: every stream a run draws lies at its own offset from SEED, and
validate_config's bounds on the streams' lengths keep any two of them from sharing a scenario."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lifestack.training.seeds as S
from lifestack.training.config import validate_config
from script_run import T


def cfg(profile: str = "peft", **overrides) -> dict:
    return T.build_config([f"--{k}={v}" for k, v in overrides.items()], profile=profile)


def stream_ranges(c: dict, batch: int = 4) -> dict[str, range]:
    """The scenario seeds (minus SEED) each stream draws, from the functions the trainer
    calls: each stage's prompts and held-out prompts, the integrity watch per difficulty,
    the warm start's demonstrations (``batch`` a step, as ``warm_start`` writes them) and
    the final evaluation's episodes on each of eval_stages.py's first two seeds."""
    seed = c["SEED"]
    out = {}
    for n in range(1, c["N_STAGES"] + 1):
        start = S.stage_prompts(seed, n) - seed
        out[f"train {n}"] = range(start, start + c["N_PROMPTS_PER_STAGE"])
        start = S.held_out_prompts(seed, n) - seed
        out[f"held-out {n}"] = range(start, start + c["N_EVAL_PROMPTS"])
    for d in range(1, 6):
        out[f"integrity {d}"] = range(S.integrity_scenario(seed, d, 0) - seed,
                                      S.integrity_scenario(seed, d, c["INTEGRITY_PROMPTS"]) - seed)
    steps = c["WARM_START_SFT_STEPS"]
    out["warm start"] = range(S.WARM_START_SCENARIOS, S.WARM_START_SCENARIOS + (max(64, steps * batch // 4) if steps else 0))
    for k in (0, 1):
        start = S.final_evaluation(seed, k) - seed
        out[f"final, seed {k}"] = range(start, start + c["N_EVAL_EPISODES"])
    return out


def first_shared(c: dict) -> tuple[str, str] | None:
    ranges = sorted(((name, r) for name, r in stream_ranges(c).items() if len(r)), key=lambda x: x[1].start)
    for (a, ra), (b, rb) in zip(ranges, ranges[1:]):
        if ra.stop > rb.start:
            return a, b
    return None


def test_the_defaults_and_the_cpu_profile_draw_disjoint_streams():
    assert first_shared(cfg()) is None and first_shared(cfg("cpu")) is None


def test_every_bound_is_the_room_its_offsets_leave():
    top = {"N_STAGES": S.MAX_STAGES, "N_PROMPTS_PER_STAGE": S.MAX_STAGE_PROMPTS, "N_EVAL_PROMPTS": S.PER_STAGE,
           "N_EVAL_EPISODES": S.PER_STAGE, "WARM_START_SFT_STEPS": S.MAX_DEMONSTRATIONS, "INTEGRITY_PROMPTS": 1000}
    c = cfg(**top)  # accepted, every length at its bound
    assert first_shared(c) is None
    for key in top:  # one more, and two streams would share scenarios (the check refuses it)
        if key == "INTEGRITY_PROMPTS":
            continue  # its own bound (0..1000) predates these
        assert first_shared({**c, key: top[key] + 1}) is not None, key
        with pytest.raises(T.ConfigError, match=f"^{key}: must be in "):
            cfg(**{**top, key: top[key] + 1})


def test_stage_fifty_would_train_on_the_warm_starts_scenarios():
    assert S.MAX_STAGES == 49
    assert first_shared({**cfg("cpu"), "N_STAGES": 50}) == ("train 50", "warm start")


@settings(max_examples=80, deadline=None)
@given(stages=st.integers(1, 60), prompts=st.integers(1, 120_000), held_out=st.integers(1, 1200),
       episodes=st.integers(1, 1200), integrity=st.integers(0, 1000),
       warm=st.sampled_from([0, 1, 1000, 3_000_999, 3_001_000, 3_001_001, 3_100_000]))
def test_every_accepted_configuration_draws_disjoint_streams(stages, prompts, held_out, episodes, integrity, warm):
    c = {**cfg(), "N_STAGES": stages, "N_PROMPTS_PER_STAGE": prompts, "N_EVAL_PROMPTS": held_out,
         "N_EVAL_EPISODES": episodes, "INTEGRITY_PROMPTS": integrity, "WARM_START_SFT_STEPS": warm}
    try:
        validate_config(c)
    except T.ConfigError:
        return  # refused: some bounds are wider than needed (N_STAGES=50 without a warm start)
    assert first_shared(c) is None
