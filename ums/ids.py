"""``ums_id_`` and ``ums_uid_``: message identities derived from binlog coordinates only.

``ums_id_`` is the original's formula (spec 1.4): binlog file number * 10^13 + offset, written as
a decimal string. ``ums_uid_`` replaces the original's ZooKeeper sequence with
``ums_id_ * 10^6 + row index``, so a replay of the same binlog yields the same uids.

    >>> ums_id("mysql-bin.000103", 12345678)
    '1030000012345678'
    >>> ums_uid("1030000012345678", 2)
    '1030000012345678000002'

``position_id`` is the same ``number * 10^13 + offset`` for any numbered log: log tables use a Kafka
partition and offset (``ums_uid(position_id(3, 4711), 2)`` -> ``'30000000004711000002'``).
"""

from __future__ import annotations

from ums.errors import BadPositionError

OFFSET_LIMIT = 10**13  # offsets occupy the low 13 decimal digits of ums_id_
ROW_LIMIT = 10**6  # row indices occupy the low 6 decimal digits of ums_uid_
LONG_MAX = 2**63 - 1  # ums_id_ is declared "long": it must fit a signed 64-bit integer


def binlog_file_number(binlog_file: str) -> int:
    """Digits after the last ``.`` of a binlog file name: ``mysql-bin.000103`` -> 103."""
    suffix = binlog_file.rsplit(".", 1)[-1] if "." in binlog_file else ""
    if not (suffix.isascii() and suffix.isdigit()):
        msg = f"binlog file {binlog_file!r}: expected a name ending in .<digits>"
        raise BadPositionError(msg)
    return int(suffix)


def ums_id(binlog_file: str, offset: int, compensation: int = 0) -> str:
    """``(file number + compensation) * 10^13 + offset`` as a decimal string.

    ``compensation`` is the original's ``logfile.num.compensation``: added to the file number to
    keep ums_id_ increasing after a server's binlog numbering restarts.
    """
    number = binlog_file_number(binlog_file) + compensation
    if number < 0 and _is_int(offset) and 0 <= offset < OFFSET_LIMIT:
        msg = f"binlog file {binlog_file!r}: compensation {compensation} makes the file number negative"
        raise BadPositionError(msg)
    return position_id(number, offset, f"binlog file {binlog_file!r}", "file number")


def position_id(number: int, offset: int, where: str = "position", what: str = "number") -> str:
    """``number * 10^13 + offset`` as a decimal string: a binlog file number or a Kafka partition, and the
    offset in it; ``where`` and ``what`` name them in errors."""
    if not _is_int(offset) or not 0 <= offset < OFFSET_LIMIT:
        msg = f"{where}: offset {offset!r} is not in 0..10^13-1"
        raise BadPositionError(msg)
    if not _is_int(number) or number < 0:
        msg = f"{where}: {what} {number!r} is not a non-negative int"
        raise BadPositionError(msg)
    value = number * OFFSET_LIMIT + offset
    if value > LONG_MAX:
        msg = f"{where}: {what} {number} overflows a 64-bit ums_id_"
        raise BadPositionError(msg)
    return str(value)


def parse_ums_id(value: str | int) -> tuple[int, int]:
    """``"1030000012345678"`` -> ``(103, 12345678)`` (file number incl. compensation, offset)."""
    return divmod(_canonical_int(value, "ums_id_", LONG_MAX), OFFSET_LIMIT)


def ums_uid(ums_id_value: str | int, row_index: int) -> str:
    """``ums_id_ * 10^6 + row_index`` as a decimal string.

    ``row_index`` is the tuple's index among the tuples emitted for one binlog rows event (a ``b``
    before-image counts as a tuple). A rows event is cut at ``binlog_row_event_max_size`` (8 KiB by
    default) and a row image takes at least one byte, so an event holds far fewer than 10^6 tuples.
    Compare uids as integers: their order is the order of ``(ums_id_, row_index)``.
    """
    base = _canonical_int(ums_id_value, "ums_id_", LONG_MAX)
    if not _is_int(row_index) or not 0 <= row_index < ROW_LIMIT:
        msg = f"row index {row_index!r} of ums_id_ {base}: needs 0 <= index < 10^6"
        raise BadPositionError(msg)
    return str(base * ROW_LIMIT + row_index)


def ums_uids(ums_id_value: str | int, count: int) -> list[str]:
    """``[ums_uid(ums_id_value, t) for t in range(count)]``, checked once instead of per tuple."""
    if count > ROW_LIMIT:
        ums_uid(ums_id_value, count - 1)  # raises with the limit named
    base = _canonical_int(ums_id_value, "ums_id_", LONG_MAX) * ROW_LIMIT
    return [str(base + t) for t in range(count)]


_UID_TAILS: list[bytes] = []  # b"000000", b"000001", ...


def uid_tails(count: int) -> list[bytes]:
    """The last six digits of ``ums_uid_`` for row indices ``0..count-1`` (at least), made once per process:
    for an ``ums_id_`` above 0, ``ums_uid(ums_id_, t)`` is the ``ums_id_`` digits followed by
    ``uid_tails(t + 1)[t]`` (``ums_uid("1030000012345678", 2)`` = ``"1030000012345678" + "000002"``), so a
    message text can be written without an integer per tuple."""
    if count > ROW_LIMIT:
        msg = f"{count} row indices: needs fewer than 10^6"
        raise BadPositionError(msg)
    if len(_UID_TAILS) < count:
        _UID_TAILS.extend(f"{t:06d}".encode() for t in range(len(_UID_TAILS), max(count, 1024)))
    return _UID_TAILS


def parse_ums_uid(value: str | int) -> tuple[str, int]:
    """``"1030000012345678000002"`` -> ``("1030000012345678", 2)``."""
    base, row_index = divmod(_canonical_int(value, "ums_uid_", LONG_MAX * ROW_LIMIT), ROW_LIMIT)
    return str(base), row_index


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _canonical_int(value: str | int, what: str, limit: int) -> int:
    """A non-negative int given as an int or a canonical decimal string (no sign, no leading 0)."""
    text = str(value) if _is_int(value) else value
    canonical = (
        isinstance(text, str) and text.isascii() and text.isdigit() and (len(text) == 1 or text[0] != "0")
    )
    if not canonical or int(text) > limit:
        msg = f"{what} {value!r}: expected a decimal integer in 0..{limit}"
        raise BadPositionError(msg)
    return int(text)


PULLED_UID_DIGITS = 15  # a pulled row's ums_uid_: its ums_id_ digits, shard in 6 digits, row in 9


def row_of_uid(ums_id_value: str, uid: str) -> int:
    """The row index an ``ums_uid_`` gives a change's position: an increment's (``parse_ums_uid``), or 0
    for a full-pull row, whose uid is its ``ums_id_`` digits followed by 15 (docs/fullpull.md; Debezium's
    snapshot rows are row 0 too): ``row_of_uid("1030000012345678", "1030000012345678000001000000041")``
    -> 0."""
    if len(uid) == len(ums_id_value) + PULLED_UID_DIGITS and uid.startswith(ums_id_value) and uid.isdigit():
        return 0
    return parse_ums_uid(uid)[1]
