"""``dbus metrics exporter``: DBus's Prometheus exporter (dbuslib/promexport.py) on
``prometheus.listen``: Prometheus scrapes its ``/metrics``; DBus's processes write to it through
``endpoints.influxdb.exporter`` (docs/monitoring.md#prometheus). Beside what they write, it tells from
ZooKeeper which stages run: ``dbus_process_up{ds,stage}``, the processes of each stage of each configured
source announced there (dbuslib/liveness.py, as ``dbus status`` reads them); 0 is a stage that is down.
"""

from __future__ import annotations

import argparse
import logging
import socketserver
import threading
from collections.abc import Iterator
from typing import Any

from dbuslib.config import DbusConfig, load_config, parse_listen
from dbuslib.errors import ConfigError

log = logging.getLogger(__name__)


def add_parsers(sub: Any) -> None:
    mp = sub.add_parser("metrics", help="Prometheus: the exporter of DBus's measurements").add_subparsers(
        dest="action", required=True
    )
    ex = mp.add_parser(
        "exporter",
        help="serve every measurement DBus writes on /metrics (docs/monitoring.md#prometheus)",
        description="Take DBus's points (InfluxDB line protocol on /api/v2/write, what "
        "endpoints.influxdb.exporter sends) and serve the newest value of each series on /metrics.",
    )
    ex.add_argument("--listen", metavar="HOST:PORT", help="default: prometheus.listen (127.0.0.1:19091)")
    ex.set_defaults(handler=serve)


class Processes:
    """``dbus_process_up``: per configured source and stage of ``dbus status``'s list, the announced
    processes that run, read from ZooKeeper at each scrape; nothing when ZooKeeper does not answer (the
    scrape goes on with the rest, and ``dbus_exporter_zookeeper_up`` says 0)."""

    def __init__(self, cfg: DbusConfig) -> None:
        self.cfg = cfg
        self._client: Any = None

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        from dbuslib import liveness, zk
        from status.readers import LIVE_STAGES, LOG_LIVE_STAGES

        up = GaugeMetricFamily(
            "dbus_process_up",
            "processes of the stage announced in ZooKeeper that run (0: down)",
            labels=["ds", "stage"],
        )
        reached = 1
        try:
            if self._client is None:
                self._client = zk.client(self.cfg.endpoints.zookeeper)
            root, host = self.cfg.endpoints.zookeeper.root, liveness.this_host()
            wanted: list[tuple[str, tuple[str, ...]]] = [(ds, LIVE_STAGES) for ds in self.cfg.sources]
            wanted += [(ds, LOG_LIVE_STAGES) for ds in self.cfg.log_sources]
            for ds, stages in wanted:
                announced = liveness.read(self._client, root, ds)
                for stage in stages:
                    up.add_metric([ds, stage], len(liveness.alive(announced.get(stage, []), host)))
        except Exception as e:  # a scrape never fails for ZooKeeper: the figures DBus wrote still count
            log.warning("dbus metrics exporter: ZooKeeper not read: %s", e)
            reached = 0
            if self._client is not None:
                self._client.stop()
                self._client = None
        else:
            yield up
        yield GaugeMetricFamily("dbus_exporter_zookeeper_up", "ZooKeeper answered this scrape", value=reached)


def serve(args: argparse.Namespace) -> int:
    import waitress

    from dbuslib.promexport import Latest, app

    cfg = load_config(args.config)
    host, port = parse_listen(args.listen or cfg.prometheus.listen, "--listen / prometheus.listen")
    latest = Latest(cfg.prometheus.expire_s)
    try:
        server = waitress.create_server(
            app(latest, Processes(cfg)),
            host=host,
            port=port,
            threads=4,
            ident="dbus-exporter",
        )
    except OSError as e:
        msg = f"dbus metrics exporter: cannot listen on {host}:{port}: {e.strerror or e}"
        raise ConfigError(msg) from None
    print(f"dbus metrics exporter: serving on http://{host}:{port}/metrics", flush=True)
    if cfg.prometheus.spark_metrics:
        where = "prometheus.spark_metrics"
        g_host, g_port = parse_listen(cfg.prometheus.spark_metrics, where)
        try:
            graphite = GraphiteServer((g_host, g_port), latest)
        except OSError as e:
            msg = f"dbus metrics exporter: cannot listen on {g_host}:{g_port} ({where}): {e.strerror or e}"
            raise ConfigError(msg) from None
        threading.Thread(target=graphite.serve_forever, name="dbus-exporter-spark", daemon=True).start()
        print(f"dbus metrics exporter: taking Spark's metrics on {g_host}:{g_port} (Graphite)", flush=True)
    server.run()
    return 0


MAX_LINE_BYTES = 4096  # a Graphite line of Spark's is a metric's name and two numbers: far shorter


class GraphiteServer(socketserver.ThreadingTCPServer):
    """Spark's GraphiteSink's connections: each line becomes a sample of ``latest`` (dbuslib/graphite.py);
    a line that is not DBus's Spark's is dropped and counted (``dropped``)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], latest: Any) -> None:
        self.latest, self.dropped = latest, 0
        super().__init__(address, _GraphiteLines)


class _GraphiteLines(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        from dbuslib.graphite import parse_line

        server = self.server
        assert isinstance(server, GraphiteServer)
        skipping = False  # the rest of a line longer than MAX_LINE_BYTES: dropped, not held in memory
        while raw := self.rfile.readline(MAX_LINE_BYTES):
            whole = raw.endswith(b"\n") or len(raw) < MAX_LINE_BYTES  # (the last line may lack its \n)
            if skipping or not whole:
                if not skipping:
                    server.dropped += 1
                skipping = not whole
                continue
            sample = parse_line(raw.decode("utf-8", "replace"))
            if sample is None:
                server.dropped += 1
            else:
                server.latest.add([sample])
