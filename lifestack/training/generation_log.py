"""``generations.jsonl``: a sample of what the policy wrote and how each reward scored it.

:class:`GenerationLog` is opened on a path and closed by its owner (the run context); it
appends one JSON line at a time and flushes it, so a killed run leaves valid JSONL. The
file is opened once (an open per line cost more than the rest of a logged evaluation)
and reopened when it was deleted or replaced under it (a fresh run moves it aside into
``previous_run_*``; a user may delete it). A write that fails (a full disk) is reported once on stderr and never changes a
reward.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import IO, Any

FILE_NAME = "generations.jsonl"


class GenerationLog:
    """Appends JSON lines to ``LOG_DIR/generations.jsonl``; see the module docstring."""

    def __init__(self, log_dir: str | Path = "training_logs") -> None:
        self.path = str(Path(log_dir) / FILE_NAME)
        self._fh: IO[str] | None = None
        self._inode: int | None = None
        self._warned = False

    def open(self, log_dir: str | Path) -> None:
        """Log to ``log_dir`` from now on (the file itself opens at the first line)."""
        path = str(Path(log_dir) / FILE_NAME)
        if path != self.path:
            self.close()
            self.path = path

    def _handle(self) -> IO[str]:
        fh = self._fh
        if fh is not None and not fh.closed:
            try:  # still the same file? One syscall.
                if os.stat(self.path).st_ino == self._inode:
                    return fh
            except OSError:
                pass
        self.close()
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a", encoding="utf-8")
        self._fh, self._inode = fh, os.fstat(fh.fileno()).st_ino
        return fh

    def write(self, line: dict[str, Any]) -> None:
        try:
            fh = self._handle()
            fh.write(json.dumps(line, default=str) + "\n")
            fh.flush()  # a line is whole on disk once written
        except OSError as exc:
            if not self._warned:
                print(f"[log] could not write {FILE_NAME}: {exc}", file=sys.stderr)
                self._warned = True

    def close(self) -> None:
        fh, self._fh, self._inode = self._fh, None, None
        if fh is not None:
            try:
                fh.close()
            except OSError:
                pass

    @property
    def is_open(self) -> bool:
        return self._fh is not None and not self._fh.closed
