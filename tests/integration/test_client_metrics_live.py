"""A consumer client's metrics (dbusclient/metrics.py) written to the stack's InfluxDB through the stages'
writer, then read back by ``dbus status`` of the source: the client's rows/s, lag and bootstrap state on
the screen and in ``--json``, and the per-partition, per-pull and per-code points in their measurements.
The client is named ``pytest_<uuid>`` (source ``demo``); its series are dropped afterwards."""

from __future__ import annotations

import argparse
import json
import uuid

import pytest
from dashboards import influxql

from cli import status
from dbusclient import metrics
from dbusclient.checkpoint import Bootstrap, Checkpoint, Mode, PartitionPosition, TablePull
from dbuslib.stagemetrics import PointWriter

TOPIC = "demo.shop.result"
PULLS = (
    TablePull("demo", "shop", "orders", 1704164645123, 1030000012000000, 420001, False),
    TablePull("demo", "shop", "items", 1704164645124, 1030000012000001, 7, True),
)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def client_name(cfg):
    name = f"pytest_{uuid.uuid4().hex[:12]}"
    yield name
    for measurement in (
        metrics.MEASUREMENT,
        metrics.LAG_MEASUREMENT,
        metrics.BOOTSTRAP_MEASUREMENT,
        metrics.ERROR_MEASUREMENT,
    ):
        influxql(cfg, f'DROP SERIES FROM "{measurement}" WHERE "{metrics.TAG_CLIENT}" = \'{name}\'')


def test_a_clients_metrics_show_in_dbus_status(cfg, client_name, capsys):
    clock, writer = Clock(), PointWriter(cfg.endpoints.influxdb, name="pytest-client-metrics")
    m = metrics.ClientMetrics("demo", client_name, writer, interval_s=10.0, clock=clock)
    m.checkpoint(Checkpoint(Mode.BOOTSTRAP_SNAPSHOT, (PartitionPosition(TOPIC, 0, 300),), Bootstrap(PULLS)))
    m.window(2000, 1990, 10, 0, 0.4)
    m.window(1000, 995, 0, 5, 0.2)
    m.error("CLIENT_SINK_FAILED")
    clock.t += 10.0
    assert m.due()
    m.lag({(TOPIC, 0): 1500}, {(TOPIC, 0): 300})
    assert m.flush_if_due() == 5  # client, one partition, two pulls, one code
    assert writer.flush(10.0) and writer.failed_writes == 0 and writer.dropped == 0

    assert status.cli(argparse.Namespace(config=str(cfg.path), source="demo", json=True, window=10.0)) in (
        0,
        1,
    )
    snap = json.loads(capsys.readouterr().out)
    [mine] = [c for c in snap["clients"] if c["client"] == client_name]
    assert {k: v for k, v in mine.items() if k != "age_s"} == {
        "client": client_name,
        "rows_per_s": 300.0,
        "applied_per_s": 298.5,
        "lag_records": 1200,
        "mode": "BOOTSTRAP_SNAPSHOT",
        "pulls": 2,
        "pulls_ended": 1,
        "bootstrap_rows": 420008,
    }
    assert 0 <= mine["age_s"] < 60

    status.cli(argparse.Namespace(config=str(cfg.path), source="demo", json=False, window=10.0))
    screen = capsys.readouterr().out
    [line] = [x for x in screen.splitlines() if client_name in x]
    assert "300.0" in line and "1,200" in line, screen
    assert line.endswith("bootstrap snapshot: 1/2 pulls ended, 420,008 rows"), screen

    def rows(measurement: str, tag: str) -> dict[str, list]:
        series = influxql(
            cfg,
            f'SELECT * FROM "{measurement}" WHERE "{metrics.TAG_CLIENT}" = \'{client_name}\' '
            f'AND time > now() - 1h GROUP BY "{tag}"',
        )
        return {
            s["tags"][tag]: [dict(zip(s["columns"], v, strict=False)) for v in s["values"]] for s in series
        }

    [lag] = rows(metrics.LAG_MEASUREMENT, "partition")["0"]
    assert (lag["topic"], lag["lag_records"]) == (TOPIC, 1200)
    pulls = rows(metrics.BOOTSTRAP_MEASUREMENT, "id")
    assert {k: (v[0]["table"], v[0]["rows"], v[0]["ended"]) for k, v in pulls.items()} == {
        "1704164645123": ("orders", 420001, 0),
        "1704164645124": ("items", 7, 1),
    }
    [err] = rows(metrics.ERROR_MEASUREMENT, "code")["CLIENT_SINK_FAILED"]
    assert err["count"] == 1
