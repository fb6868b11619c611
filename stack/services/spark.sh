# Spark: pyspark (==$SPARK_VERSION) comes from PyPI into $VENV and runs local[*], so there is no
# daemon. This service resolves the extra jars of conf/stack/spark-pom.xml (Kafka source/sink,
# MariaDB JDBC) and writes $STACK_CACHE/jars/spark.jars, one line of comma-separated absolute
# paths:  spark-submit --jars "$(cat .stack/jars/spark.jars)" ...
# It also builds DBus's own JVM rows decoder (binlog/jvm, dbus.jvm.RowsUdf) into $DBUS_JVM_JAR, rebuilt
# whenever its sources change, and keeps that jar in the list.

SPARK_JARS=$STACK_CACHE/jars/spark
SPARK_JAR_LIST=$STACK_CACHE/jars/spark.jars
DBUS_JVM_JAR=$STACK_CACHE/jars/dbus-jvm.jar

_spark_pyspark_jars() { ls -d "$VENV"/lib/python3*/site-packages/pyspark/jars 2>/dev/null | head -n1; }

# artifact name of a jar file: kafka-clients-3.9.1.jar -> kafka-clients
_spark_artifact() { basename "$1" | sed -E 's/-[0-9]+(\.[0-9]+)+.*$//'; }

spark_install() {
  local pom=$STACK_CACHE/jars/spark-pom.xml   # beside the list: one for both variants of the stack
  mkdir -p "$STACK_CACHE/jars"
  render "$STACK_REPO/conf/stack/spark-pom.xml" "$pom" SPARK_VERSION
  # Maven jars: done when the list is newer than the rendered pom (rewritten only when its content changes).
  [ -f "$SPARK_JAR_LIST" ] && [ "$SPARK_JAR_LIST" -nt "$pom" ] || _spark_maven_jars "$pom"
  # Our decoder jar: build.sh is a no-op when the jar is newer than every source.
  bash "$STACK_REPO/binlog/jvm/build.sh" "$DBUS_JVM_JAR" || die "building $DBUS_JVM_JAR failed"
  _spark_listed "$DBUS_JVM_JAR" || _spark_list_add "$DBUS_JVM_JAR"
}

# true when the jar list names this jar
_spark_listed() { [ -f "$SPARK_JAR_LIST" ] && tr ',' '\n' < "$SPARK_JAR_LIST" | grep -qxF "$1"; }

# append a jar to the list (written to a temporary file and renamed: readers never see half a list)
_spark_list_add() {
  local tmp=$SPARK_JAR_LIST.tmp.$$
  { tr ',' '\n' < "$SPARK_JAR_LIST" | grep -v '^$'; echo "$1"; } | paste -sd, - > "$tmp"
  mv -f "$tmp" "$SPARK_JAR_LIST"
  log "spark jars: added $(basename "$1")"
}

_spark_maven_jars() {
  local pom=$1
  local shipped; shipped=$(_spark_pyspark_jars)
  [ -n "$shipped" ] || die "pyspark is not installed in $VENV (create the venv first)"
  rm -rf "$SPARK_JAR_LIST" "$SPARK_JARS"   # rebuild from scratch (Maven caches in ~/.m2)
  mvn_copy "$pom" "$SPARK_JARS"
  # Drop what pyspark already has (any version): duplicate classes on the classpath break Spark.
  local have f; have=$(for f in "$shipped"/*.jar; do _spark_artifact "$f"; done | sort -u)
  for f in "$SPARK_JARS"/*.jar; do
    if grep -qxF "$(_spark_artifact "$f")" <<<"$have"; then rm -f "$f"; fi
  done
  ls "$SPARK_JARS"/*.jar | paste -sd, - > "$SPARK_JAR_LIST"
  log "spark jars: $(tr ',' '\n' < "$SPARK_JAR_LIST" | xargs -n1 basename | tr '\n' ' ')"
}

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
