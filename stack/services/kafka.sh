# Apache Kafka in KRaft mode (one process: broker + controller, node 1) from Maven Central jars
# (conf/stack/kafka-pom.xml), run with java. Config: conf/stack/kafka-server.properties;
# logging: conf/stack/kafka-log4j2.xml -> .stack/kafka/log. Health needs kafka-python in $VENV.

KAFKA_HOME=$STACK_HOME/kafka
KAFKA_JARS=$STACK_CACHE/jars/kafka
# Fixed cluster id (base64url of "dbus-local-stack"): formatting needs no generated state.
KAFKA_CLUSTER_ID=ZGJ1cy1sb2NhbC1zdGFjaw

KAFKA_JAVA=(java -Xms512m -Xmx1g -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true
  -Dkafka.logs.dir="$KAFKA_HOME/log"
  -Dlog4j2.configurationFile="$STACK_REPO/conf/stack/kafka-log4j2.xml"
  -cp "$KAFKA_JARS/*")

# The listeners: PLAINTEXT (KAFKA_PORT) beside SASL_SSL (KAFKA_SECURE_PORT); SECURE=1: SASL_SSL only
# (KAFKA_PORT), the controller's listener over TLS, the user dbus's password in secrets/kafka-password.
if [ "$SECURE" = 1 ]; then
  KAFKA_LISTENERS=SASL_SSL://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
  KAFKA_ADVERTISED=SASL_SSL://127.0.0.1:$KAFKA_PORT
  KAFKA_PROTOCOL_MAP=SASL_SSL:SASL_SSL,CONTROLLER:SSL
  KAFKA_INTER_BROKER=SASL_SSL
  KAFKA_SASL_PORT=$KAFKA_PORT
  KAFKA_PASSWORD_FILE=$SECRETS_HOME/kafka-password
else
  KAFKA_LISTENERS=PLAINTEXT://127.0.0.1:$KAFKA_PORT,SASL_SSL://127.0.0.1:$KAFKA_SECURE_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
  KAFKA_ADVERTISED=PLAINTEXT://127.0.0.1:$KAFKA_PORT,SASL_SSL://127.0.0.1:$KAFKA_SECURE_PORT
  KAFKA_PROTOCOL_MAP=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
  KAFKA_INTER_BROKER=PLAINTEXT
  KAFKA_SASL_PORT=$KAFKA_SECURE_PORT
  KAFKA_PASSWORD_FILE=$TLS_HOME/kafka-password
fi

kafka_install() {
  local dir; dir=$(svc_dir kafka)
  mvn_copy "$STACK_REPO/conf/stack/kafka-pom.xml" "$KAFKA_JARS"
  tls_install
  if [ "$SECURE" = 1 ]; then secret kafka-password >/dev/null; fi
  KAFKA_PASSWORD=$(cat "$KAFKA_PASSWORD_FILE") KAFKA_BROKER_PASSWORD=$(secret kafka-broker-password) \
    render "$STACK_REPO/conf/stack/kafka-server.properties" "$dir/server.properties" \
    KAFKA_HOME KAFKA_CONTROLLER_PORT KAFKA_LISTENERS KAFKA_ADVERTISED KAFKA_PROTOCOL_MAP KAFKA_INTER_BROKER \
    KAFKA_PASSWORD KAFKA_BROKER_PASSWORD TLS_HOME
  # Format the log dir once (static controller quorum, so changing ports later needs no re-format).
  # SECURE=1: with the SCRAM credentials of dbus and broker, since no listener takes a client without them
  # (arguments of this one short command: kafka-storage takes them no other way).
  if [ ! -f "$dir/data/meta.properties" ]; then
    log "formatting Kafka storage in $dir/data"
    local scram=() pw bpw
    if [ "$SECURE" = 1 ]; then
      pw=$(cat "$KAFKA_PASSWORD_FILE"); bpw=$(secret kafka-broker-password)
      scram=(--add-scram "SCRAM-SHA-512=[name=dbus,password=$pw]" --add-scram "SCRAM-SHA-256=[name=dbus,password=$pw]"
             --add-scram "SCRAM-SHA-512=[name=broker,password=$bpw]")
    fi
    "${KAFKA_JAVA[@]}" kafka.tools.StorageTool format -t "$KAFKA_CLUSTER_ID" -c "$dir/server.properties" "${scram[@]}" \
      >"$dir/log/format.log" 2>&1 || die "Kafka storage format failed; see $dir/log/format.log"
  fi
}

# Serving = the broker answers a metadata request (list topics) on the PLAINTEXT listener, and on the
# SASL_SSL one as user dbus (SCRAM-SHA-512, the stack's CA). The SCRAM credentials live in the cluster's
# metadata: set through the PLAINTEXT listener when that login fails (a fresh cluster, a new password).
# SECURE=1: the SASL_SSL login alone (its credentials were given at format).
kafka_health() {
  local plain=$STACK_HOST:$KAFKA_PORT
  if [ "$SECURE" = 1 ]; then plain=""; fi
  { [ -z "$plain" ] || port_open "$KAFKA_PORT"; } && port_open "$KAFKA_SASL_PORT" || return 1
  timeout 30 "$VENV/bin/python" - "$plain" "$STACK_HOST:$KAFKA_SASL_PORT" "$TLS_HOME/ca.pem" "$KAFKA_PASSWORD_FILE" \
    >/dev/null 2>&1 <<'EOF'
import sys
from pathlib import Path

from kafka import KafkaAdminClient
from kafka.admin import ScramMechanism, UserScramCredentialUpsertion

plain, secure, ca, password = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4]).read_text().strip()


def secure_login() -> bool:
    try:
        KafkaAdminClient(
            bootstrap_servers=secure, security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username="dbus", sasl_plain_password=password, ssl_cafile=ca,
            request_timeout_ms=5000, bootstrap_timeout_ms=5000,
        ).close()
        return True
    except Exception:
        return False


if not plain:
    sys.exit(0 if secure_login() else 1)
admin = KafkaAdminClient(bootstrap_servers=plain, request_timeout_ms=3000)
admin.list_topics()
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
  if [ "$SECURE" != 1 ] && pid_alive "$dir/pid" && port_open "$KAFKA_PORT" && ! port_open "$KAFKA_SECURE_PORT"; then
    log "kafka: serving without its SASL_SSL listener (started from an older server.properties): restarting"
    kafka_stop
  fi
  if ! pid_alive "$dir/pid"; then
    port_open "$KAFKA_PORT" && die "port $KAFKA_PORT is taken by something that is not our Kafka"
    port_open "$KAFKA_SASL_PORT" && die "port $KAFKA_SASL_PORT is taken by something that is not our Kafka"
    start_bg "$dir/pid" "$dir/log/stdout.log" "${KAFKA_JAVA[@]}" kafka.Kafka "$dir/server.properties"
  fi
  wait_for 90 kafka "$dir/log/server.log" running_and "$dir/pid" "$dir/log/server.log" kafka_health
}

kafka_stop() { stop_pid kafka "$KAFKA_HOME/pid" 30; }

kafka_describe() {
  local jar v; jar=$(ls "$KAFKA_JARS"/kafka_2.13-[0-9]*.jar 2>/dev/null | head -n1)
  v=${jar##*/kafka_2.13-}; v=${v%.jar}
  if [ "$SECURE" = 1 ]; then
    echo "kafka ${v:-?} (KRaft) on $STACK_HOST:$KAFKA_PORT, SASL_SSL only (SCRAM-SHA-512, user dbus), controller :$KAFKA_CONTROLLER_PORT over TLS"
  else
    echo "kafka ${v:-?} (KRaft) on $STACK_HOST:$KAFKA_PORT, SASL_SSL :$KAFKA_SECURE_PORT, controller :$KAFKA_CONTROLLER_PORT"
  fi
}
