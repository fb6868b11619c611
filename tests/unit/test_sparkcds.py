"""dbuslib/sparkcds.py: a Spark driver's JVM options name the class archive made for that JVM, Spark and
those options, when it exists and ``spark.class_data_sharing`` is on; each set of options has its own."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dbuslib import connectors, spark, sparkcds
from dbuslib.config import DEFAULT_CONFIG, load_config

OPTIONS = "spark.driver.extraJavaOptions"


def config(tmp_path: Path, **spark_keys: object):
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    jar = tmp_path / "jars" / "dbus-jvm.jar"
    jar.parent.mkdir()
    jar.write_bytes(b"PK")
    (tmp_path / "jars" / "spark.jars").write_text(str(jar))
    raw["spark"].update({"jars_file": str(tmp_path / "jars" / "spark.jars"), **spark_keys})
    path = tmp_path / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_config(path)


@pytest.fixture(autouse=True)
def no_spark_home(monkeypatch):
    monkeypatch.delenv("SPARK_HOME", raising=False)


def test_without_an_archive_the_options_stay_as_configured(tmp_path):
    cfg = config(tmp_path)
    conf = spark.settings(cfg)
    assert sparkcds.with_archive(cfg, conf) == conf


def test_an_archive_beside_the_jars_is_named_with_the_logs_of_class_sharing_off(tmp_path):
    cfg = config(tmp_path)
    conf = spark.settings(cfg)
    path = sparkcds.archive_path(cfg, conf[OPTIONS])
    assert path.parent == tmp_path / "jars"
    path.write_bytes(b"archive")
    got = sparkcds.with_archive(cfg, conf)[OPTIONS]
    assert got == f"{conf[OPTIONS]} -XX:SharedArchiveFile={path} {sparkcds.QUIET}"


def test_the_stage_options_decide_which_archive(tmp_path):
    cfg = config(tmp_path, stages={"logprocessor": {OPTIONS: "-XX:+UseSerialGC"}})
    base, own = sparkcds.option_sets(cfg)
    assert own == "-XX:+UseSerialGC" and base != own
    sparkcds.archive_path(cfg, own).write_bytes(b"archive")
    args = spark.submit_args(cfg, "logprocessor", 1)
    assert f"{OPTIONS}=-XX:+UseSerialGC -XX:SharedArchiveFile={sparkcds.archive_path(cfg, own)}" in " ".join(
        args
    )
    assert "SharedArchiveFile" not in " ".join(spark.submit_args(cfg, "dispatcher", 1))  # its own: not made


def test_class_data_sharing_off_leaves_the_options_alone(tmp_path):
    cfg = config(tmp_path, class_data_sharing=False)
    conf = spark.settings(cfg)
    sparkcds.archive_path(cfg, conf[OPTIONS]).write_bytes(b"archive")
    assert sparkcds.with_archive(cfg, conf) == conf


def test_an_archive_in_the_configured_options_is_kept_alone(tmp_path):
    own = {OPTIONS: "-XX:SharedArchiveFile=/opt/my.jsa"}
    assert sparkcds.with_archive(config(tmp_path), own) == own


def test_the_key_changes_with_the_options_the_jvm_and_spark(tmp_path, monkeypatch):
    a = sparkcds.key("-XX:+UseSerialGC")
    assert a == sparkcds.key(" -XX:+UseSerialGC ")
    assert a != sparkcds.key("-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    monkeypatch.setattr(connectors, "java_path", lambda: str(tmp_path / "other-java"))
    assert a != sparkcds.key("-XX:+UseSerialGC")
    monkeypatch.undo()
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "spark"))
    assert a != sparkcds.key("-XX:+UseSerialGC")


def test_the_key_changes_when_a_jar_of_the_class_path_is_replaced(tmp_path, monkeypatch):
    """A reinstalled pyspark: the same names, new files; the JVM would refuse the old archive."""
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    (jars / "spark-core.jar").write_bytes(b"PK1")
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "spark"))
    a = sparkcds.key("-XX:+UseSerialGC")
    assert a == sparkcds.key("-XX:+UseSerialGC")
    (jars / "spark-core.jar").write_bytes(b"PK22")
    assert a != sparkcds.key("-XX:+UseSerialGC")
