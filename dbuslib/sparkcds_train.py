"""What ``dbus spark cds`` runs under spark-submit with ``-XX:ArchiveClassesAtExit`` (dbuslib/sparkcds.py):
the work a stage's driver does at its start, without a server, so that the JVM archives those classes: a
session with the stages' jars, a batch job with a shuffle, a Kafka source and sink planned (no broker is
asked), a streaming query run for two batches, DBus's JVM classes loaded. Arguments: a scratch folder, then
DBus's JVM jar(s)."""

import sys
import time
import zipfile
from pathlib import Path

from pyspark.sql import SparkSession

work = Path(sys.argv[1])
spark = SparkSession.builder.appName("dbus-class-archive").getOrCreate()
spark.range(10_000).selectExpr("id % 7 AS k", "id").groupBy("k").count().collect()
spark.createDataFrame([(1, "a")], ["id", "v"]).write.mode("overwrite").json(str(work / "rows"))
kafka = (
    spark.readStream.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9").option("subscribe", "t")
)
kafka.load().selectExpr("CAST(key AS STRING) AS k", "value").writeStream.format("kafka")
rate = spark.readStream.format("rate").option("rowsPerSecond", 100).load()
query = rate.writeStream.format("noop").option("checkpointLocation", str(work / "ckpt")).start()
while query.lastProgress is None or query.lastProgress["batchId"] < 2:
    time.sleep(0.2)
query.stop()
jvm = spark.sparkContext._jvm
assert jvm is not None
loader = jvm.Thread.currentThread().getContextClassLoader()
for jar in sys.argv[2:]:  # DBus's JVM jar: each of its classes loaded (not initialised)
    with zipfile.ZipFile(jar) as z:
        for entry in z.namelist():
            if entry.endswith(".class") and "$" not in entry:
                try:
                    jvm.Class.forName(entry[: -len(".class")].replace("/", "."), False, loader)
                except Exception:  # a class whose dependencies are not on the class path: not archived
                    pass
spark.stop()
