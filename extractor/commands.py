"""``dbus extractor run|status|reset`` (registered by cli/main.py) and the operator commands behind them:
``status`` (leader, epoch, positions, lag) and ``reset`` (move the position).

    dbus extractor run    --source demo
    dbus extractor status --source demo [--json]
    dbus extractor reset  --source demo --to current|earliest|FILE:POS|GTID [--full-pull] [--force]

``dbus extractor ...`` is ``python -m extractor --config C ...`` in-process (extractor/main.py parses
it, prints its errors as ``extractor: CODE: ...`` and returns its exit codes).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dbuslib.config import DbusConfig, Source
from dbuslib.errors import DbusError

if TYPE_CHECKING:
    from dbuslib import mysql
    from extractor.position import Position


def add_parsers(sub: Any) -> None:
    ex = sub.add_parser(
        "extractor",
        help="binlog reader: run | status | reset (see --help)",
        description="binlog -> first-level Kafka topic",
    )
    add_commands(ex)
    ex.set_defaults(handler=extractor_cli)


def add_commands(p: argparse.ArgumentParser) -> None:
    """``run | status | reset`` under ``p``: ``python -m extractor`` and ``dbus extractor`` alike (each
    answers ``--help`` at every level without a configuration). Here, not in extractor/main.py, so that
    ``dbus --help`` loads no binlog reader (mysql-replication is the server extra's)."""
    sub = p.add_subparsers(dest="extractor_command", required=True, metavar="COMMAND")
    config = argparse.ArgumentParser(add_help=False)  # --config also after the command
    config.add_argument("--config", default=argparse.SUPPRESS, help="configuration file")
    r = sub.add_parser(
        "run", parents=[config], help="read the binlog and publish raw events (leads or waits as standby)"
    )
    r.add_argument("--source", required=True, help="source name under 'sources'")
    s = sub.add_parser("status", parents=[config], help="leader, epoch, committed position and lag")
    s.add_argument("--source", required=True)
    s.add_argument("--json", action="store_true", help="print JSON")
    z = sub.add_parser(
        "reset", parents=[config], help="move the committed position (run it while no extractor runs)"
    )
    z.add_argument("--source", required=True)
    z.add_argument("--to", required=True, help="current | earliest | FILE:POS | GTID (e.g. 0-1-42)")
    z.add_argument(
        "--full-pull", action="store_true", help="also request a full pull of every captured table"
    )
    z.add_argument("--force", action="store_true", help="even while an extractor leads (it will be deposed)")


def extractor_cli(args: argparse.Namespace) -> int:
    from extractor.main import dispatch

    return dispatch(args)


def status(cfg: DbusConfig, ds: str) -> dict[str, Any]:
    """What ``dbus extractor status`` shows, as a dict (``--json`` prints it as is)."""
    from dbuslib import mysql, zk
    from extractor.leader import Leadership
    from extractor.loop import position_file, position_store

    src = cfg.source(ds)
    client = zk.client(cfg.endpoints.zookeeper)
    try:
        leader = Leadership(client, cfg.endpoints.zookeeper.root, ds, "status").current_leader()
        store = position_store(cfg, ds, client)
        in_zk, in_file = store.read_zk(), store.read_file()
    finally:
        client.stop()
        client.close()
    committed = max((p for p in (in_zk, in_file) if p), key=lambda p: (p.epoch, p.sort_key()), default=None)
    db = mysql.connect(src.mysql)
    try:
        end = mysql.binlog_end(db)
    finally:
        db.close()
    return {
        "source": ds,
        "leader": leader,
        "epoch": committed.epoch if committed else 0,
        "zookeeper": in_zk.to_dict() if in_zk else None,
        "local_file": in_file.to_dict() if in_file else None,
        "local_file_path": str(position_file(cfg, src, ds)),
        "server_end": {"file": end.file, "pos": end.pos, "gtid": end.gtid},
        "behind_bytes": _behind(committed, end),
        "lag_s": round(time.time() - committed.ts, 1) if committed and committed.ts else None,
    }


def _behind(committed: Position | None, end: mysql.BinlogPosition) -> int | None:
    if committed is None or committed.file != end.file:
        return None
    return max(0, end.pos - committed.pos)


def format_status(info: dict[str, Any]) -> str:
    leader = info["leader"] or "none (no extractor runs)"
    pos = info["zookeeper"] or info["local_file"]
    where = f"{pos['file']}:{pos['pos']} gtid {pos['gtid'] or '-'}" if pos else "none committed yet"
    behind = f"{info['behind_bytes']} bytes" if info["behind_bytes"] is not None else "another binlog file"
    lines = [
        f"source     {info['source']}",
        f"leader     {leader}",
        f"epoch      {info['epoch']}",
        f"committed  {where}",
        f"  in ZooKeeper {_short(info['zookeeper'])}; local file {_short(info['local_file'])}",
        f"server end {info['server_end']['file']}:{info['server_end']['pos']} (behind: {behind})",
        f"lag        {info['lag_s']} s since the last committed transaction's time"
        if info["lag_s"] is not None
        else "lag        unknown",
    ]
    return "\n".join(lines)


def _short(p: dict[str, Any] | None) -> str:
    return f"{p['file']}:{p['pos']} (epoch {p['epoch']})" if p else "none"


def reset(cfg: DbusConfig, ds: str, to: str, *, full_pull: bool = False, force: bool = False) -> str:
    """Write a new committed position (and a new epoch); optionally request full pulls of every table."""
    from dbuslib import zk
    from extractor.leader import Leadership
    from extractor.loop import position_store

    src = cfg.source(ds)
    target = _target(src, to)
    client = zk.client(cfg.endpoints.zookeeper)
    try:
        leadership = Leadership(client, cfg.endpoints.zookeeper.root, ds, "reset")
        running = leadership.current_leader()
        if running and not force:
            msg = f"{ds}: extractor {running} is running; stop it first (or pass --force to depose it)"
            raise DbusError(msg)
        epoch = leadership.bump_epoch()
        position_store(cfg, ds, client).reset(replace(target, epoch=epoch))
    finally:
        client.stop()
        client.close()
    done = f"{ds}: position reset to {target} (epoch {epoch})"
    if full_pull:
        tables = request_full_pulls(cfg, ds, src)
        done += f"; full pull requested for {len(tables)} table(s): {', '.join(tables)}"
    return done


def _target(src: Source, to: str) -> Position:
    from dbuslib import mysql
    from extractor.reader import initial_position

    db = mysql.connect(src.mysql)
    try:
        return initial_position(
            src.model_copy(update={"extractor": src.extractor.model_copy(update={"start": to})}), db
        )
    finally:
        db.close()


def captured_tables(src: Source) -> list[str]:
    from dbuslib import mysql
    from dbuslib.filters import TableFilter

    db = mysql.connect(src.mysql)
    wanted = TableFilter(src.capture)
    try:
        with db.cursor() as cur:
            cur.execute(
                "SELECT table_schema, table_name FROM information_schema.tables "
                "WHERE table_type = 'BASE TABLE' ORDER BY 1, 2"
            )
            return [
                f"{s}.{t}" for s, t in cur.fetchall() if wanted.allows(s, t) and s != src.heartbeat.schema_
            ]
    finally:
        db.close()


def request_full_pulls(cfg: DbusConfig, ds: str, src: Source) -> list[str]:
    """One FULL_DATA_INDEPENDENT_PULL_REQ per captured table on ``<ds>_ctrl`` (the original's payload)."""
    from dbuslib import kafka, topics
    from ums import control_key, control_to_json
    from ums.control import full_pull_request
    from ums.timefmt import epoch_ms

    tables = captured_tables(src)
    topic = src.topics.name("ctrl", ds)
    kafka.ensure_topics(cfg.endpoints.kafka, [topic])
    producer = kafka.producer(cfg.endpoints.kafka)
    now = datetime.now(UTC)
    for i, name in enumerate(tables):
        schema, table = name.split(".", 1)
        msg = full_pull_request(
            ds,
            schema,
            table,
            result_topic=topics.result_topic(ds, src, schema, table),
            remark="after extractor reset",
            seqno=epoch_ms(now) + i,  # ids are epoch ms: keep them unique within one burst
            from_="dbus-extractor-reset",
            now=now,
        )
        producer.send(topic, key=control_key(msg).encode(), value=control_to_json(msg).encode())
    producer.flush()
    producer.close()
    return tables
