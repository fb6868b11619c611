#!/usr/bin/env bash
# The local stack: bash stack/stack.sh {install|up|down|restart|status} [service...]
# (restart: DOWN_S=5 bash stack/stack.sh restart mariadb; stops, waits DOWN_S seconds, starts, checks health)
# Services, in start order: mariadb postgresql zookeeper kafka registry rsyslog influxdb prometheus spark connect (rsyslog
# ships into Kafka; registry is the schema registry of the avro format; connect only installs jars: tests start
# their own Kafka Connect workers). Each
# lives in stack/services/NAME.sh and defines NAME_install (idempotent, fast when done), NAME_start
# (idempotent: no-op when healthy, waits for health), NAME_stop, NAME_health (exit 0 when serving) and
# NAME_describe (one line: endpoint, version).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/lib.sh"
ALL="mariadb postgresql zookeeper kafka registry rsyslog influxdb prometheus spark connect"
# the secure variant (SECURE=1, stack/env.sh): what `make demo` and the tests of the secure subset need; no
# InfluxDB there: DBus runs on Prometheus alone (conf/dbus-secure.yaml)
if [ "$SECURE" = 1 ]; then ALL="mariadb postgresql zookeeper kafka rsyslog prometheus spark"; fi
for f in "$here"/services/*.sh; do . "$f"; done

cmd=${1:-status}; shift || true
services=${*:-$ALL}
mkdir -p "$STACK_HOME" "$STACK_CACHE"
case "$cmd" in
  install) for s in $services; do "${s}_install"; done ;;
  up)      # Spark's install (its connectors by Ivy, DBus's jar by javac, the drivers' class archives: a minute of
           # CPU on a fresh clone, needing no server) runs beside the servers' installs and starts, which
           # mostly wait; not on the secure stack, whose configuration reads the passwords those installs make.
           bg=""
           if [ "$SECURE" != 1 ] && [[ " $services " == *" spark "* ]]; then
             bg=$STACK_HOME/spark-install.log
             spark_install > "$bg" 2>&1 & bg_pid=$!
             # a server's install that fails ends `up` only once Spark's is done: none is left running
             # into a second `up`, where two would write the same jars
             trap 'wait "$bg_pid" 2>/dev/null || true' EXIT
           fi
           for s in $services; do
             if [ -n "$bg" ] && [ "$s" = spark ]; then
               wait "$bg_pid" || { cat "$bg" >&2; die "spark's install failed (above; $bg)"; }
               cat "$bg" >&2
             else
               "${s}_install"
             fi
             "${s}_start"
           done
           for s in $services; do log "up: $("${s}_describe")"; done ;;
  down)    rev=""; for s in $services; do rev="$s $rev"; done
           for s in $rev; do "${s}_stop"; done ;;
  restart) # stop, stay down DOWN_S seconds (default 5: a transient outage), start and wait for health
           rev=""; for s in $services; do rev="$s $rev"; done
           for s in $rev; do "${s}_stop"; done
           log "restart: $services down for ${DOWN_S:-5}s"
           sleep "${DOWN_S:-5}"
           for s in $services; do "${s}_start"; done
           for s in $services; do log "up: $("${s}_describe")"; done ;;
  status)  rc=0
           for s in $services; do
             if "${s}_health" 2>/dev/null; then echo "$s: up   $("${s}_describe")"; else echo "$s: DOWN"; rc=1; fi
           done
           exit $rc ;;
  *) die "usage: stack.sh {install|up|down|restart|status} [service...]" ;;
esac
