"""Errors raised by the UMS library.

Every error is a ``ValueError`` with a stable ``code`` (listed in docs/ums.md) and a message that
names the field, namespace, file or path at fault, e.g.::

    UMS_BAD_MESSAGE: payload[3].tuple: 5 values for 6 fields
"""

from __future__ import annotations


class UmsError(ValueError):
    """Root of all UMS errors; ``code`` is stable, the message is for people."""

    code = "UMS_ERROR"

    def __str__(self) -> str:
        return f"{self.code}: {super().__str__()}"


class BadNamespaceError(UmsError):
    """A namespace is not ``dsType.dsAlias.schema.table.version.dbPart.tablePart``."""

    code = "UMS_BAD_NAMESPACE"


class BadValueError(UmsError):
    """A column value cannot be encoded to, or decoded from, its UMS type."""

    code = "UMS_BAD_VALUE"


class BadMessageError(UmsError):
    """A UMS message breaks the envelope contract (structure, arity, types, fixed fields)."""

    code = "UMS_BAD_MESSAGE"


class BadPositionError(UmsError):
    """A binlog file name, offset, ``ums_id_`` or row index is out of range."""

    code = "UMS_BAD_POSITION"


class BadTimestampError(UmsError):
    """A naive datetime, or a timestamp string not in ``yyyy-MM-dd HH:mm:ss.SSS`` form."""

    code = "UMS_BAD_TIMESTAMP"


class BadColumnTypeError(UmsError):
    """A MySQL ``COLUMN_TYPE`` string that cannot be parsed (empty, unbalanced)."""

    code = "UMS_BAD_COLUMN_TYPE"


class BadAvroError(UmsError):
    """An Avro record or schema that does not carry a UMS message."""

    code = "UMS_BAD_AVRO"


class BadControlError(UmsError):
    """A control message the keeper would reject (id, type, from, timestamp, payload)."""

    code = "UMS_BAD_CONTROL"
