"""Tests for lifestack.feedback: records, the SQLite store, score(), errors and the CLI.

Every test uses an explicit database path under tmp_path (or ":memory:"); the env var is
pointed at tmp_path too so nothing can touch the user's real feedback database.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lifestack import feedback as fbmod
from lifestack.feedback import (
    FEEDBACK_ACTION_TYPES,
    SCHEMA_VERSION,
    SEED_PATH,
    FeedbackStore,
    FeedbackStoreError,
    OutcomeFeedback,
    default_db_path,
    main,
)
from lifestack.metrics import DOMAIN_NAMES


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LIFESTACK_FEEDBACK_DB", str(tmp_path / "env-default.sqlite3"))


def make(episode_id="e1", situation="friday_6pm", action_type="negotiate",
         target_domain="career", eff=8.0, **kw) -> OutcomeFeedback:
    return OutcomeFeedback(episode_id=episode_id, situation=situation, action_type=action_type,
                           target_domain=target_domain, overall_effectiveness=eff, **kw)


@pytest.fixture
def empty(tmp_path):
    with FeedbackStore(tmp_path / "fb.sqlite3", seed=False) as store:
        yield store


def write_jsonl(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


# ----------------------------------------------------------------------------- records


def test_round_trip_and_normalisation():
    fb = make(domains_improved=["career", "time", "career"], domains_worsened=("finances",),
              notes="hi", submitted_at="2025-03-01T10:00:00+02:00")
    assert fb.domains_improved == ("career", "time")
    assert fb.domains_worsened == ("finances",)
    assert fb.submitted_at == "2025-03-01T08:00:00Z"
    assert isinstance(fb.overall_effectiveness, float)
    d = fb.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert OutcomeFeedback.from_dict(d) == fb


@pytest.mark.parametrize(
    "change, field",
    [
        ({"overall_effectiveness": float("nan")}, "overall_effectiveness"),
        ({"overall_effectiveness": float("inf")}, "overall_effectiveness"),
        ({"overall_effectiveness": 10.5}, "overall_effectiveness"),
        ({"overall_effectiveness": -0.1}, "overall_effectiveness"),
        ({"overall_effectiveness": "7"}, "overall_effectiveness"),
        ({"overall_effectiveness": True}, "overall_effectiveness"),
        ({"action_type": "bribe"}, "action_type"),
        ({"action_type": "inspect"}, "action_type"),
        ({"target_domain": "hobbies"}, "target_domain"),
        ({"situation": ""}, "situation"),
        ({"episode_id": "   "}, "episode_id"),
        ({"situation": None}, "situation"),
        ({"domains_improved": ["career", "vibes"]}, "domains_improved"),
        ({"domains_worsened": "career"}, "domains_worsened"),
        ({"notes": 3}, "notes"),
        ({"submitted_at": "yesterday"}, "submitted_at"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_from_dict_validation(change, field):
    d = make().to_dict()
    d.update(change)
    with pytest.raises(ValueError, match=field):
        OutcomeFeedback.from_dict(d)


def test_from_dict_missing_field_and_non_mapping():
    d = make().to_dict()
    del d["action_type"]
    with pytest.raises(ValueError, match="action_type"):
        OutcomeFeedback.from_dict(d)
    with pytest.raises(ValueError, match="JSON object"):
        OutcomeFeedback.from_dict([1, 2])  # type: ignore[arg-type]


def test_defaults_and_optional_nulls():
    d = {"episode_id": "x", "situation": "s", "action_type": "rest",
         "target_domain": "time", "overall_effectiveness": 0, "notes": None,
         "domains_improved": None}
    fb = OutcomeFeedback.from_dict(d)
    assert fb.notes == "" and fb.domains_improved == () and fb.submitted_at == ""
    assert fb.overall_effectiveness == 0.0


# ----------------------------------------------------------------------------- paths


def test_default_db_path(monkeypatch, tmp_path):
    monkeypatch.setenv("LIFESTACK_FEEDBACK_DB", str(tmp_path / "x.db"))
    assert default_db_path() == tmp_path / "x.db"
    monkeypatch.delenv("LIFESTACK_FEEDBACK_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_db_path() == tmp_path / "xdg" / "lifestack" / "feedback.sqlite3"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_db_path() == tmp_path / "home" / ".local" / "share" / "lifestack" / "feedback.sqlite3"


def test_store_uses_env_path_when_none_given(tmp_path):
    with FeedbackStore(seed=False) as store:
        assert store.path == tmp_path / "env-default.sqlite3"
    assert (tmp_path / "env-default.sqlite3").is_file()


# ----------------------------------------------------------------------------- store


def test_seed_file_is_labelled_illustrative():
    lines = [json.loads(line) for line in SEED_PATH.read_text().splitlines() if line.strip()]
    assert 25 <= len(lines) <= 40
    situations = {r["situation"] for r in lines}
    assert {"flight_crisis", "code_merge_crisis", "friday_6pm"} <= situations
    for r in lines:
        fb = OutcomeFeedback.from_dict(r)
        assert fb.episode_id.startswith("seed-")
        assert fb.notes.startswith("[illustrative]") and fb.is_illustrative
    assert len({r["episode_id"] for r in lines}) == len(lines)
    # several action types per task domain, with both good and bad outcomes
    for dom in ("flight_crisis", "code_merge_crisis"):
        effs = {r["action_type"]: r["overall_effectiveness"] for r in lines if r["situation"] == dom}
        assert len(effs) >= 4 and max(effs.values()) >= 7 and min(effs.values()) <= 3


def test_create_and_seed(tmp_path):
    path = tmp_path / "nested" / "dir" / "fb.sqlite3"
    with FeedbackStore(path) as store:
        assert store.seeded
        n = store.count()
        assert n == sum(1 for line in SEED_PATH.read_text().splitlines() if line.strip())
        assert all(fb.is_illustrative for fb in store.list(limit=None))
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert "feedback_lookup" in indexes
    conn.close()
    # reopening neither re-seeds nor duplicates
    with FeedbackStore(path) as store:
        assert not store.seeded and store.count() == n


def test_no_seed(tmp_path):
    with FeedbackStore(tmp_path / "a.sqlite3", seed=False) as store:
        assert store.count() == 0 and not store.seeded
    # an existing empty database is not seeded later either
    with FeedbackStore(tmp_path / "a.sqlite3", seed=True) as store:
        assert store.count() == 0


def test_memory_store():
    with FeedbackStore(":memory:") as store:
        assert store.count() > 0
        store.add(make("m1"))


def test_add_list_count(empty):
    empty.add(make("a", submitted_at="2025-01-01T00:00:00Z"))
    empty.add(make("b", situation="burnout_crash", action_type="rest", target_domain="mental_wellbeing",
                   submitted_at="2025-02-01T00:00:00Z"))
    empty.add(make("c"))  # stamped now -> newest
    assert empty.count() == 3
    got = empty.list()
    assert [fb.episode_id for fb in got] == ["c", "b", "a"]
    assert got[0].submitted_at.endswith("Z") and got[0].submitted_at > "2025-02"
    assert [fb.episode_id for fb in empty.list(limit=1)] == ["c"]
    assert [fb.episode_id for fb in empty.list(situation="friday_6pm")] == ["c", "a"]
    assert empty.list(limit=0) == []
    assert empty.list(situation="nope") == []
    with pytest.raises(ValueError, match="limit"):
        empty.list(limit=-1)


def test_list_orders_by_time_not_text_across_offsets(empty):
    empty.add(make("late", submitted_at="2025-01-01T10:00:00-05:00"))  # 15:00Z
    empty.add(make("early", submitted_at="2025-01-01T12:00:00Z"))
    assert [fb.episode_id for fb in empty.list()] == ["late", "early"]


def test_add_duplicate_episode_is_value_error(empty):
    empty.add(make("dup"))
    with pytest.raises(ValueError, match="dup"):
        empty.add(make("dup", eff=1))
    assert empty.count() == 1


def test_list_round_trips_records(empty):
    fb = make("rt", domains_improved=("career", "time"), domains_worsened=("finances",),
              notes="ünïcode ✓", submitted_at="2025-05-05T05:05:05.250000Z")
    empty.add(fb)
    assert empty.list() == [fb]


def test_import_good_file(empty, tmp_path):
    path = write_jsonl(tmp_path / "good.jsonl", [make(f"g{i}", eff=i).to_dict() for i in range(5)])
    with path.open("a") as f:
        f.write("\n   \n")  # blank lines are skipped
    assert empty.import_jsonl(path) == 5
    assert empty.count() == 5


@pytest.mark.parametrize(
    "bad, message",
    [
        ("{not json", "invalid JSON"),
        (json.dumps({**make("x").to_dict(), "overall_effectiveness": 11}), "overall_effectiveness"),
        (json.dumps({**make("x").to_dict(), "action_type": "bribe"}), "action_type"),
        ("[1, 2, 3]", "JSON object"),
        (json.dumps(make("g0").to_dict()), "g0"),  # duplicate of line 1
    ],
)
def test_import_bad_line_rolls_back(empty, tmp_path, bad, message):
    empty.add(make("pre"))
    lines = [make("g0").to_dict(), make("g1").to_dict(), bad, make("g3").to_dict()]
    path = write_jsonl(tmp_path / "bad.jsonl", lines)
    with pytest.raises(ValueError) as info:
        empty.import_jsonl(path)
    text = str(info.value)
    assert str(path) in text and ":3:" in text and message in text
    assert empty.count() == 1
    assert [fb.episode_id for fb in empty.list()] == ["pre"]


def test_import_duplicate_of_existing_record_rolls_back(empty, tmp_path):
    empty.add(make("old"))
    path = write_jsonl(tmp_path / "d.jsonl", [make("new1").to_dict(), make("old").to_dict()])
    with pytest.raises(ValueError, match=r"d\.jsonl:2:.*old"):
        empty.import_jsonl(path)
    assert empty.count() == 1


def test_import_missing_file(empty, tmp_path):
    with pytest.raises(OSError):
        empty.import_jsonl(tmp_path / "missing.jsonl")


# ----------------------------------------------------------------------------- score


def test_score_none_when_nothing_matches(empty):
    assert empty.score("friday_6pm", "negotiate", "career") is None
    empty.add(make("a", action_type="negotiate"))
    assert empty.score("friday_6pm", "rest", "career") is None
    assert empty.score("other", "negotiate", "career") is None
    assert empty.score(None, ["x"], {}) is None  # type: ignore[arg-type]


def test_score_sign_and_shrinkage(empty):
    empty.add(make("a", eff=10.0))
    # one matching record: mean 1.0, weight 1 -> shrink 1/3
    assert empty.score("friday_6pm", "negotiate", "career") == pytest.approx(1 / 3)
    empty.add(make("b", eff=10.0))
    assert empty.score("friday_6pm", "negotiate", "career") == pytest.approx(2 / 4)
    for i in range(38):
        empty.add(make(f"c{i}", eff=10.0))
    assert empty.score("friday_6pm", "negotiate", "career") == pytest.approx(40 / 42)
    empty.add(make("bad", action_type="deprioritize", eff=0.0))
    assert empty.score("friday_6pm", "deprioritize", "career") == pytest.approx(-1 / 3)
    empty.add(make("neutral", action_type="rest", eff=5.0))
    assert empty.score("friday_6pm", "rest", "career") == 0.0


def test_score_target_domain_weighting(empty):
    empty.add(make("m", target_domain="career", eff=10.0))    # x = +1
    empty.add(make("o", target_domain="finances", eff=0.0))   # x = -1
    # query career: weights 1.0 (+1) and 0.5 (-1): mean 0.5/1.5, n=1.5 -> 0.5/3.5
    assert empty.score("friday_6pm", "negotiate", "career") == pytest.approx(0.5 / 3.5)
    assert empty.score("friday_6pm", "negotiate", "finances") == pytest.approx(-0.5 / 3.5)
    # a domain neither record targets: both weight 0.5 -> mean 0
    assert empty.score("friday_6pm", "negotiate", "time") == pytest.approx(0.0)
    assert empty.score("friday_6pm", "negotiate", "not-a-domain") == pytest.approx(0.0)


def test_score_index_invalidated_by_add_and_import(empty, tmp_path):
    empty.add(make("a", eff=10.0))
    assert empty.score("friday_6pm", "negotiate", "career") == pytest.approx(1 / 3)
    empty.add(make("b", eff=0.0))
    assert empty.score("friday_6pm", "negotiate", "career") == pytest.approx(0.0)
    path = write_jsonl(tmp_path / "i.jsonl", [make("c", action_type="rest", eff=10.0).to_dict()])
    assert empty.score("friday_6pm", "rest", "career") is None
    empty.import_jsonl(path)
    assert empty.score("friday_6pm", "rest", "career") == pytest.approx(1 / 3)


def test_score_uses_index_not_sql(empty, monkeypatch):
    empty.add(make("a", eff=9.0))
    first = empty.score("friday_6pm", "negotiate", "career")
    empty.close()  # any SQL now would raise; the index must answer on its own
    for _ in range(100):
        assert empty.score("friday_6pm", "negotiate", "career") == first


def test_score_sees_external_writes_after_invalidate(tmp_path):
    path = tmp_path / "shared.sqlite3"
    with FeedbackStore(path, seed=False) as reader, FeedbackStore(path, seed=False) as writer:
        assert reader.score("friday_6pm", "negotiate", "career") is None
        writer.add(make("w", eff=10.0))
        assert reader.score("friday_6pm", "negotiate", "career") is None  # loaded once
        reader.invalidate()
        assert reader.score("friday_6pm", "negotiate", "career") == pytest.approx(1 / 3)


def test_seeded_scores_separate_actions(tmp_path):
    with FeedbackStore(tmp_path / "s.sqlite3") as store:
        for dom in ("flight_crisis", "code_merge_crisis"):
            scores = {a: store.score(dom, a, "career") for a in FEEDBACK_ACTION_TYPES}
            known = {a: s for a, s in scores.items() if s is not None}
            assert len(known) >= 4
            assert max(known.values()) > 0 > min(known.values())
        assert store.score("friday_6pm", "negotiate", "career") > store.score(
            "friday_6pm", "deprioritize", "career")


_records = st.builds(
    dict,
    situation=st.sampled_from(["s1", "s2", "friday_6pm"]),
    action_type=st.sampled_from(FEEDBACK_ACTION_TYPES),
    target_domain=st.sampled_from(DOMAIN_NAMES),
    overall_effectiveness=st.floats(min_value=0.0, max_value=10.0, allow_nan=False),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(_records, max_size=25),
    situation=st.sampled_from(["s1", "s2", "friday_6pm", "unknown"]),
    action_type=st.one_of(st.sampled_from(FEEDBACK_ACTION_TYPES), st.text(max_size=5)),
    target_domain=st.one_of(st.sampled_from(DOMAIN_NAMES), st.text(max_size=5)),
)
def test_score_always_none_or_finite_in_range(records, situation, action_type, target_domain):
    with FeedbackStore(":memory:", seed=False) as store:
        for i, rec in enumerate(records):
            store.add(OutcomeFeedback(episode_id=f"h{i}", **rec))
        result = store.score(situation, action_type, target_domain)
        matching = [r for r in records if r["situation"] == situation and r["action_type"] == action_type]
        if not matching:
            assert result is None
        else:
            assert isinstance(result, float) and math.isfinite(result) and -1.0 <= result <= 1.0
            if all(r["overall_effectiveness"] > 5 for r in matching):
                assert result > 0
            if all(r["overall_effectiveness"] < 5 for r in matching):
                assert result < 0


# ----------------------------------------------------------------------------- errors


def test_corrupt_db_file(tmp_path):
    path = tmp_path / "corrupt.sqlite3"
    path.write_bytes(os.urandom(8192))
    with pytest.raises(FeedbackStoreError) as info:
        FeedbackStore(path)
    msg = str(info.value)
    assert str(path) in msg and "LIFESTACK_FEEDBACK_DB" in msg and "Delete" in msg
    assert "\n" not in msg


def test_corrupt_db_text_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("this is not a database\n" * 100)
    with pytest.raises(FeedbackStoreError, match="notes.txt"):
        FeedbackStore(path, seed=False)


def test_directory_as_path(tmp_path):
    path = tmp_path / "adir"
    path.mkdir()
    with pytest.raises(FeedbackStoreError) as info:
        FeedbackStore(path)
    assert str(path) in str(info.value) and "directory" in str(info.value)


def test_parent_is_a_file(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(FeedbackStoreError, match="file"):
        FeedbackStore(tmp_path / "file" / "fb.sqlite3")


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="root ignores permissions")
def test_permission_denied(tmp_path):
    path = tmp_path / "locked.sqlite3"
    FeedbackStore(path, seed=False).close()
    path.chmod(0)
    try:
        with pytest.raises(FeedbackStoreError, match="locked.sqlite3"):
            FeedbackStore(path)
    finally:
        path.chmod(0o600)


def test_unopenable_file_is_wrapped(tmp_path, monkeypatch):
    # what sqlite reports for permission denied (a test running as root cannot provoke it)
    def refuse(*args, **kwargs):
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(fbmod.sqlite3, "connect", refuse)
    with pytest.raises(FeedbackStoreError, match="nope.sqlite3"):
        FeedbackStore(tmp_path / "nope.sqlite3")


def test_write_failure_is_wrapped(empty):
    empty._conn.execute("PRAGMA query_only = 1")  # writes now fail like a read-only file
    with pytest.raises(FeedbackStoreError, match=str(empty.path)):
        empty.add(make("ro"))


def test_foreign_sqlite_db_with_wrong_schema(tmp_path):
    path = tmp_path / "other.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    with pytest.raises(FeedbackStoreError, match="other.sqlite3"):
        FeedbackStore(path)


def test_newer_schema_version_is_refused(tmp_path):
    path = tmp_path / "future.sqlite3"
    FeedbackStore(path, seed=False).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(FeedbackStoreError, match="newer"):
        FeedbackStore(path)


def test_migration_table_is_ordered_from_one():
    assert sorted(fbmod.MIGRATIONS) == list(range(1, SCHEMA_VERSION + 1))


def test_closed_store(tmp_path):
    store = FeedbackStore(tmp_path / "c.sqlite3", seed=False)
    store.close()
    store.close()
    with pytest.raises(FeedbackStoreError, match="closed"):
        store.count()


# ----------------------------------------------------------------------------- CLI


def test_cli_add_list_import(tmp_path, capsys):
    db = str(tmp_path / "cli.sqlite3")
    assert main(["--db", db, "add", "--situation", "friday_6pm", "--action-type", "negotiate",
                 "--target-domain", "career", "--effectiveness", "8", "--improved", "career,finances",
                 "--worsened", "time", "--notes", "boss agreed", "--episode-id", "ep-1"]) == 0
    out = capsys.readouterr().out
    assert "ep-1" in out

    assert main(["--db", db, "add", "--situation", "burnout_crash", "--action-type", "rest",
                 "--target-domain", "mental_wellbeing", "--effectiveness", "9"]) == 0
    capsys.readouterr()

    assert main(["list", "--db", db, "--limit", "50", "--situation", "friday_6pm"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) >= 2  # our record plus the illustrative seed one
    assert "ep-1" in lines[0] and "negotiate->career" in lines[0] and "+career" in lines[0]
    assert "-time" in lines[0] and "8/10" in lines[0] and "boss agreed" in lines[0]
    assert all("friday_6pm" in line for line in lines)

    with FeedbackStore(db) as store:
        before = store.count()
        generated = [fb for fb in store.list(limit=None) if fb.situation == "burnout_crash"
                     and not fb.is_illustrative]
        assert len(generated) == 1 and len(generated[0].episode_id) == 32  # uuid4 hex

    path = write_jsonl(tmp_path / "in.jsonl", [make(f"i{i}").to_dict() for i in range(3)])
    assert main(["--db", db, "import", str(path)]) == 0
    assert "imported 3 records" in capsys.readouterr().out
    with FeedbackStore(db) as store:
        assert store.count() == before + 3


def test_cli_default_db_is_env_var(tmp_path, capsys):
    assert main(["list", "--limit", "1"]) == 0
    assert (tmp_path / "env-default.sqlite3").is_file()
    assert len(capsys.readouterr().out.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["add", "--situation", "s", "--action-type", "bribe", "--target-domain", "career",
          "--effectiveness", "5"], "action_type"),
        (["add", "--situation", "s", "--action-type", "rest", "--target-domain", "career",
          "--effectiveness", "nan"], "overall_effectiveness"),
        (["add", "--situation", "s", "--action-type", "rest", "--target-domain", "career",
          "--effectiveness", "12"], "overall_effectiveness"),
        (["add", "--situation", "s", "--action-type", "rest", "--target-domain", "career",
          "--effectiveness", "5", "--improved", "career,moon"], "domains_improved"),
        (["add", "--situation", "s"], "required"),
        (["list", "--limit", "many"], "limit"),
        (["list", "--limit", "-3"], "limit"),
        (["frobnicate"], "frobnicate"),
        ([], "required"),
    ],
)
def test_cli_errors_exit_2_one_line(tmp_path, capsys, argv, needle):
    assert main(["--db", str(tmp_path / "e.sqlite3"), *argv]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and needle in err
    assert "Traceback" not in captured.err


def test_cli_bad_import_and_corrupt_db(tmp_path, capsys):
    db = tmp_path / "x.sqlite3"
    bad = write_jsonl(tmp_path / "bad.jsonl", [make("ok").to_dict(), "{oops"])
    assert main(["--db", str(db), "import", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bad.jsonl:2" in err

    assert main(["--db", str(db), "import", str(tmp_path / "missing.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "missing.jsonl" in err

    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(os.urandom(4096))
    assert main(["--db", str(junk), "list"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(junk) in err


def test_cli_help_returns_zero(capsys):
    assert main(["--help"]) == 0
    assert "add" in capsys.readouterr().out


def test_python_dash_m_entry_point(tmp_path):
    import subprocess

    db = tmp_path / "m.sqlite3"
    env = {**os.environ, "LIFESTACK_FEEDBACK_DB": str(db)}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-m", "lifestack.feedback", "add", "--situation", "s",
                           "--action-type", "rest", "--target-domain", "time", "--effectiveness",
                           "99"], capture_output=True, text=True, cwd=root, env=env, timeout=60)
    assert proc.returncode == 2
    assert "overall_effectiveness" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_version_1_database_is_migrated_in_place_keeping_its_records(tmp_path):
    path = tmp_path / "v1.sqlite3"
    conn = sqlite3.connect(path)
    fbmod._migrate_to_v1(conn)
    conn.execute(
        "INSERT INTO feedback (episode_id, situation, action_type, target_domain, overall_effectiveness, "
        "submitted_at, submitted_epoch) VALUES ('old', 'friday_6pm', 'negotiate', 'career', 9, "
        "'2026-01-01T00:00:00Z', 0)")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    store = FeedbackStore(path)
    [old] = store.list(limit=None)
    assert old.episode_id == "old" and old.pressured_domain == "" and old.difficulty == 0
    assert store.score("friday_6pm", "negotiate", "career") == pytest.approx(0.8 / 3)
    store.add(make("new", pressured_domain="time", difficulty=3))
    assert {fb.episode_id: (fb.pressured_domain, fb.difficulty) for fb in store.list(limit=None)}["new"] == ("time", 3)
    store.close()
    check = sqlite3.connect(path)
    assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
    check.close()


@pytest.mark.parametrize("field, value", [("pressured_domain", "moods"), ("difficulty", 6), ("difficulty", -1),
                                          ("difficulty", 2.5), ("difficulty", True), ("pressured_domain", 3)])
def test_situation_fields_are_validated(field, value):
    with pytest.raises(ValueError, match=field):
        make(**{field: value})


def test_seed_records_that_name_a_task_family_all_name_a_pressured_domain():
    records = [json.loads(line) for line in fbmod.SEED_PATH.read_text().splitlines() if line.strip()]
    family = [r for r in records if r["situation"] in ("flight_crisis", "code_merge_crisis")]
    assert family and all(r.get("pressured_domain") in DOMAIN_NAMES for r in family)
