"""``dbus spark jars``: the jars a Spark stage needs, made ready when no ``spark.jars_file`` lists them.

A checkout's ``make stack-up`` writes ``.stack/jars/spark.jars``; an installed DBus (``pip install``, no
checkout) has no such list, and ``dbus submit`` calls ``ensure`` before it starts spark-submit: Spark's
connectors are resolved once into the user cache (``dbuslib.connectors``, Apache Ivy from Maven Central,
cached), DBus's JVM jar is compiled beside them from the sources the package carries (``binlog.jvmjar``, a
JDK 17; again only when a source is newer than the jar), and the two are listed in
``<cache>/spark-<version>/dbus.jars``, which ``dbuslib.spark.jars`` reads when ``spark.jars_file`` does not
exist. ``dbus spark jars`` does it ahead (e.g. while building an image) and prints the list.
"""

from __future__ import annotations

import logging
import os
import sys

from dbuslib import connectors
from dbuslib.config import DbusConfig

log = logging.getLogger("dbus.sparkjars")


def ensure(cfg: DbusConfig, say: bool = True) -> list[str]:
    """The stage jars' list ready (``dbuslib.spark.jars_list``): nothing to do when ``spark.jars_file``
    exists; else resolved and built into the user cache (a few seconds when done before). Returns the
    jars."""
    from dbuslib import spark

    configured = cfg.resolve(cfg.spark.jars_file)
    if configured.exists():
        return spark.jars(cfg)
    folder = connectors.user_folder()
    tell = (lambda m: print(f"dbus: {m}", file=sys.stderr, flush=True)) if say else log.info
    found = connectors.resolve(folder, say=tell)
    from binlog import jvmjar

    jar = folder / spark.JVM_JAR
    fresh = not jar.exists()
    if fresh:
        tell(f"building DBus's JVM jar {jar} (javac, once)")
    jvmjar.build(jar, folder)
    listed = [*found, str(jar)]
    target = folder / connectors.FULL_LIST_NAME
    if not target.exists() or target.read_text().strip() != ",".join(listed):
        tmp = target.with_name(f"{target.name}.tmp.{os.getpid()}")
        tmp.write_text(",".join(listed) + "\n")
        tmp.replace(target)
    return spark.jars(cfg)
