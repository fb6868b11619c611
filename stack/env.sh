# Ports and folders of the local stack. Every value can be overridden from the environment.
# conf/dbus.yaml names the same endpoints; change both together.
STACK_REPO=${STACK_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
STACK_HOME=${STACK_HOME:-$STACK_REPO/.stack}          # git-ignored: data, logs, jars, binaries
STACK_HOST=127.0.0.1
MARIADB_PORT=${MARIADB_PORT:-13306}
POSTGRESQL_PORT=${POSTGRESQL_PORT:-15432}           # the SQL sink's replica target (dbusclient/sink_sql.py)
ZOOKEEPER_PORT=${ZOOKEEPER_PORT:-12181}
KAFKA_PORT=${KAFKA_PORT:-19092}
KAFKA_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-19093}
KAFKA_SECURE_PORT=${KAFKA_SECURE_PORT:-19094}    # SASL_SSL (SCRAM, PLAIN; the CA of .stack/tls): stack/services/kafka.sh
INFLUXDB_PORT=${INFLUXDB_PORT:-18086}
REGISTRY_PORT=${REGISTRY_PORT:-18081}             # the schema registry (Apicurio, Confluent API)
PROMETHEUS_PORT=${PROMETHEUS_PORT:-19090}         # Prometheus (stack/services/prometheus.sh)
DBUS_EXPORTER_PORT=${DBUS_EXPORTER_PORT:-19091}   # what it scrapes: `dbus metrics exporter` (prometheus.listen)
SPARK_VERSION=${SPARK_VERSION:-4.2.0}                  # must match pyspark's version in pyproject.toml
VENV=${VENV:-$STACK_REPO/.venv}
