# Spark: pyspark (==$SPARK_VERSION) comes from PyPI into $VENV and runs local[*], so there is no
# daemon. This service resolves the extra jars of conf/stack/spark-pom.xml (Kafka source/sink,
# MariaDB JDBC) and writes $STACK_HOME/jars/spark.jars, one line of comma-separated absolute
# paths:  spark-submit --jars "$(cat .stack/jars/spark.jars)" ...

SPARK_JARS=$STACK_HOME/jars/spark
SPARK_JAR_LIST=$STACK_HOME/jars/spark.jars

_spark_pyspark_jars() { ls -d "$VENV"/lib/python3*/site-packages/pyspark/jars 2>/dev/null | head -n1; }

# artifact name of a jar file: kafka-clients-3.9.1.jar -> kafka-clients
_spark_artifact() { basename "$1" | sed -E 's/-[0-9]+(\.[0-9]+)+.*$//'; }

spark_install() {
  local dir; dir=$(svc_dir spark)
  local pom=$dir/spark-pom.xml
  render "$STACK_REPO/conf/stack/spark-pom.xml" "$pom" SPARK_VERSION
  # Done when the list is newer than the rendered pom (rewritten only when its content changes).
  [ -f "$SPARK_JAR_LIST" ] && [ "$SPARK_JAR_LIST" -nt "$pom" ] && return 0
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
