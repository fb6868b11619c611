"""The 7-part UMS namespace: ``dsType.dsAlias.schema.table.version.dbPartition.tablePartition``.

    >>> str(Namespace("mysql", "demo", "shop", "orders", 3))
    'mysql.demo.shop.orders.3.0.0'
    >>> Namespace.parse("mysql.demo.shop.orders.3.0.0").table
    'orders'
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from ums.errors import BadNamespaceError

_PARTS = 7


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
        return ".".join(str(getattr(self, f.name)) for f in fields(self))

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
        return cls(*parts[:4], int(version), *parts[5:])


def _check_part(ns: Namespace, name: str, value: object) -> None:
    if not isinstance(value, str) or not value or "." in value:
        msg = f"namespace {ns._text()!r}: {name} {value!r} must be a non-empty string without '.'"
        raise BadNamespaceError(msg)
