"""The DBus consumer client (issue #17): the pure core so far.

- ``dbusclient.decode``: UMS data messages (JSON, or Avro through ``ums.avro``) -> typed ``RowChange``s;
- ``dbusclient.merge``: the merge rule a consumer applies window by window (``Merger``);
- ``dbusclient.checkpoint``: the checkpoint (``Checkpoint``), its versioned JSON form, and the file store.

The Kafka consumer loop, the bootstrap requests and ``dbus replicate`` are built on these later. This
package imports only ``ums`` and ``dbuslib``. See docs/client.md.
"""
