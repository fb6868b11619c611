"""Full-pull progress in ZooKeeper (spec 3.5): what ``dbus fullpull status`` shows and a restart resumes from.

One node per request, ``<root>/FullPuller/<ds>/<schema>/<table>/<seqno>`` (schema and table escaped by
``dbuslib.zk.escape``: a table named ``..`` is ``%2E%2E``, ordinary names are as they are), holds the
pull's state as JSON (the original's ``ProgressInfo`` names, plus what a resume needs: the position,
version, batch and shard plan)::

    {"SeqNo": 1704164645123, "Status": "pulling", "TotalCount": 10, "FinishedCount": 4,
     "TotalRows": 1000000, "FinishedRows": 412000, "StartSecs": 1704164645.2, "UmsId": "1030000012345678",
     "UmsTs": "2024-01-02 03:04:05.123", "Version": 0, "BatchNo": 2, "SplitCol": "id",
     "Shards": [{"where": "`id` >= 1 AND `id` < 100001", "lower": "1", "upper": "100001"}, ...], ...}

Each shard has a child ``shards/<index>``: ``{"rows": 41000, "state": "pulling"|"done"}``. A shard's
reader reports its rows as it goes; the driver marks it ``done`` only once every message of the shard is
acknowledged by Kafka. Status goes ``splitting`` -> ``pulling`` -> ``ending`` (or ``abort``).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from dbuslib import zkpaths
from dbuslib.zk import unescape

SPLITTING, PULLING, ENDING, ABORT = "splitting", "pulling", "ending", "abort"
DONE = "done"  # a shard's state once all its messages are acknowledged
FINISHED = (ENDING, ABORT)


@dataclass(frozen=True)
class ShardState:
    rows: int = 0
    state: str = PULLING


@dataclass(frozen=True)
class Progress:
    """One pull, as stored in its node (JSON keys = field names)."""

    SeqNo: int
    Schema: str
    Table: str
    Status: str = SPLITTING
    TotalCount: int = 0
    FinishedCount: int = 0
    TotalRows: int = 0
    FinishedRows: int = 0
    StartSecs: float = 0.0
    ConsumeSecs: float = 0.0
    EndSecs: float = 0.0
    ErrorCode: str = ""
    ErrorMsg: str = ""
    UmsId: str = ""
    UmsTs: str = ""
    Version: int = 0
    BatchNo: int = 0
    SplitCol: str = ""
    SplitSource: str = ""
    Warning: str = ""
    Topic: str = ""
    Namespace: str = ""
    Columns: list[dict[str, Any]] = field(default_factory=list)
    Resumes: int = 0
    Shards: list[dict[str, Any]] = field(default_factory=list)
    # the output format fixed at acceptance (output.format_for the table; "ums" for a node written before
    # per-row formats), the table's primary key and the snapshot's binlog file (per-row records carry them)
    Format: str = "ums"
    PrimaryKey: list[str] = field(default_factory=list)
    BinlogFile: str = ""

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Progress:
        obj = json.loads(data)
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in obj.items() if k in known})

    @property
    def finished(self) -> bool:
        return self.Status in FINISHED

    def with_shards(self, shards: dict[int, ShardState], now: float | None = None) -> Progress:
        """Counts refreshed from the shards' own nodes."""
        now = time.time() if now is None else now
        done = sum(1 for s in shards.values() if s.state == DONE)
        end = self.EndSecs if self.finished else now
        return replace(
            self,
            FinishedCount=done,
            FinishedRows=sum(s.rows for s in shards.values()),
            ConsumeSecs=round(max(0.0, end - self.StartSecs), 3) if self.StartSecs else 0.0,
        )


def rate_and_eta(p: Progress) -> tuple[float, float | None]:
    """Rows per second so far, and seconds left (None when unknown)."""
    rate = p.FinishedRows / p.ConsumeSecs if p.ConsumeSecs > 0 else 0.0
    if p.finished or rate <= 0:
        return rate, None if not p.finished else 0.0
    return rate, max(0.0, (p.TotalRows - p.FinishedRows) / rate)


def fraction(p: Progress) -> float:
    """How much of the pull is done: its rows of those counted when it was planned, or, when more rows came
    meanwhile (the table grew while it was pulled), its shards; 1.0 once it ended."""
    if p.Status == ENDING:
        return 1.0
    if p.FinishedRows > p.TotalRows:
        return min(1.0, p.FinishedCount / max(p.TotalCount, 1))
    return min(1.0, p.FinishedRows / max(p.TotalRows, 1))


def rows_text(p: Progress) -> str:
    """``412000/1000000 rows``; ``1800 rows (550 counted when planned)`` once the pull read more rows than
    were counted (rows written while it runs)."""
    if p.FinishedRows > p.TotalRows:
        return f"{p.FinishedRows} rows ({p.TotalRows} counted when planned)"
    return f"{p.FinishedRows}/{p.TotalRows} rows"


def bar(p: Progress, width: int = 30) -> str:
    """``[##########----------]  41% 412000/1000000 rows  4/10 shards  51234 rows/s  ETA 11s  pulling``."""
    frac = fraction(p)
    filled = int(round(frac * width))
    rate, eta = rate_and_eta(p)
    eta_text = "-" if eta is None else f"{eta:.0f}s"
    text = (
        f"[{'#' * filled}{'-' * (width - filled)}] {frac * 100:3.0f}% {rows_text(p)}  "
        f"{p.FinishedCount}/{p.TotalCount} shards  {rate:.0f} rows/s  ETA {eta_text}  {p.Status}"
    )
    if p.ErrorMsg:
        text += f"  {p.ErrorCode}: {p.ErrorMsg}"
    return text


class ProgressStore:
    """The ZooKeeper edge of one source's pulls (``root`` = ``dbuslib.zkpaths.fullpuller(<zk root>, ds)``)."""

    def __init__(self, zk: KazooClient, root: str) -> None:
        self.zk = zk
        self.root = root

    def node(self, schema: str, table: str, seqno: int) -> str:
        return zkpaths.pull(self.root, schema, table, seqno)

    def create(self, p: Progress) -> None:
        try:
            self.zk.create(self.node(p.Schema, p.Table, p.SeqNo), p.to_bytes(), makepath=True)
        except NodeExistsError:
            self.put(p)

    def get(self, schema: str, table: str, seqno: int) -> Progress | None:
        try:
            data, _ = self.zk.get(self.node(schema, table, seqno))
        except NoNodeError:
            return None
        return Progress.from_bytes(data)

    def put(self, p: Progress) -> None:
        self.zk.set(self.node(p.Schema, p.Table, p.SeqNo), p.to_bytes())

    def shard_path(self, p: Progress, index: int) -> str:
        return zkpaths.pull_shard(self.root, p.Schema, p.Table, p.SeqNo, index)

    def report_shard(self, p: Progress, index: int, state: ShardState) -> None:
        path = self.shard_path(p, index)
        data = json.dumps(asdict(state)).encode()
        try:
            self.zk.set(path, data)
        except NoNodeError:
            try:
                self.zk.create(path, data, makepath=True)
            except NodeExistsError:
                self.zk.set(path, data)

    def shards(self, p: Progress) -> dict[int, ShardState]:
        base = zkpaths.pull_shards(self.root, p.Schema, p.Table, p.SeqNo)
        try:
            children = self.zk.get_children(base)
        except NoNodeError:
            return {}
        out = {}
        for child in children:
            try:
                data, _ = self.zk.get(f"{base}/{child}")
            except NoNodeError:
                continue
            out[int(child)] = ShardState(**json.loads(data))
        return out

    def refreshed(self, p: Progress) -> Progress:
        return p.with_shards(self.shards(p))

    def find(self, seqno: int) -> Progress | None:
        return next((p for p in self.all() if p.SeqNo == seqno), None)

    def all(self) -> list[Progress]:
        """Every pull recorded for the source, newest first, counts refreshed."""
        out = []
        for schema in self._children(self.root):
            for table in self._children(f"{self.root}/{schema}"):
                for seq in self._children(f"{self.root}/{schema}/{table}"):
                    if seq.isdigit():
                        p = self.get(unescape(schema), unescape(table), int(seq))
                        if p is not None:
                            out.append(self.refreshed(p))
        return sorted(out, key=lambda p: p.SeqNo, reverse=True)

    def _children(self, path: str) -> list[str]:
        try:
            return self.zk.get_children(path)
        except NoNodeError:
            return []
