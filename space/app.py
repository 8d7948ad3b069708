"""Hugging Face Space entry point: the LifeStack demo page (``scripts/demo.py``).

The Space holds this folder's files at its root, next to the repository's ``lifestack/``
and ``scripts/`` folders (docs/after_training.md, "Publishing the demo as a Space"); run
from a checkout, it finds them one folder up. The Space variable ``LIFESTACK_MODEL`` names
the model to load (a hub id); without it the page shows the reference policies only.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Mapping

HERE = Path(__file__).resolve().parent


def arguments(environ: Mapping[str, str]) -> list[str]:
    """``scripts/demo.py``'s command line in a Space: every interface (the Space's proxy
    connects from outside the container), on the port the Space expects."""
    model = environ.get("LIFESTACK_MODEL", "").strip()
    who = ["--model", model] if model else ["--policy", "heuristic"]
    return who + ["--host", "0.0.0.0", "--port", environ.get("GRADIO_SERVER_PORT", "7860")]


def repository_root() -> Path:
    for root in (HERE, HERE.parent):
        if (root / "lifestack").is_dir() and (root / "scripts" / "demo.py").is_file():
            return root
    raise SystemExit("app.py: lifestack/ and scripts/ are not next to this file (see the Space's README)")


if __name__ == "__main__":
    root = repository_root()
    sys.path[:0] = [str(root), str(root / "scripts")]
    from demo import main

    raise SystemExit(main(arguments(os.environ)))
