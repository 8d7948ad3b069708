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

With ``stage_0`` and the final model both replayed it prints GRPO's paired change over the
same starts (final minus start: episode reward and success, 95 % intervals over starts).
``--json FILE`` saves every model's episodes; ``--from-json FILE ...`` pools saved replays
of several runs (seeds) without playing: each run's paired change, and their mean with a
95 % interval that resamples the runs and then their starts, so the spread between
training runs is in it. ``--models stage_0,final`` replays only the models named.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from lifestack.training import seeds as run_seeds  # noqa: E402
from lifestack.training.episode_play import paired, paired_line, paired_runs  # noqa: E402
from lifestack.training.run_evaluation import paired_rows, rows_as_played  # noqa: E402
from lifestack.training.models import is_saved_model  # noqa: E402

CHANGE = ("stage_0", "final")  # GRPO's start and the run's final model: the paired change compares these


def saved_models(output_dir: Path) -> list[tuple[str, Path]]:
    """(name, path) of stage_0, stage_1, ... and the final model, those that exist, in order:
    full weights or LoRA adapters (``is_saved_model``)."""
    stages = sorted((p for p in output_dir.glob("stage_*") if p.name[6:].isdigit() and is_saved_model(p)),
                    key=lambda p: int(p.name[6:]))
    out = [(p.name, p) for p in stages]
    if is_saved_model(output_dir):
        out.append(("final", output_dir))
    return out


def successes_by_difficulty(rows: list[dict]) -> str:
    """Successes over episodes per difficulty, e.g. ``d1 28/60, d2 39/60``: where a stage
    gains or loses whole tasks."""
    out = []
    for d in sorted({r["difficulty"] for r in rows}):
        here = [r for r in rows if r["difficulty"] == d]
        out.append(f"d{d} {sum(r['outcome'] == 'success' for r in here)}/{len(here)}")
    return ", ".join(out)


def saved_replay(doc: Any) -> tuple[int, list[dict], list[dict]]:
    """(seed, start's episodes, final model's episodes) of a ``--json`` file's document;
    ValueError for anything else."""
    def row_ok(r: Any) -> bool:
        return (isinstance(r, dict) and all(isinstance(r.get(k), int) and not isinstance(r.get(k), bool)
                                            for k in ("seed", "difficulty"))
                and isinstance(r.get("outcome"), str) and isinstance(r.get("reward"), (int, float))
                and not isinstance(r.get("reward"), bool) and math.isfinite(r["reward"]))

    if not (isinstance(doc, dict) and isinstance(doc.get("seed"), int) and not isinstance(doc["seed"], bool)
            and isinstance(doc.get("models"), dict)):
        raise ValueError("not an eval_stages --json file (needs seed and models)")
    rows = [doc["models"].get(name) for name in CHANGE]
    if not all(isinstance(r, list) and r and all(row_ok(x) for x in r) for r in rows):
        raise ValueError(f"needs the episodes of {' and '.join(CHANGE)}, each with seed, difficulty, outcome "
                         "and a finite reward")
    return doc["seed"], rows[0], rows[1]


def report_saved(paths: list[str]) -> int:
    """``--from-json``: each run's paired change and the pooled one; 2 (one line on
    stderr, nothing printed) on a bad file, a repeated seed or mixed HORIZON."""
    runs, horizons = [], []
    try:
        for path in paths:
            try:
                doc = json.loads(Path(path).read_text(encoding="utf-8"))
                seed, before, after = saved_replay(doc)
                pair = (rows_as_played(before), rows_as_played(after))
                runs.append((seed, pair, paired(*pair)))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
                raise ValueError(f"--from-json {path}: {exc}") from None
            horizons.append(str(doc.get("horizon")))
        if len({run[0] for run in runs}) != len(runs):
            raise ValueError("--from-json: a seed appears twice (pool different runs)")
        if len(set(horizons)) > 1:
            raise ValueError(f"--from-json: the runs' HORIZON differ ({', '.join(sorted(set(horizons)))}); "
                             "pool runs of one setting")
    except ValueError as exc:
        print(f"eval_stages: {exc}", file=sys.stderr)
        return 2
    for seed, _, change in runs:
        print(f"seed {seed} ({change['success']['starts']} starts): final - stage_0: {paired_line(change)}")
    pooled = paired_runs([pair for _, pair, _ in runs])
    print(f"{len(runs)} runs, final - stage_0, mean over runs: {paired_line(pooled)} (interval: runs, then starts)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output-dir", default="lifestack_model", help="the run's OUTPUT_DIR")
    parser.add_argument("--seeds", type=int, default=6, help="evaluation seeds (default 6)")
    parser.add_argument("--models", default="", help="replay only these, e.g. stage_0,final (default: all)")
    parser.add_argument("--json", default=None, help="save every replayed model's episodes here")
    parser.add_argument("--from-json", nargs="+", default=None, metavar="FILE",
                        help="pool these saved replays (one run each) instead of playing")
    parser.add_argument("overrides", nargs="*", help="the trainer's --KEY=value overrides of the run")
    args = parser.parse_args(argv)
    if args.from_json:
        return report_saved(args.from_json)
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
    if args.models:
        wanted = [m for m in args.models.split(",") if m]
        missing = [m for m in wanted if m not in dict(models)]
        if missing:
            print(f"eval_stages: --models: no saved {', '.join(missing)} in {out_dir} "
                  f"(saved: {', '.join(name for name, _ in models)})", file=sys.stderr)
            return 2
        models = [(name, path) for name, path in models if name in wanted]
    cfg = T.build_config([f"--OUTPUT_DIR={out_dir}", *args.overrides])  # resolves the profile as the trainer does
    T.RUN.configure(cfg)
    seeds = [run_seeds.final_evaluation(cfg["SEED"], k) for k in range(args.seeds)]
    print(f"[eval stages] {len(models)} models x {len(seeds)} seeds x {cfg['N_EVAL_EPISODES']} greedy episodes")
    played: dict[str, list[dict]] = {}
    for name, path in models:
        model, tok = load_model(cfg, path, banner=False, collective=False)
        rows = [run_episodes(model, tok, cfg, cfg["N_EVAL_EPISODES"], s, T.RUN) for s in seeds]
        played[name] = [r for per_seed in rows for r in per_seed]
        means = [statistics.mean(r["reward"] for r in per_seed) for per_seed in rows]
        wins = [success_rate(per_seed) for per_seed in rows]
        print(f"{name}: mean {statistics.mean(means):+.3f}, success {statistics.mean(wins):.0%} over seeds; per seed "
              + ", ".join(f"{m:+.3f} ({w:.0%})" for m, w in zip(means, wins)), flush=True)
        print(f"  {name} successes per difficulty: " + successes_by_difficulty(played[name]), flush=True)
        del model
    if all(name in played for name in CHANGE):
        change = paired_rows(played["stage_0"], played["final"])
        print(f"final - stage_0, paired over {change['success']['starts']} starts: {paired_line(change)}")
    if args.json:
        Path(args.json).write_text(json.dumps({"seed": cfg["SEED"], "horizon": cfg["HORIZON"], "eval_seeds": seeds,
                                               "models": played}), encoding="utf-8")
        print(f"[eval stages] episodes saved to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
