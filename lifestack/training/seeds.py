"""Every seed a training run derives from ``SEED``, in one place.

Each stream gets its own offset, far enough apart that no two streams draw the same
scenario (``sample_scenario(seed + index, ...)``: item ``i`` of a stream is seed + offset
+ i): a stage's training prompts never reappear as held-out prompts, demonstrations or
evaluation episodes. A stream's length is a constant a user sets, so ``validate_config``
bounds each length by the room its offsets leave (the ``MAX_*`` below); every length
inside them keeps the streams apart (``tests/test_training_seeds.py``). Changing an offset
changes what a seeded run trains and measures.
"""

from __future__ import annotations

STAGE_PROMPTS = 100_000  # stage n trains on seed + 100_000 n + i
WARM_START_BATCHES = 777  # the warm start's batch order (random.Random)
WARM_START_SCENARIOS = 5_000_000  # demonstration i's scenario
WARM_START_DEMONSTRATIONS = 6_000_000  # demonstration i's demonstrator draws (Random(seed + index))
INTEGRITY_SCENARIOS = 8_000_000  # the integrity watch: + 1000 x difficulty + i
HELD_OUT_PROMPTS = 9_000_000  # stage n's held-out evaluation: + 1000 n + i
FINAL_EVALUATION = 20_000_000  # the final evaluation's episode starts (+ 1000 k: eval_stages.py's k-th seed)
PER_STAGE = 1000  # held-out prompts of one stage, integrity prompts of one difficulty, episodes of one evaluation seed

# the room the offsets leave, checked by validate_config
MAX_STAGE_PROMPTS = STAGE_PROMPTS  # N_PROMPTS_PER_STAGE: more would reach the next stage's
MAX_STAGES = WARM_START_SCENARIOS // STAGE_PROMPTS - 1  # 49: stage 50's prompts would be the demonstrations'
MAX_DEMONSTRATIONS = INTEGRITY_SCENARIOS + PER_STAGE - WARM_START_SCENARIOS  # up to the integrity watch's first


def stage_prompts(seed: int, stage: int) -> int:
    return seed + STAGE_PROMPTS * stage


def held_out_prompts(seed: int, stage: int) -> int:
    return seed + HELD_OUT_PROMPTS + PER_STAGE * stage


def integrity_scenario(seed: int, difficulty: int, i: int) -> int:
    return seed + INTEGRITY_SCENARIOS + PER_STAGE * difficulty + i


def final_evaluation(seed: int, k: int = 0) -> int:
    return seed + FINAL_EVALUATION + PER_STAGE * k
