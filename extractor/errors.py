"""Errors of the extractor's position bookkeeping and leader election (codes listed in docs/errors.md)."""

from __future__ import annotations

from dbuslib.errors import DbusError


class PositionError(DbusError):
    """A position is malformed (the message names the key) or would move a committed position backwards."""

    code = "EXTRACTOR_BAD_POSITION"


class PositionFileError(DbusError):
    """The local mirror of the committed position cannot be written or read (disk full, permissions)."""

    code = "EXTRACTOR_POSITION_FILE"


class DeposedError(DbusError):
    """Another extractor leads this source now (a higher epoch): stop producing, never commit again."""

    code = "EXTRACTOR_DEPOSED"


class NotLeaderError(DbusError):
    """``Leadership.acquire(timeout=...)`` gave up: another extractor still leads."""

    code = "EXTRACTOR_NOT_LEADER"
    retriable = True
