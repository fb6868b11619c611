"""Spark's own metrics as its GraphiteSink sends them, for ``dbus metrics exporter`` (dbuslib/promexport.py).

A Spark stage with ``prometheus.spark_metrics`` set (dbuslib.spark.settings) reports every metric of its
metrics system (the JVM's heap and GC, the DAG scheduler, the block manager, the streaming queries...)
every ``PERIOD_S`` seconds over TCP in Graphite's plaintext protocol, one line per value::

    dbus_spark.dbus-appender-demo.driver.jvm.heap.used 123456789 1764470000

``<PREFIX>.<app>.<instance>.<metric>``: the application's name (``spark.metrics.namespace``; DBus's names
hold no dot), ``driver`` or an executor's id, then the metric's own dotted name. ``parse_line`` makes it the
sample ``spark_<metric>{app, instance}`` (dots and other characters Prometheus does not take become ``_``);
a line that is not DBus's Spark's (another prefix, too few parts, a value that is not a finite number) is
None, counted and dropped by the exporter.
"""

from __future__ import annotations

import math

from dbuslib.lineprotocol import Sample

PREFIX = "dbus_spark"  # GraphiteSink's prefix: DBus's Spark lines told from anything else sent to the port
MEASUREMENT = "spark"
PERIOD_S = 10


def parse_line(line: str) -> Sample | None:
    """One line of Graphite's plaintext protocol from DBus's Spark as a sample; None when it is not one."""
    parts = line.split()
    if len(parts) not in (2, 3):
        return None
    path, raw = parts[0], parts[1]
    names = path.split(".")
    if len(names) < 4 or names[0] != PREFIX or not names[1] or not names[2]:
        return None
    try:
        value = float(raw)
        when = int(parts[2]) * 1_000_000_000 if len(parts) == 3 else None
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    field = "_".join(n for n in names[3:] if n)
    if not field:
        return None
    return Sample(MEASUREMENT, (("app", names[1]), ("instance", names[2])), ((field, value),), when)
