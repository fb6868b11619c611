"""Golden test through the real extractor: every column type, insert/update/delete, multi-row statements
and a multi-statement transaction go MariaDB -> extractor -> Kafka; decoding the topic gives back exactly
what SELECT returned after each transaction, in binlog order. Records are cut into 4 kB chunks on the
way, so chunking and reassembly are part of the path. The readable cases of tests/golden/cdc/ go the same
way and must decode to the tuples written there."""

from __future__ import annotations

from typing import Any

import golden_cdc
import pytest
from every_type import (
    CREATE,
    MAX_ROW,
    MIN_ROW,
    NULL_ROW,
    ODD_ROW,
    TRANSACTIONS,
    compare,
    multi_row_insert,
    replay,
    run,
)
from extractor_env import cleanup, make_env

from binlog.rows import decode_rows

pytestmark = pytest.mark.integration


@pytest.fixture
def chunking_env(tmp_path, writer_db, kafka_up):
    env = make_env(tmp_path, writer_db[1], max_record_bytes=4096)
    yield env
    cleanup(env)


def test_topic_holds_every_change_in_order_with_exact_values(chunking_env, writer_db):
    env, (db, _) = chunking_env, writer_db
    with db.cursor() as cur:
        cur.execute(CREATE)
    env.spawn()
    transactions = [[multi_row_insert(db, [MAX_ROW, MIN_ROW, ODD_ROW, NULL_ROW])], *TRANSACTIONS[1:]]
    snapshots = run(db, transactions)

    def all_transactions(records) -> bool:
        gtids = {r.event.header.gtid for r in env.whole_events(records) if r.event.kind == "rows"}
        return len(gtids) >= len(transactions)

    raw = env.records(all_transactions, timeout=120)
    assert any(r.event.chunk for r in raw), "the large rows events were cut into chunks"
    records = env.whole_events(raw)
    assert any(r.event.kind == "ddl" and r.event.header.ddl == "CREATE" for r in records)
    rows = [r for r in records if r.event.kind == "rows"]
    assert len({r.partition for r in rows}) == 1, "one table's records share a partition"
    by_gtid: dict[str, list] = {}
    for r in sorted(rows, key=lambda r: r.offset):
        by_gtid.setdefault(r.event.header.gtid, []).append(r.event)
    assert list(by_gtid) == sorted(by_gtid, key=lambda g: int(g.rsplit("-", 1)[1])), "binlog order"

    table: dict[int, dict[str, Any]] = {}
    problems: list[str] = []
    for n, (events, snapshot) in enumerate(zip(by_gtid.values(), snapshots, strict=True)):
        for event in events:
            decoded = decode_rows(event)
            problems += replay(table, decoded, f"transaction {n}")
        problems += compare(table, snapshot, decoded.columns, f"after transaction {n}")
    assert problems == []


def test_golden_cdc_files_through_the_extractor(chunking_env, writer_db):
    """tests/golden/cdc/*.sql: each statement, through the extractor, decodes to the tuples on its ``->``
    lines (values as ums.values.encode_column writes them, as the appender would)."""
    env, (db, _) = chunking_env, writer_db
    cases = {path: golden_cdc.read_case(path) for path in golden_cdc.cases()}
    env.spawn()
    with db.cursor() as cur:
        for statements in cases.values():
            for s in statements:
                cur.execute(s.sql)
    wanted = {t for statements in cases.values() for t in golden_cdc.tables(statements)}
    total = sum(len(s.expected) for statements in cases.values() for s in statements)

    def decoded(records) -> list:
        return [
            d
            for r in env.whole_events(records)
            if r.event.kind == "rows" and (d := decode_rows(r.event)).table in wanted
        ]

    events = decoded(env.records(lambda r: sum(len(d.rows) for d in decoded(r)) >= total, timeout=120))
    problems: list[str] = []
    for path, statements in cases.items():
        tables = golden_cdc.tables(statements)
        got = [t for d in events if d.table in tables for t in golden_cdc.decoded_tuples(d)]
        problems += golden_cdc.differences(path, statements, got)
    assert problems == []
