# The log shipper: rsyslog from Debian (packages rsyslog, rsyslog-kafka) as a private rsyslogd, not the
# system's: its own config, pid file and work directory under .stack/rsyslog, no imuxsock/imklog (/dev/log is
# left alone). The config is generated from the DBus configuration (dbus logs shipper-conf: imfile inputs for
# each log source's shipper.files, omkafka to its raw topic; docs/logs.md, The shipper), and rsyslogd is
# restarted when it changed. It needs Kafka (the raw topics are created at start) and the venv's dbus.
# .stack/rsyslog/data: imfile's read positions, disk-assisted queues, failed and oversize lines;
# .stack/rsyslog/log/rsyslogd.log: rsyslogd's own messages; log/stdout.log: what it printed.
# Another instance beside the stack's (tests/integration/test_rsyslog_ship.py runs one per test):
#   RSYSLOG_HOME=/tmp/x RSYSLOG_DBUS_CONFIG=/tmp/x/dbus.yaml bash stack/stack.sh up|restart|down rsyslog
RSYSLOG_HOME=${RSYSLOG_HOME:-$STACK_HOME/rsyslog}
RSYSLOG_DBUS_CONFIG=${RSYSLOG_DBUS_CONFIG:-$STACK_DBUS_CONFIG}   # whose log sources are shipped

# omkafka's librdkafka: Debian 12's (2.0.2) cannot log in with SCRAM to Kafka 4 (it repeats the client's
# nonce in its final message, which Kafka 4 checks strictly: confluentinc/librdkafka#4895, fixed in 2.6.1), so
# the stack's rsyslogd loads the one the confluent-kafka wheel (PyPI) carries, self-contained (OpenSSL
# linked in), through LD_LIBRARY_PATH. Same soname, same ABI.
RSYSLOG_LIBRDKAFKA_WHEEL=confluent-kafka==2.16.1
RSYSLOG_LIBRDKAFKA=$STACK_CACHE/librdkafka

rsyslog_install() {
  apt_install rsyslog rsyslog-kafka
  local dir=$RSYSLOG_LIBRDKAFKA marker; marker="$RSYSLOG_LIBRDKAFKA/.from-$RSYSLOG_LIBRDKAFKA_WHEEL"
  [ -f "$marker" ] && [ -e "$dir/lib/librdkafka.so.1" ] && return 0
  log "rsyslog: librdkafka from the $RSYSLOG_LIBRDKAFKA_WHEEL wheel into $dir (SCRAM with Kafka 4)"
  rm -rf "$dir"; mkdir -p "$dir/lib"
  "$VENV/bin/python" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux_2_28_x86_64 -d "$dir" "$RSYSLOG_LIBRDKAFKA_WHEEL" >"$dir/pip.log" 2>&1 \
    || die "rsyslog: pip download $RSYSLOG_LIBRDKAFKA_WHEEL failed; see $dir/pip.log"
  "$VENV/bin/python" - "$dir" <<'EOF' || die "rsyslog: no librdkafka in the $RSYSLOG_LIBRDKAFKA_WHEEL wheel"
import sys, zipfile
from pathlib import Path

d = Path(sys.argv[1])
wheel = zipfile.ZipFile(next(d.glob("*.whl")))
name = next(n for n in wheel.namelist() if "/librdkafka" in n and ".so" in n)
(d / "lib" / "librdkafka.so.1").write_bytes(wheel.read(name))
EOF
  touch "$marker"
}

# Serving = rsyslogd's own pid file (written once its config is active and the inputs run) names our
# running rsyslogd.
rsyslog_health() {
  local pidfile=$RSYSLOG_HOME/rsyslogd.pid
  [ -f "$pidfile" ] && [ "$(cat "/proc/$(cat "$pidfile")/comm" 2>/dev/null)" = rsyslogd ]
}

# _rsyslog_conf OUT: the generated config into OUT; dies naming the command when it fails.
_rsyslog_conf() {
  # umask 077: the file holds endpoints.kafka.security's SASL password when there is one
  (umask 077; "$VENV/bin/dbus" --config "$RSYSLOG_DBUS_CONFIG" logs shipper-conf --create-topics \
    --work-dir "$RSYSLOG_HOME/data" --log "$RSYSLOG_HOME/log/rsyslogd.log" >"$1") \
    || die "rsyslog: dbus logs shipper-conf --config $RSYSLOG_DBUS_CONFIG failed"
}

rsyslog_start() {
  local dir=$RSYSLOG_HOME conf new
  mkdir -p "$dir/data" "$dir/log"
  conf="$dir/rsyslog.conf"; new="$dir/rsyslog.conf.new"
  _rsyslog_conf "$new"
  if cmp -s "$new" "$conf"; then
    rm -f "$new"
    rsyslog_health && return 0
  else
    LD_LIBRARY_PATH=$RSYSLOG_LIBRDKAFKA/lib rsyslogd -N1 -f "$new" >"$dir/log/check.log" 2>&1 \
      || { cat "$dir/log/check.log" >&2; die "rsyslog: the generated $new does not load; see $dir/log/check.log"; }
    if rsyslog_health; then log "rsyslog: the configuration changed; restarting"; rsyslog_stop; fi
    mv -f "$new" "$conf"
  fi
  pid_alive "$dir/pid" && rsyslog_stop       # running but not healthy: start afresh
  rm -f "$dir/rsyslogd.pid"                  # stale after a kill -9; rsyslogd refuses a live pid in it
  log "rsyslog: starting rsyslogd $(_rsyslog_version) with $conf (log $dir/log/rsyslogd.log)"
  start_bg "$dir/pid" "$dir/log/stdout.log" env LD_LIBRARY_PATH="$RSYSLOG_LIBRDKAFKA/lib" \
    rsyslogd -n -i "$dir/rsyslogd.pid" -f "$conf"
  wait_for 30 rsyslog "$dir/log/stdout.log" running_and "$dir/pid" "$dir/log/stdout.log" rsyslog_health
}

# TERM: rsyslogd sends what it holds for up to 10 s, then saves its queue, its read positions and the
# records Kafka has not acknowledged (10 s more) in data/. With Kafka down it loses the one line it was
# sending (rsyslog 8.2302; docs/logs.md, The shipper): say so.
rsyslog_stop() {
  if pid_alive "$RSYSLOG_HOME/pid" && ! kafka_health; then
    log "rsyslog: Kafka does not answer: rsyslogd saves its queue, but may lose the line it is sending"
  fi
  stop_pid rsyslog "$RSYSLOG_HOME/pid" 60
  rm -f "$RSYSLOG_HOME/rsyslogd.pid"
}

_rsyslog_version() { rsyslogd -v 2>/dev/null | sed -n '1s/^rsyslogd *\([^ ]*\).*/\1/p'; }

rsyslog_describe() {
  local sources
  sources=$(sed -n 's/^# Log sources shipped: \(.*\)\.$/\1/p' "$RSYSLOG_HOME/rsyslog.conf" 2>/dev/null)
  echo "rsyslog $(_rsyslog_version) (imfile -> omkafka), shipping log sources: ${sources:-none}; config $RSYSLOG_HOME/rsyslog.conf"
}
