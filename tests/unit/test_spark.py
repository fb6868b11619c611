"""dbuslib/spark.py's pure parts: the jars a stage needs (each listed file must exist, and the error says
how to make it), the filesystem of a checkpoint root, a query's checkpoint location, and the checkpoint
manager chosen by that filesystem."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dbuslib import spark
from dbuslib.config import DEFAULT_CONFIG, load_config
from dbuslib.errors import StackError

FS_MANAGER = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
S3_MANAGER = "org.apache.spark.internal.io.cloud.AbortableStreamBasedCheckpointFileManager"


def config(tmp_path: Path, **spark_keys: object):
    """The sample configuration in ``tmp_path`` with ``spark_keys`` over its ``spark`` section."""
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    raw["spark"].update(spark_keys)
    path = tmp_path / "conf" / "dbus.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(raw))
    return load_config(path)


def jars_config(tmp_path: Path, names: list[str], make: list[str]):
    """A configuration whose jars file lists ``names`` (paths under tmp_path/jars, or URIs), of which the
    files in ``make`` exist."""
    folder = tmp_path / "jars"
    folder.mkdir(exist_ok=True)
    for name in make:
        (folder / name).write_bytes(b"PK")
    listed = [n if ":" in n else str(folder / n) for n in names]
    (folder / "spark.jars").write_text(",".join(listed) + "\n")
    return config(tmp_path, jars_file=str(folder / "spark.jars")), folder


def test_jars_lists_every_jar_when_each_exists(tmp_path):
    cfg, folder = jars_config(tmp_path, ["kafka.jar", "dbus-jvm.jar"], ["kafka.jar", "dbus-jvm.jar"])
    assert spark.jars(cfg) == [str(folder / "kafka.jar"), str(folder / "dbus-jvm.jar")]


def test_a_missing_jvm_decoder_jar_says_dbus_jvm_build_with_its_path(tmp_path):
    cfg, folder = jars_config(tmp_path, ["kafka.jar", "dbus-jvm.jar"], ["kafka.jar"])
    with pytest.raises(StackError) as e:
        spark.jars(cfg)
    jar = folder / "dbus-jvm.jar"
    assert f"lists jars that do not exist: {jar}" in str(e.value)
    assert f"run `dbus jvm build --out {jar}`" in str(e.value)
    assert "make stack-up" not in str(e.value)


def test_a_missing_connector_jar_says_make_stack_up(tmp_path):
    cfg, folder = jars_config(tmp_path, ["kafka.jar", "dbus-jvm.jar"], ["dbus-jvm.jar"])
    with pytest.raises(StackError, match=r"do not exist: .*kafka\.jar: run `make stack-up`") as e:
        spark.jars(cfg)
    assert "dbus jvm build" not in str(e.value)


def test_both_missing_name_both_fixes(tmp_path):
    cfg, folder = jars_config(tmp_path, ["kafka.jar", "dbus-jvm.jar"], [])
    with pytest.raises(StackError) as e:
        spark.jars(cfg)
    assert f"`dbus jvm build --out {folder / 'dbus-jvm.jar'}`" in str(e.value)
    assert "`make stack-up`" in str(e.value)


def test_jars_at_uris_are_sparks_to_fetch_and_file_uris_are_checked(tmp_path):
    uris = ["hdfs://nn:8020/jars/kafka.jar", "local:/opt/jars/dbus-jvm.jar"]
    cfg, _ = jars_config(tmp_path, uris, [])
    assert spark.jars(cfg) == uris
    cfg, folder = jars_config(tmp_path, [f"file:{tmp_path}/jars/gone.jar"], [])
    with pytest.raises(StackError, match="gone.jar"):
        spark.jars(cfg)


def test_no_jars_file_and_no_resolved_connectors_says_what_makes_them(tmp_path, monkeypatch):
    monkeypatch.setenv("DBUS_CACHE", str(tmp_path / "cache"))
    cfg = config(tmp_path, jars_file=str(tmp_path / "nowhere" / "spark.jars"))
    with pytest.raises(
        StackError, match=r"spark\.jars \(spark\.jars_file\) is missing and DBus has not resolved"
    ):
        spark.jars(cfg)
    assert "`dbus spark jars` does" in str(pytest.raises(StackError, spark.jars, cfg).value)


def test_no_jars_file_uses_the_connectors_dbus_resolved(tmp_path, monkeypatch):
    """A pip install: no spark.jars_file list, the user cache's (cli/sparkjars.py writes it)."""
    from dbuslib import connectors

    monkeypatch.setenv("DBUS_CACHE", str(tmp_path / "cache"))
    folder = connectors.user_folder()
    folder.mkdir(parents=True)
    for name in ("kafka-clients-3.9.2.jar", "dbus-jvm.jar"):
        (folder / name).write_bytes(b"PK")
    (folder / "dbus.jars").write_text(f"{folder / 'kafka-clients-3.9.2.jar'},{folder / 'dbus-jvm.jar'}\n")
    cfg = config(tmp_path, jars_file=str(tmp_path / "nowhere" / "spark.jars"))
    assert spark.jars(cfg) == [str(folder / "kafka-clients-3.9.2.jar"), str(folder / "dbus-jvm.jar")]
    assert folder == tmp_path / "cache" / f"spark-{connectors.spark_version()}"


@pytest.mark.parametrize(
    ("location", "scheme"),
    [
        ("../.stack/checkpoints", "file"),
        ("/var/lib/dbus/checkpoints", "file"),
        ("hdfs://nn:8020/x", "hdfs"),
        ("s3a://b/x", "s3a"),
        ("file:///x", "file"),
        ("HDFS://nn/x", "hdfs"),
        ("C:\\dbus\\checkpoints", "file"),  # a drive letter is no scheme
    ],
)
def test_scheme(location, scheme):
    assert spark.scheme(location) == scheme


@pytest.mark.parametrize(
    ("root", "expected"),
    [
        ("checkpoints", "{conf}/checkpoints/dispatcher/demo"),  # relative: to the configuration's folder
        ("../shared/checkpoints", "{tmp}/shared/checkpoints/dispatcher/demo"),
        ("/var/lib/dbus/checkpoints", "/var/lib/dbus/checkpoints/dispatcher/demo"),
        ("hdfs://nn:8020/x", "hdfs://nn:8020/x/dispatcher/demo"),
        ("hdfs://nn:8020/x/", "hdfs://nn:8020/x/dispatcher/demo"),
        ("s3a://b/x", "s3a://b/x/dispatcher/demo"),
        ("file:///x", "file:///x/dispatcher/demo"),
    ],
)
def test_checkpoint(tmp_path, root, expected):
    cfg = config(tmp_path, checkpoint_root=root)
    want = expected.format(conf=tmp_path / "conf", tmp=tmp_path)
    assert spark.checkpoint(cfg, "dispatcher", "demo") == want


@pytest.mark.parametrize(
    ("root", "manager"),
    [
        ("../.stack/checkpoints", FS_MANAGER),
        ("/abs/checkpoints", FS_MANAGER),
        ("file:///shared/dbus", FS_MANAGER),
        ("s3a://bucket/dbus", S3_MANAGER),
        ("hdfs://nn:8020/dbus", None),  # Spark's default manager: rename is atomic on HDFS
    ],
)
def test_settings_choose_the_checkpoint_manager_by_filesystem(tmp_path, root, manager):
    settings = spark.settings(config(tmp_path, checkpoint_root=root))
    assert settings.get(spark.CHECKPOINT_MANAGER) == manager
    assert settings["spark.sql.shuffle.partitions"] == "4"  # spark.conf's own entries kept


def test_a_checkpoint_manager_in_spark_conf_wins(tmp_path):
    raw_conf = yaml.safe_load(DEFAULT_CONFIG.read_text())["spark"]["conf"]
    cfg = config(
        tmp_path, checkpoint_root="s3a://b/x", conf={**raw_conf, spark.CHECKPOINT_MANAGER: "my.Manager"}
    )
    assert spark.settings(cfg)[spark.CHECKPOINT_MANAGER] == "my.Manager"


@pytest.mark.parametrize(("where", "flag"), [("mine", True), ("jars/spark", False)])
def test_a_missing_jvm_jar_names_the_kafka_clients_folder_when_it_is_not_beside_it(tmp_path, where, flag):
    """dbus jvm build compiles against kafka-clients from spark/ beside the jar unless told: a list whose
    kafka-clients jar is elsewhere (a pip user's own jars) gets the --kafka-jars it needs; the stack's
    layout (spark/ beside dbus-jvm.jar, which jars_config puts in tmp_path/jars) does not."""
    clients = tmp_path / where / "kafka-clients-4.2.2.jar"
    clients.parent.mkdir(parents=True)
    clients.write_bytes(b"PK")
    cfg, folder = jars_config(tmp_path, [str(clients), "dbus-jvm.jar"], [])
    with pytest.raises(StackError) as e:
        spark.jars(cfg)
    extra = f" --kafka-jars {clients.parent}" if flag else ""
    assert f"`dbus jvm build --out {folder / 'dbus-jvm.jar'}{extra}`" in str(e.value)


def test_secret_settings_go_to_a_private_properties_file_not_the_command_line(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(spark, "jars", lambda cfg: ["/jars/a.jar"])
    raw_conf = yaml.safe_load(DEFAULT_CONFIG.read_text())["spark"]["conf"]
    conf = {**raw_conf, "spark.hadoop.fs.s3a.secret.key": "s3-s3cr3t", "spark.my.opts": "token=abc123"}
    args = spark.submit_args(config(tmp_path, conf=conf), "appender", 2)
    line = " ".join(args)
    assert "s3-s3cr3t" not in line and "abc123" not in line
    assert "spark.sql.shuffle.partitions=4" in line  # the others stay where a reader can see them
    assert "spark.redaction.regex=" in line  # the regex names secrets: it is none
    path = Path(args[args.index("--extra-properties-file") + 1])
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
    assert path.read_text() == "spark.hadoop.fs.s3a.secret.key=s3-s3cr3t\nspark.my.opts=token=abc123\n"
    # the same settings again: the same file
    assert spark.submit_args(config(tmp_path, conf=conf), "appender", 2)[-1] == str(path)


def test_no_secret_setting_no_properties_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(spark, "jars", lambda cfg: ["/jars/a.jar"])
    assert "--extra-properties-file" not in spark.submit_args(config(tmp_path))
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize(
    ("key", "value", "secret"),
    [
        ("spark.hadoop.fs.s3a.secret.key", "x", True),
        ("spark.hadoop.fs.s3a.access.key", "AKIA", True),
        ("spark.executorEnv.DB_PASSWORD", "x", True),
        ("spark.driver.extraJavaOptions", "-Dtoken=x", True),  # by its value
        ("spark.sql.shuffle.partitions", "4", False),
        ("spark.redaction.regex", spark.REDACTION_REGEX, False),
    ],
)
def test_is_secret_setting_as_spark_redacts(key, value, secret):
    assert spark.is_secret_setting(key, value) is secret
