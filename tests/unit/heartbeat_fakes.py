"""Fakes of ZooKeeper, a channel, a clock and the dead-letter reader for the heartbeat monitor's unit tests
(test_heartbeat_observe, test_heartbeat_logmonitor)."""

from __future__ import annotations

from datetime import datetime, timezone

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from heartbeat.channels import ChannelError


def at(ms):
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


class Stat:
    def __init__(self, version):
        self.version = version


class FakeZk:
    def __init__(self):
        self.nodes: dict[str, bytes] = {}
        self.versions: dict[str, int] = {}

    def ensure_path(self, path):
        pass

    def get_children(self, path):
        """The direct children of ``path`` (a node whose only descendants exist counts as there)."""
        names = {k[len(path) + 1 :].split("/")[0] for k in self.nodes if k.startswith(path + "/")}
        if not names and path not in self.nodes:
            raise NoNodeError
        return sorted(names)

    def get(self, path):
        if path not in self.nodes:
            raise NoNodeError
        return self.nodes[path], Stat(self.versions.get(path, 0))

    def exists(self, path):
        there = path in self.nodes or any(k.startswith(path + "/") for k in self.nodes)
        return Stat(self.versions.get(path, 0)) if there else None

    def create(self, path, data=b"", makepath=False, ephemeral=False):
        if path in self.nodes:
            raise NodeExistsError
        self.nodes[path] = data
        self.versions[path] = 0

    def delete(self, path):
        if self.nodes.pop(path, None) is None:
            raise NoNodeError

    def set(self, path, data, version=-1):
        if path not in self.nodes:
            raise NoNodeError
        if version != -1 and version != self.versions.get(path, 0):
            raise BadVersionError
        self.nodes[path] = data
        self.versions[path] = self.versions.get(path, 0) + 1


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
