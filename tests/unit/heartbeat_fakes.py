"""Fakes of ZooKeeper, a channel, a clock and the dead-letter reader for the heartbeat monitor's unit tests
(test_heartbeat_observe, test_heartbeat_logmonitor)."""

from __future__ import annotations

from datetime import datetime, timezone

from kazoo.exceptions import NodeExistsError, NoNodeError

from heartbeat.channels import ChannelError


def at(ms):
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


class FakeZk:
    def __init__(self):
        self.nodes: dict[str, bytes] = {}

    def ensure_path(self, path):
        pass

    def get_children(self, path):
        return [k.rsplit("/", 1)[1] for k in self.nodes if k.rsplit("/", 1)[0] == path]

    def get(self, path):
        if path not in self.nodes:
            raise NoNodeError
        return self.nodes[path], None

    def create(self, path, data, makepath=False):
        if path in self.nodes:
            raise NodeExistsError
        self.nodes[path] = data

    def delete(self, path):
        if self.nodes.pop(path, None) is None:
            raise NoNodeError

    def set(self, path, data):
        if path not in self.nodes:
            raise NoNodeError
        self.nodes[path] = data


class FakeChannel:
    def __init__(self, name, failures=0):
        self.name, self.failures, self.sent = name, failures, []

    def send(self, note):
        if self.failures:
            self.failures -= 1
            msg = f"{self.name} down"
            raise ChannelError(msg)
        self.sent.append((note.event, note.alert.key))


class Clock:
    def __init__(self, ms):
        self.ms = ms

    def __call__(self):
        return self.ms / 1000


class FakeDlq:
    """heartbeat.deadletters.DlqReader without Kafka: ``pending`` letters are read at the next check."""

    topic = "demo.dlq"

    def __init__(self):
        self.pending: list = []
        self.failure: Exception | None = None
        self.commits = self.rewinds = 0

    def read(self):
        if self.failure is not None:
            raise self.failure
        out, self.pending = self.pending, []
        return out

    def commit(self):
        self.commits += 1

    def rewind(self):
        self.rewinds += 1

    def close(self):
        pass
