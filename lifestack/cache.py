"""A bounded, insertion-ordered cache: ``cache_put`` adds to a plain dict and evicts the
oldest entries past a limit (first in, first out).

Standard library only: the evaluation's per-prompt and per-completion caches and the
value's continuation cache share it.
"""

from __future__ import annotations

import itertools
from typing import Any


def cache_put(cache: dict, key: Any, value: Any, limit: int) -> None:
    """First in, first out: past ``limit`` the oldest quarter goes in one sweep (cheaper
    than one eviction per insert on this per-completion path)."""
    cache[key] = value
    if len(cache) > limit:
        for old in list(itertools.islice(cache, len(cache) - limit * 3 // 4)):
            del cache[old]
