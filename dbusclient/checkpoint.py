"""The consumer's checkpoint: where it is in each partition, and how far a bootstrap got.

A checkpoint is saved after the callbacks of a window succeeded; a restarted consumer resumes from it.
Its JSON form (``to_json``; ``version`` 1, every field documented in docs/client.md)::

    {"format": "dbus-client-checkpoint", "version": 1, "mode": "BOOTSTRAP_SNAPSHOT",
     "partitions": [{"topic": "demo.shop.result", "partition": 0, "offset": 1234,
                     "ums_id": "1030000012345678"}],
     "bootstrap": {"pulls": [{"ds": "demo", "schema": "shop", "table": "orders",
                              "seqno": "1704164645123", "ums_id": "1030000012000000",
                              "rows": 420001, "ended": false}],
                   "catchup": []}}

- ``mode``: ``ONLINE`` (no bootstrap: ``bootstrap`` is null), ``BOOTSTRAP_SNAPSHOT`` (full pulls
  requested, their rows still coming), ``BOOTSTRAP_CATCHUP`` (every pull ended; reading on to the
  ``catchup`` offsets, the end offsets when the last pull ended, then ``ONLINE``);
- ``partitions``: per (topic, partition) the next offset to read and the ``ums_id_`` of the last change
  applied from it (null before the first);
- ``bootstrap.pulls``: one per table, the request's ``SEQNO``, the pull's snapshot position
  (``ums_id``, null until its start marker is read), the snapshot rows applied, and whether its end
  marker was read.

``ums_id`` and ``seqno`` are decimal strings, as in UMS: JSON readers that hold numbers as doubles lose
digits past 2^53. ``load_checkpoint`` errors (``CLIENT_BAD_CHECKPOINT``) name the file and the field.
Stores sit behind ``CheckpointStore`` (``load``/``save``): ``FileCheckpointStore`` here,
``ZkCheckpointStore`` (dbusclient/checkpoint_zk.py) and the SQL sink's ``SqlCheckpointStore``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any, NoReturn, Protocol, TypeVar

from dbuslib.errors import DbusError

FORMAT = "dbus-client-checkpoint"
VERSION = 1

T = TypeVar("T")


class CheckpointError(DbusError):
    """A checkpoint that does not parse or breaks its invariants; the message names the file and field."""

    code = "CLIENT_BAD_CHECKPOINT"


class Mode(Enum):
    """Where the consumer is: online, or in one of the two phases of a bootstrap."""

    ONLINE = "ONLINE"
    BOOTSTRAP_SNAPSHOT = "BOOTSTRAP_SNAPSHOT"
    BOOTSTRAP_CATCHUP = "BOOTSTRAP_CATCHUP"


@dataclass(frozen=True)
class PartitionPosition:
    """``{"topic": "demo.shop.result", "partition": 0, "offset": 1234, "ums_id": "1030000012345678"}``:
    ``offset`` the next one to read, ``ums_id`` the last applied change's (None before the first)."""

    topic: str
    partition: int
    offset: int
    ums_id: int | None = None


@dataclass(frozen=True)
class TablePull:
    """One table's full pull of a bootstrap: ``{"ds": "demo", "schema": "shop", "table": "orders",
    "seqno": "1704164645123", "ums_id": null, "rows": 0, "ended": false}``. ``ums_id`` is the pull's
    snapshot position (from its start marker), ``rows`` the snapshot rows applied so far."""

    ds: str
    schema: str
    table: str
    seqno: int
    ums_id: int | None = None
    rows: int = 0
    ended: bool = False


@dataclass(frozen=True)
class Bootstrap:
    """The pulls of a bootstrap and, in catch-up, the offsets to reach before going online."""

    pulls: tuple[TablePull, ...]
    catchup: tuple[PartitionPosition, ...] = ()


@dataclass(frozen=True)
class Checkpoint:
    """A consumer's checkpoint (module docstring); valid by construction (``check``)."""

    mode: Mode = Mode.ONLINE
    partitions: tuple[PartitionPosition, ...] = ()
    bootstrap: Bootstrap | None = field(default=None)

    def __post_init__(self) -> None:
        problem = _problem(self)
        if problem is not None:
            raise CheckpointError(problem)

    def offsets(self) -> dict[tuple[str, int], int]:
        """(topic, partition) -> the next offset to read."""
        return {(p.topic, p.partition): p.offset for p in self.partitions}

    def advanced(self, topic: str, partition: int, offset: int, ums_id: int | None = None) -> Checkpoint:
        """This checkpoint with (topic, partition) at ``offset`` (and ``ums_id``, when given)."""
        kept = [p for p in self.partitions if (p.topic, p.partition) != (topic, partition)]
        old = next((p for p in self.partitions if (p.topic, p.partition) == (topic, partition)), None)
        last = ums_id if ums_id is not None else (old.ums_id if old else None)
        new = PartitionPosition(topic, partition, offset, last)
        return replace(self, partitions=tuple(sorted([*kept, new], key=lambda p: (p.topic, p.partition))))


def _problem(cp: Checkpoint) -> str | None:
    """Why ``cp`` breaks an invariant, or None."""
    seen: set[tuple[str, int]] = set()
    for i, p in enumerate(cp.partitions):
        where = f"partitions[{i}]"
        if (p.topic, p.partition) in seen:
            return f"{where}: {p.topic} partition {p.partition} is listed twice"
        seen.add((p.topic, p.partition))
        if p.offset < 0 or p.partition < 0 or (p.ums_id is not None and p.ums_id < 0):
            return f"{where}: partition, offset and ums_id must not be negative"
    if cp.mode is Mode.ONLINE:
        return None if cp.bootstrap is None else "bootstrap: must be null in mode ONLINE"
    if cp.bootstrap is None or not cp.bootstrap.pulls:
        return f"bootstrap.pulls: mode {cp.mode.value} needs at least one pull"
    if cp.mode is Mode.BOOTSTRAP_SNAPSHOT:
        return "bootstrap.catchup: must be empty in mode BOOTSTRAP_SNAPSHOT" if cp.bootstrap.catchup else None
    for i, pull in enumerate(cp.bootstrap.pulls):
        if not pull.ended or pull.ums_id is None:
            return f"bootstrap.pulls[{i}]: mode BOOTSTRAP_CATCHUP needs every pull ended, with its ums_id"
    return None


# ---------------------------------------------------------------- JSON form


def to_dict(cp: Checkpoint) -> dict[str, Any]:
    """The checkpoint as JSON-ready dicts, in the documented key order."""
    boot = cp.bootstrap
    return {
        "format": FORMAT,
        "version": VERSION,
        "mode": cp.mode.value,
        "partitions": [_position_dict(p) for p in cp.partitions],
        "bootstrap": None
        if boot is None
        else {
            "pulls": [
                {
                    "ds": p.ds,
                    "schema": p.schema,
                    "table": p.table,
                    "seqno": str(p.seqno),
                    "ums_id": _opt_text(p.ums_id),
                    "rows": p.rows,
                    "ended": p.ended,
                }
                for p in boot.pulls
            ],
            "catchup": [_position_dict(p) for p in boot.catchup],
        },
    }


def to_json(cp: Checkpoint) -> str:
    """``to_dict`` as indented JSON text, ending with a newline."""
    return json.dumps(to_dict(cp), indent=1) + "\n"


def from_json(text: str | bytes, where: str = "checkpoint") -> Checkpoint:
    """Parse a checkpoint; ``where`` (the file) starts every error message."""
    try:
        obj = json.loads(text)
    except (ValueError, UnicodeDecodeError) as e:
        msg = f"{where}: not JSON: {e}"
        raise CheckpointError(msg) from None
    return from_dict(obj, where)


def from_dict(obj: object, where: str = "checkpoint") -> Checkpoint:
    """A checkpoint from parsed JSON; errors name ``where`` and the field."""
    r = _Reader(where)
    top = r.mapping(obj, "$", {"format", "version", "mode", "partitions", "bootstrap"})
    if top.get("format") != FORMAT:
        r.fail("format", f"expected {FORMAT!r}, got {top.get('format')!r}")
    if top.get("version") != VERSION:
        r.fail("version", f"{top.get('version')!r} is not supported (this client reads version {VERSION})")
    mode = r.get(top, "mode", "$", lambda v, p: r.enum(Mode, v, p))
    partitions = r.get(top, "partitions", "$", r.positions)
    boot_obj = top.get("bootstrap")
    bootstrap = None if boot_obj is None else r.bootstrap(boot_obj, "bootstrap")
    try:
        return Checkpoint(mode, partitions, bootstrap)
    except CheckpointError as e:
        msg = f"{where}: {e}"
        raise CheckpointError(msg) from None


def _position_dict(p: PartitionPosition) -> dict[str, Any]:
    return {"topic": p.topic, "partition": p.partition, "offset": p.offset, "ums_id": _opt_text(p.ums_id)}


def _opt_text(value: int | None) -> str | None:
    return None if value is None else str(value)


class _Reader:
    """Typed reads of the JSON form; every failure names the file and the field's path."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, path: str, problem: str) -> NoReturn:
        msg = f"{self.where}: {path}: {problem}"
        raise CheckpointError(msg)

    def mapping(self, obj: object, path: str, keys: set[str]) -> dict[str, Any]:
        if not isinstance(obj, dict):
            self.fail(path, f"expected an object, got {type(obj).__name__}")
        unknown = sorted(set(obj) - keys)
        if unknown:
            self.fail(path, f"unknown key(s) {unknown} (known: {sorted(keys)})")
        return obj

    def get(self, obj: dict[str, Any], key: str, path: str, read: Callable[[Any, str], T]) -> T:
        full = key if path == "$" else f"{path}.{key}"
        if key not in obj:
            self.fail(full, "missing")
        return read(obj[key], full)

    def enum(self, kind: type[Mode], value: object, path: str) -> Mode:
        names = [m.value for m in kind]
        if value not in names:
            self.fail(path, f"{value!r} is not one of {names}")
        return kind(value)

    def text(self, value: object, path: str) -> str:
        if not isinstance(value, str) or not value:
            self.fail(path, f"expected a non-empty string, got {value!r}")
        return value

    def count(self, value: object, path: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            self.fail(path, f"expected a non-negative integer, got {value!r}")
        return value

    def flag(self, value: object, path: str) -> bool:
        if not isinstance(value, bool):
            self.fail(path, f"expected true or false, got {value!r}")
        return value

    def digits(self, value: object, path: str) -> int:
        if not (isinstance(value, str) and value.isascii() and value.isdigit()):
            self.fail(path, f"expected a decimal integer as a string, got {value!r}")
        return int(str(value))

    def opt_digits(self, value: object, path: str) -> int | None:
        return None if value is None else self.digits(value, path)

    def items(self, value: object, path: str) -> Iterable[tuple[object, str]]:
        if not isinstance(value, list):
            self.fail(path, f"expected a list, got {type(value).__name__}")
        return ((item, f"{path}[{i}]") for i, item in enumerate(value))

    def positions(self, value: object, path: str) -> tuple[PartitionPosition, ...]:
        out = []
        for item, p in self.items(value, path):
            obj = self.mapping(item, p, {"topic", "partition", "offset", "ums_id"})
            out.append(
                PartitionPosition(
                    self.get(obj, "topic", p, self.text),
                    self.get(obj, "partition", p, self.count),
                    self.get(obj, "offset", p, self.count),
                    self.get(obj, "ums_id", p, self.opt_digits),
                )
            )
        return tuple(out)

    def pull(self, item: object, p: str) -> TablePull:
        obj = self.mapping(item, p, {"ds", "schema", "table", "seqno", "ums_id", "rows", "ended"})
        return TablePull(
            self.get(obj, "ds", p, self.text),
            self.get(obj, "schema", p, self.text),
            self.get(obj, "table", p, self.text),
            self.get(obj, "seqno", p, self.digits),
            self.get(obj, "ums_id", p, self.opt_digits),
            self.get(obj, "rows", p, self.count),
            self.get(obj, "ended", p, self.flag),
        )

    def pulls(self, value: object, path: str) -> tuple[TablePull, ...]:
        return tuple(self.pull(item, p) for item, p in self.items(value, path))

    def bootstrap(self, value: object, path: str) -> Bootstrap:
        obj = self.mapping(value, path, {"pulls", "catchup"})
        pulls = self.get(obj, "pulls", path, self.pulls)
        return Bootstrap(pulls, self.get(obj, "catchup", path, self.positions))


# ---------------------------------------------------------------- stores


class CheckpointStore(Protocol):
    """Where a consumer keeps its checkpoint: a file, a ZooKeeper node, or the sink's own database."""

    def load(self) -> Checkpoint | None:
        """The saved checkpoint, or None when none was ever saved."""
        ...

    def save(self, checkpoint: Checkpoint) -> None:
        """Replace the saved checkpoint; when this returns it survives a crash of the machine."""
        ...


class FileCheckpointStore:
    """A checkpoint in one JSON file, replaced atomically: a temporary file in the same folder is
    written and fsynced, then renamed over the file (``os.replace``), and the folder fsynced. A reader
    sees the old checkpoint or the new one, never a mix. A missing file means no checkpoint."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def load(self) -> Checkpoint | None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            msg = f"{self.path}: cannot read: {e.strerror or e}"
            raise CheckpointError(msg) from None
        return from_json(data, str(self.path))

    def save(self, checkpoint: Checkpoint) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(to_json(checkpoint))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            _fsync_dir(self.path.parent)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            msg = f"{self.path}: cannot save the checkpoint: {e.strerror or e}"
            raise CheckpointError(msg) from None


def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (POSIX: the folder's entry is data of the folder)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
