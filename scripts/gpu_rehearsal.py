#!/usr/bin/env python
"""GPU rehearsal: the trainer's own GPU path, end to end, in a few minutes and with no download.

    python scripts/gpu_rehearsal.py --json rehearsal.json     # on one CUDA GPU (about 5 minutes)
    python scripts/gpu_rehearsal.py --cpu                     # anywhere: the same steps, CPU profile

For each profile installed here (``unsloth`` when it imports, then ``peft``) it runs
``scripts/train_trl.py``'s ``main`` in a fresh process on the real Qwen2.5-1.5B-Instruct
architecture with RANDOM weights (``lifestack/data/model_configs``; the tokenizer is
Qwen2.5's own rebuilt offline by the qwen extra, else the trainer's tiny one), three times:

1. single decisions: two GRPO steps, the stage's on-policy states and held-out
   evaluation, the final evaluation (2 episodes) and the model card;
2. episode mode (``HORIZON=2``): one GRPO step of closed-loop episodes, its evaluations;
3. a KL penalty (``BETA=0.04``) over two stages after a two-step warm start: every stage's
   reference is GRPO's start (``lifestack.training.kl_reference``).

Each run also records the optimisation settings its trainer holds (``trainer_args``) and
fails when one differs from what ``grpo_config`` states (Unsloth's GRPOConfig has other
defaults: 8-bit AdamW, weight decay, warmup, another loss).

It prints, per profile and run: seconds per GRPO step (TRL's ``step_time``, the median),
completion tokens per second of step time, peak GPU memory (``max_memory_allocated``;
peak RSS on a CPU), and the padding side seen at every ``generate`` call, split into
GRPO's own generations (inside the trainer's ``unwrap_model_for_generation``) and every
other one (on-policy states, evaluations): those must all be ``left`` (or ``none``, a
batch of one). A random model writes random tokens, so rewards say nothing; the figures
measure cost and correctness of the path. Exit status 1 when a run failed or a generate
call outside GRPO was not left-padded.

``--cpu`` (or no CUDA) runs the ``cpu`` profile through the same two runs with small
lengths: the harness itself, checked in CI.
"""

from __future__ import annotations

import os

for _var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):  # never download
    os.environ[_var] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Sequence  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
for _p in (ROOT, SCRIPTS):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

RUNS = {  # name -> overrides on top of the shared ones below
    "single": ["--N_PROMPTS_PER_STAGE=2", "--ON_POLICY_STATES=0.5", "--N_EVAL_PROMPTS=4", "--N_EVAL_EPISODES=2"],
    "episodes": ["--HORIZON=2", "--N_PROMPTS_PER_STAGE=1", "--ON_POLICY_STATES=0.0", "--N_EVAL_PROMPTS=2",
                 "--N_EVAL_EPISODES=1", "--MAX_SEQ_LENGTH=4096"],
    # a KL penalty over two stages after a warm start: the reference is GRPO's start in both
    # (lifestack.training.kl_reference; a LoRA model's second stage used to stop on TRL's "ref" adapter)
    "kl": ["--BETA=0.04", "--N_STAGES=2", "--WARM_START_SFT_STEPS=2", "--N_PROMPTS_PER_STAGE=1",
           "--ON_POLICY_STATES=0.0", "--N_EVAL_PROMPTS=2", "--N_EVAL_EPISODES=1"],
}
BATCH = 4  # PER_DEVICE_BATCH_SIZE = NUM_GENERATIONS: one prompt's group per GRPO step
# The settings train_trl.grpo_config states because Unsloth's GRPOConfig changes their defaults,
# as the built trainer must hold them (str of the value)
STATED_ARGS = {"optim": "adamw_torch_fused", "weight_decay": "0.0", "warmup_steps": "0",
               "lr_scheduler_type": "linear", "loss_type": "bnpo", "top_k": "0", "top_p": "1.0",
               "mask_truncated_completions": "False", "epsilon_high": "None"}


def overrides(profile: str, model_dir: Path, work: Path, run: str) -> list[str]:
    out = work / profile / run
    completion = 32 if profile == "cpu" else 256  # the GPU default; the CPU harness keeps it short
    return [f"--DEVICE_PROFILE={profile}", f"--MODEL_NAME={model_dir}", "--N_STAGES=1", f"--NUM_GENERATIONS={BATCH}",
            f"--PER_DEVICE_BATCH_SIZE={BATCH}", f"--MAX_COMPLETION_LENGTH={completion}", "--INTEGRITY_PROMPTS=0",
            "--WARM_START_SFT_STEPS=0", "--SAVE_STEPS=100", "--REPORT_TO=none", "--RESUME=False",
            f"--OUTPUT_DIR={out / 'model'}", f"--LOG_DIR={out / 'logs'}", f"--PLOT_PATH={out / 'curve.png'}",
            f"--CURVES_PATH={out / 'curves.png'}", f"--CURRICULUM_PLOT_PATH={out / 'curriculum.png'}",
            f"--FEEDBACK_DB={out / 'feedback.sqlite3'}", f"--CPU_BASE_DIR={work / 'cpu_base'}", *RUNS[run]]


def build_random_model(directory: Path) -> str:
    """Save Qwen2.5-1.5B-Instruct's architecture with random weights (bf16/fp16 by the
    trainer's precision rule) and a tokenizer into ``directory``; returns the tokenizer kind."""
    import torch

    from lifestack.training.bench import (
        build_model, build_tokenizer, model_config, qwen_tokenizer_available, save_for_reload,
    )
    from lifestack.training.models import choose_precision, torch_dtype

    kind = "qwen" if qwen_tokenizer_available() else "tiny"
    tok = build_tokenizer(directory / "tokenizer", kind)
    kwargs, _notes = model_config(tok, "real", "real")
    dtype = torch_dtype(choose_precision(tuple(torch.cuda.get_device_capability())))
    model = build_model(kwargs, "cuda", dtype, seed=0)
    save_for_reload(model, tok, directory)
    del model
    torch.cuda.empty_cache()
    return kind


def one_run(profile: str, model_dir: Path, work: Path, run: str) -> dict[str, Any]:
    """In this process: the trainer's main with a recorder on every generate call."""
    if profile == "unsloth":
        import unsloth  # noqa: F401  (before transformers, trl, peft: it patches them)
    import torch
    from trl.trainer import grpo_trainer

    import train_trl as T
    from lifestack.training import run_evaluation as EV
    from lifestack.training.generation import padding_side_of

    calls: list[dict[str, Any]] = []
    inside = {"trainer": False}
    trainer_unwrap = grpo_trainer.unwrap_model_for_generation  # Unsloth's, once it is imported

    from contextlib import contextmanager

    @contextmanager
    def marked_unwrap(*args, **kwargs):
        with trainer_unwrap(*args, **kwargs) as model:
            inside["trainer"] = True
            try:
                yield model
            finally:
                inside["trainer"] = False

    grpo_trainer.unwrap_model_for_generation = marked_unwrap

    def recording(load):
        def load_and_record(*args, **kwargs):
            model, tok = load(*args, **kwargs)
            core = model.get_base_model() if hasattr(model, "get_base_model") else model  # the causal LM under a LoRA
            original = core.generate

            def generate(*a, **k):
                mask = k.get("attention_mask")
                calls.append({"where": "grpo" if inside["trainer"] else "other",
                              "side": "none" if mask is None else padding_side_of(mask)})
                return original(*a, **k)

            core.generate = generate
            return model, tok
        return load_and_record

    T.load_model = recording(T.load_model)
    EV.load_model = recording(EV.load_model)
    seen_args: dict[str, Any] = {}
    build_stage_trainer = T.stage_trainer

    def stage_trainer(*args, **kwargs):  # the optimisation settings as the trainer holds them (Unsloth rewrites defaults)
        trainer = build_stage_trainer(*args, **kwargs)
        seen_args.update({k: str(getattr(getattr(trainer.args, k, None), "value", getattr(trainer.args, k, None)))
                          for k in STATED_ARGS})
        return trainer

    T.stage_trainer = stage_trainer
    cuda = torch.cuda.is_available() and profile != "cpu"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    status = T.main(overrides(profile, model_dir, work, run))
    wall = time.perf_counter() - t0
    history = [json.loads(line) for line in
               (work / profile / run / "logs" / "train_history.jsonl").read_text().splitlines() if line.strip()] \
        if (work / profile / run / "logs" / "train_history.jsonl").exists() else []
    steps = [h["step_time"] for h in history if "step_time" in h]
    lengths = [h["completions/mean_length"] for h in history if "completions/mean_length" in h]
    if cuda:
        peak = torch.cuda.max_memory_allocated() / 2**30
    else:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    s_per_step = statistics.median(steps) if steps else None
    tokens = (statistics.mean(lengths) * BATCH / s_per_step) if steps and lengths and s_per_step else None
    sides: dict[str, dict[str, int]] = {}
    for c in calls:
        sides.setdefault(c["where"], {}).setdefault(c["side"], 0)
        sides[c["where"]][c["side"]] += 1
    return {"profile": profile, "run": run, "status": status, "wall_seconds": round(wall, 1),
            "grpo_steps": len(steps), "s_per_step": s_per_step, "tokens_per_s": tokens,
            "peak_memory_gib": round(peak, 2), "peak_memory_of": "GPU allocated" if cuda else "process RSS",
            "generate_padding": sides, "trainer_args": seen_args,
            "device": torch.cuda.get_device_name() if cuda else "cpu"}


def problems(result: dict[str, Any]) -> list[str]:
    out = []
    if result.get("status") != 0:
        out.append(f"exit status {result.get('status')}")
    other = result.get("generate_padding", {}).get("other", {})
    if not other:
        out.append("no evaluation generate call was seen")
    bad = {side: n for side, n in other.items() if side not in ("left", "none")}
    if bad:
        out.append(f"generate calls outside GRPO padded {bad}")
    if not result.get("grpo_steps"):
        out.append("no GRPO step was logged")
    changed = {k: v for k, v in result.get("trainer_args", {}).items() if v != STATED_ARGS[k]}
    if changed:
        out.append(f"the trainer does not hold the stated settings: {changed}")
    return out


def line(r: dict[str, Any]) -> str:
    fmt = lambda x, spec: "-" if x is None else format(x, spec)  # noqa: E731
    pads = "; ".join(f"{where}: " + ", ".join(f"{n} {side}" for side, n in sorted(s.items()))
                     for where, s in sorted(r.get("generate_padding", {}).items()))
    return (f"{r['profile']:8} {r['run']:9} {fmt(r.get('s_per_step'), '.2f'):>7} s/step  "
            f"{fmt(r.get('tokens_per_s'), '.0f'):>6} tokens/s  {fmt(r.get('peak_memory_gib'), '.2f')} GiB "
            f"({r.get('peak_memory_of', '?')})  generate padding: {pads or '-'}"
            + (f"  PROBLEM: {'; '.join(problems(r))}" if problems(r) else ""))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu", action="store_true", help="the cpu profile through the same runs (no GPU needed)")
    ap.add_argument("--profiles", default="", help="comma-separated (default: unsloth when installed, peft)")
    ap.add_argument("--json", default="", help="write the results here")
    ap.add_argument("--work", default="", help="working folder (default: a temporary one)")
    ap.add_argument("--one", nargs=3, metavar=("PROFILE", "MODEL_DIR", "RUN"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:  # a child: one profile, one run, the result as JSON on the last line
        profile, model_dir, run = args.one
        result = one_run(profile, Path(model_dir), Path(args.work), run)
        print("REHEARSAL_RESULT " + json.dumps(result), flush=True)
        return 0
    import importlib.util

    import torch

    cuda = torch.cuda.is_available() and not args.cpu
    if args.profiles:
        profiles = [p.strip() for p in args.profiles.split(",") if p.strip()]
    elif cuda:
        profiles = (["unsloth"] if importlib.util.find_spec("unsloth") else []) + ["peft"]
    else:
        profiles = ["cpu"]
    work = Path(args.work or tempfile.mkdtemp(prefix="lifestack-rehearsal-"))
    model_dir = work / "random_model"
    if cuda:
        t0 = time.perf_counter()
        kind = build_random_model(model_dir)
        print(f"[rehearsal] {torch.cuda.get_device_name()}: Qwen2.5-1.5B architecture, random weights, "
              f"{kind} tokenizer, saved in {time.perf_counter() - t0:.0f}s", flush=True)
    results = []
    for profile in profiles:
        for run in RUNS:
            cmd = [sys.executable, str(Path(__file__).resolve()), "--work", str(work), "--one", profile, str(model_dir), run]
            print(f"[rehearsal] {profile} / {run}: {' '.join(cmd[2:])}", flush=True)
            proc = subprocess.run(cmd, capture_output=True, text=True)
            found = [ln for ln in proc.stdout.splitlines() if ln.startswith("REHEARSAL_RESULT ")]
            if found:
                result = json.loads(found[-1].removeprefix("REHEARSAL_RESULT "))
                kl = [ln for ln in proc.stdout.splitlines() if ln.startswith("[kl] ")]  # what the KL reference is
                if kl:
                    result["kl_reference"] = kl[0]
                    print(kl[0], flush=True)
            else:
                tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
                result = {"profile": profile, "run": run, "status": proc.returncode, "error": "\n".join(tail)}
                print("\n".join(tail), file=sys.stderr)
            results.append(result)
            print(line(result), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    failed = [r for r in results if problems(r)]
    print(f"[rehearsal] {len(results) - len(failed)} of {len(results)} runs passed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
