"""A stage killed while its first batch's offsets were being written starts again (Spark 4's empty-checkpoint
check would refuse it for ever: dbuslib.spark.VERIFY_EMPTY_CHECKPOINT)."""

from __future__ import annotations

from dbuslib import spark as dspark


def test_a_query_starts_over_the_temporary_file_a_kill_left_in_offsets(spark, tmp_path):
    checkpoint = tmp_path / "checkpoint"
    (checkpoint / "offsets").mkdir(parents=True)
    # what FileSystemBasedCheckpointFileManager leaves when the process dies before its rename to offsets/0
    (checkpoint / "offsets" / ".0.5f0c4a1e-3b7d-4e8a-9c1f-2d6b8e0a7c35.tmp").write_text("v1\n")
    assert spark.conf.get(dspark.VERIFY_EMPTY_CHECKPOINT) == "false"
    query = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 10)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(once=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert (checkpoint / "offsets" / "0").exists() and (checkpoint / "commits" / "0").exists()
