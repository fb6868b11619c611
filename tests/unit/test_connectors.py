"""dbuslib.connectors: which resolved jars a Spark stage adds (pyspark's own dropped), the Ivy module, the
user cache's place."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from dbuslib import connectors


def test_artifact_names_drop_the_version():
    assert connectors.artifact("kafka-clients-3.9.2.jar") == "kafka-clients"
    assert connectors.artifact("spark-sql-kafka-0-10_2.13-4.2.0.jar") == "spark-sql-kafka-0-10_2.13"
    assert connectors.artifact("snappy-java-1.1.10.8.jar") == "snappy-java"
    assert connectors.artifact("scala-library-2.13.18.jar") == "scala-library"


def test_what_pyspark_ships_is_dropped_whatever_its_version():
    """What Ivy retrieved for Spark 4.2.0's Kafka connector, against jars pyspark 4.2.0 ships."""
    resolved = [
        "lz4-java-1.11.0.jar",
        "jsr305-3.0.0.jar",
        "commons-pool2-2.13.1.jar",
        "hadoop-client-api-3.5.0.jar",
        "hadoop-client-runtime-3.5.0.jar",
        "kafka-clients-3.9.2.jar",
        "spark-sql-kafka-0-10_2.13-4.2.0.jar",
        "spark-tags_2.13-4.2.0.jar",
        "spark-token-provider-kafka-0-10_2.13-4.2.0.jar",
        "scala-library-2.13.18.jar",
        "slf4j-api-2.0.17.jar",
        "snappy-java-1.1.10.8.jar",
        "mariadb-java-client-3.5.11.jar",
        "ivy.xml",
    ]
    shipped = [
        "lz4-java-1.8.0.jar",
        "jsr305-3.0.0.jar",
        "hadoop-client-api-3.4.2.jar",
        "hadoop-client-runtime-3.4.2.jar",
        "spark-tags_2.13-4.2.0.jar",
        "scala-library-2.13.16.jar",
        "slf4j-api-2.0.17.jar",
        "snappy-java-1.1.10.7.jar",
    ]
    assert connectors.kept(resolved, shipped) == [
        "commons-pool2-2.13.1.jar",
        "kafka-clients-3.9.2.jar",
        "mariadb-java-client-3.5.11.jar",
        "spark-sql-kafka-0-10_2.13-4.2.0.jar",
        "spark-token-provider-kafka-0-10_2.13-4.2.0.jar",
    ]


def test_the_ivy_module_depends_on_each_coordinate():
    root = ET.fromstring(connectors.ivy_module(connectors.coordinates("4.2.0")))
    deps = [(d.get("org"), d.get("name"), d.get("rev"), d.get("conf")) for d in root.iter("dependency")]
    assert deps == [
        ("org.apache.spark", "spark-sql-kafka-0-10_2.13", "4.2.0", "default->default"),
        ("org.mariadb.jdbc", "mariadb-java-client", connectors.MARIADB_JDBC, "default->default"),
    ]


def test_the_cache_is_dbus_cache_else_xdg_else_home(monkeypatch, tmp_path):
    monkeypatch.setenv("DBUS_CACHE", str(tmp_path / "a"))
    assert connectors.cache_root() == tmp_path / "a"
    monkeypatch.delenv("DBUS_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert connectors.cache_root() == tmp_path / "x" / "dbus"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert connectors.cache_root() == tmp_path / "h" / ".cache" / "dbus"


def test_a_folder_resolved_for_the_same_coordinates_is_kept(monkeypatch, tmp_path):
    """No Ivy run (it would fail: no java on a PATH of nothing) when the folder is complete."""
    out = tmp_path / "jars"
    out.mkdir()
    (out / "kafka-clients-3.9.2.jar").write_bytes(b"PK")
    jar = str(out / "kafka-clients-3.9.2.jar")
    (out / "spark.jars").write_text(jar + "\n")
    stamp = "\n".join(":".join(c) for c in connectors.coordinates(connectors.spark_version()))
    (out / "coordinates").write_text(stamp + "\n")
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    listed = tmp_path / "list" / "spark.jars"
    assert connectors.resolve(out, listed) == [jar]
    assert listed.read_text() == jar + "\n"
