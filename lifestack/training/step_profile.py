"""Where a CPU-profile GRPO step's wall time goes (``scripts/bench_cpu_step.py`` is the command).

:class:`StepProfiler` attaches to a built ``trl.GRPOTrainer`` and splits every optimizer
step into four disjoint parts:

- ``generation``: time inside the policy's ``generate`` (TRL's own single-turn call, or
  every turn of the episode rollout);
- ``scoring``: time inside the reward functions (the run context's ``reward_seconds``,
  which the reward wrapper adds to once per outermost call);
- ``forward_backward``: the rest of ``training_step`` once TRL's ``_prepare_inputs``
  (generation, scoring and the batch around them) is taken out (the loss's forward pass,
  the backward pass), plus gradient clipping and the optimizer step;
- ``overhead``: the rest of the step's wall time: TRL's batch preparation outside
  ``generate`` and the rewards (chat template, tokenizing, decoding, advantages; in
  episode mode stepping the environment and tokenizing its replies), the data loader,
  logging, step checkpoints. Reported apart as ``prepare_other`` (inside
  ``_prepare_inputs``) and ``log_save_other`` (outside it).

A step's wall time runs from the previous step's end (``on_step_end``; for the first
step its own ``on_step_begin``) to its own end, so it includes the previous step's
logging and checkpoint save. The three measured parts are disjoint intervals inside that
window, so the overhead, their remainder, is never negative (it is clamped at 0 against
float rounding only).

:func:`summarize` reduces the per-step records to medians and shares (each part's total
over all steps divided by the total wall time: the four shares sum to 1), and steps per
minute (60 / the median step). :func:`warm_start_timing` times the warm start and
splits its time per step into writing the demonstrations, tokenizing and the model. transformers is imported inside :meth:`StepProfiler.attach`.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any, Callable, Sequence

CATEGORIES = ("generation", "scoring", "forward_backward", "overhead")
DETAILS = ("prepare_other", "log_save_other", "optimizer")


class StepProfiler:
    """Per-optimizer-step timings of one ``GRPOTrainer`` (see the module docstring).

    ``reward_clock`` is an object with a ``reward_seconds`` float (the training script's
    run context). :meth:`attach` wraps the trainer's ``training_step`` and
    ``_prepare_inputs`` and the model's ``generate`` on the instances, and adds a
    callback; :meth:`detach` undoes it. ``steps`` holds one dict per finished step.
    """

    def __init__(self, reward_clock: Any, clock: Callable[[], float] = time.perf_counter) -> None:
        self.reward_clock = reward_clock
        self.clock = clock
        self.steps: list[dict[str, float]] = []
        self._undo: list[Callable[[], None]] = []
        self._reset(None)

    # --- the counters of the step in progress ---------------------------------------
    def _reset(self, start: float | None) -> None:
        self._start = start
        self._generation = 0.0
        self._prepare = 0.0
        self._training_step = 0.0
        self._training_step_end: float | None = None
        self._optimizer = 0.0
        self._reward0 = float(self.reward_clock.reward_seconds)
        self._generate_calls = 0
        self._decode_steps = 0

    def _wrap(self, owner: Any, name: str, add: Callable[[float], None],
              seen: Callable[[tuple, dict, Any], None] | None = None) -> None:
        """Replace ``owner.name`` by a timed call of the same bound method (an instance
        attribute, so code that calls ``self.name(...)`` goes through it); ``seen(args,
        kwargs, result)`` looks at each call's result."""
        inner = getattr(owner, name)
        had_own = name in vars(owner)
        clock = self.clock

        def timed(*args, **kwargs):
            t0 = clock()
            try:
                out = inner(*args, **kwargs)
            finally:
                add(clock() - t0)
            if seen is not None:
                seen(args, kwargs, out)
            return out

        setattr(owner, name, timed)
        self._undo.append(lambda: setattr(owner, name, inner) if had_own else delattr(owner, name))

    def _add_generation(self, seconds: float) -> None:
        self._generation += seconds
        self._generate_calls += 1

    def _count_new_tokens(self, args: tuple, kwargs: dict, out: Any) -> None:
        """The tokens one ``generate`` call added per row (its decoding steps)."""
        ids = kwargs.get("input_ids", args[0] if args else None)
        sequences = getattr(out, "sequences", out)
        if ids is not None and hasattr(sequences, "shape") and hasattr(ids, "shape"):
            self._decode_steps += int(sequences.shape[-1]) - int(ids.shape[-1])

    def _add_prepare(self, seconds: float) -> None:
        self._prepare += seconds

    def _add_training_step(self, seconds: float) -> None:
        self._training_step += seconds
        self._training_step_end = self.clock()

    # --- the trainer's events -------------------------------------------------------
    def step_begin(self) -> None:
        if self._start is None:  # the first step; later ones start where the previous ended
            self._reset(self.clock())

    def optimizer_step(self) -> None:
        """After ``optimizer.step()``: clipping and the step ran since ``training_step`` returned."""
        if self._training_step_end is not None:
            self._optimizer += self.clock() - self._training_step_end
            self._training_step_end = None

    def step_end(self) -> None:
        now = self.clock()
        wall = now - (self._start if self._start is not None else now)
        scoring = float(self.reward_clock.reward_seconds) - self._reward0
        forward_backward = max(0.0, self._training_step - self._prepare) + self._optimizer
        prepare_other = max(0.0, self._prepare - self._generation - scoring)
        overhead = max(0.0, wall - self._generation - scoring - forward_backward)
        self.steps.append({
            "wall": wall, "generation": self._generation, "scoring": scoring, "forward_backward": forward_backward,
            "overhead": overhead, "prepare_other": prepare_other, "log_save_other": max(0.0, overhead - prepare_other),
            "optimizer": self._optimizer, "generate_calls": float(self._generate_calls),
            "decode_steps": float(self._decode_steps),
        })
        self._reset(now)

    # --- attaching ------------------------------------------------------------------
    def attach(self, trainer) -> "StepProfiler":
        """Time ``trainer`` from its next step on (the model's ``generate``, the trainer's
        ``training_step`` and ``_prepare_inputs``, a callback at the step's edges)."""
        from transformers import TrainerCallback

        profiler = self

        class _Edges(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                profiler.step_begin()

            def on_optimizer_step(self, args, state, control, **kwargs):
                profiler.optimizer_step()

            def on_step_end(self, args, state, control, **kwargs):
                profiler.step_end()

        model = getattr(trainer.model, "module", trainer.model)
        self._wrap(model, "generate", self._add_generation, self._count_new_tokens)
        self._wrap(trainer, "_prepare_inputs", self._add_prepare)
        self._wrap(trainer, "training_step", self._add_training_step)
        edges = _Edges()
        trainer.add_callback(edges)
        self._undo.append(lambda: trainer.remove_callback(edges))
        return self

    def detach(self) -> None:
        while self._undo:
            self._undo.pop()()


def summarize(steps: Sequence[dict[str, float]], skip_first: int = 0) -> dict[str, Any]:
    """Medians and shares of per-step records (:class:`StepProfiler`'s ``steps``).

    ``skip_first`` leaves out that many first steps (warm-up). Returns ``steps`` (how many
    were summarized), ``median`` (seconds per category, detail and the wall time; the
    tokens ``generate`` added per step, ``decode_steps``, and the generation time per
    added token, ``generation_per_decode_step``: generation time follows the longest
    answer of a batch, which varies from step to step),
    ``share`` (each category's total over the total wall time; the four sum to 1),
    ``steps_per_minute`` (60 / the median wall time) and ``total_seconds``.
    """
    rows = list(steps)[skip_first:]
    if not rows:
        raise ValueError("no steps to summarize")
    keys = ("wall", *CATEGORIES, *DETAILS)
    median = {k: statistics.median(r[k] for r in rows) for k in keys}
    decode = [r["generation"] / r["decode_steps"] for r in rows if r.get("decode_steps")]
    median["decode_steps"] = statistics.median(r.get("decode_steps", 0.0) for r in rows)
    median["generation_per_decode_step"] = statistics.median(decode) if decode else float("nan")
    total_wall = sum(r["wall"] for r in rows)
    share = {k: (sum(r[k] for r in rows) / total_wall if total_wall > 0 else 0.0) for k in CATEGORIES}
    return {"steps": len(rows), "median": median, "share": share,
            "steps_per_minute": 60.0 / median["wall"] if median["wall"] > 0 else math.inf,
            "total_seconds": total_wall}


def warm_start_timing(run_warm_start: Callable[[dict], Sequence[float]], steps: int,
                      clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Time a warm start: ``run_warm_start(timings)`` runs it with ``timings`` for its
    ``timings`` argument and returns its per-step losses. ``{"seconds", "steps",
    "seconds_per_step", "final_loss"}`` plus the warm start's own split per step
    (``demonstrations_per_step``, ``tokenize_per_step``, ``model_per_step``; means over
    its steps, the demonstrations' writing included)."""
    timings: dict[str, float] = {}
    t0 = clock()
    losses = list(run_warm_start(timings))
    seconds = clock() - t0
    out = {"seconds": seconds, "steps": steps, "seconds_per_step": seconds / steps if steps else 0.0,
           "final_loss": losses[-1] if losses else float("nan")}
    for key in ("demonstrations", "tokenize", "model"):
        out[f"{key}_per_step"] = timings.get(key, float("nan")) / steps if steps else 0.0
    return out


def warm_start_line(warm: dict[str, float]) -> str:
    """One line for a :func:`warm_start_timing` result."""
    return (f"warm start: {warm['steps']} steps, {warm['seconds_per_step']:.3f} s/step (writing the demonstrations "
            f"{warm['demonstrations_per_step']:.3f}, tokenizing {warm['tokenize_per_step']:.3f}, model, backward and "
            f"optimizer {warm['model_per_step']:.3f}; final loss {warm['final_loss']:.3f})")


def breakdown_lines(summary: dict[str, Any], title: str) -> list[str]:
    """The printed table of one :func:`summarize` result."""
    med, share = summary["median"], summary["share"]
    lines = [f"{title}: {summary['steps']} steps, median step {med['wall']:.3f} s, "
             f"{summary['steps_per_minute']:.1f} steps/min",
             "| part | median s/step | share of wall time |", "|---|---:|---:|"]
    for k in CATEGORIES:
        lines.append(f"| {k} | {med[k]:.3f} | {share[k]:.1%} |")
    lines.append(f"(generation: {med['decode_steps']:.0f} tokens added per step, "
                 f"{1000 * med['generation_per_decode_step']:.1f} ms each; overhead: {med['prepare_other']:.3f} s "
                 f"in TRL's batch preparation, {med['log_save_other']:.3f} s logging, checkpoints, data loader; "
                 f"optimizer {med['optimizer']:.3f} s of forward_backward)")
    return lines


def bench_config(T, work, *, steps: int, horizon: int, seed: int, base_dir, overrides: Sequence[str] = ()) -> dict:
    """The CPU profile's configuration for a bench of ``steps`` optimizer steps in one
    stage (``T``: the training script's module), its files under ``work``; ``overrides``
    (``--KEY=value``) win."""
    from pathlib import Path

    work = Path(work)
    probe = T.build_config([f"--HORIZON={horizon}", *overrides], profile="cpu")
    prompts_per_step = probe["PER_DEVICE_BATCH_SIZE"] * probe["GRAD_ACCUM_STEPS"] // probe["NUM_GENERATIONS"]
    argv = [f"--OUTPUT_DIR={work / 'out'}", f"--LOG_DIR={work / 'logs'}", f"--CPU_BASE_DIR={base_dir}",
            f"--SEED={seed}", f"--HORIZON={horizon}", "--N_STAGES=1", f"--N_PROMPTS_PER_STAGE={steps * prompts_per_step}",
            *overrides]
    return T.build_config(argv, profile="cpu")


def profile_run(T, cfg: dict[str, Any], *, init_from=None, skip_first: int = 0,
                progress: Callable[[str], None] = print) -> dict[str, Any]:
    """One bench run: the CPU profile's model loaded and warm-started (timed), the stage's
    prompts built as the curriculum builds them (on-policy states included, timed), the
    stage's GRPOTrainer (``T.stage_trainer``) trained with a :class:`StepProfiler`
    attached. ``init_from`` (a saved model directory, e.g. a warm-started ``stage_0``):
    GRPO starts from it, and the warm start is timed on a throwaway copy of it instead
    (so a short WARM_START_SFT_STEPS measures its per-step time without changing the
    start). Returns ``{"warm_start", "dataset_seconds", "steps" (per-step records),
    "summary"}``."""
    import copy
    import random

    from transformers import set_seed

    from lifestack.training import seeds
    from lifestack.training.run_evaluation import policy_advance
    from lifestack.training.models import load_model
    from lifestack.training.run_state import RunPaths
    from lifestack.training.warm_start import warm_start

    T.EVALUATOR.prompts.clear()  # every run starts with the caches a fresh process has
    T.EVALUATOR.evaluations.clear()
    random.seed(cfg["SEED"])
    set_seed(cfg["SEED"])
    model, tokenizer = load_model(cfg, init_from, banner=False)
    warmed = copy.deepcopy(model) if init_from is not None else model
    warm = warm_start_timing(lambda timings: warm_start(warmed, tokenizer, cfg, timings=timings),
                             cfg["WARM_START_SFT_STEPS"])
    warmed = None  # the copy is not needed again: free it
    progress(f"[bench] {warm_start_line(warm)}" + (f"; GRPO starts from {init_from}" if init_from else ""))
    paths = RunPaths.of(cfg)
    T.RUN.configure(cfg)
    T.RUN.stage, T.RUN.difficulty, T.RUN.signatures = 1, cfg["START_DIFFICULTY"], {}
    t0 = time.perf_counter()
    dataset = T.generate_dataset(cfg["N_PROMPTS_PER_STAGE"], cfg["START_DIFFICULTY"],
                                 seed=seeds.stage_prompts(cfg["SEED"], 1), advance=policy_advance(model, tokenizer, cfg))
    dataset_seconds = time.perf_counter() - t0
    trainer = T.stage_trainer(model, tokenizer, cfg, 1, dataset, paths)
    profiler = StepProfiler(T.RUN).attach(trainer)
    try:
        trainer.train()
    finally:
        profiler.detach()
        T.RUN.log.close()
    return {"warm_start": warm, "dataset_seconds": dataset_seconds, "steps": profiler.steps,
            "summary": summarize(profiler.steps, skip_first=skip_first)}
