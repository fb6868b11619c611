# Apache Kafka in KRaft mode (one process: broker + controller, node 1) from Maven Central jars
# (conf/stack/kafka-pom.xml), run with java. Config: conf/stack/kafka-server.properties;
# logging: conf/stack/kafka-log4j2.xml -> .stack/kafka/log. Health needs kafka-python in $VENV.

KAFKA_HOME=$STACK_HOME/kafka
KAFKA_JARS=$STACK_HOME/jars/kafka
# Fixed cluster id (base64url of "dbus-local-stack"): formatting needs no generated state.
KAFKA_CLUSTER_ID=ZGJ1cy1sb2NhbC1zdGFjaw

KAFKA_JAVA=(java -Xms512m -Xmx1g -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true
  -Dkafka.logs.dir="$KAFKA_HOME/log"
  -Dlog4j2.configurationFile="$STACK_REPO/conf/stack/kafka-log4j2.xml"
  -cp "$KAFKA_JARS/*")

kafka_install() {
  local dir; dir=$(svc_dir kafka)
  mvn_copy "$STACK_REPO/conf/stack/kafka-pom.xml" "$KAFKA_JARS"
  render "$STACK_REPO/conf/stack/kafka-server.properties" "$dir/server.properties" \
    KAFKA_HOME KAFKA_PORT KAFKA_CONTROLLER_PORT
  # Format the log dir once (static controller quorum, so changing ports later needs no re-format).
  if [ ! -f "$dir/data/meta.properties" ]; then
    log "formatting Kafka storage in $dir/data"
    "${KAFKA_JAVA[@]}" kafka.tools.StorageTool format -t "$KAFKA_CLUSTER_ID" -c "$dir/server.properties" \
      >"$dir/log/format.log" 2>&1 || die "Kafka storage format failed; see $dir/log/format.log"
  fi
}

# Serving = the broker answers a metadata request (list topics) on the PLAINTEXT listener.
kafka_health() {
  port_open "$KAFKA_PORT" || return 1
  timeout 10 "$VENV/bin/python" - "$STACK_HOST:$KAFKA_PORT" >/dev/null 2>&1 <<'EOF'
import sys
from kafka import KafkaAdminClient
admin = KafkaAdminClient(bootstrap_servers=sys.argv[1], request_timeout_ms=3000)
admin.list_topics()
admin.close()
EOF
}

kafka_start() {
  kafka_health && return 0
  local dir; dir=$(svc_dir kafka)
  if ! pid_alive "$dir/pid"; then
    port_open "$KAFKA_PORT" && die "port $KAFKA_PORT is taken by something that is not our Kafka"
    start_bg "$dir/pid" "$dir/log/stdout.log" "${KAFKA_JAVA[@]}" kafka.Kafka "$dir/server.properties"
  fi
  wait_for 90 kafka "$dir/log/server.log" running_and "$dir/pid" "$dir/log/server.log" kafka_health
}

kafka_stop() { stop_pid kafka "$KAFKA_HOME/pid" 30; }

kafka_describe() {
  local jar v; jar=$(ls "$KAFKA_JARS"/kafka_2.13-[0-9]*.jar 2>/dev/null | head -n1)
  v=${jar##*/kafka_2.13-}; v=${v%.jar}
  echo "kafka ${v:-?} (KRaft) on $STACK_HOST:$KAFKA_PORT, controller :$KAFKA_CONTROLLER_PORT"
}
