"""``dbus metrics exporter``: DBus's Prometheus exporter (dbuslib/promexport.py) on
``prometheus.listen``: Prometheus scrapes its ``/metrics``; DBus's processes write to it through
``endpoints.influxdb.exporter`` (docs/monitoring.md#prometheus)."""

from __future__ import annotations

import argparse
from typing import Any

from dbuslib.config import load_config, parse_listen
from dbuslib.errors import ConfigError


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


def serve(args: argparse.Namespace) -> int:
    import waitress

    from dbuslib.promexport import Latest, app

    cfg = load_config(args.config)
    host, port = parse_listen(args.listen or cfg.prometheus.listen, "--listen / prometheus.listen")
    try:
        server = waitress.create_server(
            app(Latest(cfg.prometheus.expire_s)), host=host, port=port, threads=4, ident="dbus-exporter"
        )
    except OSError as e:
        msg = f"dbus metrics exporter: cannot listen on {host}:{port}: {e.strerror or e}"
        raise ConfigError(msg) from None
    print(f"dbus metrics exporter: serving on http://{host}:{port}/metrics", flush=True)
    server.run()
    return 0
