"""Where a reload's rules begin, per partition (docs/logs.md, The log processor): the *switch offsets*.

At a reload the driver stops the running query between two batches and starts the next one on the new rule
set. The next query resumes from the checkpoint, which may be behind the last batch the old query finished
(the offset and commit logs are written asynchronously with ``processor.async_progress``; a batch stopped
mid-way is redone), so it reads again lines the old rules already shaped. Those lines must keep their old
shape: the answer says that every line before the switch offsets followed the old rules and every line from
them the new ones. So the next query carries the rule sets it replaces, each with the offsets *until* which it
applies (``Earlier``), and the JVM picks a record's rule set by its partition and offset (``dbus.jvm.
LogRecordUdf``; ``rules_at`` is the same choice in Python)::

    {"until": {"0": 23773, "1": 23690}, "rules": <the rule set before the switch>}

The switch offsets of a partition are past everything the old query may have read there (``switch_at``):
the end of its last finished batch, of the batch its offset log planned, and the end of the raw topic once
the old query has stopped (a stop may interrupt a batch whose end no log holds yet: its lines, partly
written under the old rules, are before the topic's end). The lines between the old query's last batch and
that end are shaped by the old rules too, by the next query. A partition the old query never read and the
topic did not have then has no switch offset: all its lines follow the new rules.

An ``Earlier`` is dropped once no restart can read its lines again: when the checkpoint's last committed batch
ends at or after its ``until`` in every partition (``committed_end``, ``still_needed``).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from logprocessor.rules import RuleSet

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Earlier:
    """A rule set that shapes the lines before ``until`` (partition -> offset) of the partitions it names."""

    rules: RuleSet
    until: Mapping[int, int]


def rules_at(earlier: Sequence[Earlier], current: RuleSet, partition: int, offset: int) -> RuleSet:
    """The rule set that shapes the line at (partition, offset): the oldest earlier set whose ``until`` is
    past it, else ``current`` (``LogRecordUdf.version``)."""
    for e in earlier:
        until = e.until.get(partition)
        if until is not None and offset < until:
            return e.rules
    return current


def switch_at(finished: Mapping[int, int], planned: Mapping[int, int] | None) -> dict[int, int]:
    """Per partition, the larger of two ends the old query read up to at most (``planned`` None: unknown):
    its last finished batch's, its offset log's latest batch's, the raw topic's after it stopped."""
    out = dict(finished)
    for p, o in (planned or {}).items():
        out[p] = max(o, out.get(p, o))
    return out


def still_needed(earlier: Sequence[Earlier], committed: Mapping[int, int] | None) -> tuple[Earlier, ...]:
    """The earlier sets a restart from the checkpoint may still need: all of them when ``committed`` (the end
    of the last committed batch) is unknown, else those with a partition whose ``until`` is past it."""
    if committed is None:
        return tuple(earlier)
    return tuple(e for e in earlier if any(o > committed.get(p, -1) for p, o in e.until.items()))


def passed(until: Mapping[int, int], start: Mapping[int, int]) -> bool:
    """Whether a batch that starts at ``start`` comes after every line before ``until``."""
    return all(start.get(p, -1) >= o for p, o in until.items())


def until_json(until: Mapping[int, int]) -> dict[str, int]:
    return {str(p): o for p, o in sorted(until.items())}


# ---------------------------------------------------------------- the checkpoint (a local folder)


def planned_end(checkpoint: str) -> dict[int, int] | None:
    """The end offsets of the latest batch in the checkpoint's offset log (None: not a local folder, or no
    batch yet)."""
    return _batch_end(checkpoint, "offsets")


def committed_end(checkpoint: str) -> dict[int, int] | None:
    """The end offsets of the latest batch in the checkpoint's commit log: a restart reads nothing before
    them (None: not a local folder, or nothing committed yet)."""
    return _batch_end(checkpoint, "commits")


def _batch_end(checkpoint: str, log_dir: str) -> dict[int, int] | None:
    folder = _local(checkpoint)
    if folder is None:
        return None
    batch = _latest(folder / log_dir)
    if batch is None:
        return None
    try:
        return source_offsets((folder / "offsets" / str(batch)).read_text())
    except (OSError, ValueError) as e:
        log.warning("%s: offset log of batch %s unreadable: %s", checkpoint, batch, e)
        return None


def source_offsets(text: str) -> dict[int, int]:
    """The Kafka source's offsets of one offset-log file (``v1``, its metadata, then one line per source,
    ``{"<topic>": {"<partition>": <offset>}}``)::

        v1
        {"batchWatermarkMs":0,"batchTimestampMs":1732460000000,"conf":{}}
        {"applog":{"0":23773,"1":23690}}
    """
    lines = text.splitlines()
    if len(lines) < 3:
        msg = "an offset log entry has no source line"
        raise ValueError(msg)
    doc = json.loads(lines[2])
    if not isinstance(doc, dict) or len(doc) != 1:
        msg = "an offset log entry of one topic was expected"
        raise ValueError(msg)
    [offsets] = doc.values()
    return {int(p): int(o) for p, o in offsets.items()}


def _local(checkpoint: str) -> Path | None:
    if checkpoint.startswith("file:"):
        checkpoint = checkpoint[len("file:") :].lstrip("/")
        checkpoint = "/" + checkpoint
    elif "://" in checkpoint:
        return None
    return Path(checkpoint)


def _latest(folder: Path) -> int | None:
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    ids = [int(n) for n in names if n.isdigit()]
    return max(ids) if ids else None


def start_offsets(progress: Mapping[str, Any]) -> dict[int, int] | None:
    """The start offsets of a batch progress's (one) Kafka source, or None."""
    sources = progress.get("sources") or []
    if not sources:
        return None
    start = sources[0].get("startOffset")
    if isinstance(start, str):
        try:
            start = json.loads(start)
        except ValueError:
            return None
    if not isinstance(start, dict) or len(start) != 1:
        return None
    [offsets] = start.values()
    return {int(p): int(o) for p, o in offsets.items()} if isinstance(offsets, dict) else None
