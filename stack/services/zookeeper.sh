# Apache ZooKeeper (standalone) from Maven Central jars (conf/stack/zookeeper-pom.xml), run with java.
# Config: conf/stack/zoo.cfg; logging: conf/stack/zookeeper-logback.xml -> .stack/zookeeper/log.

ZK_HOME=$STACK_HOME/zookeeper
ZK_JARS=$STACK_CACHE/jars/zookeeper

zookeeper_install() {
  svc_dir zookeeper >/dev/null
  mvn_copy "$STACK_REPO/conf/stack/zookeeper-pom.xml" "$ZK_JARS"
  local ZK_ENFORCE_AUTH=false
  if [ "$SECURE" = 1 ]; then ZK_ENFORCE_AUTH=true; secret zookeeper-password >/dev/null; fi
  render "$STACK_REPO/conf/stack/zoo.cfg" "$ZK_HOME/zoo.cfg" ZK_HOME ZOOKEEPER_PORT \
    ZK_ENFORCE_AUTH
}

# _zookeeper_4lw CMD: send a four-letter word over bash's /dev/tcp and print the answer.
_zookeeper_4lw() {
  timeout 3 bash -c "exec 3<>/dev/tcp/$STACK_HOST/$ZOOKEEPER_PORT && printf $1 >&3 && cat <&3" \
    2>/dev/null || true
}

# Serving = "srvr" reports a mode. ("ruok" is not enough: it answers imok as soon as the port
# listens, even when the server failed to load its database and serves nothing.)
zookeeper_health() { _zookeeper_4lw srvr | grep -q '^Mode: '; }

zookeeper_start() {
  zookeeper_health && return 0
  local dir; dir=$(svc_dir zookeeper)
  if ! pid_alive "$dir/pid"; then
    port_open "$ZOOKEEPER_PORT" && die "port $ZOOKEEPER_PORT is taken by something that is not ZooKeeper"
    start_bg "$dir/pid" "$dir/log/stdout.log" \
      java -Xms64m -Xmx256m -XX:+UseSerialGC \
        -Dzookeeper.log.dir="$dir/log" \
        -Dlogback.configurationFile="$STACK_REPO/conf/stack/zookeeper-logback.xml" \
        -cp "$ZK_JARS/*" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg"
  fi
  wait_for 60 zookeeper "$dir/log/zookeeper.log" \
    running_and "$dir/pid" "$dir/log/stdout.log" zookeeper_health
}

zookeeper_stop() { stop_pid zookeeper "$ZK_HOME/pid" 20; }

zookeeper_describe() {
  local v; v=$(_zookeeper_4lw srvr | sed -n 's/^Zookeeper version: \([^-,]*\).*/\1/p')
  local auth=""; if [ "$SECURE" = 1 ]; then auth=", digest authentication enforced (user dbus)"; fi
  echo "zookeeper ${v:-?} on $STACK_HOST:$ZOOKEEPER_PORT$auth"
}
