"""A Structured Streaming round trip Kafka -> Kafka, run through spark-submit.

Usage: mapfile -t args < <(dbus spark args)
       spark-submit "${args[@]}" cli/sparkcheck.py --config conf/dbus.yaml --in A --out B

Reads every record now in topic A (JSON values), wraps each as
``{"source_partition": p, "source_offset": o, "change": <value>}``, writes it to topic B with the key
kept, and stops (trigger availableNow). It proves the connector jars, the broker and spark-submit work
together.
"""

from __future__ import annotations

import argparse
import sys
import tempfile


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True)
    p.add_argument("--in", dest="source_topic", required=True)
    p.add_argument("--out", dest="sink_topic", required=True)
    args = p.parse_args(argv)

    from pyspark.sql import SparkSession

    from dbuslib.config import load_config
    from dbuslib.spark import kafka_client_options, kafka_source

    kafka = load_config(args.config).endpoints.kafka
    spark = SparkSession.builder.appName("dbus-sparkcheck").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    with tempfile.TemporaryDirectory(prefix="dbus-sparkcheck-") as checkpoint:
        query = (
            kafka_source(spark.readStream, kafka)
            .option("subscribe", args.source_topic)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr(
                "key",
                """concat('{"source_partition":', partition, ',"source_offset":', offset,
                          ',"change":', CAST(value AS STRING), '}') AS value""",
            )
            .writeStream.format("kafka")
            .options(**kafka_client_options(kafka))
            .queryName("sparkcheck_roundtrip")
            .option("topic", args.sink_topic)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        rows = sum(p["numInputRows"] for p in query.recentProgress)
    spark.stop()
    print(f"sparkcheck: copied {rows} record(s) {args.source_topic} -> {args.sink_topic}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
