# Prometheus from Debian (the `prometheus` package; its promtool checks DBus's rules), run from its own
# data dir under .stack/prometheus (never the system service). It scrapes DBus's exporter on
# DBUS_EXPORTER_PORT (`dbus metrics exporter`, which the tests and the demo start: docs/monitoring.md)
# and evaluates conf/prometheus/dbus-rules.yml; config rendered from conf/stack/prometheus.yml.

prometheus_url() { echo "http://$STACK_HOST:$PROMETHEUS_PORT"; }

prometheus_install() {
  if ! command -v prometheus >/dev/null; then
    apt_install_server prometheus  # its system service not started (stack/lib.sh)
    if pgrep -x prometheus >/dev/null && ! pid_alive "$STACK_HOME/prometheus/pid"; then
      log "stopping the system Prometheus service started by the package"
      { systemctl disable --now prometheus || service prometheus stop; } >/dev/null 2>&1 || true
    fi
  fi
  command -v curl >/dev/null || apt_install curl
  local dir; dir=$(svc_dir prometheus)
  render "$STACK_REPO/conf/stack/prometheus.yml" "$dir/prometheus.yml" STACK_REPO STACK_HOST DBUS_EXPORTER_PORT
}

prometheus_health() {
  curl -sf --max-time 3 "$(prometheus_url)/-/ready" >/dev/null 2>&1
}

prometheus_start() {
  local dir; dir=$(svc_dir prometheus)
  if prometheus_health; then
    # a changed config or rule file: reloaded in place (--web.enable-lifecycle)
    curl -sf --max-time 10 -XPOST "$(prometheus_url)/-/reload" >/dev/null 2>&1 \
      || die "prometheus: reloading $dir/prometheus.yml failed; see $dir/log/stdout.log"
    return 0
  fi
  if ! pid_alive "$dir/pid"; then
    port_open "$PROMETHEUS_PORT" && die "port $PROMETHEUS_PORT is taken by something that is not our Prometheus"
    start_bg "$dir/pid" "$dir/log/stdout.log" prometheus --config.file="$dir/prometheus.yml" \
      --storage.tsdb.path="$dir/data" --web.listen-address="$STACK_HOST:$PROMETHEUS_PORT" \
      --web.enable-lifecycle --storage.tsdb.retention.time=2d
  fi
  wait_for 60 prometheus "$dir/log/stdout.log" running_and "$dir/pid" "$dir/log/stdout.log" prometheus_health
}

prometheus_stop() {
  stop_pid prometheus "$STACK_HOME/prometheus/pid" 30
}

prometheus_describe() {
  local v; v=$(prometheus --version 2>&1 | head -n 1 | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -n 1)
  echo "prometheus $v at $(prometheus_url), scraping DBus's exporter on $STACK_HOST:$DBUS_EXPORTER_PORT, rules conf/prometheus/dbus-rules.yml"
}
