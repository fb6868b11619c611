"""cli/submit.py and ``dbus spark args``: the spark-submit argument list that starts a Spark stage.

No Kafka and no stack: ``stage_tasks`` (the partitions a stage reads) and ``ship.code_zip`` are replaced,
and the configuration lists jar files made in tmp_path. What is checked: the master (``spark.master``, or
the last ``--master`` after ``--``, which also decides the sizing: ``spark.cores.max`` on a standalone
cluster, ``spark.executor.instances`` on YARN and Kubernetes, nothing on a local master, which gets a
thread per task when it has fewer), ``spark.stages.<stage>`` over the sizing, the stage's installed
main.py, ``--schema`` passed on; ``dbus spark args`` prints one argument per line, bash's ``mapfile``
reading back the same list, a value with spaces included.
"""

from __future__ import annotations

import importlib
import subprocess
from pathlib import Path

import pytest
import yaml

import appender
import dispatcher
import fullpuller
from cli import main as dbus
from cli import submit
from dbuslib import ship
from dbuslib.config import DEFAULT_CONFIG, load_config
from dbuslib.errors import ConfigError

ZIP = "/cache/dbus-code-0123456789abcdef.zip"
JAVA_OPTIONS = "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@pytest.fixture
def tasks(monkeypatch):
    """The tasks each stage reads at once (``stage_tasks``), settable by the test; no Kafka asked."""
    counts = {"dispatcher": 3, "appender": 3, "fullpuller": 2}
    seen: list[tuple] = []

    def stage_tasks(cfg, stage, ds, schemas=None):
        seen.append((stage, ds, schemas))
        return counts[stage]

    monkeypatch.setattr(submit, "stage_tasks", stage_tasks)
    monkeypatch.setattr(ship, "code_zip", lambda cache_dir=None: Path(ZIP))
    monkeypatch.delenv("SPARK_HOME", raising=False)
    counts["seen"] = seen
    return counts


def make_config(tmp_path: Path, **spark_keys: object):
    """The sample configuration with jar files of its own in tmp_path and ``spark_keys`` over ``spark``."""
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    jars = [tmp_path / "spark-sql-kafka.jar", tmp_path / "dbus-jvm.jar"]
    for jar in jars:
        jar.write_bytes(b"PK")
    (tmp_path / "spark.jars").write_text(",".join(map(str, jars)))
    raw["spark"].update({"jars_file": str(tmp_path / "spark.jars"), **spark_keys})
    path = tmp_path / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_config(path)


def confs(argv: list[str]) -> dict[str, str]:
    """The ``--conf k=v`` settings of an argument list (a later one wins, as in spark-submit)."""
    pairs = [argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--conf"]
    return dict(pairs)


def masters(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == "--master"]


def test_a_local_master_from_the_config_gets_a_thread_per_task(tmp_path, tasks):
    cfg = make_config(tmp_path)
    argv = submit.command(cfg, "dispatcher", "demo")
    import pyspark

    assert argv[0] == str(Path(pyspark.__file__).parent / "bin" / "spark-submit")
    assert masters(argv) == ["local[3]"]  # local[2] has fewer slots than the query's 3 tasks
    assert argv[argv.index("--jars") + 1] == f"{tmp_path}/spark-sql-kafka.jar,{tmp_path}/dbus-jvm.jar"
    assert argv[argv.index("--py-files") + 1] == ZIP
    conf = confs(argv)
    assert conf["spark.driver.extraJavaOptions"] == "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    assert not {"spark.cores.max", "spark.executor.instances", "spark.executor.memory"} & set(conf)
    main = Path(dispatcher.__file__).parent / "main.py"
    assert argv[-5:] == [str(main), "--config", str(cfg.path), "--source", "demo"]


def test_a_local_master_with_enough_slots_is_kept(tmp_path, tasks):
    tasks["fullpuller"] = 2
    argv = submit.command(make_config(tmp_path, master="local[4]"), "fullpuller", "demo")
    assert masters(argv) == ["local[4]"]
    assert argv[-5] == str(Path(fullpuller.__file__).parent / "main.py")


@pytest.mark.parametrize("form", [["--master", "spark://h:7077"], ["--master=spark://h:7077"]])
def test_a_master_after_dashes_wins_and_sizes_the_stage(tmp_path, tasks, form):
    cfg = make_config(tmp_path)  # spark.master: local[2]
    extra = [*form, "--conf", "spark.driver.host=10.0.0.5"]
    argv = submit.command(cfg, "dispatcher", "demo", extra)
    assert masters(argv)[0] == "spark://h:7077"  # the sizing's master, ahead of the extra arguments
    assert (
        argv[-5 - len(extra) : -5] == extra
    )  # passed on as given, after DBus's: spark-submit takes the last
    conf = confs(argv)
    assert conf["spark.cores.max"] == "3" and conf["spark.executor.memory"] == "1g"
    assert "spark.executor.instances" not in conf
    assert conf["spark.driver.host"] == "10.0.0.5"  # the user's, after the config's 127.0.0.1


def test_the_master_of_the_config_when_it_is_a_cluster(tmp_path, tasks):
    argv = submit.command(make_config(tmp_path, master="spark://h:7077"), "appender", "demo")
    assert masters(argv) == ["spark://h:7077"] and confs(argv)["spark.cores.max"] == "3"


@pytest.mark.parametrize("master", ["yarn", "k8s://https://k8s.example:6443"])
def test_yarn_and_kubernetes_get_executor_instances(tmp_path, tasks, master):
    argv = submit.command(make_config(tmp_path), "appender", "demo", ["--master", master])
    conf = confs(argv)
    assert conf["spark.executor.instances"] == "3" and "spark.cores.max" not in conf
    # two cores per executor (spark.stages.<stage>): half as many executors, rounded up
    cfg = make_config(tmp_path, stages={"appender": {"spark.executor.cores": "2"}})
    conf = confs(submit.command(cfg, "appender", "demo", ["--master", master]))
    assert conf["spark.executor.instances"] == "2" and conf["spark.executor.cores"] == "2"


def test_spark_stages_override_the_sizing_and_the_conf(tmp_path, tasks):
    stages = {
        "dispatcher": {
            "spark.cores.max": "5",
            "spark.executor.memory": "2g",
            "spark.sql.shuffle.partitions": "8",
        }
    }
    cfg = make_config(tmp_path, master="spark://h:7077", stages=stages)
    conf = confs(submit.command(cfg, "dispatcher", "demo"))
    assert (conf["spark.cores.max"], conf["spark.executor.memory"]) == ("5", "2g")
    assert conf["spark.sql.shuffle.partitions"] == "8"  # over spark.conf's "4"
    other = confs(submit.command(cfg, "appender", "demo"))  # another stage: its own sizing
    assert (other["spark.cores.max"], other["spark.executor.memory"]) == ("3", "1g")
    local = confs(submit.command(make_config(tmp_path, stages=stages), "dispatcher", "demo"))
    assert local["spark.cores.max"] == "5"  # on a local master only what the stage says


def test_schemas_are_passed_to_the_appender(tmp_path, tasks):
    cfg = make_config(tmp_path)
    argv = submit.command(cfg, "appender", "demo", schemas=["shop", "crm"])
    main = Path(appender.__file__).parent / "main.py"
    assert argv[-9:] == [str(main), "--config", str(cfg.path), "--source", "demo"] + [
        "--schema",
        "shop",
        "--schema",
        "crm",
    ]
    assert tasks["seen"][-1] == ("appender", "demo", ["shop", "crm"])


def test_spark_home_names_the_spark_submit(tmp_path, tasks, monkeypatch):
    monkeypatch.setenv("SPARK_HOME", "/opt/spark")
    assert submit.command(make_config(tmp_path), "dispatcher", "demo")[0] == "/opt/spark/bin/spark-submit"


def test_unknown_stage_or_source_is_a_config_error(tmp_path, tasks):
    cfg = make_config(tmp_path)
    with pytest.raises(ConfigError, match="unknown stage 'extractor'"):
        submit.command(cfg, "extractor", "demo")
    with pytest.raises(ConfigError, match="nope"):
        submit.command(cfg, "dispatcher", "nope")


def test_dbus_submit_print_parses_arguments_after_dashes(tmp_path, tasks, capsys):
    cfg = make_config(tmp_path)
    argv = ["--config", str(cfg.path), "submit", "dispatcher", "--source", "demo", "--print"]
    assert dbus.main([*argv, "--", "--master", "yarn"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == submit.command(cfg, "dispatcher", "demo", ["--master", "yarn"])


def mapfile(text: str) -> list[str]:
    """What ``mapfile -t args < <(...)`` makes of ``text`` in bash, argument by argument."""
    done = subprocess.run(
        ["bash", "-c", 'mapfile -t args; printf "%s\\0" "${args[@]}"'],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split("\0")[:-1]


def test_dbus_spark_args_prints_one_argument_per_line(tmp_path, tasks, capsys):
    cfg = make_config(tmp_path)
    assert dbus.main(["--config", str(cfg.path), "spark", "args"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[:2] == ["--master", "local[2]"]
    assert lines[lines.index(JAVA_OPTIONS) - 1] == "--conf"  # a value with spaces: one line
    assert "--py-files" not in lines  # without a stage: the master, jars and settings only
    assert mapfile(out) == lines


def test_dbus_spark_args_for_a_stage_has_its_sizing_and_code(tmp_path, tasks, capsys):
    cfg = make_config(tmp_path)
    args = ["--config", str(cfg.path), "spark", "args", "--stage", "dispatcher", "--source", "demo"]
    assert dbus.main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == submit.command(cfg, "dispatcher", "demo")[1:-5][: len(lines)]
    assert lines[:2] == ["--master", "local[3]"] and lines[lines.index("--py-files") + 1] == ZIP
    assert JAVA_OPTIONS in lines


def test_dbus_spark_args_stage_needs_a_source(tmp_path, tasks, capsys):
    cfg = make_config(tmp_path)
    assert dbus.main(["--config", str(cfg.path), "spark", "args", "--stage", "dispatcher"]) == 2
    assert "--stage needs --source" in capsys.readouterr().err


def test_the_stage_mains_are_where_the_packages_are():
    for stage in submit.SUBMITTED:
        main = submit.main_file(stage)
        assert main == Path(importlib.import_module(stage).__file__).parent / "main.py" and main.is_file()
