"""The 7-part UMS namespace: ``dsType.dsAlias.schema.table.version.dbPartition.tablePartition``.

    >>> str(Namespace("mysql", "demo", "shop", "orders", 3))
    'mysql.demo.shop.orders.3.0.0'
    >>> Namespace.parse("mysql.demo.shop.orders.3.0.0").table
    'orders'

A part may hold any character, a dot included (MariaDB allows `` `t.dot` `` as a table name). In the text
a ``.`` inside a part is written ``%2E`` and a ``%`` is written ``%25``, so the text always has exactly 7
dot-separated parts and ``parse`` gives the names back; a name without ``.`` or ``%`` is written as it is:

    >>> str(Namespace("mysql", "demo", "shop", "t.dot", 0))
    'mysql.demo.shop.t%2Edot.0.0.0'
    >>> Namespace.parse("mysql.demo.shop.t%2Edot.0.0.0").table
    't.dot'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields

from ums.errors import BadNamespaceError

_PARTS = 7
_ESCAPED = re.compile(r"%(25|2[Ee])")


@dataclass(frozen=True)
class Namespace:
    """Where a UMS message's rows come from, and which table version they follow.

    ``db_partition`` is always ``"0"`` for MySQL; ``table_partition`` is ``"0"``, a physical
    (sharded) table name, or ``"*"`` in heartbeats of partitioned tables (spec 1.3).
    JSON example: ``"mysql.demo.shop.orders.3.0.0"``.
    """

    ds_type: str
    ds_alias: str
    schema: str
    table: str
    version: int
    db_partition: str = "0"
    table_partition: str = "0"

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name != "version":
                _check_part(self, f.name, getattr(self, f.name))
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 0:
            msg = f"namespace {self._text()!r}: version {self.version!r} is not a non-negative int"
            raise BadNamespaceError(msg)

    def __str__(self) -> str:
        return self._text()

    def _text(self) -> str:
        return ".".join(escape_part(str(getattr(self, f.name))) for f in fields(self))

    @classmethod
    def parse(cls, text: str) -> Namespace:
        """Parse ``mysql.demo.shop.orders.3.0.0``; the version must be a plain decimal int."""
        parts = text.split(".") if isinstance(text, str) else []
        if len(parts) != _PARTS:
            msg = f"namespace {text!r}: expected 7 dot-separated parts, got {len(parts)}"
            raise BadNamespaceError(msg)
        version = parts[4]
        if not (version.isascii() and version.isdigit()):
            msg = f"namespace {text!r}: version {version!r} is not a non-negative int"
            raise BadNamespaceError(msg)
        names = [unescape_part(p) for p in parts]
        return cls(names[0], names[1], names[2], names[3], int(version), names[5], names[6])


def escape_part(name: str) -> str:
    """A name as one part of a namespace text (or of a key built from it).

    ``%`` -> ``%25``, ``.`` -> ``%2E``.
    """
    if "%" not in name and "." not in name:
        return name
    return name.replace("%", "%25").replace(".", "%2E")


def unescape_part(text: str) -> str:
    """The inverse of ``escape_part``; any other ``%`` sequence is kept as it is."""
    if "%" not in text:
        return text
    return _ESCAPED.sub(lambda m: "%" if m.group(1) == "25" else ".", text)


def _check_part(ns: Namespace, name: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        msg = f"namespace {ns._text()!r}: {name} {value!r} must be a non-empty string"
        raise BadNamespaceError(msg)
