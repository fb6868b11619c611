"""``canal-json``: Canal's flat message (``com.alibaba.otter.canal.protocol.FlatMessage``), a row each.

What Canal's Kafka producer writes (``MQMessageUtils.messageConverter``, serialized by fastjson2 with
``WriteNulls``), with one row in ``data``; its readers parse it with
``JSON.parseObject(value, FlatMessage.class)`` (canal.client's ``KafkaCanalConnector``)::

    {"data":[{"id":"1","name":"Zoë","amount":"19.90"}],"database":"shop","es":1700000000000,"gtid":"",
     "id":30000000001234,"isDdl":false,"mysqlType":{"id":"int(11)","name":"varchar(20)",
     "amount":"decimal(10,2)"},"old":[{"amount":"9.90"}],"pkNames":["id"],"sql":"",
     "sqlType":{"id":4,"name":12,"amount":3},"table":"orders","ts":1700000000000,"type":"UPDATE"}

- every value is a string or null, in the text Canal's parser writes (``LogEventConvert.parseOneRow``):
  integers and BIT in decimal (an unsigned value above the signed range raises ``sqlType`` one step, as
  Canal does), DECIMAL plain, FLOAT/DOUBLE as Java's ``toString`` (``1.1``, ``1.0E10``), DATE/DATETIME/
  TIMESTAMP/TIME as MySQL prints them (TIMESTAMP in UTC), YEAR in 4 digits (``0000`` for the zero year),
  ENUM as its index (``0`` the invalid value) and SET as its bit mask, binary strings and BLOBs as the
  ISO-8859-1 text of their bytes; ``mysqlType`` is the column's COLUMN_TYPE, ``sqlType`` its
  ``java.sql.Types`` code as Canal maps it;
- ``old``: for an UPDATE with a before image, the old values of the columns that changed (null without
  one); ``id``: the change's ``ums_id_``; ``es`` and ``ts``: the change's commit time (``ts`` is Canal's
  build time: we write the commit time, so a replay writes the same bytes);
- a full-pulled row is an INSERT (Canal has no read operation); a delete is followed by a tombstone when
  ``FormatOptions.tombstones``; an update that changes the primary key is a DELETE of the old key (and
  its tombstone) and an INSERT of the new key;
- the key is the primary key's UMS values as a compact JSON object in key order (``{"id":1}``), none
  for a table without a key; headers: ``ums_id_``, ``ums_uid_``, ``ums_version`` (the table version),
  ``ums_ds`` (the data source), ``ums_snapshot`` (``true``/``last``, pulled rows only) and
  ``ums_encoded`` (masked fields only: ``{"name":"string"}``, their UMS types).

``decode_canal`` reads such a record back to its ``RowChange``: exact for every value; the shape
carries what Canal's message does (nullability is not in it: key columns are NOT NULL, others nullable)
and the position has no binlog file name (``file`` ""; its number and offset are in ``ums_id``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from operator import itemgetter

import orjson

from ums.errors import BadValueError
from ums.formats import UMS_ID_HEADER, UMS_UID_HEADER, UMS_VERSION_HEADER, FormatOptions, Record
from ums.ids import parse_ums_id, row_of_uid
from ums.message import UmsField
from ums.rowchange import OpCode, Position, RowChange, Snapshot, TableShape
from ums.scalars import JsonValue
from ums.types import ColumnSpec, UmsType, parse_column_type, set_members

VERSION_HEADER, DS_HEADER = UMS_VERSION_HEADER, "ums_ds"
SNAPSHOT_HEADER, ENCODED_HEADER = "ums_snapshot", "ums_encoded"

# java.sql.Types codes, as Canal writes them in sqlType
TINYINT, SMALLINT, INTEGER, BIGINT, DECIMAL = -6, 5, 4, -5, 3
REAL, DOUBLE, BIT, DATE, TIME, TIMESTAMP = 7, 8, -7, 91, 92, 93
CHAR, VARCHAR, BLOB, CLOB = 1, 12, 2004, 2005

# Canal's sqlType by COLUMN_TYPE base name (RowsLogBuffer's binlog type -> Types, then LogEventConvert's
# BLOB/CLOB for binary and text values); MariaDB's INET4/INET6/UUID arrive as strings: CHAR.
_SQL_TYPES: dict[str, int] = {
    **dict.fromkeys(("tinyint", "bool", "boolean"), TINYINT),
    "smallint": SMALLINT,
    **dict.fromkeys(("mediumint", "int", "integer"), INTEGER),
    **dict.fromkeys(("bigint", "serial"), BIGINT),
    **dict.fromkeys(("decimal", "numeric", "dec", "fixed"), DECIMAL),
    "float": REAL,
    **dict.fromkeys(("double", "real"), DOUBLE),
    "bit": BIT,
    "date": DATE,
    **dict.fromkeys(("datetime", "timestamp"), TIMESTAMP),
    "time": TIME,
    "year": VARCHAR,
    **dict.fromkeys(("char", "inet4", "inet6", "uuid"), CHAR),
    **dict.fromkeys(("varchar", "json"), VARCHAR),
    **dict.fromkeys(("tinytext", "text", "mediumtext", "longtext"), CLOB),
    "enum": INTEGER,
    "set": BIT,
}
# an unsigned value above the signed range: Canal writes the next wider type
_WIDER: dict[int, tuple[int, int]] = {  # sqlType -> (largest signed value, the wider sqlType)
    TINYINT: (2**7 - 1, SMALLINT),
    SMALLINT: (2**15 - 1, INTEGER),
    INTEGER: (2**31 - 1, BIGINT),
    BIGINT: (2**63 - 1, DECIMAL),
}
# a masked field (its type the one masking gave it) and a type Canal does not name: by UMS type
_SQL_BY_UMS_TYPE: dict[UmsType, int] = {
    UmsType.INT: INTEGER,
    UmsType.LONG: BIGINT,
    UmsType.FLOAT: REAL,
    UmsType.DOUBLE: DOUBLE,
    UmsType.DECIMAL: DECIMAL,
    UmsType.DATE: DATE,
    UmsType.DATETIME: TIMESTAMP,
    UmsType.BINARY: BLOB,
    UmsType.BOOLEAN: 16,  # Types.BOOLEAN
}
_TYPES = ("INSERT", "UPDATE", "DELETE")


def java_text(value: float) -> str:
    """Java's ``Double.toString``/``Float.toString`` of the shortest digits: ``1.1``, ``100.0``,
    ``1.0E10``, ``1.234E-5``, ``-0.0`` (scientific below 10^-3 and from 10^7 on)."""
    if value == 0:
        return "-0.0" if str(value).startswith("-") else "0.0"
    number = Decimal(repr(value))
    if Decimal("0.001") <= abs(number) < Decimal(10_000_000):
        text = format(number, "f")
        return text if "." in text else text + ".0"
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)
    shown = "".join(map(str, digits)).rstrip("0") or "0"
    power = len(digits) + exponent - 1
    return f"{'-' if sign else ''}{shown[0]}.{shown[1:] or '0'}E{power}"


@dataclass(frozen=True)
class _Codec:
    """One field of a table version: its name, Canal's type texts, and its values' text forms."""

    name: str
    mysql_type: str
    sql_type: int
    text: Callable[[JsonValue], str]
    parse: Callable[[str], JsonValue]
    wider: tuple[int, int] | None = None  # unsigned integers: (signed max, wider sqlType)


def _plain(value: JsonValue) -> str:
    if not isinstance(value, str):
        msg = f"expected a string, got {value!r}"
        raise TypeError(msg)
    return value


def _same(text: str) -> JsonValue:
    return text


def _int_text(value: JsonValue) -> str:
    if not isinstance(value, int) or isinstance(value, bool):
        msg = f"expected an int, got {value!r}"
        raise TypeError(msg)
    return str(value)


def _float_text(value: JsonValue) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        msg = f"expected a number, got {value!r}"
        raise TypeError(msg)
    return java_text(float(value))


def _binary_text(value: JsonValue) -> str:
    return base64.b64decode(_plain(value), validate=True).decode("latin-1")


def _binary_parse(text: str) -> JsonValue:
    return base64.b64encode(text.encode("latin-1")).decode("ascii")


def _boolean_text(value: JsonValue) -> str:
    if not isinstance(value, bool):
        msg = f"expected a boolean, got {value!r}"
        raise TypeError(msg)
    return "true" if value else "false"


def _boolean_parse(text: str) -> JsonValue:
    if text not in ("true", "false"):
        msg = f"expected true or false, got {text!r}"
        raise ValueError(msg)
    return text == "true"


def _float_parse(text: str) -> JsonValue:
    return float(text)


def _int_parse(text: str) -> JsonValue:
    return int(text)


# text forms by UMS type: a column's own (below) or a masked field's
_BY_UMS_TYPE: dict[UmsType, tuple[Callable[[JsonValue], str], Callable[[str], JsonValue]]] = {
    UmsType.INT: (_int_text, _int_parse),
    UmsType.FLOAT: (_float_text, _float_parse),
    UmsType.DOUBLE: (_float_text, _float_parse),
    UmsType.BINARY: (_binary_text, _binary_parse),
    UmsType.BOOLEAN: (_boolean_text, _boolean_parse),
}


def _year_text(value: JsonValue) -> str:
    return "0000" if value == 0 else _int_text(value)


def _enum_codec(members: tuple[str, ...]) -> tuple[Callable[[JsonValue], str], Callable[[str], JsonValue]]:
    """ENUM as Canal writes it: the value's index (1-based; 0 is the invalid value '')."""
    index = {m: str(i) for i, m in enumerate(members, 1)}
    index.setdefault("", "0")

    def text(value: JsonValue) -> str:
        return index.get(_plain(value)) or _plain(value)  # a value outside the members: its own text

    def parse(text: str) -> JsonValue:
        if not (text.isascii() and text.isdigit()):
            return text
        number = int(text)
        if number > len(members):
            msg = f"ENUM index {number} above its {len(members)} members"
            raise ValueError(msg)
        return members[number - 1] if number else ""

    return text, parse


def _set_codec(members: tuple[str, ...]) -> tuple[Callable[[JsonValue], str], Callable[[str], JsonValue]]:
    """SET as Canal writes it: the bit mask of its members (bit i for the i-th member)."""
    bits = {m: 1 << i for i, m in enumerate(members)}

    def text(value: JsonValue) -> str:
        chosen = _plain(value).split(",") if value else []
        if any(m not in bits for m in chosen):
            return _plain(value)  # a member the type does not list: its own text
        return str(sum(bits[m] for m in chosen))

    def parse(text: str) -> JsonValue:
        if not (text.isascii() and text.isdigit()):
            return text
        mask = int(text)
        if mask >> len(members):
            msg = f"SET mask {mask} has bits above its {len(members)} members"
            raise ValueError(msg)
        return ",".join(m for i, m in enumerate(members) if mask >> i & 1)

    return text, parse


def _codec(column: ColumnSpec, field: UmsField) -> _Codec:
    parsed = parse_column_type(column.column_type)
    if field.encoded:  # masked: written by the UMS type masking gave it
        text, parse = _BY_UMS_TYPE.get(field.type, (_plain, _same))
        sql_type = _SQL_BY_UMS_TYPE.get(field.type, VARCHAR)
        return _Codec(field.name, column.column_type, sql_type, text, parse)
    sql_type = _SQL_TYPES.get(parsed.base) or _SQL_BY_UMS_TYPE.get(column.ums_type, VARCHAR)
    if parsed.base == "enum":
        text, parse = _enum_codec(set_members(column.column_type))
    elif parsed.base == "set":
        text, parse = _set_codec(set_members(column.column_type))
    elif parsed.base == "year":
        text, parse = _year_text, _int_parse
    else:
        text, parse = _BY_UMS_TYPE.get(column.ums_type, (_plain, _same))
    wider = _WIDER.get(sql_type) if parsed.unsigned else None
    return _Codec(field.name, column.column_type, sql_type, text, parse, wider)


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _dumps(value: object) -> bytes:
    """``_compact(value)`` in UTF-8, by orjson (the same bytes for strings, ints and None; what it refuses,
    a lone surrogate or an int beyond 64 bits, goes the ``json`` way and fails or not as it did)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return _compact(value).encode()


_STR_OR_NONE = frozenset({str, type(None)})


class _Plan:
    """How one table version's rows are written: its codecs and the message's parts that do not change
    from row to row, already in JSON (the appender's hot path writes the rest)."""

    def __init__(self, shape: TableShape) -> None:
        self.shape = shape
        self.codecs = tuple(_codec(c, f) for c, f in zip(shape.columns, shape.fields, strict=True))
        self.names = tuple(c.name for c in self.codecs)
        # a str value written as it is (most columns of most tables): its type checked, no call
        plain = [i for i, c in enumerate(self.codecs) if c.text is _plain and c.wider is None]
        self.plain: Callable[[tuple[JsonValue, ...]], tuple[JsonValue, ...]] | None = None
        if len(plain) == 1:
            only = plain[0]
            self.plain = lambda values: (values[only],)
        elif plain:
            self.plain = itemgetter(*plain)
        self.steps = tuple(
            (i, c.name, None if c.text is _plain else c.text, c.wider)
            for i, c in enumerate(self.codecs)
            if i not in plain
        )
        self.sql_types = {c.name: c.sql_type for c in self.codecs}
        self.sql_types_json = _compact(self.sql_types).encode()
        mysql_types = _compact({c.name: c.mysql_type for c in self.codecs})
        self.database = b'],"database":' + _compact(shape.schema).encode() + b',"es":'
        self.middle = f',"isDdl":false,"mysqlType":{mysql_types},"old":'.encode()
        self.tail = f',"pkNames":{_compact(list(shape.primary_key) or None)},"sql":"","sqlType":'.encode()
        self.table = b',"table":' + _compact(shape.table).encode() + b',"ts":'
        self.key_names = tuple((shape.fields[i].name, i) for i in shape.key_indices)
        headers = [(VERSION_HEADER, str(shape.version).encode()), (DS_HEADER, shape.ds.encode())]
        encoded = {f.name: f.type.value for f in shape.fields if f.encoded}
        if encoded:
            headers.append((ENCODED_HEADER, json.dumps(encoded, separators=(",", ":")).encode()))
        self.headers = tuple(headers)

    def row(
        self, values: tuple[JsonValue, ...], where: Callable[[], str]
    ) -> tuple[dict[str, str | None], dict[str, int] | None]:
        """The row's texts by column, and its sqlType when an unsigned value made one wider (else None)."""
        plain = self.plain
        if len(values) != len(self.names) or (
            plain is not None and not _STR_OR_NONE.issuperset(map(type, plain(values)))
        ):
            return self._checked(values, where)  # raises, naming the first bad field
        out = list(values)
        wider: dict[str, int] | None = None
        for i, name, text_of, widen in self.steps:
            value = out[i]
            if value is None:
                continue
            try:
                text = _plain(value) if text_of is None else text_of(value)
            except (TypeError, ValueError) as err:
                msg = f"{where()}: field {name} ({self.shape.columns[i].column_type}): {err}"
                raise BadValueError(msg) from err
            out[i] = text
            if widen is not None and int(text) > widen[0]:
                if wider is None:
                    wider = dict(self.sql_types)
                wider[name] = widen[1]
        return dict(zip(self.names, out, strict=True)), wider  # type: ignore[arg-type]

    def _checked(
        self, values: tuple[JsonValue, ...], where: Callable[[], str]
    ) -> tuple[dict[str, str | None], dict[str, int] | None]:
        """``row`` column by column, for a row whose plain columns are not all strings."""
        data: dict[str, str | None] = {}
        wider: dict[str, int] | None = None
        for (name, c), value in zip(zip(self.names, self.codecs, strict=True), values, strict=True):
            if value is None:
                data[name] = None
                continue
            try:
                text = c.text(value)
            except (TypeError, ValueError) as err:
                msg = f"{where()}: field {name} ({self.shape.columns[len(data)].column_type}): {err}"
                raise BadValueError(msg) from err
            data[name] = text
            if c.wider is not None and int(text) > c.wider[0]:
                if wider is None:
                    wider = dict(self.sql_types)
                wider[name] = c.wider[1]
        return data, wider

    def key(self, values: tuple[JsonValue, ...]) -> bytes | None:
        names = self.key_names
        if not names:
            return None
        if len(names) == 1:
            ((name, i),) = names
            value = values[i]
            if type(value) is int or type(value) is str:
                return _dumps({name: value})
        return _compact({name: values[i] for name, i in names}).encode()


class CanalJson:
    """The ``canal-json`` encoder: ``records(topic, change)`` -> Canal flat messages, one row each. Per row
    it writes the texts of the columns that are not strings already, the row with one ``orjson.dumps``,
    and joins it with its table's parts written once per table version."""

    name = "canal-json"

    def __init__(self, options: FormatOptions) -> None:
        self.options = options
        self._plans: dict[int, _Plan] = {}
        self._ums_id, self._ums_id_bytes = -1, b""

    def _plan(self, shape: TableShape) -> _Plan:
        plan = self._plans.get(id(shape))
        if plan is None or plan.shape is not shape:
            if len(self._plans) > 1024:
                self._plans.clear()
            plan = self._plans[id(shape)] = _Plan(shape)
        return plan

    def records(self, topic: str, change: RowChange) -> list[Record]:
        plan = self._plan(change.table)
        at = change.at
        if at.ums_id != self._ums_id:
            self._ums_id, self._ums_id_bytes = at.ums_id, str(at.ums_id).encode()
        headers = (
            (UMS_ID_HEADER, self._ums_id_bytes),
            (UMS_UID_HEADER, change.ums_uid.encode()),
            *plan.headers,
        )
        if at.snapshot != "false":
            headers += ((SNAPSHOT_HEADER, at.snapshot.encode()),)

        def where() -> str:
            return f"{topic} ums_uid_ {change.ums_uid}"

        if change.op in ("c", "r"):
            return [self._record(plan, change, b"INSERT", _image(change.after, where), None, headers, where)]
        if change.op == "d":
            return self._delete(plan, change, _image(change.before, where), headers, where)
        after = _image(change.after, where)
        if change.key_changed:
            before = _image(change.before, where)
            deleted = self._delete(plan, change, before, headers, where)
            return [*deleted, self._record(plan, change, b"INSERT", after, None, headers, where)]
        return [self._record(plan, change, b"UPDATE", after, change.before, headers, where)]

    def _delete(
        self,
        plan: _Plan,
        change: RowChange,
        before: tuple[JsonValue, ...],
        headers: tuple[tuple[str, bytes], ...],
        where: Callable[[], str],
    ) -> list[Record]:
        deleted = self._record(plan, change, b"DELETE", before, None, headers, where)
        if not self.options.tombstones or deleted.key is None:
            return [deleted]
        return [deleted, Record(deleted.key, None, headers)]

    def _record(
        self,
        plan: _Plan,
        change: RowChange,
        kind: bytes,
        values: tuple[JsonValue, ...],
        before: tuple[JsonValue, ...] | None,
        headers: tuple[tuple[str, bytes], ...],
        where: Callable[[], str],
    ) -> Record:
        data, wider = plan.row(values, where)
        old = b"null"
        if before is not None:
            old_data, _ = plan.row(before, where)
            old = _dumps([{name: text for name, text in old_data.items() if text != data[name]}])
        at = change.at
        gtid = _dumps(at.gtid) if at.gtid else b'""'
        sql_types = plan.sql_types_json if wider is None else _dumps(wider)
        # the keys in fastjson2's order (alphabetical), as Canal's producer writes them
        value = b"".join(
            (
                b'{"data":[', _dumps(data), plan.database, b"%d" % at.ts_ms, b',"gtid":', gtid,
                b',"id":%d' % at.ums_id, plan.middle, old, plan.tail, sql_types, plan.table,
                b'%d,"type":"%s"}' % (at.ts_ms, kind),
            )
        )  # fmt: skip
        return Record(plan.key(values), value, headers)


def _image(values: tuple[JsonValue, ...] | None, where: Callable[[], str]) -> tuple[JsonValue, ...]:
    if values is None:
        msg = f"{where()}: the change lacks the row image its operation needs"
        raise BadValueError(msg)
    return values


def decode_canal(
    key: bytes | None, value: bytes | None, headers: tuple[tuple[str, bytes], ...] = ()
) -> RowChange | None:
    """A ``canal-json`` record back to its ``RowChange`` (None for a tombstone). Raises ``ValueError``
    naming the field for a record it cannot read."""
    if value is None:
        return None
    named = {k: v.decode("utf-8", "replace") for k, v in headers}
    try:
        message = json.loads(value)
    except (ValueError, UnicodeDecodeError) as err:
        msg = f"canal-json value: not JSON ({err})"
        raise BadValueError(msg) from err
    if not isinstance(message, dict):
        msg = "canal-json value: not a JSON object"
        raise BadValueError(msg)
    kind = message.get("type")
    if message.get("isDdl") or kind not in _TYPES:
        msg = (
            f"canal-json type {kind!r} (isDdl {message.get('isDdl')!r}): only INSERT, UPDATE and DELETE rows"
        )
        raise BadValueError(msg)
    data, mysql_types = message.get("data"), message.get("mysqlType")
    if not (isinstance(data, list) and len(data) == 1 and isinstance(data[0], dict)):
        msg = "canal-json data: expected a list of one row"
        raise BadValueError(msg)
    if not isinstance(mysql_types, dict):
        msg = "canal-json mysqlType: expected an object of column types"
        raise BadValueError(msg)
    pk_names = tuple(message.get("pkNames") or ())
    bad = next((n for n, t in mysql_types.items() if not isinstance(t, str)), None)
    if bad is not None:
        msg = f"canal-json mysqlType.{bad}: {mysql_types[bad]!r} is not a column type"
        raise BadValueError(msg)
    if not all(isinstance(n, str) for n in pk_names):
        msg = f"canal-json pkNames: {list(pk_names)!r} are not column names"
        raise BadValueError(msg)
    shape_key = (
        named.get(DS_HEADER, ""),
        _required_str(message, "database"),
        _required_str(message, "table"),
        named.get(VERSION_HEADER, "0"),
        tuple(mysql_types.items()),
        pk_names,
        named.get(ENCODED_HEADER),
    )
    known = _READ_SHAPES.get(shape_key)
    if known is None:
        if len(_READ_SHAPES) >= _READ_SHAPES_KEPT:
            _READ_SHAPES.clear()
        known = _READ_SHAPES[shape_key] = _read_shape(*shape_key)
    shape, codecs = known
    row = _parse_row(codecs, data[0], "data[0]")
    snapshot: Snapshot = "false"
    if named.get(SNAPSHOT_HEADER) in ("true", "last"):
        snapshot = "true" if named[SNAPSHOT_HEADER] == "true" else "last"
    op: OpCode
    before: tuple[JsonValue, ...] | None = None
    after: tuple[JsonValue, ...] | None = None
    if kind == "INSERT":
        op, after = ("r" if snapshot != "false" else "c"), row
    elif kind == "DELETE":
        op, before = "d", row
    else:
        op, after = "u", row
        old = message.get("old")
        if isinstance(old, list) and old and isinstance(old[0], dict):
            changed = {**data[0], **old[0]}
            before = _parse_row(codecs, changed, "old[0]")
    ums_id_text = named.get(UMS_ID_HEADER) or str(message.get("id") or 0)
    uid = named.get(UMS_UID_HEADER, "")
    _, pos = parse_ums_id(ums_id_text)
    row_index = row_of_uid(ums_id_text, uid) if uid else 0
    es = message.get("es")
    at = Position(
        int(ums_id_text),
        es if isinstance(es, int) else 0,
        "",
        pos,
        row_index,
        None,
        message.get("gtid") or None,
        snapshot,
    )
    return RowChange(shape, op, before, after, at, uid)


_READ_SHAPES: dict[tuple[object, ...], tuple[TableShape, tuple[_Codec, ...]]] = {}
_READ_SHAPES_KEPT = 1024  # table shapes a reader remembers (then it starts again)


def _read_shape(
    ds: str,
    database: str,
    table: str,
    version: str,
    mysql_types: tuple[tuple[str, object], ...],
    pk_names: tuple[str, ...],
    encoded_text: str | None,
) -> tuple[TableShape, tuple[_Codec, ...]]:
    """The shape a flat message's ``mysqlType``, ``pkNames`` and headers give, and its fields' codecs."""
    encoded: dict[str, str] = json.loads(encoded_text) if encoded_text else {}
    columns, fields = [], []
    for name, column_type in mysql_types:
        column = ColumnSpec(name, str(column_type), name not in pk_names)
        ums_type = UmsType(encoded[name]) if name in encoded else column.ums_type
        columns.append(column)
        fields.append(UmsField(name, ums_type, column.nullable, name in encoded))
    if not version.isascii() or not version.isdigit():
        msg = f"canal-json header {VERSION_HEADER}: {version!r} is not a table version"
        raise BadValueError(msg)
    shape = TableShape(ds, database, table, int(version), tuple(columns), tuple(fields), pk_names)
    return shape, tuple(_codec(c, f) for c, f in zip(shape.columns, shape.fields, strict=True))


def _parse_row(codecs: tuple[_Codec, ...], row: dict[str, object], where: str) -> tuple[JsonValue, ...]:
    values: list[JsonValue] = []
    for codec in codecs:
        text = row.get(codec.name)
        if text is None:
            values.append(None)
            continue
        if not isinstance(text, str):
            msg = f"canal-json {where}.{codec.name}: {text!r} is not a string"
            raise BadValueError(msg)
        try:
            values.append(codec.parse(text))
        except (TypeError, ValueError) as err:
            msg = f"canal-json {where}.{codec.name} ({codec.mysql_type}): cannot read {text[:40]!r}: {err}"
            raise BadValueError(msg) from err
    return tuple(values)


def _required_str(message: dict[str, object], name: str) -> str:
    value = message.get(name)
    if not isinstance(value, str) or not value:
        msg = f"canal-json {name}: expected a non-empty string, got {value!r}"
        raise BadValueError(msg)
    return value
