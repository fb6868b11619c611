"""The appender's reloadable rules: snapshot JSON, generations, the listener's answer to a reload (no
servers)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from appender import rules
from appender.rules import RulesError, RulesSnapshot, next_snapshot
from dbuslib.config import DEFAULT_CONFIG, MaskRule, load_config
from dbuslib.errors import ConfigError
from ums import UmsField, UmsType
from ums.control import ControlType, new_control_message, to_json

MASKING = {
    "shop.customers": {
        "phone": MaskRule(type="regex", pattern=r"(\d{3})\d+", replacement=r"\1****"),
        "email": MaskRule(type="sha256", salt="pepper"),
    },
    "shop.*": {"note": MaskRule(type="replace", value="N/A")},
}


def test_snapshot_round_trip_keeps_rules_and_salts():
    snap = next_snapshot(
        None, "demo", MASKING, "/x/dbus.yaml", 42, now=datetime(2024, 1, 2, 3, 4, 5, 123000, UTC)
    )
    back = RulesSnapshot.from_json(snap.to_json())
    assert back == snap
    assert (back.generation, back.request_id, back.loaded_at) == (1, 42, "2024-01-02 03:04:05.123")
    assert back.masking["shop.customers"]["email"].salt.get_secret_value() == "pepper"
    obj = json.loads(snap.to_json())
    assert obj["format"] == 1 and obj["masking"]["shop.*"] == {"note": {"type": "replace", "value": "N/A"}}


def test_snapshot_plan_masks_like_the_file():
    plan = RulesSnapshot.from_json(next_snapshot(None, "demo", MASKING).to_json()).plan()
    fields = (UmsField("phone", UmsType.STRING, True), UmsField("note", UmsType.STRING, True))
    mask = plan.for_table("shop", "customers", fields)
    assert mask.apply_row(("13812345678", "secret")) == ("138****", "N/A")


def test_generation_grows_by_one():
    first = next_snapshot(None, "demo", {})
    second = next_snapshot(first, "demo", MASKING, request_id=7)
    assert (first.generation, second.generation, second.request_id) == (1, 2, 7)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"not json", "not JSON"),
        (b"[]", "JSON object"),
        (b'{"format": 2, "generation": 1}', "format 2"),
        (b'{"format": 1, "generation": 0}', "generation 0"),
        (b'{"format": 1, "generation": true}', "generation True"),
        (
            b'{"format": 1, "generation": 1, "masking": {"a.b": {"c": {"type": "rot13"}}}}',
            "masking.a.b.c.type",
        ),
        (b'{"format": 1, "generation": 1, "masking": {"a.b": {"ums_id_": {"type": "default"}}}}', "ums_id_"),
    ],
)
def test_bad_snapshots_are_rejected_with_the_reason(data, needle):
    with pytest.raises(RulesError, match="rules") as e:
        RulesSnapshot.from_json(data, "/DBus/Appender/demo/rules")
    assert needle in str(e.value)


def _config(tmp_path: Path, masking: dict) -> Path:
    raw = yaml.safe_load(DEFAULT_CONFIG.read_text())
    raw["sources"]["demo"]["masking"] = masking
    raw["spark"]["jars_file"] = str(load_config().resolve(load_config().spark.jars_file))
    path = tmp_path / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_load_rules_names_file_and_key(tmp_path):
    good = _config(tmp_path, {"shop.t": {"c": {"type": "md5"}}})
    assert rules.load_rules(str(good), "demo")[1]["shop.t"]["c"].type == "md5"
    bad = _config(tmp_path, {"shop.t": {"ums_ts_": {"type": "default"}}})
    with pytest.raises(ConfigError, match=r"dbus.yaml: sources\.demo\.masking\.shop\.t\.ums_ts_"):
        rules.load_rules(str(bad), "demo")
    bad = _config(tmp_path, {"shop.t": {"c": {"type": "replace"}}})
    with pytest.raises(ConfigError, match=r"sources\.demo\.masking\.shop\.t\.c"):
        rules.load_rules(str(bad), "demo")


class FakeZk:
    """The few kazoo calls the listener makes, in memory, with versions."""

    def __init__(self):
        self.nodes: dict[str, tuple[bytes, int]] = {}

    class _Stat:
        def __init__(self, version):
            self.version = version

    class _Async:
        def __init__(self, fn):
            self.fn = fn

        def get(self, timeout=None):
            return self.fn()

    def get(self, path):
        from kazoo.exceptions import NoNodeError

        if path not in self.nodes:
            raise NoNodeError
        data, version = self.nodes[path]
        return data, self._Stat(version)

    def get_async(self, path):
        return self._Async(lambda: self.get(path))

    def exists(self, path):
        return path in self.nodes

    def create(self, path, data, makepath=False):
        from kazoo.exceptions import NodeExistsError

        if path in self.nodes:
            raise NodeExistsError
        self.nodes[path] = (data, 0)

    def set(self, path, data, version=-1):
        from kazoo.exceptions import BadVersionError

        if version not in (-1, self.nodes[path][1]):
            raise BadVersionError
        self.nodes[path] = (data, self.nodes[path][1] + 1)


def test_listener_applies_a_good_file_and_keeps_rules_on_a_bad_one(tmp_path):
    path = _config(tmp_path, {"shop.t": {"c": {"type": "replace", "value": "x"}}})
    cfg = load_config(path)
    listener = rules.ReloadListener(cfg, "demo")
    listener._zk = FakeZk()
    start = rules.publish(listener._zk, cfg, "demo", cfg.source("demo").masking, str(path))
    listener.generation = start.generation
    node = rules.node_path(cfg, "demo")

    path.write_text(path.read_text().replace("type: replace", "type: md5"))
    msg = new_control_message(ControlType.APPENDER_RELOAD_CONFIG, "test", {"ds": "demo"})
    reply = listener.handle(to_json(msg).encode())
    assert reply == {"request_id": msg.id, "source": "demo", "status": "applied", "generation": 2}
    snap = RulesSnapshot.from_json(listener._zk.get(node)[0])
    assert (snap.generation, snap.request_id, snap.masking["shop.t"]["c"].type) == (2, msg.id, "md5")

    path.write_text(path.read_text().replace("type: md5", "type: rot13"))
    reply = listener.handle(to_json(msg).encode())
    assert reply["status"] == "rejected" and reply["generation"] == 2 and reply["code"] == "CONFIG_INVALID"
    assert "masking.shop.t.c.type" in reply["reason"]
    assert RulesSnapshot.from_json(listener._zk.get(node)[0]).generation == 2, "old rules stay"
    assert json.loads(listener._zk.get(rules.reply_path(cfg, "demo"))[0])["status"] == "rejected"

    other = new_control_message(ControlType.FULL_DATA_INDEPENDENT_PULL_REQ, "test", {"SCHEMA_NAME": "s"})
    assert listener.handle(to_json(other).encode()) is None
    assert listener.handle(b"garbage") is None
    for_other_source = new_control_message(ControlType.APPENDER_RELOAD_CONFIG, "test", {"ds": "other"})
    assert listener.handle(to_json(for_other_source).encode()) is None


def test_current_plan_reads_the_node_else_the_file(tmp_path, monkeypatch):
    path = _config(tmp_path, {"shop.t": {"c": {"type": "replace", "value": "file"}}})
    cfg = load_config(path)
    fake = FakeZk()
    monkeypatch.setattr(rules, "_STATE", rules._WorkerState())
    monkeypatch.setattr(rules.zk, "client", lambda _cfg: fake)
    fields = (UmsField("c", UmsType.STRING, True),)

    generation, plan = rules.current_plan(cfg, "demo")
    assert generation == 0 and plan.for_table("shop", "t", fields).apply_row(("v",)) == ("file",)

    rules.publish(fake, cfg, "demo", {"shop.t": {"c": MaskRule(type="replace", value="zk")}})
    generation, plan = rules.current_plan(cfg, "demo")
    assert generation == 1 and plan.for_table("shop", "t", fields).apply_row(("v",)) == ("zk",)
    assert rules.current_plan(cfg, "demo")[1] is plan, "compiled once per generation"

    def broken(_path):
        msg = "down"
        raise ConnectionError(msg)

    monkeypatch.setattr(fake, "get_async", broken)
    assert rules.current_plan(cfg, "demo")[1] is plan, "ZooKeeper down: the last plan of this worker"
    monkeypatch.setattr(rules, "_STATE", rules._WorkerState())
    monkeypatch.setattr(rules.zk, "client", lambda _cfg: fake)
    with pytest.raises(rules.EndpointError, match="cannot read the appender rules"):
        rules.current_plan(cfg, "demo")


def test_dbus_reload_with_a_bad_file_sends_nothing(tmp_path, monkeypatch, capsys):
    from cli import main as cli
    from dbuslib import kafka

    def no_kafka(*a, **k):
        msg = "nothing may be sent"
        raise AssertionError(msg)

    monkeypatch.setattr(kafka, "producer", no_kafka)
    bad = _config(tmp_path, {"shop.t": {"c": {"type": "regex", "pattern": "(a)", "replacement": r"\2"}}})
    assert cli.main(["reload", "--source", "demo", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "CONFIG_INVALID" in err and str(bad) in err and "masking.shop.t.c" in err
    assert cli.main(["--config", str(bad), "reload", "--source", "nosuch"]) == 2
    assert "no source 'nosuch'" in capsys.readouterr().err


# ---------------------------------------------------------------- the listener survives any record

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

RELOAD_KEY = b"APPENDER_RELOAD_CONFIG"


@pytest.fixture(scope="module")
def listener(tmp_path_factory):
    path = _config(tmp_path_factory.mktemp("reload"), {"shop.t": {"c": {"type": "replace", "value": "x"}}})
    cfg = load_config(path)
    one = rules.ReloadListener(cfg, "demo")
    one._zk = FakeZk()
    one.generation = rules.publish(one._zk, cfg, "demo", cfg.source("demo").masking, str(path)).generation
    return one


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)


def _reload_with(key: str, value) -> bytes:
    msg = new_control_message(ControlType.APPENDER_RELOAD_CONFIG, "test", {"ds": "demo"})
    obj = json.loads(to_json(msg))
    obj[key] = value
    return json.dumps(obj).encode()


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    value=st.none()
    | st.binary(max_size=200)
    | st.builds(_reload_with, st.sampled_from(["id", "type", "timestamp", "from", "payload"]), json_values),
    key=st.none() | st.sampled_from([RELOAD_KEY, b"FULL_DATA_INDEPENDENT_PULL_REQ", b"\xff"]),
)
def test_handle_never_raises_and_answers_only_reloads(listener, value, key):
    from unittest import mock

    with mock.patch.object(rules.log, "exception") as bug:  # the last-resort catch is not what saves it
        reply = listener.handle(value, key, "demo_ctrl[0]@3")
    assert not bug.called, bug.call_args
    assert reply is None or reply["status"] in ("applied", "rejected")
    if reply is not None and reply["status"] == "rejected":
        assert reply["code"] in ("UMS_BAD_CONTROL", "CONFIG_INVALID", rules.RELOAD_FAILED)


@pytest.mark.parametrize(
    "value",
    [
        None,
        b"garbage",
        b'{"id": 9, "type": "APPENDER_RELOAD_CONFIG", "n": ' + b"1" * 5000 + b"}",
        b"[" * 100_000,
        b'{"id": 9, "payload": []}',
    ],
)
def test_a_poison_reload_is_rejected_with_the_reason_and_a_later_one_applies(listener, value):
    reply = listener.handle(value, RELOAD_KEY, "demo_ctrl[0]@7")
    assert reply["status"] == "rejected" and reply["code"] == "UMS_BAD_CONTROL"
    assert reply["reason"].startswith("demo_ctrl[0]@7: UMS_BAD_CONTROL: control message")
    assert reply["request_id"] == (9 if value and value.startswith(b'{"id": 9') else None)
    stored = json.loads(listener._zk.get(rules.reply_path(listener.cfg, "demo"))[0])
    assert stored == reply
    good = new_control_message(ControlType.APPENDER_RELOAD_CONFIG, "test", {"ds": "demo"})
    before = listener.generation
    after = listener.handle(to_json(good).encode(), RELOAD_KEY, "demo_ctrl[0]@8")
    assert after == {"request_id": good.id, "source": "demo", "status": "applied", "generation": before + 1}


def test_garbage_that_is_not_a_reload_is_ignored(listener):
    assert listener.handle(None, b"FULL_DATA_INDEPENDENT_PULL_REQ") is None
    assert listener.handle(b"\x00\x01", None) is None


def test_a_zookeeper_failure_rejects_the_reload_and_the_listener_goes_on(listener, monkeypatch):
    def down(*a, **k):
        msg = "ZooKeeper gone"
        raise ConnectionError(msg)

    monkeypatch.setattr(rules, "publish", down)
    msg = new_control_message(ControlType.APPENDER_RELOAD_CONFIG, "test", {"ds": "demo"})
    reply = listener.handle(to_json(msg).encode(), RELOAD_KEY)
    assert reply["status"] == "rejected" and reply["code"] == "APPENDER_RELOAD_FAILED"
    assert "ConnectionError: ZooKeeper gone" in reply["reason"]


def test_a_failing_poll_is_retried_and_later_records_are_handled(listener, monkeypatch):
    from types import SimpleNamespace

    good = new_control_message(ControlType.APPENDER_RELOAD_CONFIG, "test", {"ds": "demo"})
    rec = SimpleNamespace(
        topic="demo_ctrl", partition=0, offset=5, key=RELOAD_KEY, value=to_json(good).encode()
    )
    seen = []

    class Consumer:
        calls = 0

        def poll(self, timeout_ms):
            Consumer.calls += 1
            if Consumer.calls == 1:
                msg = "broker gone"
                raise OSError(msg)
            if Consumer.calls == 2:
                return {
                    "tp": [
                        SimpleNamespace(topic="demo_ctrl", partition=0, offset=4, key=RELOAD_KEY, value=None),
                        rec,
                    ]
                }
            listener.stopping.set()
            return {}

    monkeypatch.setattr(listener, "_consumer", Consumer())
    monkeypatch.setattr(listener.stopping, "wait", lambda t: False)  # no real backoff in a unit test
    monkeypatch.setattr(listener, "handle", lambda v, k, w: seen.append((w, v is None)))
    listener._listen()
    listener.stopping.clear()
    assert seen == [("demo_ctrl[0]@4", True), ("demo_ctrl[0]@5", False)]
