"""The Kafka record headers DBus writes beside UMS messages, named in one place for every writer and reader
(ums/chunks.py names the chunk headers ``ums_chunk`` and ``ums_chunk_id``).

- ``ums_avro_schema``: on an Avro result record, the fingerprint of its writer schema (ASCII, 64 hex digits),
  the key of the schema in the meta store (appender/output.py writes it; dbuslib/metastore.py keeps schemas).
- ``dbus_fullpull`` = ``start`` / ``end``: a full pull's markers in a table's result topic
  (fullpuller/job.py), with ``dbus_fullpull_id`` (the request's SEQNO), ``dbus_fullpull_ums_id`` (the
  pull's snapshot position, the ``ums_id_`` of its rows) and, on ``end``, ``dbus_fullpull_rows`` (the rows
  it wrote). fullpuller/resets.py and the consumer client (dbusclient/consumer.py) read them.
  ``dbus_fullpull`` = ``abort``: the pull failed after its start (the puller gave up on it; the reply on
  ``<ds>_callback`` says the same), with ``dbus_fullpull_error`` = its error code and message; a consumer
  bootstrapping from the pull requests another.
"""

from __future__ import annotations

AVRO_SCHEMA = "ums_avro_schema"
FULLPULL = "dbus_fullpull"
FULLPULL_ID = "dbus_fullpull_id"
FULLPULL_UMS_ID = "dbus_fullpull_ums_id"
FULLPULL_ROWS = "dbus_fullpull_rows"
FULLPULL_ERROR = "dbus_fullpull_error"
FULLPULL_START, FULLPULL_END, FULLPULL_ABORT = "start", "end", "abort"
