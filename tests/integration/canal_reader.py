"""Canal's own reader of canal-json topics for the tests: tests/interop/canal's FlatMessageDump (Canal 1.1.8's
``FlatMessage`` parsed by fastjson2 as Canal's Kafka client does), built once (Maven, then javac; a no-op when
current) and run on the stack's JDK.

``messages(bootstrap, topic)``: every record of a topic as Canal parsed it (FlatMessage's getters), in order.
``tables(bootstrap, topics)``: the tables the records rebuild (Canal's messages applied in order by primary
key), each row read back to UMS values with ``decode_canal``: ``{(database, table): {key: {column: value}}}``,
``key`` the primary key's values as a tuple.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from ums.formats.canal import decode_canal
from ums.scalars import JsonValue

REPO = Path(__file__).resolve().parents[2]


def classpath() -> str:
    home = Path(os.environ.get("STACK_CACHE", REPO / ".stack"))  # jars: stack/env.sh
    done = subprocess.run(
        ["bash", str(REPO / "tests/interop/canal/build.sh"), str(home / "jars" / "interop-canal")],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done.stdout.strip().splitlines()[-1]


def _run(mode: str, bootstrap: str, topics: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        ["java", "-cp", classpath(), "FlatMessageDump", mode, bootstrap, topics],
        capture_output=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")[-3000:]
    return [json.loads(line) for line in done.stdout.decode("utf-8").split("\n") if line]


def messages(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    """``{"key":..,"id":..,"database":..,..}`` per record, ``{"key":..,"tombstone":true}`` for a tombstone."""
    return _run("kafka", bootstrap, topic)


def tables(
    bootstrap: str, topics: list[str]
) -> dict[tuple[str, str], dict[tuple[JsonValue, ...], dict[str, JsonValue]]]:
    out: dict[tuple[str, str], dict[tuple[JsonValue, ...], dict[str, JsonValue]]] = {}
    for row in _run("table", bootstrap, ",".join(topics)):
        message = {"type": "INSERT", "isDdl": False, **{k: v for k, v in row.items() if k != "data"}}
        change = decode_canal(None, json.dumps(message | {"data": [row["data"]]}).encode())
        assert change is not None and change.after is not None
        values = dict(zip((f.name for f in change.table.fields), change.after, strict=True))
        key = tuple(values[name] for name in change.table.primary_key)
        out.setdefault((row["database"], row["table"]), {})[key] = values
    return out
