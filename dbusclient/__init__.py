"""The DBus consumer client (issue #17).

- ``dbusclient.consumer``: the ``Consumer`` over Kafka: windows, callbacks, retries, checkpoints,
  rebalances, key filters and the bootstrap by full pulls;
- ``dbusclient.decode``: UMS data messages (JSON, or Avro through ``ums.avro``) -> typed ``RowChange``s;
- ``dbusclient.merge``: the merge rule a consumer applies window by window (``Merger``);
- ``dbusclient.checkpoint``: the checkpoint (``Checkpoint``), its versioned JSON form, and the file store;
- ``dbusclient.sink_sql``: the replica sink into MariaDB or PostgreSQL (``SqlSink``, through SQLAlchemy)
  and ``SqlCheckpointStore``, the checkpoint in the same transaction as the rows.

``dbus replicate`` and the ZooKeeper checkpoint store are built on these later. This package imports only
``ums`` and ``dbuslib``. See docs/client.md.
"""
