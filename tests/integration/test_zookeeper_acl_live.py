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
from dbuslib.config import load_config, raw_config

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


def test_dbus_zookeeper_secure_gives_older_nodes_the_acl(cfg, tmp_path):
    """Nodes made before ``auth`` was set (open to the world) get DBus's ACL from ``dbus zookeeper secure``;
    ``--dry-run`` counts them and changes none."""
    import subprocess
    import sys

    from extractor_env import REPO

    root = f"/DBusAcl_{uuid.uuid4().hex[:8]}"
    anyone = KazooClient(hosts=cfg.endpoints.zookeeper.hosts)
    anyone.start()
    made = [f"{root}/Extractor/demo/position", f"{root}/Extractor/demo/epoch", f"{root}/Live/demo"]
    for path in made:
        anyone.create(path, b"{}", makepath=True)
    raw = raw_config(cfg.path)
    raw["endpoints"]["zookeeper"].update(root=root, auth={"username": "dbus", "password": "zk-s3cret"})
    raw["spark"]["jars_file"] = str((cfg.path.parent / raw["spark"]["jars_file"]).resolve())
    path = tmp_path / "dbus.yaml"
    path.write_text(yaml.safe_dump(raw))
    dbus = [sys.executable, "-m", "cli.main", "--config", str(path), "zookeeper", "secure"]
    own = zk.client(load_config(path).endpoints.zookeeper)
    try:
        dry = subprocess.run([*dbus, "--dry-run"], cwd=REPO, capture_output=True, text=True, check=True)
        assert "would change the ACL of 7 node(s)" in dry.stdout, dry.stdout  # root, 2 parents... 7 in all
        anyone.set(made[0], b"still open")
        done = subprocess.run(dbus, cwd=REPO, capture_output=True, text=True, check=True)
        assert "changed the ACL of 7 node(s), 0 had it already" in done.stdout, done.stdout
        for node in walk(own, root):
            acl = {(a.id.scheme, a.perms) for a in own.get_acls(node)[0]}
            assert acl == {("digest", Permissions.ALL), ("world", Permissions.READ)}, node
        with pytest.raises(NoAuthError):
            anyone.set(made[0], b"forged")
        assert anyone.get(made[0])[0] == b"still open"  # readable, unchanged
        again = subprocess.run(dbus, cwd=REPO, capture_output=True, text=True, check=True)
        assert "changed the ACL of 0 node(s), 7 had it already" in again.stdout
        assert "zk-s3cret" not in dry.stdout + dry.stderr + done.stdout + done.stderr
    finally:
        own.delete(root, recursive=True)
        for c in (own, anyone):
            c.stop()
            c.close()
