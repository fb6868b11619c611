"""UMS 1.3: the Unified Message Schema of DBus (messages, ids, types, Avro, control messages).

Pure Python: no Spark, Kafka or I/O here. See docs/ums.md.
"""

from ums.avro import avro_schema, decode_avro, encode_avro
from ums.build import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_TUPLES,
    DataRow,
    build_data_message,
    build_data_messages,
    build_heartbeat_message,
    build_termination_message,
    data_schema,
    field_for,
    split_tuples,
)
from ums.control import ControlMessage, ControlType, control_key, new_control_message
from ums.control import from_json as control_from_json
from ums.control import to_json as control_to_json
from ums.decode import decode_value
from ums.encoding import from_dict, from_json, to_dict, to_json
from ums.errors import (
    BadAvroError,
    BadColumnTypeError,
    BadControlError,
    BadMessageError,
    BadNamespaceError,
    BadPositionError,
    BadTimestampError,
    BadValueError,
    UmsError,
)
from ums.ids import parse_ums_id, parse_ums_uid, ums_id, ums_uid
from ums.keys import data_key, heartbeat_key, initial_data_key
from ums.message import SYSTEM_FIELDS, UMS_VERSION, Op, ProtocolType, UmsField, UmsMessage, UmsSchema
from ums.namespace import Namespace
from ums.scalars import format_time, parse_time
from ums.timefmt import epoch_ms, from_epoch_ms, parse_ums_ts, ums_ts, ums_ts_ms
from ums.types import ColumnSpec, UmsType, fsp_for, set_members, ums_type_for
from ums.values import ValueFormat, encode_column, encode_value

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_TUPLES",
    "SYSTEM_FIELDS",
    "UMS_VERSION",
    "BadAvroError",
    "BadColumnTypeError",
    "BadControlError",
    "BadMessageError",
    "BadNamespaceError",
    "BadPositionError",
    "BadTimestampError",
    "BadValueError",
    "ColumnSpec",
    "ControlMessage",
    "ControlType",
    "DataRow",
    "Namespace",
    "Op",
    "ProtocolType",
    "UmsError",
    "UmsField",
    "UmsMessage",
    "UmsSchema",
    "UmsType",
    "ValueFormat",
    "avro_schema",
    "build_data_message",
    "build_data_messages",
    "build_heartbeat_message",
    "build_termination_message",
    "control_from_json",
    "control_key",
    "control_to_json",
    "data_key",
    "data_schema",
    "decode_avro",
    "decode_value",
    "encode_avro",
    "encode_column",
    "encode_value",
    "epoch_ms",
    "field_for",
    "format_time",
    "from_dict",
    "from_epoch_ms",
    "from_json",
    "fsp_for",
    "heartbeat_key",
    "initial_data_key",
    "new_control_message",
    "parse_time",
    "parse_ums_id",
    "parse_ums_ts",
    "parse_ums_uid",
    "set_members",
    "split_tuples",
    "to_dict",
    "to_json",
    "ums_id",
    "ums_ts",
    "ums_ts_ms",
    "ums_type_for",
    "ums_uid",
]
