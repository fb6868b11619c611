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
  tls_install
  KAFKA_PASSWORD=$(cat "$TLS_HOME/kafka-password") \
    render "$STACK_REPO/conf/stack/kafka-server.properties" "$dir/server.properties" \
    KAFKA_HOME KAFKA_PORT KAFKA_CONTROLLER_PORT KAFKA_SECURE_PORT KAFKA_PASSWORD TLS_HOME
  # Format the log dir once (static controller quorum, so changing ports later needs no re-format).
  if [ ! -f "$dir/data/meta.properties" ]; then
    log "formatting Kafka storage in $dir/data"
    "${KAFKA_JAVA[@]}" kafka.tools.StorageTool format -t "$KAFKA_CLUSTER_ID" -c "$dir/server.properties" \
      >"$dir/log/format.log" 2>&1 || die "Kafka storage format failed; see $dir/log/format.log"
  fi
}

# Serving = the broker answers a metadata request (list topics) on the PLAINTEXT listener, and on the
# SASL_SSL one as user dbus (SCRAM-SHA-512, the stack's CA). The SCRAM credentials live in the cluster's
# metadata: set through the PLAINTEXT listener when that login fails (a fresh cluster, a new password).
kafka_health() {
  port_open "$KAFKA_PORT" && port_open "$KAFKA_SECURE_PORT" || return 1
  timeout 30 "$VENV/bin/python" - "$STACK_HOST:$KAFKA_PORT" "$STACK_HOST:$KAFKA_SECURE_PORT" "$TLS_HOME" \
    >/dev/null 2>&1 <<'EOF'
import sys
from pathlib import Path

from kafka import KafkaAdminClient
from kafka.admin import ScramMechanism, UserScramCredentialUpsertion

plain, secure, tls = sys.argv[1], sys.argv[2], Path(sys.argv[3])
password = (tls / "kafka-password").read_text().strip()
admin = KafkaAdminClient(bootstrap_servers=plain, request_timeout_ms=3000)
admin.list_topics()


def secure_login() -> bool:
    try:
        KafkaAdminClient(
            bootstrap_servers=secure, security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username="dbus", sasl_plain_password=password, ssl_cafile=str(tls / "ca.pem"),
            request_timeout_ms=5000, bootstrap_timeout_ms=5000,
        ).close()
        return True
    except Exception:
        return False


if not secure_login():
    for m in (ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256):  # one per request: Kafka's rule
        failed = admin.alter_user_scram_credentials([UserScramCredentialUpsertion("dbus", m, password, 8192)])
        if failed.get("dbus"):
            sys.exit(f"SCRAM credentials of dbus: {failed['dbus']}")
    sys.exit(0 if secure_login() else 1)
admin.close()
EOF
}

kafka_start() {
  kafka_health && return 0
  local dir; dir=$(svc_dir kafka)
  if pid_alive "$dir/pid" && port_open "$KAFKA_PORT" && ! port_open "$KAFKA_SECURE_PORT"; then
    log "kafka: serving without its SASL_SSL listener (started from an older server.properties): restarting"
    kafka_stop
  fi
  if ! pid_alive "$dir/pid"; then
    port_open "$KAFKA_PORT" && die "port $KAFKA_PORT is taken by something that is not our Kafka"
    port_open "$KAFKA_SECURE_PORT" && die "port $KAFKA_SECURE_PORT is taken by something that is not our Kafka"
    start_bg "$dir/pid" "$dir/log/stdout.log" "${KAFKA_JAVA[@]}" kafka.Kafka "$dir/server.properties"
  fi
  wait_for 90 kafka "$dir/log/server.log" running_and "$dir/pid" "$dir/log/server.log" kafka_health
}

kafka_stop() { stop_pid kafka "$KAFKA_HOME/pid" 30; }

kafka_describe() {
  local jar v; jar=$(ls "$KAFKA_JARS"/kafka_2.13-[0-9]*.jar 2>/dev/null | head -n1)
  v=${jar##*/kafka_2.13-}; v=${v%.jar}
  echo "kafka ${v:-?} (KRaft) on $STACK_HOST:$KAFKA_PORT, SASL_SSL :$KAFKA_SECURE_PORT, controller :$KAFKA_CONTROLLER_PORT"
}
