"""Hypothesis strategies for UMS messages, shared by the message and Avro tests."""

from datetime import UTC, datetime
from decimal import Decimal

from hypothesis import strategies as st

from ums.ids import ums_id, ums_uid
from ums.message import (
    ALLOWED_OPS,
    SYSTEM_FIELDS,
    SYSTEM_NAMES,
    ProtocolType,
    UmsField,
    UmsMessage,
    UmsSchema,
)
from ums.namespace import Namespace
from ums.scalars import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN
from ums.timefmt import ums_ts
from ums.types import UmsType
from ums.values import encode_value


def wall(*args: int) -> datetime:
    """A MySQL DATETIME value: zoneless wall-clock time, the one place naive datetimes belong."""
    return datetime(*args)  # noqa: DTZ001


finite = {"allow_nan": False, "allow_infinity": False}
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(**finite) | st.text(),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3),
    max_leaves=6,
)
decimals_65_30 = st.builds(
    lambda n, s: Decimal(f"{n}E-{s}"), st.integers(-(10**65) + 1, 10**65 - 1), st.integers(0, 30)
)
PYTHON_VALUES = {
    UmsType.INT: st.integers(INT_MIN, INT_MAX),
    UmsType.LONG: st.integers(LONG_MIN, LONG_MAX),
    UmsType.FLOAT: st.floats(width=32, **finite),
    UmsType.DOUBLE: st.floats(**finite),
    UmsType.DECIMAL: decimals_65_30,
    UmsType.DATE: st.dates(),
    UmsType.DATETIME: st.datetimes(),
    UmsType.STRING: st.text() | st.timedeltas() | st.sets(st.sampled_from("abc")),
    UmsType.BINARY: st.binary(max_size=40),
    UmsType.JSONOBJECT: json_values.filter(lambda v: v is not None),
    UmsType.BOOLEAN: st.booleans(),
    UmsType.RAW: st.text(),
}

name_part = st.text("abcdefghijklmnopqrstuvwxyz0123456789_!*", min_size=1, max_size=8)
namespaces = st.builds(
    Namespace, name_part, name_part, name_part, name_part, st.integers(0, 999), st.just("0"), name_part
)
column_names = st.text(min_size=1, max_size=10).filter(lambda n: n not in SYSTEM_NAMES)
user_fields = st.lists(
    st.builds(UmsField, column_names, st.sampled_from(UmsType), st.booleans(), st.booleans()),
    max_size=8,
    unique_by=lambda f: f.name,
)
timestamps = st.datetimes(min_value=wall(1970, 1, 1), max_value=wall(2100, 1, 1), timezones=st.just(UTC)).map(
    ums_ts
)
positions = st.builds(
    lambda f, o: ums_id(f"mysql-bin.{f:06d}", o), st.integers(0, 999_999 // 2), st.integers(0, 10**13 - 1)
)


@st.composite
def wire_values(draw, field):
    """A JSON value for ``field``, made by encoding a random Python value."""
    if field.nullable and draw(st.booleans()):
        return None
    return encode_value(field.type, draw(PYTHON_VALUES[field.type]))


@st.composite
def system_values(draw, protocol, index):
    """ums_id_, ums_ts_, ums_op_, ums_uid_ as the protocol's fixed fields need them."""
    position, ts = draw(positions), draw(timestamps)
    values = {
        "ums_id_": position,
        "ums_ts_": ts,
        "ums_op_": draw(st.sampled_from(sorted(ALLOWED_OPS.get(protocol, {"i"})))),
        "ums_uid_": ums_uid(position, index),
    }
    return tuple(values[f.name] for f in SYSTEM_FIELDS[protocol])


@st.composite
def messages(draw):
    """Any valid UMS message: random protocol, namespace, user fields and 1..4 tuples."""
    protocol = draw(st.sampled_from(ProtocolType))
    users = tuple(draw(user_fields)) if protocol in ALLOWED_OPS else ()
    schema = UmsSchema(draw(namespaces), SYSTEM_FIELDS[protocol] + users, draw(st.integers(0, 2**40)))
    rows = [
        draw(system_values(protocol, i)) + tuple(draw(wire_values(f)) for f in users)
        for i in range(draw(st.integers(1, 4)))
    ]
    return UmsMessage(protocol, schema, tuple(rows))
