#!/usr/bin/env python
"""How good is a model at LifeStack, on which difficulty, against what?

    python scripts/evaluate.py --model lifestack_model                 # 10 episodes per difficulty 1-5
    python scripts/evaluate.py --model lifestack_model/stage_2 --difficulties 3-5 --episodes 20
    python scripts/evaluate.py --model lifestack_model --compare lifestack_model/stage_0   # paired
    python scripts/evaluate.py --model Qwen/Qwen2.5-1.5B-Instruct      # a hub id (downloads)
    python scripts/evaluate.py --model lifestack_model --json eval.json --plot eval.png --push user/repo
    python scripts/evaluate.py --from-json seed_42.json seed_7.json seed_1.json   # several runs, pooled

Plays seeded closed-loop episodes (``lifestack.training.episode_play``) with any causal LM
that has a chat template: a trained ``OUTPUT_DIR``, a ``stage_N`` folder, a LoRA adapter
folder (loaded on its base model) or a hub id. Greedy, batched, with a progress bar. The
reference policies (random, heuristic, and the oracle: the greedy maximiser of the
decision reward, the strongest the package has) play the very same episodes. Prints a
table per difficulty: success rate, episode task reward, step reward per decision,
valid-JSON rate and regret against the oracle, each with a 95 % bootstrap interval over
episodes; ``--compare`` adds a second model and the paired difference. Writes JSON and a
PNG when asked; ``--push REPO`` appends the table to that hub repo's model card.

``--from-json`` pools the saved JSON of several evaluations (one per training seed, say)
without playing anything: each file's ``--model`` rows become "model", its ``--compare``
rows "compare", the references keep their names; the paired difference counts each start
once, with the mean of its differences over the files, so its interval is over starts.
The files must agree on the horizon and on ``--from-crisis``.

A bad argument (an unknown path, a folder without a model, a model without a chat
template) is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from lifestack.training import episode_play as M  # noqa: E402
from lifestack.training.generation import generation_mode  # noqa: E402
from lifestack.training.models import choose_precision, is_adapter, is_saved_model, prepare_tokenizer, torch_dtype  # noqa: E402


class UsageError(Exception):
    """A bad argument: one line for the user, exit 2."""


def looks_like_hub_id(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(p and not p.startswith(".") for p in parts) and not name.startswith(("/", "."))


def load_models(names) -> dict | None:
    """``{name: (model, tokenizer)}`` for each name given (empty ones skipped), in order
    (the probe scripts' ``--model``/``--compare``); None, with the reason on stderr, when
    one cannot load."""
    try:
        return {name: load(name) for name in names if name}
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return None


def load(name: str, device: str | None = None):
    """(model, tokenizer) from a folder (full model or LoRA adapter) or a hub id; UsageError
    when it is not there, holds no model, or its tokenizer has no chat template."""
    path = Path(name)
    if path.exists():
        if not path.is_dir():
            raise UsageError(f"--model {name}: not a folder")
        if not is_saved_model(path):
            raise UsageError(f"--model {name}: no model in this folder (no config.json or adapter_config.json)")
    elif not looks_like_hub_id(name):
        raise UsageError(f"--model {name}: no such folder (and not a hub id like owner/name)")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    # the trainer's precision rule: bf16 only on compute capability 8.0+ (a T4 says it supports
    # bf16 but only emulates it), fp16 on older GPUs, fp32 on a CPU
    cuda = device.startswith("cuda")
    dtype = torch_dtype(choose_precision(tuple(torch.cuda.get_device_capability(device)) if cuda else None))
    adapter = is_adapter(path)
    try:  # the tokenizer first: a model without a chat template is refused before its weights load
        base = None
        if adapter:
            from peft import PeftConfig, PeftModel

            base = PeftConfig.from_pretrained(str(path)).base_model_name_or_path
        tok = AutoTokenizer.from_pretrained(str(path) if not adapter or (path / "tokenizer_config.json").exists() else base)
        if not getattr(tok, "chat_template", None):
            raise UsageError(f"--model {name}: its tokenizer has no chat template (the prompts are chat messages)")
        if adapter:
            model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base, dtype=dtype), str(path))
        else:
            model = AutoModelForCausalLM.from_pretrained(name, dtype=dtype)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--model {name}: cannot load it ({type(exc).__name__}: {str(exc).splitlines()[0]})") from None
    model.to(device)
    generation_mode(model)
    return model, prepare_tokenizer(tok)  # the trainer's: a pad token (generation pads left itself)


def play_all(players: dict, starts: list, horizon: int, quiet: bool = False) -> dict:
    """Every player on the same starts, with one progress bar per player (decisions)."""
    from tqdm.auto import tqdm

    played = {}
    for name, answer in players.items():
        with tqdm(desc=f"[evaluate] {name}", unit="decision", disable=quiet, leave=False) as bar:
            played[name] = M.play_episodes(answer, starts, horizon, progress=bar.update)
    return played


def plot(results: dict, path: str) -> None:
    """Success rate and episode reward per difficulty, one bar per player."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    players = list(results)
    diffs = [d for d in next(iter(results.values())) if d != "all"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / len(players)
    for ax, metric, label in ((axes[0], "success", "success rate"), (axes[1], "episode_reward", "episode task reward")):
        for k, name in enumerate(players):
            xs = [i + (k - (len(players) - 1) / 2) * width for i in range(len(diffs))]
            ys = [results[name][d][metric]["mean"] or 0.0 for d in diffs]
            err = [[y - results[name][d][metric]["ci95"][0] for y, d in zip(ys, diffs)],
                   [results[name][d][metric]["ci95"][1] - y for y, d in zip(ys, diffs)]]
            ax.bar(xs, ys, width, yerr=err, capsize=2, label=name)
        ax.set_xticks(range(len(diffs)), [f"d{d}" for d in diffs])
        ax.set_ylabel(label)
        ax.set_title(f"{label} per difficulty (95% CI)")
    axes[0].set_ylim(0, 1.05)
    axes[1].set_ylim(-1.05, 1.05)
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def pool_saved(docs: list[tuple[str, object]]) -> tuple[dict[str, list[M.Played]], dict | None, dict]:
    """Several evaluations' saved JSON (name, parsed document), pooled: the episodes per
    player ("model", "compare" when every file has one, and each reference every file
    has), the paired "compare" minus "model" (``M.paired``: each start once), and the
    settings the files share. A file that is not an evaluation's JSON, or that disagrees
    with the first on the horizon or on ``from_crisis``, is a ``UsageError``."""
    rows: dict[str, list[M.Played]] = {}
    settings: dict = {}
    all_compare = all(isinstance(doc, dict) and doc.get("compare") for _name, doc in docs)
    for name, doc in docs:
        try:
            if not isinstance(doc, dict) or not isinstance(doc.get("episodes"), dict) or doc.get("model") not in doc["episodes"]:
                raise ValueError("not the JSON of scripts/evaluate.py --json (no episodes of its --model)")
            shared = {"horizon": doc.get("horizon"), "from_crisis": doc.get("from_crisis")}
            if settings and shared != settings:
                raise ValueError(f"horizon {shared['horizon']}, from_crisis {shared['from_crisis']}, while the first "
                                 f"file has horizon {settings['horizon']}, from_crisis {settings['from_crisis']}")
            settings = shared
            played = {who: [M.Played.from_dict(r) for r in (eps if isinstance(eps, list) else [None])]
                      for who, eps in doc["episodes"].items()}
            roles = {"model": doc["model"], **({"compare": doc["compare"]} if all_compare else {})}
            if not played[roles["model"]]:
                raise ValueError("its --model played no episodes")
            if all_compare and len(played[roles["compare"]]) != len(played[roles["model"]]):
                raise ValueError("its --model and --compare rows are not the same episodes")
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"--from-json {name}: {exc}") from None
        for role, who in roles.items():
            rows.setdefault(role, []).extend(played[who])
        for who, eps in played.items():
            if who not in roles.values() and who in M.REFERENCES:
                rows.setdefault(who, []).extend(eps)
    references = [r for r in M.REFERENCES if all(r in doc["episodes"] for _n, doc in docs)]
    rows = {k: v for k, v in rows.items() if k in ("model", "compare") or k in references}
    try:
        # "model" and "compare" grew file by file by equal lengths: row i of each is one start
        paired = M.paired(rows["model"], rows["compare"]) if all_compare else None
    except ValueError as exc:
        raise UsageError(f"--from-json: {exc}") from None
    return rows, paired, settings


def report_saved(paths: list[str], json_out: str | None, plot_out: str | None) -> int:
    """``--from-json``: the pooled table, and the pooled paired difference when every file
    compared two models."""
    docs = []
    try:
        for path in paths:
            try:
                docs.append((path, json.loads(Path(path).read_text(encoding="utf-8"))))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise UsageError(f"--from-json {path}: {exc}") from None
        rows, paired, settings = pool_saved(docs)
    except UsageError as exc:
        print(f"evaluate: {exc}", file=sys.stderr)
        return 2
    print(f"[evaluate] {len(paths)} evaluations pooled (horizon {settings['horizon']}, "
          f"{'from the crisis' if settings['from_crisis'] else 'scenario states'}); intervals over all their episodes")
    for path, doc in docs:
        print(f"  {path}: model = {doc['model']}" + (f", compare = {doc['compare']}" if paired else ""))
    results = {name: M.by_difficulty(eps) for name, eps in rows.items()}
    print(M.format_table(results))
    if paired:
        print(f"\ncompare minus model, paired over {paired['success']['starts']} starts (each start's mean over the "
              f"files): {M.paired_line(paired)}")
    if json_out:
        Path(json_out).write_text(json.dumps({"from_json": paths, **settings, "results": results, "paired": paired},
                                             indent=2))
        print(f"[evaluate] results: {json_out}")
    if plot_out:
        plot(results, plot_out)
        print(f"[evaluate] plot: {plot_out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a model folder, stage folder, LoRA adapter folder or hub id")
    parser.add_argument("--compare", default=None, metavar="MODEL2", help="a second model, on the same episodes")
    parser.add_argument("--episodes", type=int, default=10, help="episodes per difficulty (default 10)")
    parser.add_argument("--difficulties", default="1-5", help="e.g. 1-5, 3 or 1,3,5 (default 1-5)")
    parser.add_argument("--horizon", type=int, default=1,
                        help="1: every decision a fresh prompt (the single-decision trainer's setting); "
                             "H > 1: the conversation of episode mode, up to H turns")
    parser.add_argument("--seed", type=int, default=40_000_000, help="seed of the episode starts")
    parser.add_argument("--from-crisis", action="store_true",
                        help="start every episode at the crisis itself, the whole task, as the trainer's final "
                             "evaluation does (default: the scenario's own state, 0-2 steps rolled forward, as the "
                             "training prompts)")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--no-references", action="store_true", help="skip the reference policies")
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--plot", default=None, help="write a PNG here")
    parser.add_argument("--push", default=None, metavar="REPO", help="append the table to this hub repo's model card")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument("--from-json", nargs="+", default=None, metavar="FILE",
                        help="pool these saved evaluations (--json files) instead of playing; takes --json and --plot")
    args = parser.parse_args(argv)
    if args.from_json:
        if args.model or args.compare or args.push:
            parser.error("--from-json plays nothing: it takes no --model, --compare or --push")
        return report_saved(args.from_json, args.json, args.plot)
    if not args.model:
        parser.error("--model is required (or --from-json to pool saved evaluations)")
    try:
        difficulties = M.parse_difficulties(args.difficulties)
        if not 1 <= args.episodes <= 10_000:
            raise UsageError(f"--episodes must be in 1..10000, got {args.episodes}")
        if not 1 <= args.horizon <= 8:
            raise UsageError(f"--horizon must be in 1..8, got {args.horizon}")
        models = {"model": load(args.model)}
        if args.compare:
            models["compare"] = load(args.compare)
    except (UsageError, ValueError) as exc:
        print(f"evaluate: {exc}", file=sys.stderr)
        return 2
    starts = M.episode_starts(args.episodes, difficulties, args.seed, from_crisis=args.from_crisis)
    names = {"model": args.model, "compare": args.compare}
    players = {names[k]: M.model_player(m, t, args.max_new_tokens, args.batch_size) for k, (m, t) in models.items()}
    if not args.no_references:
        players.update({name: M.policy_player(p, args.seed) for name, p in M.REFERENCES.items()})
    print(f"[evaluate] {len(starts)} episodes (difficulties {difficulties}, {args.episodes} each, seed {args.seed}, "
          f"horizon {args.horizon}, {'from the crisis' if args.from_crisis else 'scenario states'}), players: {', '.join(players)}", flush=True)
    played = play_all(players, starts, args.horizon, args.quiet)
    results = {name: M.by_difficulty(rows) for name, rows in played.items()}
    print(M.format_table(results))
    out = {"model": args.model, "compare": args.compare, "episodes_per_difficulty": args.episodes,
           "difficulties": difficulties, "horizon": args.horizon, "seed": args.seed,
           "from_crisis": args.from_crisis, "results": results,
           "episodes": {name: [p.to_dict() for p in rows] for name, rows in played.items()}}
    if args.compare:
        out["paired"] = M.paired(played[args.model], played[args.compare])
        print(f"\n{args.compare} minus {args.model}, paired over the {len(starts)} episodes: {M.paired_line(out['paired'])}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
        print(f"[evaluate] results: {args.json}")
    if args.plot:
        plot(results, args.plot)
        print(f"[evaluate] plot: {args.plot}")
    if args.push:
        from lifestack.training.publish import append_to_card

        append_to_card(args.push, "## Evaluation (scripts/evaluate.py)\n\n" + M.format_table(results) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
