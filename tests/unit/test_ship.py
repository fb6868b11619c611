"""dbuslib/ship.py: what a Spark job carries to executors on other machines.

- The configuration document: ``load_document(config_document(cfg))`` is ``cfg`` again, for the sample
  configuration and for one with every kind of masking rule, Avro and secrets from the environment and
  a file (resolved on the submitting machine: the document holds their values, never the references).
- The code zip: named by its content (the same tree twice gives the same file, a changed file a new
  one), byte-identical when made again, and holding each package's ``__init__.py`` and nothing compiled.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from pathlib import Path

import pytest
import yaml

from dbuslib import ship
from dbuslib.config import DEFAULT_CONFIG, load_config
from dbuslib.errors import ConfigError


def same(a, b) -> None:
    """Two configurations hold the same values (secrets compared by value), read from the same file."""
    assert a == b
    assert json.loads(ship.config_document(a)) == json.loads(ship.config_document(b))
    assert a.path == b.path


def test_the_sample_configuration_round_trips():
    cfg = load_config(DEFAULT_CONFIG)
    back = ship.load_document(ship.config_document(cfg))
    same(back, cfg)
    assert back.resolve(back.spark.jars_file) == cfg.resolve(cfg.spark.jars_file)  # relative: to its file
    assert back.source("demo").mysql.password.get_secret_value() == "dbus_repl"


@pytest.fixture
def rich_config(tmp_path, monkeypatch):
    """Masking of every kind, an Avro source, secrets from ${env:...} and ${file:...}, per-stage Spark."""
    monkeypatch.setenv("DBUS_TEST_REPL_PASSWORD", "s3cret-from-env")
    (tmp_path / "meta.secret").write_text("meta-pass\n")
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    raw["endpoints"]["meta_store"]["url"] = "mysql+pymysql://dbus:${file:meta.secret}@db:3306/dbus"
    raw["endpoints"]["influxdb"]["token"] = "${env:DBUS_TEST_TOKEN:-no-token}"
    raw["spark"]["stages"] = {"appender": {"spark.executor.cores": "2"}}
    demo = raw["sources"]["demo"]
    demo["mysql"]["password"] = "${env:DBUS_TEST_REPL_PASSWORD}"
    demo["masking"]["shop.customers"].update(
        {
            "name": {"type": "replace", "value": "n/a"},
            "note": {"type": "truncate", "length": 8},
            "card": {"type": "md5", "salt_field": "id"},
            "code": {"type": "murmur3", "salt": "pepper"},
        }
    )
    avro = json.loads(json.dumps(demo))
    avro["ums"]["format"] = "avro"
    avro["mysql"]["server_id"] = 5402
    raw["sources"]["demo_avro"] = avro
    path = tmp_path / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_config(path)


def test_masking_avro_and_secrets_round_trip(rich_config):
    cfg = rich_config
    document = ship.config_document(cfg)
    back = ship.load_document(document)
    same(back, cfg)
    assert "${" not in document  # references resolved here, on the submitting machine
    assert back.endpoints.meta_store.url.get_secret_value() == "mysql+pymysql://dbus:meta-pass@db:3306/dbus"
    assert back.endpoints.influxdb.token.get_secret_value() == "no-token"
    assert back.source("demo").mysql.password.get_secret_value() == "s3cret-from-env"
    assert back.source("demo").masking["shop.customers"]["code"].salt.get_secret_value() == "pepper"
    assert back.source("demo_avro").ums.format == "avro"
    assert (
        back.source("demo_avro").appender.trigger == cfg.source("demo_avro").appender.trigger == "microbatch"
    )
    assert back.spark.stages == {"appender": {"spark.executor.cores": "2"}}


def test_a_bad_document_is_a_config_error():
    with pytest.raises(ConfigError, match="is not JSON"):
        ship.load_document("{not json")
    with pytest.raises(ConfigError, match=r"\(from /x/dbus.yaml\) is not valid"):
        ship.load_document(json.dumps({"path": "/x/dbus.yaml", "sources": {}}))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_code_zip_is_named_by_its_content_and_made_the_same_every_time(tmp_path):
    first = ship.code_zip(tmp_path / "a")
    again = ship.code_zip(tmp_path / "a")
    elsewhere = ship.code_zip(tmp_path / "b")  # made anew: the same bytes
    assert first == again and first.parent == tmp_path / "a"
    assert first.name == elsewhere.name and first.name.startswith("dbus-code-")
    assert digest(first) == digest(elsewhere)
    assert [p.name for p in (tmp_path / "a").iterdir()] == [first.name]  # no partial file left


def test_code_zip_holds_each_package_and_nothing_compiled(tmp_path):
    names = zipfile.ZipFile(ship.code_zip(tmp_path)).namelist()
    assert {f"{p}/__init__.py" for p in ship.PACKAGES} <= set(names)
    assert {n.split("/")[0] for n in names} == set(ship.PACKAGES)  # the CLI stays on the submitting machine
    assert "dispatcher/main.py" in names and "dbuslib/conf/dbus.example.yaml" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".class"))]


def test_a_changed_file_makes_a_new_zip(tmp_path, monkeypatch):
    """The packages copied to tmp_path and imported from there: one file changed, a new name."""
    tree = tmp_path / "tree"
    for name, folder in ship.package_dirs().items():
        shutil.copytree(folder, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(ship, "package_dirs", lambda: {n: tree / n for n in ship.PACKAGES})
    before = ship.code_zip(tmp_path / "cache")
    (tree / "ums" / "__init__.py").write_text((tree / "ums" / "__init__.py").read_text() + "\n# changed\n")
    after = ship.code_zip(tmp_path / "cache")
    assert after != before and before.exists() and after.exists()
    with zipfile.ZipFile(after) as z:
        assert z.read("ums/__init__.py").endswith(b"# changed\n")
