"""dbusclient.replicate over a fake sink: net effects per key, one apply per window with its checkpoint,
retries of a lost connection, sweeps after a bootstrap; BoundedStates; cli/replicate.py's --key."""

from __future__ import annotations

from typing import Any

import pytest

from cli.replicate import parse_keys
from dbusclient.checkpoint import Checkpoint, TablePull
from dbusclient.consumer import Result
from dbusclient.decode import RowChange, TableRef
from dbusclient.merge import Delete, KeyState, Upsert
from dbusclient.replicate import BoundedStates, Replicator
from dbusclient.sink_sql import ApplyResult, SinkError, SinkSchemaError
from dbuslib.errors import ConfigError
from dbuslib.retry import RetryPolicy
from ums.message import Op

T = TableRef("demo", "shop", "orders")


def change(key: int, op: Op, ums_id: int) -> RowChange:
    return RowChange(T, 1, (key,), op, ums_id, ums_id * 10**6, "2024-01-02 03:04:05.000", {"id": str(key)})


class FakeUrl:
    def render_as_string(self, hide_password: bool = True) -> str:
        return "mysql+pymysql://dbus:***@127.0.0.1/replica"


class FakeSink:
    def __init__(self, failures: list[Exception] | None = None) -> None:
        self.applied: list[tuple[list[Any], Checkpoint | None]] = []
        self.failures = failures or []
        self.engine = type("E", (), {"url": FakeUrl()})()
        self.swept: list[tuple[dict[TableRef, int], Checkpoint | None]] = []

    def has_replica(self, table: TableRef) -> bool:
        return table == T

    def sweep(self, below: Any, checkpoint: Checkpoint | None = None) -> int:
        assert self.applied, "the window is applied before the sweep"
        self.swept.append((dict(below), checkpoint))
        return 3

    def apply(self, effects: Any, checkpoint: Checkpoint | None = None) -> ApplyResult:
        if self.failures:
            raise self.failures.pop(0)
        effects = list(effects)
        self.applied.append((effects, checkpoint))
        return ApplyResult(
            sum(isinstance(e, Upsert) for e in effects), sum(isinstance(e, Delete) for e in effects)
        )


def test_a_window_is_one_apply_of_each_keys_last_change_with_its_checkpoint() -> None:
    sink = FakeSink()
    r = Replicator(sink)  # type: ignore[arg-type]
    assert r.on_start_data_event_sequence(10) is Result.SUCCESS
    for c in (
        change(1, Op.INSERT, 10),
        change(2, Op.INSERT, 11),
        change(1, Op.UPDATE, 12),
        change(2, Op.DELETE, 13),
    ):
        assert r.on_data_event(c) is Result.SUCCESS
    cp = Checkpoint()
    r.save(cp)
    ((effects, saved),) = sink.applied
    assert saved is cp
    assert [(type(e).__name__, e.change.key, e.change.ums_id) for e in effects] == [
        ("Upsert", (1,), 12),
        ("Delete", (2,), 13),
    ]
    assert (r.counts.windows, r.counts.upserts, r.counts.deletes) == (1, 1, 1) and r.pending == {}
    r.save(cp)  # a window without changes: the checkpoint alone
    assert sink.applied[-1] == ([], cp)


def test_a_rolled_back_window_leaves_nothing_pending() -> None:
    r = Replicator(FakeSink())  # type: ignore[arg-type]
    r.on_data_event(change(1, Op.INSERT, 10))
    r.sweeps[T] = 5
    r.on_rollback(Checkpoint())
    assert r.pending == {} and r.sweeps == {}


def test_a_lost_connection_is_retried_a_refused_statement_is_not() -> None:
    lost = SinkError("replica orders: OperationalError: (2013, 'Lost connection')")
    lost.retriable = True
    slept: list[float] = []
    sink = FakeSink([lost, lost])
    r = Replicator(sink, RetryPolicy(budget_s=60), sleep=slept.append)  # type: ignore[arg-type]
    r.on_data_event(change(1, Op.INSERT, 10))
    r.save(Checkpoint())
    assert len(slept) == 2 and len(sink.applied) == 1
    refused = SinkError("replica orders: DataError: (1406, 'Data too long')")
    refused.retriable = False
    sink.failures = [refused]
    with pytest.raises(SinkError, match="Data too long"):
        r.save(Checkpoint())
    assert len(slept) == 2


def test_a_bootstrap_end_sweeps_each_pulled_table_after_the_window() -> None:
    sink = FakeSink()
    r = Replicator(sink)  # type: ignore[arg-type]
    pulls = (
        TablePull("demo", "shop", "orders", 1, ums_id=500, ended=True),
        TablePull("demo", "shop", "lines", 2, ums_id=None, ended=True),  # no start marker read: not swept
        TablePull("demo", "shop", "other", 3, ums_id=600, ended=True),  # no replica yet: nothing to sweep
    )
    assert r.on_end_bootstrap(pulls) is Result.SUCCESS
    cp = Checkpoint()
    r.save(cp)
    assert sink.swept == [({T: 500}, cp)] and r.counts.swept == 3 and r.sweeps == {}
    assert len(sink.applied) == 1  # the window first, then the sweep


class SchemaSink(FakeSink):
    """ensure_schema refuses the first time (an incompatible version), then takes the new table."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def ensure_schema(self, schema: Any) -> None:
        self.calls.append("ensure")
        if self.calls.count("ensure") == 1:
            raise SinkSchemaError("replica orders: column 'note' changed from string to int in version 2")

    def drop_table(self, table: TableRef) -> None:
        self.calls.append(f"drop {table}")

    def replica_name(self, table: TableRef) -> str:
        return table.table


def test_an_incompatible_version_stops_or_drops_and_bootstraps_the_table_again() -> None:
    with pytest.raises(SinkSchemaError, match="changed from string to int"):
        Replicator(SchemaSink()).on_schema_change(T, 1, 2, None)  # type: ignore[arg-type]
    sink = SchemaSink()
    r = Replicator(sink, on_incompatible="rebootstrap")  # type: ignore[arg-type]
    requested: list[TableRef] = []
    r.request_bootstrap = requested.append
    assert r.on_schema_change(T, 1, 2, None) is Result.SUCCESS  # type: ignore[arg-type]
    assert sink.calls == ["ensure", f"drop {T}", "ensure"] and requested == [T]
    with pytest.raises(ValueError, match="stop or rebootstrap"):
        Replicator(sink, on_incompatible="ignore")  # type: ignore[arg-type]


def test_bounded_states_forget_the_least_recently_used() -> None:
    states = BoundedStates(limit=2)
    a, b, c = ((T, (1,)), (T, (2,)), (T, (3,)))
    states[a] = KeyState(1, 1, True)
    states[b] = KeyState(2, 2, True)
    assert states[a].ums_id == 1  # a is used: b is the oldest now
    states[c] = KeyState(3, 3, True)
    assert set(states) == {a, c} and len(states) == 2
    del states[a]
    assert list(states) == [c]
    with pytest.raises(ValueError, match="at least 1"):
        BoundedStates(0)


def test_key_options_parse_and_bad_ones_are_refused() -> None:
    assert parse_keys(["shop.orders=id", "shop.lines=order_id, line"]) == {
        "shop.orders": ("id",),
        "shop.lines": ("order_id", "line"),
    }
    for bad in ("shop.orders", "orders=id", "shop.orders=", "a.b.c=id"):
        with pytest.raises(ConfigError, match="expected schema.table=col"):
            parse_keys([bad])
