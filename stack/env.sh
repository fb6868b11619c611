# Ports and folders of the local stack. Every value can be overridden from the environment.
# conf/dbus.yaml names the same endpoints; change both together.
#
# SECURE=1: the secure variant (docs/security.md, The secure stack): its own folder (.stack-secure) and ports
# (2xxxx), every server refusing plaintext and anonymous clients: Kafka on SASL_SSL only (SCRAM-SHA-512), MariaDB
# with require_secure_transport, ZooKeeper with digest authentication enforced, PostgreSQL with TLS only, and
# random passwords in .stack-secure/secrets. conf/dbus-secure.yaml names its endpoints. Both variants can run
# at once; they share the installed binaries, jars and the CA (STACK_CACHE).
STACK_REPO=${STACK_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
SECURE=${SECURE:-0}
STACK_CACHE=${STACK_CACHE:-$STACK_REPO/.stack}        # binaries, jars and the stack's CA, for both variants
if [ "$SECURE" = 1 ]; then p=2; else p=1; fi          # the first digit of every port
if [ "$SECURE" = 1 ]; then
  STACK_HOME=${STACK_HOME:-$STACK_REPO/.stack-secure}
  STACK_DBUS_CONFIG=$STACK_REPO/conf/dbus-secure.yaml   # the DBus configuration of these endpoints
else
  STACK_DBUS_CONFIG=$STACK_REPO/conf/dbus.yaml
  STACK_HOME=${STACK_HOME:-$STACK_REPO/.stack}        # git-ignored: data, logs
fi
STACK_HOST=127.0.0.1
MARIADB_PORT=${MARIADB_PORT:-${p}3306}
POSTGRESQL_PORT=${POSTGRESQL_PORT:-${p}5432}          # the SQL sink's replica target (dbusclient/sink_sql.py)
ZOOKEEPER_PORT=${ZOOKEEPER_PORT:-${p}2181}
KAFKA_PORT=${KAFKA_PORT:-${p}9092}                    # SECURE=1: the SASL_SSL listener, the only one
KAFKA_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-${p}9093}   # SECURE=1: over TLS
KAFKA_SECURE_PORT=${KAFKA_SECURE_PORT:-19094}    # SASL_SSL beside PLAINTEXT (SCRAM, PLAIN; the stack's CA): stack/services/kafka.sh
INFLUXDB_PORT=${INFLUXDB_PORT:-${p}8086}
INFLUXDB_RPC_PORT=${INFLUXDB_RPC_PORT:-${p}8089}      # backup/restore RPC, loopback only (x8088 is the console's)
REGISTRY_PORT=${REGISTRY_PORT:-${p}8081}              # the schema registry (Apicurio, Confluent API)
PROMETHEUS_PORT=${PROMETHEUS_PORT:-${p}9090}          # Prometheus (stack/services/prometheus.sh)
DBUS_EXPORTER_PORT=${DBUS_EXPORTER_PORT:-${p}9091}    # what it scrapes: `dbus metrics exporter` (prometheus.listen)
unset p
SPARK_VERSION=${SPARK_VERSION:-4.2.0}                  # must match pyspark's version in pyproject.toml
VENV=${VENV:-$STACK_REPO/.venv}
