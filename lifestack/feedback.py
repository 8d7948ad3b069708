"""Outcome feedback: what actually happened when someone took an action in a situation.

An :class:`OutcomeFeedback` record says "in situation S (a conflict id such as
``"friday_6pm"`` or a task domain such as ``"flight_crisis"``) I took action A aimed at
domain D, and overall it worked this well (0-10)". Records live in an embedded SQLite
database, the :class:`FeedbackStore`, and :meth:`FeedbackStore.score` turns them into an
agreement signal in [-1, 1] for the ``reward_human_feedback_fn`` reward.

Where the database lives (:func:`default_db_path`):

1. ``$LIFESTACK_FEEDBACK_DB`` when set (``~`` is expanded);
2. otherwise ``$XDG_DATA_HOME/lifestack/feedback.sqlite3`` when ``$XDG_DATA_HOME`` is set to
   an absolute path;
3. otherwise ``~/.local/share/lifestack/feedback.sqlite3``.

``FeedbackStore(":memory:")`` gives a private in-memory database (handy in tests).

The database is created, migrated (``PRAGMA user_version``; see :data:`MIGRATIONS`) and,
on first creation only, seeded from ``lifestack/data/feedback_seed.jsonl``. The seed records
are *illustrative*, written by hand to make the reward usable out of the box: every one
has an ``episode_id`` starting with ``"seed-"`` and ``notes`` starting with
``"[illustrative]"`` (:attr:`OutcomeFeedback.is_illustrative`). Pass ``seed=False`` when
creating a database to start it empty; an existing database is never re-seeded.

Record real outcomes from the command line::

    python -m lifestack.feedback add --situation friday_6pm --action-type negotiate \\
        --target-domain career --effectiveness 8 --improved career --worsened time
    python -m lifestack.feedback list --limit 10 --situation friday_6pm
    python -m lifestack.feedback import outcomes.jsonl
    python -m lifestack.feedback --db /tmp/fb.sqlite3 list

``score`` is built for a hot reward loop: the first call loads the whole table once into
an in-memory index; afterwards each call is a dict lookup. ``add`` and ``import_jsonl``
on the same store invalidate the index; changes written by *other* processes are picked
up after :meth:`FeedbackStore.invalidate` (or by opening a new store).

Standard library only, so it imports without torch.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import sys
import threading
import uuid
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from lifestack.actions import ACTION_TYPES
from lifestack.metrics import DOMAIN_NAMES

__all__ = [
    "ENV_DB_PATH",
    "FEEDBACK_ACTION_TYPES",
    "FeedbackStore",
    "FeedbackStoreError",
    "MIGRATIONS",
    "OutcomeFeedback",
    "SCHEMA_VERSION",
    "SEED_PATH",
    "default_db_path",
    "main",
    "migrate",
]

ENV_DB_PATH = "LIFESTACK_FEEDBACK_DB"
SEED_PATH: Path = Path(__file__).resolve().parent / "data" / "feedback_seed.jsonl"

FEEDBACK_ACTION_TYPES: tuple[str, ...] = ACTION_TYPES  # the same vocabulary as the actions
MIN_EFFECTIVENESS = 0.0
MAX_EFFECTIVENESS = 10.0
NEUTRAL_EFFECTIVENESS = 5.0
#: Weight of a record whose target_domain matches the query / does not match it.
MATCHING_DOMAIN_WEIGHT = 1.0
OTHER_DOMAIN_WEIGHT = 0.5
#: Shrinkage prior: the mean is multiplied by n / (n + SHRINKAGE_PRIOR_WEIGHT).
SHRINKAGE_PRIOR_WEIGHT = 2.0

ILLUSTRATIVE_NOTE_PREFIX = "[illustrative]"
SEED_EPISODE_PREFIX = "seed-"

_REQUIRED_STRINGS = ("episode_id", "situation", "action_type", "target_domain")
#: A record that names a difficulty applies in full there, at this weight one level away,
#: and not at all further away.
NEIGHBOUR_DIFFICULTY_WEIGHT = 0.5


class FeedbackStoreError(RuntimeError):
    """The feedback database cannot be opened, read or written."""


# --------------------------------------------------------------------------- records


def _utc_now_iso() -> str:
    return _format_utc(datetime.now(timezone.utc).replace(microsecond=0))


def _format_utc(dt: datetime) -> str:
    return dt.isoformat().replace("+00:00", "Z")


def _parse_timestamp(value: str) -> datetime:
    """Parse an ISO-8601 timestamp (``Z`` allowed); naive means UTC. Returns aware UTC."""
    text = value.strip()
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=timezone.utc)
        return dt.astimezone(timezone.utc)
    except (ValueError, OverflowError):
        raise ValueError(
            f"submitted_at: not an ISO-8601 timestamp: {value!r} (e.g. 2025-01-31T18:00:00Z)"
        ) from None


def _check_domains(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ValueError(f"{name}: expected a list of domain names, got {type(value).__name__}")
    out: list[str] = []
    for item in value:
        if not isinstance(item, str) or item not in DOMAIN_NAMES:
            raise ValueError(
                f"{name}: unknown domain {item!r} (expected one of {', '.join(DOMAIN_NAMES)})"
            )
        if item not in out:
            out.append(item)
    return tuple(out)


@dataclass(frozen=True)
class OutcomeFeedback:
    """One recorded outcome. Validated on construction (``ValueError`` naming the field).

    ``situation`` is a conflict id (``"friday_6pm"``) or a task domain
    (``"flight_crisis"``). ``overall_effectiveness`` is 0 (made things worse / useless)
    to 10 (worked perfectly); 5 is neutral. ``submitted_at`` is normalised to ISO-8601 UTC
    (``...Z``); empty means "not yet stamped" and :meth:`FeedbackStore.add` fills in now.
    ``pressured_domain`` (the domain in the worst shape when the action was taken) and
    ``difficulty`` (1-5) say when the outcome applies; empty / 0 means "not recorded". A
    record whose situation is a task family (``flight_crisis``) is only used where its
    pressured domain matches: a family alone says too little about the situation.
    """

    episode_id: str
    situation: str
    action_type: str
    target_domain: str
    overall_effectiveness: float
    domains_improved: tuple[str, ...] = ()
    domains_worsened: tuple[str, ...] = ()
    notes: str = ""
    submitted_at: str = ""
    pressured_domain: str = ""
    difficulty: int = 0

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        for name in _REQUIRED_STRINGS:
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{name}: must be a non-empty string, got {value!r}")
            set_(self, name, value.strip())
        if self.action_type not in FEEDBACK_ACTION_TYPES:
            raise ValueError(
                f"action_type: unknown action type {self.action_type!r} "
                f"(expected one of {', '.join(FEEDBACK_ACTION_TYPES)})"
            )
        if self.target_domain not in DOMAIN_NAMES:
            raise ValueError(
                f"target_domain: unknown domain {self.target_domain!r} "
                f"(expected one of {', '.join(DOMAIN_NAMES)})"
            )
        eff = self.overall_effectiveness
        if isinstance(eff, bool) or not isinstance(eff, (int, float)):
            raise ValueError(f"overall_effectiveness: must be a number, got {eff!r}")
        eff = float(eff)
        if not math.isfinite(eff) or not MIN_EFFECTIVENESS <= eff <= MAX_EFFECTIVENESS:
            raise ValueError(
                f"overall_effectiveness: must be a finite number in "
                f"[{MIN_EFFECTIVENESS:g}, {MAX_EFFECTIVENESS:g}], got {eff!r}"
            )
        set_(self, "overall_effectiveness", eff)
        if not isinstance(self.pressured_domain, str):
            raise ValueError(f"pressured_domain: must be a string, got {self.pressured_domain!r}")
        set_(self, "pressured_domain", self.pressured_domain.strip())
        if self.pressured_domain and self.pressured_domain not in DOMAIN_NAMES:
            raise ValueError(
                f"pressured_domain: unknown domain {self.pressured_domain!r} "
                f"(expected one of {', '.join(DOMAIN_NAMES)}, or empty)"
            )
        d = self.difficulty
        if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d <= 5:
            raise ValueError(f"difficulty: must be an integer 1-5 (0: not recorded), got {d!r}")
        set_(self, "domains_improved", _check_domains("domains_improved", self.domains_improved))
        set_(self, "domains_worsened", _check_domains("domains_worsened", self.domains_worsened))
        if not isinstance(self.notes, str):
            raise ValueError(f"notes: must be a string, got {type(self.notes).__name__}")
        if not isinstance(self.submitted_at, str):
            raise ValueError(f"submitted_at: must be a string, got {type(self.submitted_at).__name__}")
        if self.submitted_at.strip():
            set_(self, "submitted_at", _format_utc(_parse_timestamp(self.submitted_at)))
        else:
            set_(self, "submitted_at", "")

    @property
    def is_illustrative(self) -> bool:
        """True for the hand-written seed records (not real outcomes)."""
        return self.notes.startswith(ILLUSTRATIVE_NOTE_PREFIX)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (lists for the domain tuples); inverse of :meth:`from_dict`."""
        values = ((name, getattr(self, name)) for name in _FIELDS)
        return {name: list(v) if isinstance(v, tuple) else v for name, v in values}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "OutcomeFeedback":
        """Build and validate a record; ``ValueError`` naming the offending field."""
        if not isinstance(d, Mapping):
            raise ValueError(f"expected a JSON object, got {type(d).__name__}")
        unknown = sorted(str(k) for k in d if k not in _FIELDS)
        if unknown:
            raise ValueError(f"unknown field(s): {', '.join(unknown)} (expected {', '.join(_FIELDS)})")
        for name in (*_REQUIRED_STRINGS, "overall_effectiveness"):
            if name not in d:
                raise ValueError(f"{name}: missing required field")
        kwargs = dict(d)
        for name in ("domains_improved", "domains_worsened"):
            if name in kwargs and kwargs[name] is None:
                kwargs[name] = ()
        if kwargs.get("notes") is None:
            kwargs["notes"] = ""
        if kwargs.get("submitted_at") is None:
            kwargs["submitted_at"] = ""
        if kwargs.get("pressured_domain") is None:
            kwargs["pressured_domain"] = ""
        if kwargs.get("difficulty") is None:
            kwargs["difficulty"] = 0
        return cls(**kwargs)

    def with_timestamp(self) -> "OutcomeFeedback":
        """This record, stamped with the current UTC time if it has no ``submitted_at``."""
        if self.submitted_at:
            return self
        return OutcomeFeedback(**{**self.to_dict(), "submitted_at": _utc_now_iso()})


#: The record's fields, in order: the dataclass is their one list (to_dict, from_dict,
#: the table's columns and the rows read back all follow it).
_FIELDS = tuple(f.name for f in fields(OutcomeFeedback))


# --------------------------------------------------------------------------- paths


def default_db_path() -> Path:
    """Where :class:`FeedbackStore` keeps its database when no path is given.

    ``$LIFESTACK_FEEDBACK_DB`` if set and non-empty; else
    ``$XDG_DATA_HOME/lifestack/feedback.sqlite3`` if ``$XDG_DATA_HOME`` is an absolute path;
    else ``~/.local/share/lifestack/feedback.sqlite3``.
    """
    override = os.environ.get(ENV_DB_PATH, "").strip()
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME", "").strip()
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "lifestack" / "feedback.sqlite3"


# --------------------------------------------------------------------------- schema


def _migrate_to_v1(conn: sqlite3.Connection) -> None:
    conn.execute(
        """
        CREATE TABLE feedback (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            episode_id TEXT NOT NULL UNIQUE,
            situation TEXT NOT NULL,
            action_type TEXT NOT NULL,
            target_domain TEXT NOT NULL,
            overall_effectiveness REAL NOT NULL
                CHECK (overall_effectiveness >= 0 AND overall_effectiveness <= 10),
            domains_improved TEXT NOT NULL DEFAULT '[]',
            domains_worsened TEXT NOT NULL DEFAULT '[]',
            notes TEXT NOT NULL DEFAULT '',
            submitted_at TEXT NOT NULL,
            submitted_epoch REAL NOT NULL
        )
        """
    )
    conn.execute(
        "CREATE INDEX feedback_lookup ON feedback (situation, action_type, target_domain)"
    )
    conn.execute("CREATE INDEX feedback_recent ON feedback (submitted_epoch DESC, id DESC)")


def _migrate_to_v2(conn: sqlite3.Connection) -> None:
    # when an outcome applies: the domain under pressure and the difficulty (2026-12-04)
    conn.execute("ALTER TABLE feedback ADD COLUMN pressured_domain TEXT NOT NULL DEFAULT ''")
    conn.execute("ALTER TABLE feedback ADD COLUMN difficulty INTEGER NOT NULL DEFAULT 0")


#: ``MIGRATIONS[v]`` upgrades a database at version ``v - 1`` to version ``v``. To change
#: the schema, append ``N: _migrate_to_vN``; each step runs inside the same transaction as
#: the ``user_version`` bump.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _migrate_to_v1, 2: _migrate_to_v2}
SCHEMA_VERSION = max(MIGRATIONS)


def _user_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, target: int = SCHEMA_VERSION) -> tuple[int, int]:
    """Bring ``conn``'s schema up to ``target``. Returns ``(old_version, new_version)``.

    Must be called inside a transaction the caller commits (``FeedbackStore`` does). A
    database newer than this code raises :class:`FeedbackStoreError`.
    """
    current = _user_version(conn)
    if current > target:
        raise FeedbackStoreError(
            f"schema version {current} is newer than this lifestack supports ({target})"
        )
    for version in range(current + 1, target + 1):
        MIGRATIONS[version](conn)
    if current != target:
        conn.execute(f"PRAGMA user_version = {int(target)}")
    return current, target


# --------------------------------------------------------------------------- store

# A row stores every field (the domain lists as JSON) and, after submitted_at, the same
# time as a number (submitted_epoch: what the ordering and the recency weight read).
_COLUMNS = tuple(c for name in _FIELDS for c in ((name, "submitted_epoch") if name == "submitted_at" else (name,)))
_INSERT_SQL = f"INSERT INTO feedback ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
_SELECT_COLS = ", ".join(("id", *_FIELDS))

# (situation, action_type) -> [(pressured_domain, difficulty, target_domain, (eff - 5) / 5)]
_ScoreEntry = list[tuple[str, int, str, float]]


def _row_params(fb: OutcomeFeedback) -> tuple[Any, ...]:
    """The values of _COLUMNS for one record (stamped now when it has no time)."""
    d = fb.with_timestamp().to_dict()
    row = {name: json.dumps(v) if isinstance(v, list) else v for name, v in d.items()}
    row["submitted_epoch"] = _parse_timestamp(d["submitted_at"]).timestamp()
    return tuple(row[c] for c in _COLUMNS)


def _read_jsonl(path: Path) -> list[tuple[int, OutcomeFeedback]]:
    """Parse and validate every line; ``ValueError`` naming file and line on the first bad one."""
    try:
        raw = path.read_bytes()
    except IsADirectoryError:
        raise ValueError(f"{path}: is a directory, expected a .jsonl file") from None
    records: list[tuple[int, OutcomeFeedback]] = []
    for lineno, line in enumerate(raw.splitlines(), start=1):
        try:
            text = line.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{path}:{lineno}: not valid UTF-8") from None
        if not text.strip():
            continue
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            raise ValueError(f"{path}:{lineno}: invalid JSON: {msg}") from None
        try:
            records.append((lineno, OutcomeFeedback.from_dict(data)))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{path}:{lineno}: {exc}") from None
    return records


class FeedbackStore:
    """An embedded SQLite store of :class:`OutcomeFeedback` records.

    ``FeedbackStore(path=None, *, seed=True)`` opens (creating parent directories and the
    file if needed) the database at ``path`` or :func:`default_db_path`, migrates it to
    :data:`SCHEMA_VERSION` and, when the file is new and ``seed`` is true, imports the
    illustrative records from :data:`SEED_PATH`. Any database-level failure (a corrupt
    file, a directory, no permission) raises :class:`FeedbackStoreError` naming the path.
    Safe to share between threads; use as a context manager or call :meth:`close`.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, seed: bool = True) -> None:
        self._memory = path is not None and os.fspath(path) == ":memory:"
        self.path: Path = (
            Path(":memory:") if self._memory else Path(path).expanduser() if path is not None
            else default_db_path()
        )
        self._lock = threading.RLock()
        self._index: dict[tuple[str, str], _ScoreEntry] | None = None
        self._conn: sqlite3.Connection | None = None
        self.seeded = False
        if not self._memory:
            if self.path.is_dir():
                raise self._error("is a directory, not a database file")
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise self._error(f"cannot create its directory ({exc.strerror or exc})") from None
        try:
            self._conn = sqlite3.connect(
                ":memory:" if self._memory else str(self.path),
                timeout=10.0,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise self._error(str(exc)) from None
        try:
            self._initialise(seed)
        except BaseException:
            self._conn.close()
            self._conn = None
            raise

    # -- internals ---------------------------------------------------------------------

    def _error(self, what: str) -> FeedbackStoreError:
        return FeedbackStoreError(
            f"feedback database {self.path}: {what}. Delete or move it (losing its records) or "
            f"set {ENV_DB_PATH} (or --db) to another path."
        )

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise FeedbackStoreError(f"feedback database {self.path}: store is closed")
        return self._conn

    def _initialise(self, seed: bool) -> None:
        conn = self._connection()
        seed_records: list[tuple[int, OutcomeFeedback]] = []
        try:
            # The first statement is what actually reads the file: a corrupt one fails here.
            version = _user_version(conn)
            if version == SCHEMA_VERSION:
                conn.execute("SELECT 1 FROM feedback LIMIT 1").fetchall()
                return
            if version > SCHEMA_VERSION:
                raise FeedbackStoreError(
                    f"feedback database {self.path}: schema version {version} is newer than "
                    f"this lifestack supports ({SCHEMA_VERSION}); upgrade lifestack or set "
                    f"{ENV_DB_PATH} (or --db) to another path."
                )
            if version == 0 and seed and SEED_PATH.is_file():
                seed_records = _read_jsonl(SEED_PATH)  # parsed before taking the write lock
            conn.execute("BEGIN IMMEDIATE")
            try:
                # Re-read under the write lock: another process may have migrated meanwhile.
                old, _ = migrate(conn)
                if old == 0 and seed_records:
                    conn.executemany(_INSERT_SQL, [_row_params(fb) for _, fb in seed_records])
                    self.seeded = True
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                self.seeded = False
                raise
        except FeedbackStoreError as exc:
            if str(self.path) in str(exc):
                raise
            raise self._error(str(exc)) from None
        except sqlite3.Error as exc:
            raise self._error(f"cannot open ({exc})") from None

    def _db(self, what: str, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        with self._lock:
            conn = self._connection()
            try:
                return fn(conn)
            except sqlite3.IntegrityError:
                raise
            except sqlite3.Error as exc:
                raise self._error(f"cannot {what} ({exc})") from None

    def _row_to_feedback(self, row: Sequence[Any]) -> OutcomeFeedback:
        rowid, *values = row
        try:
            data = dict(zip(_FIELDS, values))
            data["domains_improved"] = json.loads(data["domains_improved"])
            data["domains_worsened"] = json.loads(data["domains_worsened"])
            return OutcomeFeedback.from_dict(data)
        except (ValueError, TypeError) as exc:
            raise self._error(f"row {rowid} is invalid ({exc})") from None

    # -- writing -----------------------------------------------------------------------

    def add(self, fb: OutcomeFeedback) -> None:
        """Insert one record (``submitted_at`` stamped with now when empty).

        ``ValueError`` if a record with the same ``episode_id`` exists.
        """
        if not isinstance(fb, OutcomeFeedback):
            raise TypeError(f"expected OutcomeFeedback, got {type(fb).__name__}")
        params = _row_params(fb)

        def run(conn: sqlite3.Connection) -> None:
            conn.execute(_INSERT_SQL, params)

        try:
            self._db("write", run)
        except sqlite3.IntegrityError as exc:
            raise ValueError(f"episode_id {fb.episode_id!r} is already recorded ({exc})") from None
        finally:
            self._index = None

    def import_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Insert every record of a JSONL file (one object per line, blank lines skipped)
        in one transaction; returns how many. A bad line (invalid JSON, invalid record, an
        ``episode_id`` already present) raises ``ValueError`` naming the file and line
        number, and nothing is inserted."""
        path = Path(path)
        records = _read_jsonl(path)

        def run(conn: sqlite3.Connection) -> int:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for lineno, fb in records:
                    try:
                        conn.execute(_INSERT_SQL, _row_params(fb))
                    except sqlite3.IntegrityError:
                        raise ValueError(
                            f"{path}:{lineno}: episode_id {fb.episode_id!r} is already recorded"
                        ) from None
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
            return len(records)

        try:
            return self._db("write", run)
        finally:
            self._index = None

    # -- reading -----------------------------------------------------------------------

    def list(self, limit: int | None = 20, situation: str | None = None) -> list[OutcomeFeedback]:
        """Records newest first (by ``submitted_at``, then insertion order), at most
        ``limit`` (``None`` for all), optionally only those for one ``situation``."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ValueError(f"limit: must be a non-negative integer or None, got {limit!r}")
        sql = f"SELECT {_SELECT_COLS} FROM feedback"
        params: list[Any] = []
        if situation is not None:
            if not isinstance(situation, str):
                raise ValueError(f"situation: must be a string, got {type(situation).__name__}")
            sql += " WHERE situation = ?"
            params.append(situation.strip())
        sql += " ORDER BY submitted_epoch DESC, id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        rows = self._db("read", lambda conn: conn.execute(sql, params).fetchall())
        return [self._row_to_feedback(r) for r in rows]

    def count(self) -> int:
        """Number of records."""
        return int(self._db("read", lambda conn: conn.execute("SELECT COUNT(*) FROM feedback").fetchone()[0]))

    # -- scoring -----------------------------------------------------------------------

    def invalidate(self) -> None:
        """Drop the in-memory score index; the next :meth:`score` reloads the table."""
        self._index = None

    def _build_index(self) -> dict[tuple[str, str], _ScoreEntry]:
        with self._lock:
            if self._index is not None:
                return self._index
            rows = self._db(
                "read",
                lambda conn: conn.execute(
                    "SELECT id, situation, action_type, target_domain, overall_effectiveness, "
                    "pressured_domain, difficulty FROM feedback"
                ).fetchall(),
            )
            index: dict[tuple[str, str], _ScoreEntry] = {}
            for rowid, situation, action_type, target, eff, pressured, difficulty in rows:
                if (
                    not isinstance(eff, (int, float))
                    or not math.isfinite(eff)
                    or not MIN_EFFECTIVENESS <= eff <= MAX_EFFECTIVENESS
                ):
                    raise self._error(f"row {rowid} has an invalid overall_effectiveness {eff!r}")
                x = (float(eff) - NEUTRAL_EFFECTIVENESS) / (MAX_EFFECTIVENESS - NEUTRAL_EFFECTIVENESS)
                index.setdefault((situation, action_type), []).append(
                    (pressured or "", int(difficulty or 0), target, x))
            self._index = index
            return index

    def score(self, situation: str, action_type: str, target_domain: str, *,
              pressured_domain: str = "", difficulty: int = 0, family: str = "") -> float | None:
        """Agreement of an action with the recorded outcomes of its situation, in [-1, 1];
        ``None`` when no record applies.

        A record applies when its ``situation`` is ``situation`` (a conflict id), or is
        ``family`` (the task family) *and* it names the same ``pressured_domain``. A record
        that names another pressured domain than the query does not apply; one that names
        a difficulty applies in full there, at NEIGHBOUR_DIFFICULTY_WEIGHT one level away,
        not at all further. Over the records that apply and share ``action_type``: the
        weighted mean of ``(effectiveness - 5) / 5`` (weight x 1.0 when ``target_domain``
        matches, x 0.5 otherwise) times ``w / (w + 2)``, ``w`` the total weight, so a
        single record cannot give a full +-1. The table is loaded on the first call.
        """
        index = self._index
        if index is None:
            index = self._build_index()
        try:
            total_w, total = 0.0, 0.0
            for key, needs_pressure in ((situation, False), (family, True)):
                if not key or (needs_pressure and not pressured_domain):
                    continue
                for pressured, rec_difficulty, target, x in index.get((key, action_type), ()):
                    if pressured != pressured_domain and (needs_pressure or (pressured and pressured_domain)):
                        continue  # recorded under another pressure
                    w = 1.0
                    if rec_difficulty and difficulty:
                        gap = abs(rec_difficulty - difficulty)
                        w = 1.0 if gap == 0 else NEIGHBOUR_DIFFICULTY_WEIGHT if gap == 1 else 0.0
                    w *= MATCHING_DOMAIN_WEIGHT if target == target_domain else OTHER_DOMAIN_WEIGHT
                    total_w += w
                    total += w * x
        except TypeError:  # unhashable garbage from an untrusted completion
            return None
        if total_w <= 0.0:
            return None
        return _shrunk(total, total_w)

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Close the database connection (idempotent). The score index stays usable."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> "FeedbackStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else "open"
        return f"FeedbackStore({str(self.path)!r}, {state})"


def _rollback(conn: sqlite3.Connection) -> None:
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error:
        pass


def _shrunk(weighted_sum: float, weight: float) -> float:
    """``(weighted_sum / weight) * weight / (weight + prior)``, clamped against rounding."""
    value = weighted_sum / (weight + SHRINKAGE_PRIOR_WEIGHT)
    return -1.0 if value < -1.0 else 1.0 if value > 1.0 else value


# --------------------------------------------------------------------------- CLI


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(f"{self.prog}: {message}")


def _domain_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


# Record fields whose `add` option has a shorter name (--effectiveness, --improved, ...).
_CLI_NAMES = {"overall_effectiveness": "effectiveness", "domains_improved": "improved", "domains_worsened": "worsened"}


def _build_parser() -> argparse.ArgumentParser:
    db_help = f"database file (default: ${ENV_DB_PATH} or {default_db_path()})"
    common = _Parser(add_help=False)
    common.add_argument("--db", metavar="PATH", default=argparse.SUPPRESS, help=db_help)
    parser = _Parser(
        prog="python -m lifestack.feedback",
        description="Record and inspect real-world outcomes of LifeStack actions.",
        parents=[common],
    )
    sub = parser.add_subparsers(dest="command", metavar="{add,list,import}", parser_class=_Parser)
    sub.required = True

    add = sub.add_parser("add", parents=[common], help="record one outcome")
    add.add_argument("--situation", required=True, help="conflict id or task domain, e.g. friday_6pm")
    add.add_argument("--action-type", required=True, help=", ".join(FEEDBACK_ACTION_TYPES))
    add.add_argument("--target-domain", required=True, help=", ".join(DOMAIN_NAMES))
    add.add_argument("--effectiveness", required=True, type=float, help="0 (useless) to 10 (perfect)")
    add.add_argument("--improved", type=_domain_list, default=[], help="comma-separated domains")
    add.add_argument("--worsened", type=_domain_list, default=[], help="comma-separated domains")
    add.add_argument("--notes", default="")
    add.add_argument("--pressured-domain", default="", help="domain in the worst shape at the time (optional)")
    add.add_argument("--difficulty", type=int, default=0, help="1-5 (optional; 0: not recorded)")
    add.add_argument("--episode-id", default=None, help="default: a random uuid4 hex")
    add.add_argument("--submitted-at", default="", help="ISO-8601 time (default: now, UTC)")

    lst = sub.add_parser("list", parents=[common], help="show recent outcomes, newest first")
    lst.add_argument("--limit", type=int, default=20)
    lst.add_argument("--situation", default=None)

    imp = sub.add_parser("import", parents=[common], help="import a JSONL file of outcomes")
    imp.add_argument("file", metavar="FILE.jsonl")
    return parser


def _format_line(fb: OutcomeFeedback) -> str:
    changes = " ".join(
        [f"+{d}" for d in fb.domains_improved] + [f"-{d}" for d in fb.domains_worsened]
    )
    parts = [
        fb.submitted_at,
        fb.situation,
        f"{fb.action_type}->{fb.target_domain}",
        f"{fb.overall_effectiveness:g}/10",
    ]
    if changes:
        parts.append(changes)
    if fb.pressured_domain or fb.difficulty:
        parts.append(f"(pressure {fb.pressured_domain or '-'}, d{fb.difficulty or '-'})")
    parts.append(f"[{fb.episode_id}]")
    if fb.notes:
        parts.append(" ".join(fb.notes.split()))
    return "  ".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the exit status (0 ok, 2 on any error)."""
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    try:
        with FeedbackStore(getattr(args, "db", None)) as store:
            if args.command == "add":
                given = {name: getattr(args, _CLI_NAMES.get(name, name)) for name in _FIELDS}
                fb = OutcomeFeedback.from_dict({**given, "episode_id": args.episode_id or uuid.uuid4().hex})
                store.add(fb)
                print(f"recorded {fb.episode_id} in {store.path}")
            elif args.command == "list":
                records = store.list(limit=args.limit, situation=args.situation)
                for fb in records:
                    print(_format_line(fb))
                if not records:
                    print(f"no feedback records in {store.path}")
            else:
                n = store.import_jsonl(args.file)
                print(f"imported {n} record{'s' if n != 1 else ''} from {args.file} into {store.path}")
    except (ValueError, FeedbackStoreError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        name = exc.filename if exc.filename is not None else ""
        print(f"error: {name}{': ' if name else ''}{exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
