"""The docs' tables agree with the code they describe: docs/train_trl.md lists every
constant of scripts/train_trl.py, and says how many there are."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import train_trl as T  # noqa: E402  (the constants the table must list)


def test_every_constant_is_documented_and_the_count_is_right():
    import re

    doc = (ROOT / "docs" / "train_trl.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([A-Z_0-9]+)` \|", doc, re.M))
    assert rows == set(T.CONFIG_KEYS)
    assert f"All {len(T.CONFIG_KEYS)} constants can be overridden." in doc
