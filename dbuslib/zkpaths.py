"""Every ZooKeeper node DBus uses, each built by one function here (pure).

``root`` is ``endpoints.zookeeper.root`` ("/DBus" by default); every other component is a name and goes
through ``dbuslib.zk.escape``, so an ordinary name is as it is and no name becomes a relative or nested path.
The tree of source ``demo``, by example::

    /DBus/Extractor/demo                             extractor(root, ds): one source's extractor
    /DBus/Extractor/demo/leader                      extractor_leader: kazoo Lock, one child per contender
    /DBus/Extractor/demo/epoch                       extractor_epoch: "7" (extractor/leader.py)
    /DBus/Extractor/demo/position                    extractor_position: committed position JSON (store.py)
    /DBus/Appender/demo/rules                        appender_rules: the masking rules snapshot (rules.py)
    /DBus/Appender/demo/reload                       appender_reload: the answer to the last reload
    /DBus/LogProcessor/applog/reload                 logprocessor_reload: the answer to the last rules reload
    /DBus/FullPuller/demo                            fullpuller(root, ds): one source's pulls
    /DBus/FullPuller/demo/shop/orders/1704164645123  pull(base, schema, table, seqno): one request's progress
    /DBus/FullPuller/demo/shop/orders/1704164645123/shards      pull_shards(base, ...)
    /DBus/FullPuller/demo/shop/orders/1704164645123/shards/0    pull_shard(base, ..., index)
    /DBus/HeartBeat/demo/leader                      heartbeat_leader: the heartbeat writer's lock
    /DBus/HeartBeat/demo/alerts                      heartbeat_alerts: the monitor's open alerts
    /DBus/HeartBeat/demo/alerts/shop.orders.stale    alert(base, key): one open alert (heartbeat/incidents.py)
    /DBus/HeartBeat/demo/history                     heartbeat_history: the monitor's closed incidents
    /DBus/Live/demo/appender/host1:4242              live_process(root, ds, stage, who): one running stage
                                                     process, ephemeral (dbuslib/liveness.py)
    /DBus/Client/orders-replica                      client(root, name): one consumer client's nodes
    /DBus/Client/orders-replica/checkpoint           client_checkpoint: its checkpoint (checkpoint_zk.py)

``pull*`` and ``alert`` take the node of their parent (``base``), which the stores hold, instead of the root.
These are the paths a deployed ZooKeeper tree already has: tests/unit/test_zk_paths.py pins each one.
"""

from __future__ import annotations

import posixpath

from dbuslib.zk import escape

EXTRACTOR, APPENDER, FULLPULLER, HEARTBEAT = "Extractor", "Appender", "FullPuller", "HeartBeat"
LOGPROCESSOR = "LogProcessor"
LIVE = "Live"
CLIENT = "Client"
_EPOCH = "epoch"


def join(base: str, *names: str) -> str:
    """``base`` (a path) followed by ``names``, each escaped as one component."""
    return "/".join([base, *(escape(n) for n in names)])


def extractor(root: str, ds: str) -> str:
    return join(root, EXTRACTOR, ds)


def extractor_leader(root: str, ds: str) -> str:
    return join(extractor(root, ds), "leader")


def extractor_epoch(root: str, ds: str) -> str:
    return join(extractor(root, ds), _EPOCH)


def epoch_beside(position: str) -> str:
    """The epoch node next to a position node (``extractor_position``): the one its store fences with."""
    return join(posixpath.dirname(position), _EPOCH)


def extractor_position(root: str, ds: str) -> str:
    return join(extractor(root, ds), "position")


def appender(root: str, ds: str) -> str:
    return join(root, APPENDER, ds)


def appender_rules(root: str, ds: str) -> str:
    return join(appender(root, ds), "rules")


def appender_reload(root: str, ds: str) -> str:
    return join(appender(root, ds), "reload")


def logprocessor(root: str, ds: str) -> str:
    return join(root, LOGPROCESSOR, ds)


def logprocessor_reload(root: str, ds: str) -> str:
    return join(logprocessor(root, ds), "reload")


def fullpuller(root: str, ds: str) -> str:
    return join(root, FULLPULLER, ds)


def pull(base: str, schema: str, table: str, seqno: int) -> str:
    """One request's progress node; ``base`` is ``fullpuller(root, ds)``."""
    return join(base, schema, table, str(seqno))


def pull_shards(base: str, schema: str, table: str, seqno: int) -> str:
    return join(pull(base, schema, table, seqno), "shards")


def pull_shard(base: str, schema: str, table: str, seqno: int, index: int) -> str:
    return join(pull_shards(base, schema, table, seqno), str(index))


def heartbeat(root: str, ds: str) -> str:
    return join(root, HEARTBEAT, ds)


def heartbeat_leader(root: str, ds: str) -> str:
    return join(heartbeat(root, ds), "leader")


def heartbeat_alerts(root: str, ds: str) -> str:
    return join(heartbeat(root, ds), "alerts")


def heartbeat_history(root: str, ds: str) -> str:
    """The monitor's closed incidents, newest last, bounded (heartbeat/monitor.py, ``AlertStore.history``)."""
    return join(heartbeat(root, ds), "history")


def history_beside(alerts: str) -> str:
    """The closed incidents' node next to an alerts node (``heartbeat_alerts``): the one its store keeps."""
    return join(posixpath.dirname(alerts), "history")


def live(root: str, ds: str) -> str:
    """The running stage processes of source ``ds``: one child per stage (dbuslib/liveness.py)."""
    return join(root, LIVE, ds)


def live_stage(root: str, ds: str, stage: str) -> str:
    """The running processes of one stage of ``ds``: one ephemeral child each, ``<host>:<pid>``."""
    return join(live(root, ds), stage)


def live_process(root: str, ds: str, stage: str, who: str) -> str:
    """One running stage process's ephemeral node; ``who`` is ``dbuslib.zk.identity()``."""
    return join(live_stage(root, ds, stage), who)


def alert(base: str, key: str) -> str:
    """One open alert's node: ``base`` is ``heartbeat_alerts(root, ds)``, ``key`` is
    ``<schema>.<table>.<kind>`` (heartbeat.incidents.alert_key)."""
    return join(base, key)


def client(root: str, name: str) -> str:
    """One consumer client's nodes; ``name`` is the consumer's own (one per process that saves a
    checkpoint: members of a group each hold their own partitions' positions)."""
    return join(root, CLIENT, name)


def client_checkpoint(root: str, name: str) -> str:
    return join(client(root, name), "checkpoint")
