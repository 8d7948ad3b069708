#!/usr/bin/env python
"""A web page to watch a model or a reference policy play LifeStack, and to play it yourself.

    python scripts/demo.py                                   # the reference policies; http://127.0.0.1:7860
    python scripts/demo.py --model lifestack_model           # a trained run: the model, and its plots and card
    python scripts/demo.py --policy oracle --port 8080

Needs the ``demo`` extra (``pip install -e ".[demo]"``: Gradio). The page binds to
127.0.0.1 unless ``--host`` says otherwise, makes no share link and sends no analytics.
``--model`` takes what ``scripts/evaluate.py`` takes (a run's folder, a ``stage_N``
folder, a LoRA adapter folder or a hub id) and loads it the same way, on the GPU when
there is one; a bad one is one line on stderr and exit status 2. What each panel shows:
docs/after_training.md, "The demo page".
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "scripts"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from lifestack.training import demo as D  # noqa: E402


def scorer():
    """The training script's six reward functions and weights; scoring on the page is
    neither counted nor written to its generation log (``RUN.in_phase("rescore")``)."""
    import train_trl as T

    # an unreadable feedback database scores the sixth reward 0 on the page, not an error
    T.RUN.feedback.configure(T.FEEDBACK_DB or None, "zero")
    return D.Scorer(T.REWARD_FUNCS, T.REWARD_WEIGHTS, quiet=lambda: T.RUN.in_phase("rescore"))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    who = parser.add_mutually_exclusive_group()
    who.add_argument("--model", help="a model folder (a training run's OUTPUT_DIR, stage_N, LoRA adapter) or hub id")
    who.add_argument("--policy", choices=D.REFERENCE_PLAYERS, help="the player selected when the page opens")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=None, help="port (default: $GRADIO_SERVER_PORT, else 7860)")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="longest answer a model may write")
    parser.add_argument("--family", choices=D.FAMILIES, default=D.FAMILIES[0], help="the task family shown first")
    parser.add_argument("--difficulty", type=int, default=3, choices=range(1, 6), metavar="1-5",
                        help="the difficulty shown first")
    parser.add_argument("--seed", type=int, default=7, help="the seed shown first")
    args = parser.parse_args(argv)
    if args.port is None:
        env_port = os.environ.get("GRADIO_SERVER_PORT", "7860")
        try:
            args.port = int(env_port)
        except ValueError:
            parser.error(f"GRADIO_SERVER_PORT must be a port number, got {env_port!r}")
    if not 0 <= args.seed <= D.MAX_SEED:
        parser.error(f"--seed must lie in 0..{D.MAX_SEED}, got {args.seed}")
    if not 0 < args.port < 65536:
        parser.error(f"--port must lie in 1..65535, got {args.port}")
    if not 1 <= args.max_new_tokens <= 4096:
        parser.error(f"--max-new-tokens must lie in 1..4096, got {args.max_new_tokens}")
    return args


def build(args: argparse.Namespace):
    """The page for these arguments (model loaded, not launched)."""
    from lifestack.training.demo_app import build_app

    model = tokenizer = None
    if args.model:
        from evaluate import load

        model, tokenizer = load(args.model)
    return build_app(scorer(), model, tokenizer, model_name=args.model or "",
                     run_dir=args.model if D.is_run_folder(args.model) else None, default_player=args.policy,
                     max_new_tokens=args.max_new_tokens, family=args.family, difficulty=args.difficulty,
                     seed=args.seed)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from evaluate import UsageError
    from lifestack.training.demo_app import launch

    try:
        app = build(args)
    except UsageError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    launch(app, args.host, args.port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
