# Spark: pyspark (==$SPARK_VERSION) comes from PyPI into $VENV and runs local[*], so there is no
# daemon. This service resolves Spark's connectors (Kafka source/sink, MariaDB JDBC: dbuslib/connectors.py,
# the one home of their coordinates, also what a pip install of DBus uses) into $SPARK_JARS and writes
# $STACK_CACHE/jars/spark.jars, one line of comma-separated absolute paths:
#   spark-submit --jars "$(cat .stack/jars/spark.jars)" ...
# It also builds DBus's own JVM classes (binlog/jvm and each stage's <stage>/jvm, dbus.jvm.*) into $DBUS_JVM_JAR, rebuilt
# whenever its sources change, and keeps that jar in the list, and the archives of the classes a Spark
# driver loads (`dbus spark cds`: a stage starts in about half the time; docs/performance.md).

SPARK_JARS=$STACK_CACHE/jars/spark
SPARK_JAR_LIST=$STACK_CACHE/jars/spark.jars
DBUS_JVM_JAR=$STACK_CACHE/jars/dbus-jvm.jar

spark_install() {
  mkdir -p "$STACK_CACHE/jars"
  # The connectors: resolved once (Ivy's cache under $STACK_CACHE), kept while their coordinates hold.
  local connectors
  connectors=$(cd "$STACK_REPO" && DBUS_CACHE=$STACK_CACHE "$VENV/bin/python" -m dbuslib.connectors \
    --out "$SPARK_JARS") || die "resolving Spark's connectors into $SPARK_JARS failed"
  # Our decoder jar: build.sh is a no-op when the jar is newer than every source.
  bash "$STACK_REPO/binlog/jvm/build.sh" "$DBUS_JVM_JAR" || die "building $DBUS_JVM_JAR failed"
  _spark_write_list "$connectors,$DBUS_JVM_JAR"
  # The drivers' class archives (dbuslib/sparkcds.py), made once per JVM, pyspark and JVM options.
  (cd "$STACK_REPO" && "$VENV/bin/dbus" --config "$STACK_DBUS_CONFIG" spark cds >/dev/null) \
    || die "making the Spark drivers' class archives failed (dbus spark cds)"
}

# the list, rewritten only when it changes (a temporary file renamed: readers never see half a list)
_spark_write_list() {
  [ "$(cat "$SPARK_JAR_LIST" 2>/dev/null)" = "$1" ] && return 0
  local tmp=$SPARK_JAR_LIST.tmp.$$
  echo "$1" > "$tmp"
  mv -f "$tmp" "$SPARK_JAR_LIST"
  log "spark jars: $(tr ',' '\n' < "$SPARK_JAR_LIST" | xargs -n1 basename | tr '\n' ' ')"
}

# true when the jar list names this jar
_spark_listed() { [ -f "$SPARK_JAR_LIST" ] && tr ',' '\n' < "$SPARK_JAR_LIST" | grep -qxF "$1"; }

spark_start() { :; }   # local[*]: nothing to start
spark_stop()  { :; }

spark_health() {
  [ -s "$SPARK_JAR_LIST" ] || return 1
  [ -f "$DBUS_JVM_JAR" ] && _spark_listed "$DBUS_JVM_JAR" || return 1
  local jar jars; IFS=, read -r -a jars < "$SPARK_JAR_LIST"
  for jar in "${jars[@]}"; do [ -f "$jar" ] || return 1; done
  "$VENV/bin/python" -c 'import pyspark' 2>/dev/null
}

spark_describe() {
  local v n
  v=$("$VENV/bin/python" -c 'import pyspark; print(pyspark.__version__)' 2>/dev/null)
  n=$(tr ',' '\n' < "$SPARK_JAR_LIST" 2>/dev/null | grep -c .)
  echo "pyspark ${v:-?} local[*], $n extra jars in $SPARK_JAR_LIST"
}
