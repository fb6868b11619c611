"""``endpoints.zookeeper.auth``: only DBus's identity may change the nodes DBus creates (issue #31).

The real extractor runs with a digest identity under a ZooKeeper root of its own and captures a few
rows, so it writes its leader, epoch and position. Then every node under the root carries the ACL
``dbuslib.zk.secured`` gives (the identity: all; the world: read); a client without the identity, and
one with a wrong password, can read the position but cannot change it; DBus's own client can.
"""

from __future__ import annotations

import uuid

import pytest
import yaml
from extractor_env import cleanup, make_env
from helpers import wait_until
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import Permissions

from dbuslib import zk, zkpaths
from dbuslib.config import load_config

pytestmark = pytest.mark.integration


def walk(client: KazooClient, path: str) -> list[str]:
    return [path] + [p for child in client.get_children(path) for p in walk(client, f"{path}/{child}")]


def test_only_dbuss_identity_changes_what_the_extractor_wrote(writer_db, tmp_path, kafka_up):
    db, name = writer_db
    env = make_env(tmp_path, name)
    raw = yaml.safe_load(env.cfg_path.read_text())
    root = f"/DBusAcl_{uuid.uuid4().hex[:8]}"
    raw["endpoints"]["zookeeper"].update(root=root, auth={"username": "dbus", "password": "zk-s3cret"})
    env.cfg_path.write_text(yaml.safe_dump(raw))
    env.cfg = load_config(env.cfg_path)
    endpoint = env.cfg.endpoints.zookeeper
    own = zk.client(endpoint)
    anyone = KazooClient(hosts=endpoint.hosts)
    anyone.start()
    impostor = KazooClient(hosts=endpoint.hosts, auth_data=[("digest", "dbus:not-it")])
    impostor.start()
    position = zkpaths.extractor_position(root, env.ds)
    try:
        env.spawn()
        with db.cursor() as cur:
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY)")
            cur.executemany("INSERT INTO t VALUES (%s)", [(i,) for i in range(20)])
        db.commit()
        wait_until(lambda: own.exists(position) is not None, 120, f"the extractor's position {position}")
        nodes = walk(own, root)
        assert position in nodes
        assert zkpaths.extractor_leader(root, env.ds) in nodes
        for node in nodes:
            acl = {(a.id.scheme, a.perms) for a in own.get_acls(node)[0]}
            assert acl == {("digest", Permissions.ALL), ("world", Permissions.READ)}, node
        data, _ = anyone.get(position)
        assert data
        for other in (anyone, impostor):
            with pytest.raises(NoAuthError):
                other.set(position, b"{}")
            with pytest.raises(NoAuthError):
                other.create(f"{position}-forged", b"x")
        assert own.get(position)[0] == data  # nobody else changed it
        logs = list(env.logs.glob("*.log"))
        assert logs and not any("zk-s3cret" in log.read_text(errors="replace") for log in logs)
    finally:
        cleanup(env)
        own.delete(root, recursive=True)
        for c in (own, anyone, impostor):
            c.stop()
            c.close()
