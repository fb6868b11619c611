# Time-series server: a real InfluxDB OSS 1.8.10, built from the Go module proxy with
# `go install github.com/influxdata/influxdb/cmd/influxd@v1.8.10` into .stack/bin (about 2-3 min cold on
# 2 cores; no Rust needed, because 1.8's Flux engine is pure Go). Why 1.8: it is the oldest line that serves
# the InfluxDB 2.x API the project's influxdb-client uses (/api/v2/write, Flux on /api/v2/query, /health),
# and it builds with plain `go install`; Debian's influxdb 1.6 has no /api/v2, and later 1.x (1.11/1.12) would
# also need Flux's Rust libflux built through influxdata/pkg-config (not tried: 1.8.10 already fits).
# The server keeps 1.x semantics: no auth, database `dbus` (created at every start, idempotently), bucket
# "dbus/autogen" (database/retention policy, infinite retention), org ignored ("-"), token "" or "user:pass".
# Heads-up: each start spends ~5 s type-checking Flux's standard library before /health answers.
# Data and logs: .stack/influxdb/{data,log}; config rendered from conf/stack/influxdb.conf.
INFLUXDB_VERSION=${INFLUXDB_VERSION:-1.8.10}
INFLUXDB_DB=${INFLUXDB_DB:-dbus}

influxdb_url() { echo "http://$STACK_HOST:$INFLUXDB_PORT"; }
influxdb_bin() { echo "$STACK_CACHE/bin/influxd"; }

influxdb_install() {
  local bin; bin=$(influxdb_bin)
  if [ -x "$bin" ] && "$bin" version 2>/dev/null | grep -q "InfluxDB v$INFLUXDB_VERSION "; then
    command -v curl >/dev/null || apt_install curl
    return 0
  fi
  command -v curl >/dev/null || apt_install curl
  local go; go=$(command -v go || echo /usr/local/go/bin/go)
  [ -x "$go" ] || die "influxdb: Go is needed to build InfluxDB $INFLUXDB_VERSION (go not in PATH nor /usr/local/go/bin)"
  local dir tmpbin buildlog; dir=$(svc_dir influxdb)
  tmpbin="$STACK_CACHE/bin/.influxd-build"; buildlog="$dir/log/build.log"
  rm -rf "$tmpbin"; mkdir -p "$tmpbin"
  log "influxdb: building InfluxDB OSS $INFLUXDB_VERSION with go install (a few minutes once; log $buildlog)"
  local t0=$SECONDS
  GOBIN="$tmpbin" GOTOOLCHAIN=local GOFLAGS=-buildvcs=false \
    "$go" install -ldflags "-s -w -X main.version=$INFLUXDB_VERSION -X main.branch=${INFLUXDB_VERSION%.*} -X main.commit=go-install" \
    "github.com/influxdata/influxdb/cmd/influxd@v$INFLUXDB_VERSION" >"$buildlog" 2>&1 \
    || { tail -n 20 "$buildlog" >&2; die "influxdb: go install of influxd v$INFLUXDB_VERSION failed; see $buildlog"; }
  mv -f "$tmpbin/influxd" "$bin"; rm -rf "$tmpbin"
  log "influxdb: built $("$bin" version) in $((SECONDS - t0))s"
}

influxdb_health() {
  curl -sf --max-time 3 "$(influxdb_url)/health" 2>/dev/null | grep -q '"name":"influxdb".*"status":"pass"'
}

# _influxdb_running PIDFILE: pid_alive, but a zombie (killed, not yet reaped) counts as gone.
_influxdb_running() {
  pid_alive "$1" && [ "$(ps -o stat= -p "$(cat "$1")" 2>/dev/null | cut -c1)" != Z ]
}

influxdb_start() {
  local dir pidfile logfile conf; dir=$(svc_dir influxdb)
  pidfile="$dir/influxd.pid"; logfile="$dir/log/influxd.log"; conf="$dir/influxdb.conf"
  if ! influxdb_health; then
    if ! _influxdb_running "$pidfile"; then
      port_open "$INFLUXDB_PORT" && die "influxdb: port $INFLUXDB_PORT is taken by another program"
      sed -e "s#@HOME@#$dir#g; s#@PORT@#$INFLUXDB_PORT#g; s#@RPC_PORT@#$INFLUXDB_RPC_PORT#g" \
        "$STACK_REPO/conf/stack/influxdb.conf" > "$conf"
      log "influxdb: starting InfluxDB $INFLUXDB_VERSION on $(influxdb_url) (log $logfile)"
      start_bg "$pidfile" "$logfile" "$(influxdb_bin)" run -config "$conf"
    fi
    wait_for 90 influxdb "$logfile" running_and "$pidfile" "$logfile" influxdb_health
  fi
  # Idempotent in InfluxQL: a no-op when the database exists.
  curl -sf --max-time 10 -XPOST "$(influxdb_url)/query" --data-urlencode "q=CREATE DATABASE \"$INFLUXDB_DB\"" \
    | grep -q '"statement_id":0}' || die "influxdb: could not create database $INFLUXDB_DB; see $logfile"
}

influxdb_stop() {
  stop_pid influxdb "$STACK_HOME/influxdb/influxd.pid" 30
}

influxdb_describe() {
  local v
  v=$(curl -sf --max-time 3 "$(influxdb_url)/health" 2>/dev/null | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')
  echo "InfluxDB OSS ${v:-$INFLUXDB_VERSION} at $(influxdb_url) (influxdb-client: bucket $INFLUXDB_DB/autogen, org -, token \"\"; Flux on /api/v2/query)"
}
