"""A run on disk: where its files live (:class:`RunPaths`), ``curriculum_state.json``
(written atomically, with the fingerprint of the settings that wrote it), resume and its
checks, moving a previous run aside (``RESUME=False``), step checkpoints.

The state itself lives in memory from :func:`start_run` to the end of the run; it is
written (atomically) after every stage and at the end, and read only to resume.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lifestack.training.decisions import decisions
from lifestack.training.distributed import barrier, is_main_process, log
from lifestack.training.generation_log import FILE_NAME as GENERATIONS_FILE
from lifestack.training.grpo_rewards import REWARD_NAMES
from lifestack.training.models import is_saved_model

STATE_FILE = "curriculum_state.json"
HISTORY_FILE = "train_history.jsonl"
EVAL_EPISODES_FILE = "eval_episodes.jsonl"
RUN_LOGS = (GENERATIONS_FILE, HISTORY_FILE, EVAL_EPISODES_FILE)


@dataclass(frozen=True)
class RunPaths:
    """Where a run keeps its files (OUTPUT_DIR and LOG_DIR): the one place their names are spelled."""

    out: Path
    logs: Path

    @classmethod
    def of(cls, cfg: dict[str, Any]) -> "RunPaths":
        return cls(Path(cfg["OUTPUT_DIR"]), Path(cfg["LOG_DIR"]))

    @property
    def state(self) -> Path:
        return self.out / STATE_FILE

    def grpo_start(self) -> Path | None:
        """``stage_0`` when the warm start saved it (GRPO's start: the KL reference, the final
        evaluation's comparison, a resume inside stage 1), else ``None``: the base model."""
        start = self.stage(0)
        return start if is_saved_model(start) else None

    def stage(self, n: int) -> Path:
        """The model after stage ``n`` (``stage_0``: after the warm start, GRPO's start)."""
        return self.out / f"stage_{n}"

    def checkpoints(self, n: int) -> Path:
        """Stage ``n``'s step checkpoints (deleted once the stage is saved)."""
        return self.stage(n) / "checkpoints"

    @property
    def merged(self) -> Path:
        return self.out / "merged"

    @property
    def generations(self) -> Path:
        return self.logs / GENERATIONS_FILE

    @property
    def train_history(self) -> Path:
        return self.logs / HISTORY_FILE

    @property
    def eval_episodes(self) -> Path:
        return self.logs / EVAL_EPISODES_FILE

    def tensorboard(self, n: int) -> Path:
        """TensorBoard's folder for stage ``n``: outside the step checkpoints, which are deleted."""
        return self.logs / "tensorboard" / f"stage_{n}"


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON so a crash leaves either the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# The settings that change what a run trains. N_STAGES is not one of them (raising it
# extends a finished run), nor are paths, logging, evaluation episodes or vLLM.
RUN_SETTING_KEYS = (
    "MODEL_NAME", "_PROFILE", "USE_LORA", "LORA_RANK", "LORA_ALPHA", "LOAD_IN_4BIT", "SEED", "START_DIFFICULTY",
    "N_PROMPTS_PER_STAGE", "ADVANCE_THRESHOLD", "RETREAT_THRESHOLD", "N_EVAL_PROMPTS", "LEARNING_RATES", "NUM_GENERATIONS",
    "MAX_COMPLETION_LENGTH", "TEMPERATURE", "BETA", "REWARD_WEIGHTS", "WARM_START_SFT_STEPS", "WARM_START_LR",
    "WARM_START_POLICY",
)


def run_settings(cfg: dict[str, Any]) -> dict[str, Any]:
    """What a curriculum state records about the configuration that wrote it."""
    settings = {key: cfg[key] for key in RUN_SETTING_KEYS}
    settings["COMPLETIONS_PER_STEP"] = cfg["PER_DEVICE_BATCH_SIZE"] * cfg["GRAD_ACCUM_STEPS"]  # per process
    # the weights as one number per reward (0 where left out) and the rewards chosen: a run
    # recorded when REWARD_WEIGHTS was a list of six keeps its fingerprint
    settings["REWARD_WEIGHTS"] = [cfg["REWARD_WEIGHTS"].get(name, 0.0) for name in REWARD_NAMES]
    settings["REWARD_FUNCTIONS"] = [name for name in REWARD_NAMES if name in cfg["REWARD_WEIGHTS"]]
    settings.update(decisions(cfg["HORIZON"]).settings())  # HORIZON only when > 1: single-step fingerprints hold
    if cfg["ON_POLICY_STATES"] > 0:  # likewise
        settings["ON_POLICY_STATES"] = cfg["ON_POLICY_STATES"]
    return settings


def config_fingerprint(settings: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def fresh_state(cfg: dict[str, Any]) -> dict[str, Any]:
    settings = run_settings(cfg)
    return {"version": 1, "next_stage": 1, "difficulty": cfg["START_DIFFICULTY"], "stages": [], "finished": False,
            "fingerprint": config_fingerprint(settings), "settings": settings}


def settings_mismatch(recorded: dict[str, Any], cfg: dict[str, Any]) -> str | None:
    """``None`` when a recorded state belongs to this configuration, else what differs."""
    current = run_settings(cfg)
    if "fingerprint" not in recorded:
        return "it records no settings (written by an older version of this script)"
    if recorded["fingerprint"] == config_fingerprint(current):
        return None
    old = recorded.get("settings") if isinstance(recorded.get("settings"), dict) else {}
    keys = list(current) + [key for key in old if key not in current]  # HORIZON is recorded only when > 1
    diffs = [f"{key} {old.get(key, '(not recorded)')!r} -> {current.get(key, '(not recorded)')!r}"
             for key in keys if old.get(key) != current.get(key)]
    return "; ".join(diffs) or "its fingerprint differs"


def load_curriculum_state(path: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    """The state to continue from: a fresh one, or (RESUME) the recorded one when it was
    written by the same settings. A different configuration stops the run, in one line,
    unless RESUME_ANY_CONFIG; the state then records this run's settings from now on."""
    fresh = fresh_state(cfg)
    if not cfg["RESUME"] or not path.exists():
        return fresh
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        if state.get("version") != 1 or not isinstance(state.get("stages"), list):
            raise ValueError("unknown layout")
    except (OSError, ValueError, AttributeError) as exc:
        raise SystemExit(f"{path}: unreadable curriculum state ({exc}); delete it or run with --RESUME=False") from None
    mismatch = settings_mismatch(state, cfg)
    if mismatch is not None:
        if not cfg["RESUME_ANY_CONFIG"]:
            raise SystemExit(f"{path}: written by a different configuration ({mismatch}); rerun with those settings, "
                             "--RESUME=False to start over (the old run is moved aside), or --RESUME_ANY_CONFIG=True "
                             "to resume it anyway")
        log(f"[setup] RESUME_ANY_CONFIG: resuming {path} although its configuration differs ({mismatch})")
        state.update(fingerprint=fresh["fingerprint"], settings=fresh["settings"])
    return state


def archive_previous_run(out: Path, log_dir: Path, stamp: str | None = None) -> Path | None:
    """Move a previous run out of the way of a fresh one (``RESUME=False``).

    Moved to ``out/previous_run_<stamp>/``: ``curriculum_state.json``, the ``stage_N``
    directories (with any step checkpoints), ``merged/``, the final-save files the state
    lists, and the run's logs (under ``logs/``). Nothing else in ``out`` is touched (the CPU
    profile's base model, earlier archives, files of your own). Returns the archive, or
    ``None`` when there was nothing to move.
    """
    names: list[str] = []
    state_path = RunPaths(out, log_dir).state
    if state_path.is_file():
        names.append(state_path.name)
        try:
            listed = json.loads(state_path.read_text(encoding="utf-8")).get("final_files", [])
        except (OSError, ValueError, AttributeError):
            listed = []
        names += [n for n in listed if isinstance(n, str) and n == Path(n).name and n not in ("", ".", "..")]
    if out.is_dir():
        names += sorted(p.name for p in out.iterdir() if p.is_dir() and re.fullmatch(r"stage_\d+|merged", p.name))
    names = [n for n in dict.fromkeys(names) if (out / n).exists()]
    logs = [log_dir / n for n in RUN_LOGS if (log_dir / n).is_file()]
    if not names and not logs:
        return None
    dest = out / f"previous_run_{stamp or time.strftime('%Y%m%d-%H%M%S')}"
    base, i = dest, 1
    while dest.exists():
        dest, i = base.with_name(f"{base.name}_{i}"), i + 1
    dest.mkdir(parents=True)
    for name in names:
        os.replace(out / name, dest / name)
    if logs:
        (dest / "logs").mkdir()
        for path in logs:
            shutil.move(str(path), str(dest / "logs" / path.name))  # LOG_DIR may be on another filesystem
    return dest


def start_run(cfg: dict[str, Any]) -> dict[str, Any]:
    """The curriculum state this run starts from, recorded before any training.

    ``RESUME=False`` first moves the previous run aside (rank 0), so that an interrupted
    fresh run followed by a plain rerun can never continue the old run. Writing the state
    now (with the settings fingerprint) also lets a resume inside stage 1 check them.
    """
    paths = RunPaths.of(cfg)
    state_path = paths.state
    if is_main_process() and not cfg["RESUME"]:
        moved = archive_previous_run(paths.out, paths.logs)
        if moved is not None:
            log(f"[setup] RESUME=False: the previous run (state, stage directories, final model, logs) moved to {moved}")
    barrier()
    state = load_curriculum_state(state_path, cfg)
    if is_main_process():
        write_json_atomic(state_path, state)
    barrier()
    return state


def checkpoint_is_complete(path: Path) -> bool:
    """Whether a step checkpoint was written to the end.

    The Trainer writes ``trainer_state.json`` last (after the weights, the optimizer, the
    scheduler and the RNG state), with a plain ``open(..., "w")``: a run killed while
    saving leaves a folder whose state file is missing, empty or cut short, and resuming
    from it fails inside ``Trainer.train``. A state file that parses to the Trainer's
    state marks a checkpoint that can be resumed.
    """
    try:
        state = json.loads((path / "trainer_state.json").read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(state, dict) and isinstance(state.get("global_step"), int)


def last_checkpoint(directory: Path, quiet: bool = False) -> str | None:
    """The newest complete step checkpoint in ``directory`` (None if there is none).

    An incomplete newer one (a run killed while saving it) is skipped with a log line
    (``quiet``: without, for a caller that only asks whether a stage was begun), so the
    stage resumes from the checkpoint before it, or starts afresh.
    """
    if not directory.exists():
        return None
    ckpts = sorted((p for p in directory.glob("checkpoint-*") if p.is_dir() and p.name.split("-")[-1].isdigit()),
                   key=lambda p: int(p.name.split("-")[-1]), reverse=True)
    for ckpt in ckpts:
        if checkpoint_is_complete(ckpt):
            return str(ckpt)
        if not quiet:
            log(f"[resume] {ckpt} is incomplete (no readable trainer_state.json: killed while saving?); skipped")
    return None
