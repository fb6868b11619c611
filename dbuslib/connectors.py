"""The jars a Spark stage adds to pyspark: the Kafka source and sink (``spark-sql-kafka-0-10`` with what it
needs: ``spark-token-provider-kafka-0-10``, ``kafka-clients``, ``commons-pool2``) and the MariaDB JDBC driver.

One home for their coordinates and their resolution, used by the local stack (``make stack-up``:
``.stack/jars/spark.jars``) and by an installed DBus with no ``spark.jars_file`` list (a pip install: the
jars land in ``<cache>/spark-<version>/``, ``<cache>`` being ``$DBUS_CACHE``, else ``$XDG_CACHE_HOME/dbus``,
else ``~/.cache/dbus``). They are resolved with Apache Ivy, the resolver Spark's own ``--packages`` uses
(its jar ships in pyspark), from Ivy's default repository, Maven Central, with their transitive
dependencies; every jar pyspark already ships (any version: scala, slf4j, lz4, snappy, hadoop...) is
dropped, so no class is on the classpath twice. A folder already resolved for the same coordinates is kept
as it is (nothing downloaded). Behind a mirror, ``DBUS_IVY_SETTINGS`` names an Ivy settings file (what
``spark.jars.ivySettings`` is to Spark)::

    python -m dbuslib.connectors --out .stack/jars/spark --list .stack/jars/spark.jars
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from xml.sax.saxutils import quoteattr

from dbuslib.errors import StackError

MARIADB_JDBC = "3.5.11"
LIST_NAME = "spark.jars"  # the comma-separated list beside the jars (spark-submit's --jars)
FULL_LIST_NAME = "dbus.jars"  # in the user folder: the connectors and DBus's JVM jar (cli/sparkjars.py)
STAMP_NAME = "coordinates"  # what the folder was resolved for
RESOLVE_TIMEOUT_S = 900


def coordinates(spark_version: str) -> list[tuple[str, str, str]]:
    """(organisation, module, revision) of each connector for pyspark ``spark_version``."""
    return [
        ("org.apache.spark", "spark-sql-kafka-0-10_2.13", spark_version),
        ("org.mariadb.jdbc", "mariadb-java-client", MARIADB_JDBC),
    ]


def artifact(jar_name: str) -> str:
    """A jar's artifact name without its version: ``kafka-clients-3.9.2.jar`` -> ``kafka-clients``."""
    return re.sub(r"-[0-9]+(\.[0-9]+)+.*$", "", jar_name)


def kept(resolved: list[str], shipped: list[str]) -> list[str]:
    """The resolved jar names whose artifact pyspark does not already ship (``shipped``: its jars' names)."""
    have = {artifact(name) for name in shipped}
    return sorted(name for name in resolved if name.endswith(".jar") and artifact(name) not in have)


def ivy_module(coords: list[tuple[str, str, str]]) -> str:
    """An ivy.xml depending on ``coords`` (their ``default`` configuration: compile and runtime scopes)."""
    deps = "\n".join(
        f'    <dependency org={quoteattr(o)} name={quoteattr(m)} rev={quoteattr(r)} conf="default->default"/>'
        for o, m, r in coords
    )
    return (
        '<ivy-module version="2.0">\n  <info organisation="dbus" module="spark-connectors"/>\n'
        '  <configurations><conf name="default"/></configurations>\n'
        f"  <dependencies>\n{deps}\n  </dependencies>\n</ivy-module>\n"
    )


def cache_root() -> Path:
    if os.environ.get("DBUS_CACHE"):
        return Path(os.environ["DBUS_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dbus"


def pyspark_jars() -> Path:
    """The jars folder of the pyspark beside DBus."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def spark_version() -> str:
    import pyspark

    return pyspark.__version__


def user_folder() -> Path:
    """Where an installed DBus keeps the connectors of its pyspark (and the JVM jar built beside them)."""
    return cache_root() / f"spark-{spark_version()}"


def java_path() -> str | None:
    """The java Spark and spark-submit run: ``$JAVA_HOME/bin/java``, else the one on PATH; None if absent."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return java if java and os.path.exists(java) else None


def _java() -> str:
    java = java_path()
    if java is None:
        msg = "java not found (JAVA_HOME or PATH): Spark and the resolution of its connectors need Java 17"
        raise StackError(msg)
    return java


def listed(out: Path) -> list[str] | None:
    """The jars of a folder resolved before (its list), None when there is none or a jar is gone."""
    try:
        jars = [j for j in (out / LIST_NAME).read_text().strip().split(",") if j]
    except FileNotFoundError:
        return None
    return jars if jars and all(os.path.isfile(j) for j in jars) else None


def resolve(out: Path, list_file: Path | None = None, say: object = None) -> list[str]:
    """The connector jars of this pyspark in ``out`` (absolute paths), resolved once: a folder resolved
    for the same coordinates is kept. Also written, comma-separated, to ``out/spark.jars`` and to
    ``list_file`` when given. Processes resolving the same folder take turns. StackError when Java is
    missing or the resolution fails (the repository unreachable, a coordinate unknown)."""
    coords = coordinates(spark_version())
    stamp = "\n".join(":".join(c) for c in coords)
    out.mkdir(parents=True, exist_ok=True)
    with (out / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        jars = listed(out)
        if jars is None or _read(out / STAMP_NAME) != stamp:
            if callable(say):
                say(f"resolving Spark's connectors ({', '.join(':'.join(c) for c in coords)}) into {out}")
            jars = _retrieve(out, coords)
            write_list(out / LIST_NAME, jars)
            _write(out / STAMP_NAME, stamp)
    if list_file is not None:
        write_list(list_file, jars)
    return jars


def write_list(path: Path, jars: list[str]) -> None:
    """``jars`` comma-separated in ``path`` (its folder made), rewritten only when they differ."""
    text = ",".join(jars)
    if _read(path) != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        _write(path, text)


def _retrieve(out: Path, coords: list[tuple[str, str, str]]) -> list[str]:
    ivy = sorted(pyspark_jars().glob("ivy-*.jar"))
    if not ivy:
        msg = f"{pyspark_jars()} has no ivy jar: cannot resolve Spark's connectors"
        raise StackError(msg)
    for old in out.glob("*.jar"):
        old.unlink()
    with tempfile.TemporaryDirectory(prefix="dbus-ivy-") as tmp:
        module = Path(tmp) / "ivy.xml"
        module.write_text(ivy_module(coords))
        fetched = Path(tmp) / "jars"
        # a short run: C1 alone and the serial collector cost Ivy less CPU than the JIT's second tier
        quick = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
        argv = [_java(), *quick, "-jar", str(ivy[-1]), "-ivy", str(module), "-confs", "default"]
        argv += [
            "-cache",
            str(cache_root() / "ivy"),
            "-retrieve",
            f"{fetched}/[artifact]-[revision](-[classifier]).[ext]",
        ]
        if os.environ.get("DBUS_IVY_SETTINGS"):
            argv += ["-settings", os.environ["DBUS_IVY_SETTINGS"]]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S, check=False)
        names = sorted(p.name for p in fetched.glob("*")) if fetched.is_dir() else []
        if done.returncode != 0 or not names:
            problems = [ln for ln in (done.stdout + done.stderr).splitlines() if "::" in ln or "ERROR" in ln]
            msg = f"resolving Spark's connectors failed (Ivy exit {done.returncode}): " + (
                " | ".join(problems[-12:]) or done.stderr.strip()[-2000:]
            )
            raise StackError(msg)
        shipped = [p.name for p in pyspark_jars().glob("*.jar")]
        for name in kept(names, shipped):
            shutil.copy2(fetched / name, out / name)
    return [str(out / name) for name in sorted(p.name for p in out.glob("*.jar"))]


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return None


def _write(path: Path, text: str) -> None:
    """Written to a temporary file and renamed: a reader never sees half a list."""
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    tmp.write_text(text + "\n")
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dbuslib.connectors", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=None, help="the jars' folder (default: the user cache's)")
    p.add_argument("--list", type=Path, default=None, help="also write the comma-separated list here")
    args = p.parse_args(argv)
    try:
        jars = resolve(args.out or user_folder(), args.list, say=lambda m: print(m, file=sys.stderr))
    except StackError as e:
        print(f"connectors: {e.code}: {e}", file=sys.stderr)
        return 1
    print(",".join(jars))
    return 0


if __name__ == "__main__":
    sys.exit(main())
