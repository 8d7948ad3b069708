#!/usr/bin/env python
"""Score every saved stage of a run on the trainer's final evaluation, over several seeds.

    python scripts/eval_stages.py                                   # lifestack_model/, 6 evaluation seeds
    python scripts/eval_stages.py --output-dir runs/x --seeds 3 -- --DEVICE_PROFILE=cpu

The trainer's `[eval]` line compares the final model with GRPO's start on one set of
N_EVAL_EPISODES greedy episodes (seed SEED + 20,000,000). One set is one draw: this
script replays that evaluation (`run_episodes`, the same starts and scoring) for
``stage_0`` (GRPO's start), each ``stage_N`` and the final model, on ``--seeds``
evaluation seeds (the trainer's own first, then 1,000 apart), and prints the mean
reward and the success rate (the share of episodes that end in success) per model and
seed, and each model's successes per difficulty over all its episodes. Overrides after
``--`` are the trainer's ``--KEY=value`` (give the ones the run was trained with, e.g.
``--DEVICE_PROFILE=cpu``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from lifestack.training import seeds as run_seeds  # noqa: E402
from lifestack.training.models import is_saved_model  # noqa: E402


def saved_models(output_dir: Path) -> list[tuple[str, Path]]:
    """(name, path) of stage_0, stage_1, ... and the final model, those that exist, in order:
    full weights or LoRA adapters (``is_saved_model``)."""
    stages = sorted((p for p in output_dir.glob("stage_*") if p.name[6:].isdigit() and is_saved_model(p)),
                    key=lambda p: int(p.name[6:]))
    out = [(p.name, p) for p in stages]
    if is_saved_model(output_dir):
        out.append(("final", output_dir))
    return out


def by_difficulty(rows: list[dict]) -> str:
    """Successes over episodes per difficulty, e.g. ``d1 28/60, d2 39/60``: where a stage
    gains or loses whole tasks."""
    out = []
    for d in sorted({r["difficulty"] for r in rows}):
        here = [r for r in rows if r["difficulty"] == d]
        out.append(f"d{d} {sum(r['outcome'] == 'success' for r in here)}/{len(here)}")
    return ", ".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output-dir", default="lifestack_model", help="the run's OUTPUT_DIR")
    parser.add_argument("--seeds", type=int, default=6, help="evaluation seeds (default 6)")
    parser.add_argument("overrides", nargs="*", help="the trainer's --KEY=value overrides of the run")
    args = parser.parse_args(argv)
    import train_trl as T  # build_config: the trainer's constants and overrides
    from lifestack.training.run_evaluation import run_episodes
    from lifestack.training.models import load_model
    from lifestack.training.plots import success_rate

    out_dir = Path(args.output_dir)
    models = saved_models(out_dir)
    if not models:
        print(f"no saved model (config.json or adapter_config.json) in {out_dir} or its stage_N folders",
              file=sys.stderr)
        return 1
    cfg = T.build_config([f"--OUTPUT_DIR={out_dir}", *args.overrides])  # resolves the profile as the trainer does
    T.RUN.configure(cfg)
    seeds = [run_seeds.final_evaluation(cfg["SEED"], k) for k in range(args.seeds)]
    print(f"[eval stages] {len(models)} models x {len(seeds)} seeds x {cfg['N_EVAL_EPISODES']} greedy episodes")
    for name, path in models:
        model, tok = load_model(cfg, path, banner=False, collective=False)
        rows = [run_episodes(model, tok, cfg, cfg["N_EVAL_EPISODES"], s, T.RUN) for s in seeds]
        means = [statistics.mean(r["reward"] for r in per_seed) for per_seed in rows]
        wins = [success_rate(per_seed) for per_seed in rows]
        print(f"{name}: mean {statistics.mean(means):+.3f}, success {statistics.mean(wins):.0%} over seeds; per seed "
              + ", ".join(f"{m:+.3f} ({w:.0%})" for m, w in zip(means, wins)), flush=True)
        print(f"  {name} successes per difficulty: " + by_difficulty([r for per_seed in rows for r in per_seed]),
              flush=True)
        del model
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
