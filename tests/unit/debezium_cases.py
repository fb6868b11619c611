"""What the Debezium format's tests share (not a test module: tests import from here): ``key_changed`` and
``read_back`` (what a change reads back as from a Debezium record), and ``VALUES``, hypothesis strategies of
every column type, with ``RANDOM_SHAPE``, a table of one column per type (test_formats_debezium,
test_formats_avro).
"""

from __future__ import annotations

import base64
from dataclasses import replace
from datetime import date, datetime, timedelta

from hypothesis import strategies as st

from ums.formats.connect import scaled_text
from ums.message import UmsField
from ums.rowchange import RowChange, TableShape
from ums.scalars import float32_repr, format_time
from ums.types import ColumnSpec

ZERO = {"dt", "dtm", "dtm6", "ts", "ts3"}  # the ODD row's zero and invalid dates: null in Debezium


def key_changed(change: RowChange) -> bool:
    return (
        change.op == "u"
        and change.before is not None
        and change.after is not None
        and (change.before[0] != change.after[0])
    )


def read_back(change: RowChange) -> RowChange:
    """What a record reads back as: Debezium writes zero and invalid dates as null."""
    names = [f.name for f in change.table.fields]

    def clean(values):
        if values is None:
            return None
        return tuple(None if n in ZERO and v is not None and (v.startswith("0000") or "-00-" in v) else v
                     for n, v in zip(names, values, strict=True))  # fmt: skip

    return replace(change, before=clean(change.before), after=clean(change.after))


# --- hypothesis: random values per type ---------------------------------------------------------------

_DT = st.datetimes(min_value=datetime(1000, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59))  # noqa: DTZ001


def _datetime_text(fsp):
    def text(moment: datetime) -> str:
        micros = moment.microsecond // 10 ** (6 - fsp) * 10 ** (6 - fsp)
        frac = f".{micros:06d}"[: fsp + 1] if fsp else ""
        return f"{moment:%Y-%m-%d %H:%M:%S}{frac}"

    return _DT.map(text)


def _decimal_text(precision, scale):
    limit = 10**precision - 1
    return st.integers(-limit, limit).map(lambda n: scaled_text(n, scale))


VALUES = {
    "tinyint(4)": st.integers(-128, 127),
    "smallint(5) unsigned": st.integers(0, 65535),
    "int(10) unsigned": st.integers(0, 2**32 - 1).map(str),
    "bigint(20)": st.integers(-(2**63), 2**63 - 1).map(str),
    "bigint(20) unsigned": st.integers(0, 2**64 - 1).map(str),
    "decimal(65,30)": _decimal_text(65, 30),
    "decimal(10,0)": _decimal_text(10, 0),
    "float": st.floats(width=32, allow_nan=False, allow_infinity=False).map(float32_repr),
    "double": st.floats(allow_nan=False, allow_infinity=False),
    "bit(1)": st.integers(0, 1),
    "bit(17)": st.integers(0, 2**17 - 1),
    "bit(64)": st.integers(0, 2**64 - 1).map(str),
    "date": st.dates(min_value=date(1000, 1, 1)).map(date.isoformat),
    "datetime(3)": _datetime_text(3),
    "datetime(6)": _datetime_text(6),
    "timestamp(6)": _datetime_text(6),
    "timestamp": _datetime_text(0),
    "time(6)": st.integers(-(838 * 3600 + 3599) * 10**6, (838 * 3600 + 3599) * 10**6).map(
        lambda us: format_time(timedelta(microseconds=us), 6)
    ),
    "year(4)": st.integers(1901, 2155),
    "varchar(20)": st.text(),
    "set('a','b','c')": st.sampled_from(["", "a", "a,c", "b,c", "a,b,c"]),
    "longblob": st.binary().map(lambda b: base64.b64encode(b).decode()),
}
_COLUMNS = tuple(ColumnSpec(f"c{i}", t) for i, t in enumerate(VALUES))
_FIELDS = tuple(UmsField(c.name, c.ums_type, True) for c in _COLUMNS)
RANDOM_SHAPE = TableShape("demo", "prop", "every", 7, _COLUMNS, _FIELDS, ("c0",))
