"""``extends: OTHER`` and ``raw_config``: a file read over another one (mappings merged key by key, any
other value replacing the base's), each file's relative paths made absolute against its own folder first,
cycles and missing bases refused naming the files; load_config of an extending file is load_config of the
same configuration written flat."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from dbuslib.config import DEFAULT_CONFIG, load_config, raw_config
from dbuslib.errors import ConfigError


def _write(path: Path, raw: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


# ---------------------------------------------------------------- the merge


def _model(base: Any, over: Any) -> Any:
    """The merge as the docs say it, by lookup: a key of ``over`` whose value and the base's are both
    mappings is their merge; any other key of ``over`` is ``over``'s value; a key of the base alone stays."""
    if not isinstance(over, dict) or not isinstance(base, dict):
        return over
    out = {}
    for key in [*base, *(k for k in over if k not in base)]:
        if key not in over:
            out[key] = base[key]
        elif isinstance(base.get(key), dict) and isinstance(over[key], dict):
            out[key] = _model(base[key], over[key])
        else:
            out[key] = over[key]
    return out


# keys that are no path key (a/b/c), values that YAML writes back as they were; no ``${`` anywhere
_KEYS = st.sampled_from(["a", "b", "c", "d"])
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text("xyz./", max_size=4))
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=8,
)
_FILES = st.dictionaries(_KEYS, _VALUES, max_size=4)


@settings(max_examples=150, deadline=None)
@given(base=_FILES, over=_FILES)
def test_an_extending_file_merges_over_its_base_as_the_model_says(tmp_path_factory, base, over):
    folder = tmp_path_factory.mktemp("merge")
    _write(folder / "base.yaml", base)
    top = _write(folder / "top.yaml", {"extends": "base.yaml", **over})
    assert raw_config(top) == _model(base, over)


@settings(max_examples=50, deadline=None)
@given(raw=_FILES)
def test_a_file_without_extends_is_its_yaml(tmp_path_factory, raw):
    path = _write(tmp_path_factory.mktemp("flat") / "dbus.yaml", raw)
    assert raw_config(path) == raw


@pytest.mark.parametrize(
    ("base", "over", "merged"),
    [
        ({"a": {"x": 1, "y": 2}}, {"a": {"y": 3, "z": 4}}, {"a": {"x": 1, "y": 3, "z": 4}}),
        (
            {"a": {"x": {"deep": 1, "keep": 2}}},
            {"a": {"x": {"deep": 9}}},
            {"a": {"x": {"deep": 9, "keep": 2}}},
        ),
        ({"a": [1, 2, 3]}, {"a": [4]}, {"a": [4]}),  # a list replaces, it is not appended to
        ({"a": {"x": 1}}, {"a": None}, {"a": None}),  # null replaces a mapping
        ({"a": {"x": 1}}, {"a": "text"}, {"a": "text"}),
        ({"a": "text"}, {"a": {"x": 1}}, {"a": {"x": 1}}),
        ({"a": 1}, {}, {"a": 1}),
        ({}, {"a": 1}, {"a": 1}),
    ],
)
def test_merge_cases(tmp_path, base, over, merged):
    _write(tmp_path / "base.yaml", base)
    assert raw_config(_write(tmp_path / "top.yaml", {"extends": "base.yaml", **over})) == merged


def test_extends_chains_and_is_not_in_the_result(tmp_path):
    _write(tmp_path / "one.yaml", {"a": 1, "b": {"x": 1}})
    _write(tmp_path / "sub" / "two.yaml", {"extends": "../one.yaml", "b": {"y": 2}})
    three = _write(tmp_path / "three.yaml", {"extends": "sub/two.yaml", "c": 3})
    assert raw_config(three) == {"a": 1, "b": {"x": 1, "y": 2}, "c": 3}


# ---------------------------------------------------------------- relative paths


def _paths(spark: dict[str, Any] | None = None) -> dict[str, Any]:
    """A file with a relative path under every key that holds one."""
    return {
        "endpoints": {"kafka": {"security": {"tls": {"ca": "ca.pem", "cert": "c.pem", "key": "k.pem"}}}},
        "spark": spark or {"jars_file": "../jars/spark.jars", "checkpoint_root": "checkpoints"},
        "sources": {
            "demo": {"mysql": {"tls": {"ca": "certs/ca.pem"}}, "extractor": {"state_dir": "state"}},
            "other": {"extractor": {"start": "current"}},
        },
        "console": {"audit_log": "audit.log"},
        "log_sources": {
            "app": {"shipper": {"files": ["logs/*.log", "/var/log/x.log"]}, "heartbeat": {"file": "hb"}}
        },
    }


def test_a_base_in_another_folder_keeps_its_relative_paths(tmp_path):
    base = tmp_path / "base"
    _write(base / "dbus.yaml", _paths())
    top = _write(
        tmp_path / "top" / "dbus.yaml", {"extends": "../base/dbus.yaml", "console": {"listen": "h:1"}}
    )
    raw = raw_config(top)
    b = str(base)
    assert raw["endpoints"]["kafka"]["security"]["tls"] == {
        "ca": f"{b}/ca.pem",
        "cert": f"{b}/c.pem",
        "key": f"{b}/k.pem",
    }
    assert raw["spark"] == {"jars_file": f"{tmp_path}/jars/spark.jars", "checkpoint_root": f"{b}/checkpoints"}
    assert raw["sources"]["demo"] == {
        "mysql": {"tls": {"ca": f"{b}/certs/ca.pem"}},
        "extractor": {"state_dir": f"{b}/state"},
    }
    assert raw["sources"]["other"] == {"extractor": {"start": "current"}}
    assert raw["console"] == {"audit_log": f"{b}/audit.log", "listen": "h:1"}
    assert raw["log_sources"]["app"] == {
        "shipper": {"files": [f"{b}/logs/*.log", "/var/log/x.log"]},
        "heartbeat": {"file": f"{b}/hb"},
    }


def test_each_file_s_paths_are_against_its_own_folder(tmp_path):
    _write(tmp_path / "base" / "dbus.yaml", _paths())
    over = {"extends": "../base/dbus.yaml", "console": {"audit_log": "mine.log"}, "spark": {"jars_file": "j"}}
    raw = raw_config(_write(tmp_path / "top" / "dbus.yaml", over))
    assert raw["console"]["audit_log"] == f"{tmp_path}/top/mine.log"
    assert raw["spark"] == {
        "jars_file": f"{tmp_path}/top/j",
        "checkpoint_root": f"{tmp_path}/base/checkpoints",
    }


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("cp", "{dir}/cp"),
        ("../cp", "{parent}/cp"),  # `..` folded
        ("/abs/cp", "/abs/cp"),  # absolute: as written
        ("hdfs://nn:8020/dbus", "hdfs://nn:8020/dbus"),  # a URI: as written
        ("s3a://bucket/dbus", "s3a://bucket/dbus"),
        ("file:///shared/dbus", "file:///shared/dbus"),
        ("${env:DBUS_CP}/cp", "${env:DBUS_CP}/cp"),  # a reference: as written
        (42, 42),  # not a string: as it is (validation refuses it later)
        (None, None),
    ],
)
def test_checkpoint_root(tmp_path, value, expected):
    path = _write(tmp_path / "conf" / "dbus.yaml", {"spark": {"checkpoint_root": value}})
    if isinstance(expected, str):
        expected = expected.replace("{dir}", str(tmp_path / "conf")).replace("{parent}", str(tmp_path))
    assert raw_config(path) == {"spark": {"checkpoint_root": expected}}


def test_pem_files_of_any_tls_block_only(tmp_path):
    raw = {
        "anywhere": {"deeper": {"tls": {"ca": "a.pem", "key_password": "pw", "check_hostname": False}}},
        "list": [{"tls": {"cert": "c.pem", "key": "/k.pem"}}],
        "not_tls": {"ca": "x.pem"},
        "tls": "not a mapping",
    }
    got = raw_config(_write(tmp_path / "dbus.yaml", raw))
    assert got == {
        "anywhere": {
            "deeper": {"tls": {"ca": f"{tmp_path}/a.pem", "key_password": "pw", "check_hostname": False}}
        },
        "list": [{"tls": {"cert": f"{tmp_path}/c.pem", "key": "/k.pem"}}],
        "not_tls": {"ca": "x.pem"},
        "tls": "not a mapping",
    }


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("${file:secret}", "${file:{dir}/secret}"),
        ("${file:../up/secret}", "${file:{dir}/../up/secret}"),
        ("u:${file:a}@h/${file:/abs/b}", "u:${file:{dir}/a}@h/${file:/abs/b}"),
        ("$${file:secret}", "$${file:secret}"),  # escaped: the literal text, untouched
        ("${env:X:-y}", "${env:X:-y}"),
        ("${file:secret", "${file:secret"),  # unclosed: load_config says so
        ("${x}", "${x}"),
        ("plain", "plain"),
    ],
)
def test_file_references_are_made_absolute_in_any_string(tmp_path, value, expected):
    raw = {"anything": {"deep": [value]}}
    expected = expected.replace("{dir}", str(tmp_path / "conf"))
    assert raw_config(_write(tmp_path / "conf" / "dbus.yaml", raw)) == {"anything": {"deep": [expected]}}


# ---------------------------------------------------------------- errors


def test_a_cycle_names_its_files(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    _write(a, {"extends": "b.yaml"})
    _write(b, {"extends": "a.yaml"})
    with pytest.raises(ConfigError) as e:
        raw_config(a)
    assert str(e.value) == f"{b}: extends: a.yaml: a cycle: {a} -> {b} -> {a}"


def test_a_file_extending_itself_is_a_cycle(tmp_path):
    a = _write(tmp_path / "a.yaml", {"extends": "./a.yaml"})
    with pytest.raises(ConfigError, match=r"a\.yaml: extends: \./a\.yaml: a cycle: .*a\.yaml -> .*a\.yaml$"):
        raw_config(a)


def test_a_missing_base_names_it_and_the_file_extending_it(tmp_path):
    top = _write(tmp_path / "top.yaml", {"extends": "gone.yaml"})
    with pytest.raises(ConfigError) as e:
        raw_config(top)
    assert str(e.value) == f"{tmp_path}/gone.yaml: no such configuration file (extended by {top})"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: [1", "not valid YAML"),
        ("- 1\n- 2\n", "the top level must be a mapping"),
        ("", "the top level must be a mapping"),
    ],
)
def test_a_bad_base_is_named(tmp_path, text, message):
    (tmp_path / "base.yaml").write_text(text)
    top = _write(tmp_path / "top.yaml", {"extends": "base.yaml"})
    with pytest.raises(ConfigError) as e:
        raw_config(top)
    assert str(e.value).startswith(f"{tmp_path}/base.yaml: {message}")


@pytest.mark.parametrize("value", [None, 3, ["base.yaml"], {"file": "base.yaml"}, ""])
def test_extends_must_be_a_file_name(tmp_path, value):
    top = _write(tmp_path / "top.yaml", {"extends": value})
    with pytest.raises(ConfigError) as e:
        raw_config(top)
    assert str(e.value) == f"{top}: extends: must be the name of another configuration file, got {value!r}"


def test_load_config_gives_the_errors_of_a_base(tmp_path):
    top = _write(tmp_path / "top.yaml", {"extends": "gone.yaml"})
    with pytest.raises(
        ConfigError, match=r"gone\.yaml: no such configuration file \(extended by .*top\.yaml\)"
    ):
        load_config(top)


# ---------------------------------------------------------------- load_config


OVERRIDES = {
    "endpoints": {"kafka": {"bootstrap_servers": "127.0.0.1:19094", "client": {"request_timeout_ms": 5000}}},
    "sources": {"demo": {"capture": {"include": ["shop.orders"]}, "extractor": {"state_dir": "mine"}}},
    "console": {"users": [{"name": "ops", "role": "operator"}]},
}


def _over(base: Any, over: Any) -> Any:
    """``over`` written into a copy of ``base`` by hand, as someone would edit the flat file."""
    if isinstance(base, dict) and isinstance(over, dict):
        return {**base, **{k: _over(base.get(k), v) for k, v in over.items()}}
    return over


@pytest.mark.parametrize("where", ["same folder", "other folder"])
def test_load_config_of_an_extending_file_is_that_of_the_flat_file(tmp_path, where):
    base = tmp_path / "conf" / "dbus.yaml"
    base.parent.mkdir()
    shutil.copy(DEFAULT_CONFIG, base)  # its relative paths (../.stack/...) now mean tmp_path's
    (tmp_path / "conf" / "secret").write_text("s3cret\n")
    raw = yaml.safe_load(base.read_text())
    raw["endpoints"]["influxdb"]["token"] = "${file:secret}"
    _write(base, raw)
    top_dir = tmp_path / "conf" if where == "same folder" else tmp_path / "elsewhere" / "deeper"
    extends = "dbus.yaml" if where == "same folder" else "../../conf/dbus.yaml"
    over = {**OVERRIDES, "sources": {"demo": {**OVERRIDES["sources"]["demo"]}}}
    if where == "other folder":  # the extending file's own relative path, written against its folder
        over["sources"]["demo"]["extractor"] = {"state_dir": "../../conf/mine"}
    top = _write(top_dir / "secure.yaml", {"extends": extends, **over})
    flat = _write(tmp_path / "conf" / "flat.yaml", _over(raw, OVERRIDES))

    extended, written = load_config(top), load_config(flat)
    assert extended.model_dump() == written.model_dump()
    assert extended.endpoints.kafka.bootstrap_servers == "127.0.0.1:19094"
    assert extended.endpoints.influxdb.token.get_secret_value() == "s3cret"  # the base's folder's file
    assert extended.resolve(extended.spark.jars_file) == written.resolve(written.spark.jars_file)
    assert extended.resolve(extended.source("demo").extractor.state_dir) == tmp_path / "conf" / "mine"
    assert extended.path == top.resolve()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("mysql+pymysql://u:p@h/db?ssl_ca=tls/ca.pem", "mysql+pymysql://u:p@h/db?ssl_ca={d}/tls/ca.pem"),
        (
            "mysql+pymysql://u:${file:pw}@h/db?charset=utf8mb4&ssl_ca=../ca.pem&ssl_cert=c.pem&ssl_key=/k.pem",
            "mysql+pymysql://u:${{file:{d}/pw}}@h/db?charset=utf8mb4&ssl_ca={p}/ca.pem&ssl_cert={d}/c.pem"
            "&ssl_key=/k.pem",
        ),
        ("mysql+pymysql://u:p@h/db", "mysql+pymysql://u:p@h/db"),
    ],
)
def test_the_meta_store_url_s_pem_files_are_made_absolute(tmp_path, url, expected):
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "dbus.yaml").write_text(yaml.safe_dump({"endpoints": {"meta_store": {"url": url}}}))
    got = raw_config(conf / "dbus.yaml")["endpoints"]["meta_store"]["url"]
    assert got == expected.format(d=conf, p=tmp_path)
