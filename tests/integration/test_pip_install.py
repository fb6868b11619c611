"""``pip install`` of DBus into a fresh venv elsewhere gives a ``dbus`` that works from any directory.

The wheel is built from a copy of the checkout's files (``git ls-files``: what ``pip install .`` of a clone
sees, the working tree's edits included) and installed with its server extra (``<wheel>[server]``: every
dependency) into a venv under tmp_path made without ``--system-site-packages``. The dependencies come from a
wheelhouse in pytest's cache (``.pytest_cache/d/dbus_pip_wheelhouse/<key>``; under ``-p no:cacheprovider``,
``.stack/pip_wheelhouse/<key>``), built once per dependency list, the base's and the extras' (runs side by
side take turns: pytest-xdist workers each run the module fixture): a cold first run downloads them (about
500 MB, pyspark most of it; pip's own cache serves what it has), a warm run installs offline
(``--no-index``). Every command runs in tmp_path, never the checkout, without PYTHONPATH, VIRTUAL_ENV,
DBUS_CONFIG, SPARK_HOME or PYSPARK_PYTHON, and without the checkout's venv on PATH (``dbus submit`` then runs
the fresh venv's pyspark's own spark-submit).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
import uuid
import zipfile
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from helpers import wait_until

from cli.extras import requirement_name

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CHECKOUT_CONFIG = REPO / "conf" / "dbus.yaml"
PACKAGES = (
    "ums",
    "dbuslib",
    "binlog",
    "cli",
    "extractor",
    "dispatcher",
    "appender",
    "fullpuller",
    "heartbeat",
    "logprocessor",
    "dbusclient",
    "status",
    "console",
)
INSTALL_TIMEOUT = 900  # a cold run downloads pyspark
CLIENT_VENV = "client-venv"  # the client extra's venv, installed as soon as the wheel is built


def _run(argv: list[str], timeout: float = 120, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, **kw)


def _ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, f"{done.args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def _wheelhouse(request: pytest.FixtureRequest) -> Path:
    """The dependencies (and the build backend) as wheels, built once per dependency list and Python."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"]
    needs = sorted(
        {
            *project["project"]["dependencies"],
            *extras["server"],
            *extras["client"],
            *project["build-system"]["requires"],
        }
    )
    key = hashlib.sha256(json.dumps([sys.version_info[:2], needs]).encode()).hexdigest()[:16]
    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider: then beside the stack
    houses = cache.mkdir("dbus_pip_wheelhouse") if cache else REPO / ".stack" / "pip_wheelhouse"
    houses.mkdir(parents=True, exist_ok=True)
    house = houses / key
    with (houses / f"{key}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run (a shell beside this one) building it: wait for it
        if not (house / "complete").exists():
            shutil.rmtree(house, ignore_errors=True)
            _ok(_run([sys.executable, "-m", "pip", "wheel", "-q", "-w", str(house), *needs], INSTALL_TIMEOUT))
            (house / "complete").write_text("\n".join(needs))
    return house


def _source_copy(dest: Path) -> Path:
    """The checkout's files as a clone would have them plus the working tree's new ones (not ignored)."""
    listed = _ok(
        _run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"])
    )
    for name in filter(None, listed.stdout.split("\0")):
        src = REPO / name
        if src.is_file():  # a tracked file deleted in the working tree is not there
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without what would point Python or DBus at the checkout."""
    drop = (
        "PYTHONPATH",
        "VIRTUAL_ENV",
        "DBUS_CONFIG",
        "SPARK_HOME",
        "PYSPARK_PYTHON",
        "PYSPARK_DRIVER_PYTHON",
    )
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if str(REPO) not in p)
    return {**env, **extra}


class Installed:
    """A venv with DBus installed from its wheel; ``dbus(...)`` runs its command in ``cwd``."""

    def __init__(self, venv: Path, wheel: Path, cwd: Path, timings: dict[str, float]) -> None:
        self.venv, self.wheel, self.cwd, self.timings = venv, wheel, cwd, timings

    def run(
        self, argv: list[str], cwd: Path | None = None, timeout: float = 120, **env: str
    ) -> subprocess.CompletedProcess[str]:
        return _run(argv, timeout, cwd=cwd or self.cwd, env=clean_env(**env))

    def dbus(
        self, *args: str, cwd: Path | None = None, timeout: float = 120, **env: str
    ) -> subprocess.CompletedProcess[str]:
        return self.run([str(self.venv / "bin" / "dbus"), *args], cwd=cwd, timeout=timeout, **env)


class Built:
    """The wheel of the checkout and the wheelhouse of its dependencies, once per module."""

    def __init__(self, root: Path, house: Path, wheel: Path, timings: dict[str, float]) -> None:
        self.root, self.house, self.wheel, self.timings = root, house, wheel, timings
        self.ahead: dict[str, Future[Installed]] = {}

    def install_ahead(self, name: str, requirement: str) -> None:
        """``install(name, requirement)`` started in a thread now; ``installed`` waits for it."""
        pool = ThreadPoolExecutor(1)
        self.ahead[name] = pool.submit(self.install, name, requirement)
        pool.shutdown(wait=False)  # no more work for it: its thread ends with the install

    def installed(self, name: str, requirement: str) -> Installed:
        """The install started ahead once it is done (its failure raised here), else ``install``."""
        ahead = self.ahead.pop(name, None)
        return self.install(name, requirement) if ahead is None else ahead.result()

    def install(self, name: str, requirement: str) -> Installed:
        """A fresh venv ``name`` with ``requirement`` (the wheel, with an extra) installed offline."""
        began = time.monotonic()
        venv = self.root / name
        _ok(_run([sys.executable, "-m", "venv", str(venv)], 120, env=clean_env()))
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        # --no-compile: pip would byte-compile pyspark's thousands of modules (10 s), which no test here needs
        _ok(
            _run(
                [*pip, "--no-compile", "--no-index", "--find-links", str(self.house), requirement],
                600,
                env=clean_env(),
            )
        )
        timings = {**self.timings, f"{name}: venv and install": time.monotonic() - began}
        print(f"pip install test set-up, seconds: {json.dumps({k: round(v, 1) for k, v in timings.items()})}")
        cwd = self.root / f"{name}-elsewhere"
        cwd.mkdir()
        return Installed(venv, self.wheel, cwd, timings)


@pytest.fixture(scope="module")
def built(request, tmp_path_factory) -> Built:
    root = tmp_path_factory.mktemp("pip_install")
    timings: dict[str, float] = {}
    began = time.monotonic()
    house = _wheelhouse(request)
    timings["wheelhouse"] = time.monotonic() - began

    began = time.monotonic()
    src = _source_copy(root / "src")
    build = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-deps",
        "--no-index",
        "--find-links",
        str(house),
    ]
    _ok(_run([*build, "-w", str(root / "dist"), str(src)], 300))
    (wheel,) = (root / "dist").glob("dbus_cdc-*.whl")
    timings["wheel"] = time.monotonic() - began
    out = Built(root, house, wheel, timings)
    if any("client_installed" in item.fixturenames for item in request.session.items):
        out.install_ahead(CLIENT_VENV, f"{wheel}[client]")  # beside the server's install and its tests
    return out


@pytest.fixture(scope="module")
def installed(built) -> Installed:
    """The bus: ``pip install '<wheel>[server]'``."""
    return built.install("venv", f"{built.wheel}[server]")


@pytest.fixture(scope="module")
def client_installed(built) -> Installed:
    """The consumer client alone: ``pip install '<wheel>[client]'``, no pyspark, no Flask (installed
    since the wheel was built: ``built``)."""
    return built.installed(CLIENT_VENV, f"{built.wheel}[client]")


def test_the_wheel_has_every_package_and_the_files_they_read(installed):
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    assert {f"{p}/__init__.py" for p in PACKAGES} <= names
    assert {
        "binlog/jvm/build.sh",
        "binlog/jvm/src/dbus/jvm/RowsUdf.java",
        "dbuslib/conf/dbus.example.yaml",
        "console/templates/base.html",
        "console/static/console.js",
        "console/static/console.css",
    } <= names
    java = {n for n in names if n.endswith(".java")}
    assert java == {  # the shared floor's and each stage's own (binlog/jvm/build.sh compiles them all)
        str(p.relative_to(REPO))
        for floor in ("binlog", "appender", "dispatcher", "logprocessor")
        for p in (REPO / floor / "jvm/src").rglob("*.java")
    }
    tops = {n.split("/")[0] for n in names if not n.startswith("dbus_cdc-")}
    assert tops == set(PACKAGES), "only the packages: no conf/, stack/, tests/ or docs/ in the wheel"


def test_modules_come_from_the_venv_not_the_checkout(installed):
    code = (
        "import importlib, json; "
        f"print(json.dumps({{m: importlib.import_module(m).__file__ for m in {PACKAGES}}}))"
    )
    done = _ok(installed.run([str(installed.venv / "bin" / "python"), "-c", code]))
    site = next((installed.venv / "lib").glob("python3*/site-packages"))
    for module, file in json.loads(done.stdout).items():
        assert Path(file).is_relative_to(site), f"{module} from {file}, not {site}"
        assert not Path(file).resolve().is_relative_to(REPO), f"{module} from the checkout: {file}"


def test_dbus_config_check_with_config_or_dbus_config(installed):
    for done in (
        installed.dbus("--config", str(CHECKOUT_CONFIG), "config", "check"),
        installed.dbus("config", "check", DBUS_CONFIG=str(CHECKOUT_CONFIG)),
    ):
        assert _ok(done).stdout.startswith(f"{CHECKOUT_CONFIG}: valid\n")


def test_dbus_without_a_configuration_names_the_places_then_uses_a_sample(installed, tmp_path):
    done = installed.dbus("config", "check", cwd=tmp_path)
    assert done.returncode == 2, done
    assert done.stderr.startswith(
        "dbus: CONFIG_INVALID: no configuration file: not --config FILE (not given)"
    )
    assert "dbus is installed from a package" in done.stderr

    sample = _ok(installed.dbus("config", "sample", cwd=tmp_path)).stdout
    assert sample == CHECKOUT_CONFIG.read_text()
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "dbus.yaml").write_text(sample)  # ./conf/dbus.yaml: third in the search
    assert _ok(installed.dbus("config", "check", cwd=tmp_path)).stdout.startswith(
        f"{tmp_path / 'conf' / 'dbus.yaml'}: valid\n"
    )


def test_secrets_from_the_environment_in_the_installed_dbus(installed, tmp_path):
    text = CHECKOUT_CONFIG.read_text().replace("password: dbus_repl", 'password: "${env:DBUS_TEST_REPL}"')
    assert "${env:DBUS_TEST_REPL}" in text
    (tmp_path / "dbus.yaml").write_text(text)
    done = installed.dbus("--config", str(tmp_path / "dbus.yaml"), "config", "check")
    assert done.returncode == 2 and "environment variable DBUS_TEST_REPL is not set" in done.stderr, done
    _ok(
        installed.dbus("--config", str(tmp_path / "dbus.yaml"), "config", "check", DBUS_TEST_REPL="dbus_repl")
    )


def test_the_installed_console_serves_its_pages_and_files(installed, tmp_path):
    """``dbus console`` from the wheel: its templates and static files are in the package."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = (tmp_path / "console.log").open("wb")
    argv = [str(installed.venv / "bin" / "dbus"), "--config", str(CHECKOUT_CONFIG), "console"]
    proc = subprocess.Popen(
        [*argv, "--listen", f"127.0.0.1:{port}"],
        cwd=installed.cwd,
        env=clean_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )

    def get(path: str) -> tuple[int, str]:
        assert proc.poll() is None, (tmp_path / "console.log").read_text(errors="replace")[-3000:]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
                return r.status, r.read().decode("utf-8", "replace")
        except (urllib.error.URLError, OSError):
            return 0, ""

    try:
        wait_until(lambda: get("/login")[0] == 200, 60, "the installed dbus console")
        status, page = get("/login")
        assert 'name="csrf_token"' in page and "/static/console.css" in page
        assert get("/static/console.js")[0] == 200 and get("/static/console.css")[0] == 200
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
        log.close()


def test_dbus_stack_says_it_needs_a_checkout(installed):
    done = installed.dbus("stack", "status")
    assert done.returncode == 1
    assert done.stderr.startswith("dbus: STACK_DOWN: dbus stack needs a source checkout"), done.stderr


def test_dbus_status_on_the_local_stack(installed):
    done = _ok(installed.dbus("status", "--source", "demo", DBUS_CONFIG=str(CHECKOUT_CONFIG)))
    assert done.stdout.startswith("source demo at ")
    assert "extractor" in done.stdout and "heartbeats" in done.stdout


def throwaway_config(tmp_path: Path) -> tuple[str, Path]:
    """A copy of the checkout's configuration whose one source has a name, topics and checkpoints of its
    own (the stack's connector jars and JVM decoder by absolute path): a stage started on it disturbs no
    other test."""
    doc = yaml.safe_load(CHECKOUT_CONFIG.read_text())
    ds = f"pytest_pip_{uuid.uuid4().hex[:8]}"
    src = doc["sources"].pop("demo")
    src["topics"]["partitions"] = 1
    src["mysql"]["server_id"] = random.randint(100_000, 899_999)
    doc["sources"] = {ds: src}
    doc["spark"]["jars_file"] = str((CHECKOUT_CONFIG.parent / doc["spark"]["jars_file"]).resolve())
    doc["spark"]["checkpoint_root"] = str(tmp_path / "checkpoints")
    path = tmp_path / "dbus.yaml"
    path.write_text(yaml.safe_dump(doc))
    return ds, path


def test_dbus_submit_and_status_from_the_installed_package(installed, tmp_path):
    """``dbus submit dispatcher`` of the fresh venv, elsewhere: spark-submit of the venv's pyspark (no
    SPARK_HOME), DBus's code zipped from site-packages, the configuration from $DBUS_CONFIG; the query
    starts, ``dbus status`` shows the source, and SIGTERM to the process group stops it cleanly."""
    ds, config = throwaway_config(tmp_path)
    _ok(installed.dbus("topics", "create", "--source", ds, DBUS_CONFIG=str(config)))
    log = tmp_path / "dispatcher.log"
    proc: subprocess.Popen | None = None
    try:
        printed = _ok(
            installed.dbus("submit", "dispatcher", "--source", ds, "--print", DBUS_CONFIG=str(config))
        )
        argv = printed.stdout.splitlines()
        site = next((installed.venv / "lib").glob("python3*/site-packages"))
        assert argv[0] == str(site / "pyspark" / "bin" / "spark-submit"), argv
        assert argv[-5:] == [str(site / "dispatcher" / "main.py"), "--config", str(config), "--source", ds]
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [str(installed.venv / "bin" / "dbus"), "submit", "dispatcher", "--source", ds],
                cwd=installed.cwd,
                env=clean_env(DBUS_CONFIG=str(config)),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        began = time.monotonic()
        ready = f"query dispatcher_{ds} started"
        while ready not in log.read_text(errors="replace"):
            assert proc.poll() is None, f"dbus submit exited {proc.returncode}:\n{log.read_text()[-4000:]}"
            assert time.monotonic() - began < 600, f"no {ready!r} after 600 s:\n{log.read_text()[-4000:]}"
            time.sleep(0.2)
        print(f"dbus submit dispatcher from the installed package: ready in {time.monotonic() - began:.1f} s")
        status = _ok(installed.dbus("status", "--source", ds, DBUS_CONFIG=str(config)))
        assert status.stdout.startswith(f"source {ds} at "), status.stdout
        assert "dispatcher" in status.stdout, status.stdout

        os.killpg(proc.pid, signal.SIGTERM)
        code = proc.wait(60)
        text = log.read_text(errors="replace")
        assert code in (0, 143), f"exit {code}:\n{text[-4000:]}"  # 143: the JVM ended first, on the signal
        assert f"dispatcher: {ds}: stopping (SIGTERM)" in text, text[-4000:]
        assert "Traceback" not in text, text[-4000:]
        for package in PACKAGES:  # DBus's code from site-packages (the checkout gives the stack's jars only)
            assert f"{REPO}/{package}/" not in text, f"{package} from the checkout:\n{text[-4000:]}"
    finally:
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(30)
        _run(
            [str(installed.venv / "bin" / "python"), "-c", DELETE_TOPICS, ds],
            env=clean_env(DBUS_CONFIG=str(config)),
        )


class _Running:
    """A process that must still run (helpers.wait_until's ``alive``), its log shown when it ended."""

    def __init__(self, name: str, proc: subprocess.Popen, log: Path) -> None:
        self.name, self.proc, self.log = name, proc, log

    def check_alive(self) -> None:
        code = self.proc.poll()
        assert code is None, f"{self.name} exited {code}:\n{self.log.read_text(errors='replace')[-4000:]}"


def test_the_installed_package_carries_rows_with_connectors_it_resolved_itself(
    installed, tmp_path, writer_db
):
    """A pip user's case: no checkout's ``.stack/jars/spark.jars`` (the configuration names no
    ``spark.jars_file``) and an empty DBus cache. ``dbus spark jars`` resolves Spark's connectors from Maven
    Central with Ivy and compiles DBus's JVM jar; then the installed extractor, ``dbus submit dispatcher``
    and ``dbus submit appender`` carry 200 inserted rows into the result topic."""
    from pipeline_env import UmsTail, cleanup_pipeline, make_pipeline_env

    db, database = writer_db
    env = make_pipeline_env(tmp_path, database)
    raw = yaml.safe_load(env.cfg_path.read_text())
    raw["spark"].pop("jars_file")  # the default, ../.stack/jars/spark.jars beside the file: not there
    env.cfg_path.write_text(yaml.safe_dump(raw))
    cache = tmp_path / "cache"
    run_env = {"DBUS_CONFIG": str(env.cfg_path), "DBUS_CACHE": str(cache)}
    procs: dict[str, subprocess.Popen] = {}
    try:
        began = time.monotonic()
        listed = _ok(installed.dbus("spark", "jars", timeout=900, **run_env))
        jars = listed.stdout.strip().split(",")
        folder = next(cache.glob("spark-*"))
        names = sorted(Path(j).name for j in jars)
        assert all(Path(j).parent == folder for j in jars), jars
        assert names == [
            "commons-pool2-2.13.1.jar",
            "dbus-jvm.jar",
            "kafka-clients-3.9.2.jar",
            "mariadb-java-client-3.5.11.jar",
            "spark-sql-kafka-0-10_2.13-4.2.0.jar",
            "spark-token-provider-kafka-0-10_2.13-4.2.0.jar",
        ], names
        assert "resolving Spark's connectors" in listed.stderr and "building DBus's JVM jar" in listed.stderr
        print(f"dbus spark jars on an empty cache: {time.monotonic() - began:.1f} s")
        again = _ok(installed.dbus("spark", "jars", timeout=300, **run_env))
        assert again.stdout == listed.stdout and again.stderr == "", again.stderr  # once: nothing to do

        for name, argv in [
            ("extractor", ["extractor", "run", "--source", env.ds]),
            ("dispatcher", ["submit", "dispatcher", "--source", env.ds]),
            ("appender", ["submit", "appender", "--source", env.ds]),
        ]:
            with (tmp_path / f"{name}.log").open("wb") as out:
                procs[name] = subprocess.Popen(
                    [str(installed.venv / "bin" / "dbus"), *argv],
                    cwd=installed.cwd,
                    env=clean_env(**run_env),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        for name in ("dispatcher", "appender"):
            log = tmp_path / f"{name}.log"
            wait_until(
                lambda log=log, name=name: (
                    f"query {name}_{env.ds} started" in log.read_text(errors="replace")
                ),
                600,
                f"{name} started ({log})",
                interval=0.5,
                alive=[_Running(n, procs[n], tmp_path / f"{n}.log") for n in procs],
            )
        with db.cursor() as cur:
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
            for i in range(200):
                cur.execute("INSERT INTO t VALUES (%s, %s)", (i, f"row {i}"))
        db.commit()
        src = env.cfg.source(env.ds)
        tail = UmsTail(env.cfg.endpoints.kafka, src.topics.name("result", env.ds, database))
        try:
            wait_until(
                lambda: len({o.uid for o in tail.poll().out if o.kind == "data_increment_data"}) >= 200,
                300,
                "200 rows in the result topic",
                interval=0.5,  # a poll reads what arrived since the last one
                alive=[_Running(n, procs[n], tmp_path / f"{n}.log") for n in procs],
            )
        finally:
            tail.close()
        for name in ("dispatcher", "appender"):
            text = (tmp_path / f"{name}.log").read_text(errors="replace")
            assert "Traceback" not in text, text[-3000:]
            for package in PACKAGES:  # DBus's code from site-packages, the jars from the user cache
                assert f"{REPO}/{package}/" not in text, f"{package} from the checkout:\n{text[-4000:]}"
            assert f"{REPO}/.stack/jars" not in text, text[-4000:]
    finally:
        for proc in procs.values():
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for proc in procs.values():
            try:
                proc.wait(90)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
        cleanup_pipeline(env)


# the source's topics deleted, by the installed package (the test's own imports stay off the checkout's)
DELETE_TOPICS = """
import sys
from dbuslib import kafka
from dbuslib.config import load_config
cfg = load_config(None)
ds = sys.argv[1]
admin = kafka.admin(cfg.endpoints.kafka)
names = [t for t in admin.list_topics() if t == ds or t.startswith((ds + ".", ds + "_"))]
admin.close()
kafka.delete_topics(cfg.endpoints.kafka, names)
"""


# ---------------------------------------------------------------- the consumer client alone


def _names(requirements: list[str]) -> list[str]:
    return [str(requirement_name(r)) for r in requirements]


PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
BASE = _names(PROJECT["dependencies"])
SERVER = _names(PROJECT["optional-dependencies"]["server"])

# which of the distributions named in argv are installed (JSON), as the installed dbus tells it
INSTALLED = """
import json, sys
from cli.extras import installed

print(json.dumps({name: installed(name) for name in sys.argv[1:]}))
"""


def test_the_client_extra_installs_the_base_requirements_and_no_library_of_the_server(client_installed):
    python = str(client_installed.venv / "bin" / "python")
    for name in ("pyspark", "flask"):
        shown = client_installed.run([python, "-m", "pip", "show", name])
        assert shown.returncode == 1 and "not found: " + name in shown.stderr, shown
    there = json.loads(_ok(client_installed.run([python, "-c", INSTALLED, *BASE, *SERVER])).stdout)
    assert [n for n in BASE if not there[n]] == [], there
    assert [n for n in SERVER if there[n]] == [], there


def test_dbus_without_the_server_extra_runs_the_client_s_commands_and_names_the_install(client_installed):
    """``dbus --help`` and ``dbus config check`` work; ``dbus submit dispatcher`` and ``dbus console`` stop at
    once, before they read the configuration or reach a server, with the line naming the server extra and
    exit 7 (docs/errors.md, MISSING_EXTRA)."""
    helped = _ok(client_installed.dbus("--help"))
    assert "submit" in helped.stdout and "replicate" in helped.stdout
    assert _ok(client_installed.dbus("config", "check", DBUS_CONFIG=str(CHECKOUT_CONFIG))).stdout.startswith(
        f"{CHECKOUT_CONFIG}: valid\n"
    )
    began = time.monotonic()
    done = client_installed.dbus("submit", "dispatcher", "--source", "demo", DBUS_CONFIG="/nonexistent.yaml")
    took = time.monotonic() - began
    print(f"dbus submit dispatcher without the server extra: exit {done.returncode} in {took:.2f} s")
    assert done.returncode == 7, done
    assert done.stdout == ""
    assert done.stderr == (
        "dbus: MISSING_EXTRA: dbus submit needs the server extra of dbus-cdc "
        f"(not installed: {', '.join(SERVER)}): pip install 'dbus-cdc[server]'\n"
    )
    assert took < 15, f"{took:.1f} s"
    console = client_installed.dbus("console", DBUS_CONFIG=str(CHECKOUT_CONFIG))
    assert console.returncode == 7, console
    assert console.stderr.startswith(
        "dbus: MISSING_EXTRA: dbus console needs the server extra of dbus-cdc"
    ), console


UMS_FIELDS = [  # of <database>.t (id BIGINT PRIMARY KEY, v VARCHAR(20)) in UMS 1.3
    {"name": name, "type": kind, "nullable": nullable, "encoded": False}
    for name, kind, nullable in [
        ("ums_id_", "long", False),
        ("ums_ts_", "datetime", False),
        ("ums_op_", "string", False),
        ("ums_uid_", "string", False),
        ("id", "long", False),
        ("v", "string", True),
    ]
]

# the appender's part, by the installed client package: UMS messages of <database>.t (argv: source,
# database, then JSON [[ums_id, op, id, v], ...]) into the table's result topic
PRODUCE = """
import json, sys
from dbuslib import kafka, topics
from dbuslib.config import load_config

ds, database, rows, fields = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
cfg = load_config(None)
topic = topics.result_topic(ds, cfg.source(ds), database, "t")
producer = kafka.producer(cfg.endpoints.kafka)
for ums_id, op, key, v in rows:
    row = [str(ums_id), "2024-01-02 03:04:05.000", op, str(ums_id * 10**6), str(key), v]
    value = {
        "protocol": {"type": "data_increment_data", "version": "1.3"},
        "schema": {"namespace": f"mysql.{ds}.{database}.t.0.0.0", "fields": fields, "batchId": 0},
        "payload": [{"tuple": row}],
    }
    producer.send(topic, key=f"{database}.t".encode(), value=json.dumps(value).encode())
producer.flush(60)
producer.close()
print(topic)
"""

# docs/client.md's complete example, on <database>.t (argv: source, database, checkpoint file): the rows
# it keeps, as JSON, once they are the expected ones (or after 60 s), then the server's modules loaded
CONSUME = """
import json, sys, time
from dbusclient.checkpoint import FileCheckpointStore
from dbusclient.consumer import Consumer, ConsumerCallbacks, ConsumerConfig, Result
from dbuslib.config import load_config


class Replica(ConsumerCallbacks):
    def __init__(self):
        self.rows = {}

    def on_data_event(self, change):
        if change.gone:
            self.rows.pop(change.key, None)
        else:
            self.rows[change.key] = dict(change.values)
        return Result.SUCCESS


ds, database, checkpoint = sys.argv[1:4]
replica = Replica()
config = ConsumerConfig(source=ds, tables={f"{database}.t": ("id",)}, bootstrap=False, poll_timeout_ms=200)
consumer = Consumer.connect(load_config(None), config, replica, FileCheckpointStore(checkpoint))
deadline = time.monotonic() + 60
consumer.run(stop=lambda: len(replica.rows) == 2 or time.monotonic() > deadline)
print(json.dumps({str(k[0]): str(v["v"]) for k, v in sorted(replica.rows.items())}))
server = ("pyspark", "py4j", "flask", "pandas", "pyarrow", "pymysqlreplication")
print(",".join(m for m in server if m in sys.modules))
"""


def test_the_client_alone_consumes_and_replicates_a_result_topic(client_installed, tmp_path, writer_db):
    """On the local stack, with the client's install only: ``dbus topics create``, UMS messages of a table
    written to its result topic, docs/client.md's example consumer reading them, and ``dbus replicate``
    keeping them in a MariaDB replica."""
    db, database = writer_db
    with db.cursor() as cur:
        cur.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR(20))")  # replicate reads its key here
    ds, config = throwaway_config(tmp_path)
    env = {"DBUS_CONFIG": str(config)}
    python = str(client_installed.venv / "bin" / "python")
    replica = f"{database}_replica"
    writer = yaml.safe_load(config.read_text())["sources"][ds]["mysql"]
    url = (
        f"mysql+pymysql://{writer['writer']['user']}:{writer['writer']['password']}@{writer['host']}:"
        f"{writer['port']}/{replica}"
    )
    try:
        _ok(client_installed.dbus("topics", "create", "--source", ds, "--schema", database, **env))
        rows = [
            [1001, "i", 1, "a"],
            [1002, "i", 2, "b"],
            [1003, "i", 3, "c"],
            [1004, "u", 1, "a2"],
            [1005, "d", 2, "b"],
        ]
        _ok(
            client_installed.run(
                [python, "-c", PRODUCE, ds, database, json.dumps(rows), json.dumps(UMS_FIELDS)], **env
            )
        )

        began = time.monotonic()
        consumed = _ok(
            client_installed.run([python, "-c", CONSUME, ds, database, str(tmp_path / "cp.json")], **env)
        )
        print(f"the client's consumer on the result topic: {time.monotonic() - began:.1f} s")
        kept, loaded = consumed.stdout.splitlines()
        assert json.loads(kept) == {"1": "a2", "3": "c"}, consumed.stderr[-3000:]
        assert loaded == "", f"the client loaded {loaded}"

        began = time.monotonic()
        replicated = client_installed.dbus(
            *("replicate", "--source", ds, "--tables", f"{database}.t", "--to", url),
            *("--no-bootstrap", "--until-idle", "3"),
            timeout=180,
            **env,
        )
        print(f"dbus replicate of the client's install: {time.monotonic() - began:.1f} s")
        assert replicated.returncode == 0, replicated.stdout + replicated.stderr[-3000:]
        print(replicated.stdout.splitlines()[-1])  # its summary: windows, upserts, deletes
        with db.cursor() as cur:
            cur.execute(f"SELECT id, v FROM `{replica}`.t ORDER BY id")
            assert cur.fetchall() == ((1, "a2"), (3, "c"))
    finally:
        with db.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{replica}`")
        client_installed.run([python, "-c", DELETE_TOPICS, ds], **env)


@pytest.mark.jvm
def test_dbus_jvm_build_compiles_the_installed_sources(installed, tmp_path):
    jar = tmp_path / "jars" / "dbus-jvm.jar"
    kafka_jars = Path(os.environ.get("STACK_CACHE", REPO / ".stack")) / "jars" / "spark"  # kafka-clients
    assert _ok(
        installed.dbus("jvm", "build", "--out", str(jar), "--kafka-jars", str(kafka_jars))
    ).stdout.strip() == str(jar)
    assert "dbus/jvm/RowsUdf.class" in zipfile.ZipFile(jar).namelist()
