"""Dead letters: a record a stage could not handle, with the reason, never dropped.

Written to ``<ds>.dlq`` (topics.dead_letter), keyed like the original record, value JSON by example::

    {"code": "RAW_UNDECODABLE", "error": "shop.orders at mariadb-bin.000003:1234: ...", "stage": "appender",
     "topic": "demo.shop", "partition": 0, "offset": 42, "key": "shop.orders",
     "value_base64": "REJSAQAAAH...", "withheld": null}

Every member is always present (``null`` when unknown). The Spark stages (the dispatcher, the log
processor) build the same JSON in Spark SQL with ``spark_value`` below.

``code`` is stable (docs/errors.md); ``value_base64`` is the original record's value, so it can be
replayed once the cause is fixed. When the record may hold columns that are masked (its table has masking
rules, or it cannot be attributed to a table while the source masks some), the value is withheld:
``value_base64`` is null and ``withheld`` says why; topic, partition and offset still point at the
original. Errors name columns and positions, never values. ``withheld_reason`` is the rule, with its
two texts (``TABLE_MASKED``, ``UNATTRIBUTED``).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column

# A record larger than this is not copied into its dead letter (base64 makes it a third larger, and the
# dead letter must fit the topic's message limit, so its write cannot fail for size); ``withheld`` says
# so and the record stays readable at its coordinates.
MAX_VALUE_BYTES = 4 * 1024 * 1024
TABLE_MASKED = "the table has masked columns"
UNATTRIBUTED = "not attributable to a table, and this source masks columns"
UNVERIFIED = "the record did not decode, so its table is not known for sure, and this source masks columns"


def too_big(size: int) -> str:
    """``withheld`` of a record of ``size`` bytes above ``MAX_VALUE_BYTES``."""
    return (
        f"the record's {size} bytes exceed the {MAX_VALUE_BYTES} a dead letter carries; "
        "read it at its coordinates"
    )


def withheld_reason(masks_any: bool, table_masked: bool | None, decoded: bool = True) -> str:
    """Why a dead letter's value must be withheld, "" when it may be carried (the rule of every stage):
    ``masks_any`` is whether the source masks any column, ``table_masked`` whether the record's table has
    masking rules (None: the record cannot be attributed to a table), ``decoded`` whether the record
    decoded (one that did not may hold any table's rows, whatever its key or header claims)."""
    if not masks_any:
        return ""
    if table_masked is None:
        return UNATTRIBUTED
    if not decoded:
        return UNVERIFIED
    return TABLE_MASKED if table_masked else ""


@dataclass(frozen=True)
class DeadLetter:
    code: str
    error: str
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    stage: str
    withheld: str = ""

    def to_json(self) -> str:
        size = len(self.value) if self.value is not None else 0
        big = not self.withheld and size > MAX_VALUE_BYTES
        return json.dumps(
            {
                "code": self.code,
                "error": self.error,
                "stage": self.stage,
                "topic": self.topic,
                "partition": self.partition,
                "offset": self.offset,
                "key": self.key.decode("utf-8", "replace") if self.key is not None else None,
                "value_base64": base64.b64encode(self.value).decode()
                if self.value is not None and not big
                else None,
                "withheld": (too_big(size) if big else self.withheld) or None,
            },
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> DeadLetter:
        d = json.loads(text)
        key = d["key"].encode() if d.get("key") is not None else None
        value = base64.b64decode(d["value_base64"]) if d.get("value_base64") is not None else None
        return cls(
            d["code"],
            d["error"],
            d["topic"],
            d["partition"],
            d["offset"],
            key,
            value,
            d["stage"],
            d.get("withheld") or "",
        )


def spark_too_big(size: Column) -> Column:
    """``too_big`` in Spark SQL, of a byte count column."""
    from pyspark.sql import functions as F

    head, tail = too_big(0).split("0", 1)
    return F.concat(F.lit(head), size.cast("string"), F.lit(tail))


def spark_value(stage: str, code: Column, error: Column, key: Column, withheld: Column) -> Column:
    """``DeadLetter.to_json`` in Spark SQL, of the current Kafka record (its ``topic``, ``partition``,
    ``offset`` and ``value`` columns): every member present, ``value_base64`` null when ``withheld`` is set.
    The base64 is one line, as Python's: Spark's ``base64`` cuts it every 76 characters with CRLF (MIME,
    ``spark.sql.chunkBase64String.enabled``), so the breaks are removed."""
    from pyspark.sql import functions as F

    return F.to_json(
        F.struct(
            code.alias("code"),
            error.alias("error"),
            F.lit(stage).alias("stage"),
            F.col("topic"),
            F.col("partition"),
            F.col("offset"),
            key.alias("key"),
            F.when(withheld.isNull(), F.regexp_replace(F.base64("value"), "\r\n", "")).alias("value_base64"),
            withheld.alias("withheld"),
        ),
        {"ignoreNullFields": "false"},
    )
