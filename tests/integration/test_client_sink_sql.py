"""dbusclient.sink_sql against the stack's real MariaDB and PostgreSQL: each test runs on both, in a fresh
database (``dbus_test_<uuid>``) dropped afterwards. Endpoints from the stack's variables (stack/env.sh):
MARIADB_PORT (13306) and POSTGRESQL_PORT (15432), account dbus/dbus."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from replica_env import KEYS, SERVERS, V1, T, change, fresh_database, up

from dbusclient.checkpoint import Checkpoint
from dbusclient.decode import RowChange, RowRefused
from dbusclient.merge import Delete, Effect, Merger, Upsert
from dbusclient.sink_sql import SinkError, SinkSchemaError, SqlSink
from ums.message import Op, UmsField
from ums.types import UmsType

pytestmark = pytest.mark.integration


@pytest.fixture(params=sorted(SERVERS))
def url(request) -> Iterator[str]:
    """A fresh database on the stack's MariaDB or PostgreSQL: its SQLAlchemy URL."""
    with fresh_database(request.param) as made:
        yield made


@pytest.fixture
def sinks(url) -> Iterator[list[SqlSink]]:
    """SqlSinks made by the test (each one a "process" on the same target); disposed afterwards."""
    made: list[SqlSink] = []
    yield made
    for s in made:
        s.engine.dispose()


def new_sink(url: str, made: list[SqlSink], **kw: Any) -> SqlSink:
    sink = SqlSink(url, KEYS, **kw)
    sink.ensure_table(T, 1, V1)
    made.append(sink)
    return sink


def rows(url: str, query: str = "SELECT id, name, ums_id_ FROM orders ORDER BY id") -> list[tuple[Any, ...]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(query))]
    finally:
        engine.dispose()


def test_creates_the_replica_and_applies_upserts_and_deletes(url, sinks):
    sink = new_sink(url, sinks)
    window: list[Effect] = [
        up(1, 10, "a", amount="19.90", qty=3, at="2024-01-02 03:04:05.123456"),
        up(2, 11, "b"),
        up(3, 12, "c"),
    ]
    assert sink.apply(window).upserts == 3
    got = rows(url, "SELECT id, name, amount, qty, at FROM orders WHERE id = 1")[0]
    assert [int(got[0]), got[1], float(got[2]), got[3], got[4].isoformat()] == [
        1,
        "a",
        19.9,
        3,
        "2024-01-02T03:04:05.123456",
    ]
    sink.apply([up(2, 20, "b2"), Delete(change(3, Op.DELETE, 21)), up(4, 22, "d")])
    assert [(int(i), n, u) for i, n, u in rows(url)] == [(1, "a", 10), (2, "b2", 20), (4, "d", 22)]
    tombs = rows(url, "SELECT id, ums_id_ FROM orders__tombstones")
    assert [(int(i), u) for i, u in tombs] == [(3, 21)]
    # a batch bigger than one IN list of the clean-up statements
    big = [up(k, 100 + k, f"n{k}") for k in range(10, 2510)]
    assert sink.apply(big).upserts == 2500
    assert rows(url, "SELECT COUNT(*) FROM orders")[0][0] == 2503


def test_never_moves_a_key_backwards(url, sinks):
    sink = new_sink(url, sinks)
    sink.apply([up(1, 50, "new"), up(2, 50, "kept"), Delete(change(3, Op.DELETE, 50))])
    before = rows(url)
    # older upserts, an older delete, an old snapshot row behind a tombstone: nothing moves
    stale: list[Effect] = [
        up(1, 40, "old"),
        Delete(change(2, Op.DELETE, 40)),
        Upsert(change(3, Op.INSERT, 30, name="zombie")),
    ]
    sink.apply(stale)
    assert rows(url) == before
    # the same window again (a replay after a restart, by a new sink with a merger that lost its states)
    again = new_sink(url, sinks)
    effects = Merger().merge([e.change for e in stale]).effects
    again.apply(effects)
    assert rows(url) == before
    assert rows(url, "SELECT ums_id_ FROM orders__tombstones") == [(50,)]
    # the key states a restarted consumer seeds its merger with
    states = again.key_states(T)
    assert {k[1][0]: (s.ums_id, s.live) for k, s in states.items()} == {
        1: (50, True),
        2: (50, True),
        3: (50, False),
    }
    # newer changes do move: a re-insert after the delete ends its tombstone, a delete of a row goes
    again.apply([up(3, 60, "back"), Delete(change(1, Op.DELETE, 60))])
    assert [(int(i), n, u) for i, n, u in rows(url)] == [(2, "kept", 50), (3, "back", 60)]
    assert [(int(i), u) for i, u in rows(url, "SELECT id, ums_id_ FROM orders__tombstones")] == [(1, 60)]


def test_same_ums_id_later_uid_wins(url, sinks):
    """A before image and its update share ums_id_: the update's greater ums_uid_ decides."""
    sink = new_sink(url, sinks)
    first = RowChange(T, 1, (1,), Op.INSERT, 70, 70_000_000, "x", {"id": "1", "name": "b"})
    second = RowChange(T, 1, (1,), Op.UPDATE, 70, 70_000_001, "x", {"id": "1", "name": "u"})
    sink.apply([Upsert(first)])
    sink.apply([Upsert(second)])
    sink.apply([Upsert(first)])
    assert [(int(i), n, u) for i, n, u in rows(url)] == [(1, "u", 70)]


def test_checkpoint_is_saved_in_the_data_transaction(url, sinks, monkeypatch):
    sink = new_sink(url, sinks)
    cp1 = Checkpoint().advanced("demo.shop.result", 0, 100, 10)
    sink.apply([up(1, 10, "a")], cp1)
    assert sink.checkpoints.load() == cp1
    before = rows(url)
    cp2 = cp1.advanced("demo.shop.result", 0, 200, 20)

    def fail(conn, checkpoint):
        raise RuntimeError("crash after the rows were written")

    monkeypatch.setattr(sink.checkpoints, "save_in", fail)
    with pytest.raises(RuntimeError):
        sink.apply([up(1, 20, "b"), up(2, 20, "c"), Delete(change(1, Op.DELETE, 21))], cp2)
    monkeypatch.undo()
    assert rows(url) == before
    assert rows(url, "SELECT COUNT(*) FROM orders__tombstones") == [(0,)]
    assert sink.checkpoints.load() == cp1
    # a restarted sink sees the same; the window applied again commits both
    again = new_sink(url, sinks)
    assert again.checkpoints.load() == cp1
    again.apply([up(1, 20, "b"), up(2, 20, "c")], cp2)
    assert again.checkpoints.load() == cp2
    assert [(int(i), n) for i, n, _ in rows(url)] == [(1, "b"), (2, "c")]


def test_follows_a_version_change(url, sinks):
    sink = new_sink(url, sinks)
    sink.apply([up(1, 10, "a", qty=5)])
    v2 = (*[f for f in V1 if f.name != "name"], UmsField("note", UmsType.STRING, True))
    v2 = tuple(UmsField("qty", UmsType.LONG, True) if f.name == "qty" else f for f in v2)  # widened
    sink.ensure_table(T, 2, v2)
    values = {"id": "2", "amount": None, "qty": str(2**40), "at": None, "note": "n2"}
    sink.apply([Upsert(RowChange(T, 2, (2,), Op.INSERT, 20, 20_000_000, "x", values))])
    got = rows(url, "SELECT id, name, qty, note FROM orders ORDER BY id")
    assert [(int(i), n, int(q), note) for i, n, q, note in got] == [(1, "a", 5, None), (2, None, 2**40, "n2")]
    # a restarted sink knows the replica's columns; an older version's rows still apply
    again = new_sink(url, sinks)
    again.ensure_table(T, 2, v2)
    again.apply([up(3, 30, "v1 row", qty=7)])
    assert rows(url, "SELECT name, qty, note FROM orders WHERE id = 3") == [("v1 row", 7, None)]
    # an incompatible retype stops, naming the table and the column
    v3 = tuple(UmsField("note", UmsType.INT, True) if f.name == "note" else f for f in v2)
    with pytest.raises(SinkSchemaError, match=r"replica orders: column 'note' changed from string to int"):
        again.ensure_table(T, 3, v3)


def test_a_dropped_replica_is_made_anew_from_an_incompatible_version(url, sinks):
    sink = new_sink(url, sinks)
    sink.apply([up(1, 10, "a"), Delete(change(2, Op.DELETE, 11))])
    v3 = tuple(UmsField("name", UmsType.INT, True) if f.name == "name" else f for f in V1)
    with pytest.raises(SinkSchemaError, match="changed from string to int"):
        sink.ensure_table(T, 3, v3)
    sink.drop_table(T)
    sink.ensure_table(T, 3, v3)  # made anew: rows, tombstones and the column records of the old one gone
    assert rows(url, "SELECT id, name, ums_id_ FROM orders") == []
    assert rows(url, "SELECT COUNT(*) FROM orders__tombstones") == [(0,)]
    values = {"id": "4", "name": 7, "amount": None, "qty": None, "at": None}
    sink.apply([Upsert(RowChange(T, 3, (4,), Op.INSERT, 40, 40_000_000, "x", values))])
    assert rows(url, "SELECT id, name FROM orders") == [(4, 7)]


def test_a_sweep_turns_rows_older_than_a_pulls_position_into_tombstones(url, sinks):
    sink = new_sink(url, sinks)
    sink.apply([up(1, 10, "gone at the source"), up(2, 20, "pulled")])
    cp = Checkpoint()
    assert sink.sweep({T: 15}, cp) == 1
    assert rows(url) == [(2, "pulled", 20)]
    assert rows(url, "SELECT id, ums_id_, ums_uid_ FROM orders__tombstones") == [(1, 15, 0)]
    assert sink.checkpoints.load() == cp
    sink.apply([up(1, 12, "an older change")])  # behind the tombstone: not resurrected
    assert rows(url) == [(2, "pulled", 20)]


def test_drops_a_dropped_column_when_asked(url, sinks):
    sink = new_sink(url, sinks, drop_columns=True)
    sink.apply([up(1, 10, "a")])
    sink.ensure_table(T, 2, tuple(f for f in V1 if f.name != "name"))
    names = {c["name"] for c in sa.inspect(sink.engine).get_columns("orders")}
    assert "name" not in names and {"id", "qty", "ums_id_", "ums_uid_"} <= names


def test_two_sinks_on_one_target_follow_a_version_once(url, sinks):
    """Consumers of one group share the target: the second to see a new version finds it followed (and a
    column an ALTER added before a crash, unrecorded, is not added twice)."""
    first, second = new_sink(url, sinks), new_sink(url, sinks)
    v2 = (*V1, UmsField("note", UmsType.STRING, True), UmsField("extra", UmsType.INT, True))
    with first.engine.begin() as conn:  # the ALTER of a crashed follow, never recorded
        conn.execute(sa.text("ALTER TABLE orders ADD COLUMN extra INTEGER NULL"))
    first.ensure_table(T, 2, v2)
    second.ensure_table(T, 2, v2)
    values = {"id": "5", "name": "e", "amount": None, "qty": None, "at": None, "note": "n", "extra": 3}
    second.apply([Upsert(RowChange(T, 2, (5,), Op.INSERT, 50, 50_000_000, "x", values))])
    assert rows(url, "SELECT name, note, extra FROM orders WHERE id = 5") == [("e", "n", 3)]


def test_a_refused_window_or_one_that_does_not_decode_leaves_the_replica_and_the_sink_usable(url, sinks):
    """A statement the database refuses is CLIENT_SINK_FAILED (not retriable), a value that does not decode
    RowRefused (CLIENT_BAD_ROW, naming the change: the consumer sets its record aside; on MariaDB while the
    tombstones' read is still unanswered): nothing of either window is applied, and the same sink's next
    window is."""
    sink = new_sink(url, sinks)
    sink.apply([up(1, 10, "a"), Delete(change(2, Op.DELETE, 10))])
    before = rows(url)
    with sink.engine.begin() as conn:  # what the database refuses
        conn.execute(sa.text("ALTER TABLE orders ADD CONSTRAINT named CHECK (name <> 'refused')"))
    with pytest.raises(SinkError, match=r"replica orders: \w+: .*named") as refused:
        sink.apply([up(3, 20, "c"), up(4, 20, "refused")])
    assert refused.value.code == "CLIENT_SINK_FAILED" and not refused.value.retriable
    bad = up(6, 20, "f", qty="many")
    with pytest.raises(RowRefused, match=r"replica orders: key \[6\]") as undecodable:
        sink.apply([up(5, 20, "e"), bad, Delete(change(1, Op.DELETE, 20))])
    assert undecodable.value.code == "CLIENT_BAD_ROW" and undecodable.value.change is bad.change
    assert rows(url) == before
    sink.apply([up(3, 30, "c"), Delete(change(1, Op.DELETE, 30))])
    assert [(int(i), n, u) for i, n, u in rows(url)] == [(3, "c", 30)]
    assert sorted((int(i), u) for i, u in rows(url, "SELECT id, ums_id_ FROM orders__tombstones")) == [
        (1, 30),
        (2, 10),
    ]
