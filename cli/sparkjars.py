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

import sys

from dbuslib import connectors
from dbuslib.config import DbusConfig


def ensure(cfg: DbusConfig) -> list[str]:
    """The stage jars' list ready (``dbuslib.spark.jars_list``): nothing to do when ``spark.jars_file``
    exists; else resolved and built into the user cache (a few seconds when done before), what it does
    said on stderr. Returns the jars."""
    from binlog import jvmjar
    from dbuslib import spark

    if spark.configured_jars(cfg) is not None:
        return spark.jars(cfg)
    folder = connectors.user_folder()
    found = connectors.resolve(folder, say=tell)
    jar = folder / spark.JVM_JAR
    if not jar.exists():
        tell(f"building DBus's JVM jar {jar} (javac, once)")
    jvmjar.build(jar, folder)
    connectors.write_list(folder / connectors.FULL_LIST_NAME, [*found, str(jar)])
    return spark.jars(cfg)


def tell(message: str) -> None:
    print(f"dbus: {message}", file=sys.stderr, flush=True)
