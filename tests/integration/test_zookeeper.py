"""kazoo create/watch on the real ZooKeeper."""

import threading
import uuid

from dbuslib import zk


def test_create_and_watch(cfg):
    client = zk.client(cfg.endpoints.zookeeper)
    path = zk.path(cfg.endpoints.zookeeper, "pytest", uuid.uuid4().hex)
    seen: list[bytes] = []
    changed = threading.Event()
    try:
        client.create(path, b"v1", makepath=True)

        @client.DataWatch(path)
        def _watch(data, stat):
            seen.append(data)
            if data == b"v2":
                changed.set()

        client.set(path, b"v2")
        assert changed.wait(10), f"watch saw only {seen}"
        assert seen == [b"v1", b"v2"]
    finally:
        client.delete(path, recursive=True)
        client.stop()
        client.close()
