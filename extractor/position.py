"""The committed binlog position of a source: where the next transaction starts.

A position is an immutable value. It is stored as JSON in ZooKeeper and in the local mirror, by example::

    {"file": "mariadb-bin.000003", "pos": 1234, "gtid": "0-1-42", "ts": 1714557600, "epoch": 7}

- ``file``: binlog file name, ``<base>.<digits>``; "" only for a GTID-only start position (never committed);
- ``pos``: offset in ``file`` of the next event to read, always a transaction boundary (bytes);
- ``gtid``: the server's GTID position after that transaction, MariaDB form ``0-1-42``, one entry per
  domain separated by commas (``0-1-42,1-2-7``); "" when the server has none;
- ``ts``: server timestamp of the last event before ``pos`` (epoch seconds, UTC);
- ``epoch``: the leader epoch of the extractor that wrote it (see extractor/leader.py); 0 = none.

``sort_key()`` orders positions across rotations: ``mariadb-bin.000010:4`` comes after
``mariadb-bin.000009:99999``. Only ``file`` and ``pos`` are required in JSON; a missing or bad key raises
``PositionError`` naming it (``position: missing key 'pos'``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from extractor.errors import PositionError

_FILE = re.compile(r"^\S+\.(\d+)$")
_TYPES: dict[str, type] = {"file": str, "pos": int, "gtid": str, "ts": int, "epoch": int}
_REQUIRED = ("file", "pos")
START_POS = 4  # the first event of every binlog file follows the 4-byte magic number


@dataclass(frozen=True, order=False)
class Position:
    """Binlog coordinates of a transaction boundary, plus the GTID, time and epoch that go with them."""

    file: str
    pos: int
    gtid: str = ""
    ts: int = 0
    epoch: int = 0

    def __post_init__(self) -> None:
        for key, kind in _TYPES.items():
            value = getattr(self, key)
            if not isinstance(value, kind) or isinstance(value, bool):
                msg = f"position: bad key {key!r}: expected {kind.__name__}, got {value!r}"
                raise PositionError(msg)
        for key in ("pos", "ts", "epoch"):
            if getattr(self, key) < 0:
                msg = f"position: bad key {key!r}: must not be negative, got {getattr(self, key)}"
                raise PositionError(msg)
        if self.file and not _FILE.match(self.file):
            msg = f"position: bad key 'file': expected a name like mariadb-bin.000003, got {self.file!r}"
            raise PositionError(msg)
        if not self.file and not self.gtid:
            msg = "position: needs a 'file' or a 'gtid'"
            raise PositionError(msg)

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}" if self.file else f"gtid {self.gtid}"

    def sort_key(self) -> tuple[int, int]:
        """``(binlog file number, pos)``; a GTID-only position sorts before every file position."""
        m = _FILE.match(self.file)
        return (int(m.group(1)), self.pos) if m else (-1, self.pos)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "position") -> Position:
        """The position in ``d``; ``where`` starts every error message (a file or node name)."""
        if not isinstance(d, Mapping):
            msg = f"{where}: expected a JSON object, got {type(d).__name__}"
            raise PositionError(msg)
        for key in _REQUIRED:
            if key not in d:
                msg = f"{where}: missing key {key!r}"
                raise PositionError(msg)
        unknown = sorted(set(d) - set(_TYPES))
        if unknown:
            msg = f"{where}: unknown key {unknown[0]!r}"
            raise PositionError(msg)
        try:
            return cls(**d)
        except PositionError as e:
            raise PositionError(str(e).replace("position:", f"{where}:", 1)) from None

    @classmethod
    def from_json(cls, text: str | bytes, where: str = "position") -> Position:
        try:
            d = json.loads(text)
        except ValueError as e:
            msg = f"{where}: not valid JSON: {e}"
            raise PositionError(msg) from None
        return cls.from_dict(d, where)

    @classmethod
    def parse(cls, text: str) -> Position:
        """The command-line forms ``mariadb-bin.000003:4`` (FILE:POS) and ``mariadb-bin.000003`` (pos 4)."""
        file, sep, pos = text.strip().rpartition(":")
        if not sep:
            file, pos = pos, str(START_POS)
        if not _FILE.match(file) or not (pos.isascii() and pos.isdigit()):
            msg = f"position {text!r}: expected FILE:POS, e.g. mariadb-bin.000003:4"
            raise PositionError(msg)
        return cls(file=file, pos=int(pos))
