# MariaDB from Debian, run from its own datadir and config under .stack/mariadb (never the system
# service). Config: conf/stack/my.cnf; users and databases: conf/stack/mariadb-init.sql.

MARIADB_HOME=$STACK_HOME/mariadb
MARIADB_USER=$(id -un)   # the server runs as whoever runs the stack (root here: --user=root)
# SECURE=1: TCP clients must use TLS (require_secure_transport), and the accounts dbus and dbus_repl get the
# passwords of secrets/mariadb-dbus and secrets/mariadb-repl (set through the socket once the init has run).
if [ "$SECURE" = 1 ]; then MARIADB_REQUIRE_TLS=ON; else MARIADB_REQUIRE_TLS=OFF; fi

_mariadb_cnf()  { echo "$MARIADB_HOME/my.cnf"; }
_mariadb_sock() { echo "$MARIADB_HOME/mariadb.sock"; }
_mariadb_log()  { echo "$MARIADB_HOME/log/mariadb.err"; }

mariadb_install() {
  if ! command -v mariadbd >/dev/null && [ ! -x /usr/sbin/mariadbd ]; then
    apt_install_server mariadb-server mariadb-client  # its system service not started (stack/lib.sh)
    # If a system server got started anyway (systemd hosts), stop and disable it.
    if pgrep -x mariadbd >/dev/null || pgrep -x mysqld >/dev/null; then
      log "stopping the system MariaDB service started by the package"
      { systemctl disable --now mariadb || service mariadb stop; } >/dev/null 2>&1 || true
    fi
  fi
  local dir; dir=$(svc_dir mariadb)
  tls_install
  render "$STACK_REPO/conf/stack/my.cnf" "$(_mariadb_cnf)" MARIADB_PORT MARIADB_HOME MARIADB_USER TLS_HOME \
    MARIADB_REQUIRE_TLS
  if [ ! -d "$dir/data/mysql" ]; then
    log "initialising MariaDB datadir $dir/data"
    rm -rf "$dir/data"; mkdir -p "$dir/data"
    # root@localhost authenticates by unix socket (the OS user running the stack), no password.
    mariadb-install-db --defaults-file="$(_mariadb_cnf)" --user="$MARIADB_USER" --skip-test-db \
      >"$dir/log/install-db.log" 2>&1 || die "mariadb-install-db failed; see $dir/log/install-db.log"
  fi
}

# Root access through the socket (unix_socket authentication).
_mariadb_root() { mariadb --defaults-file="$(_mariadb_cnf)" --socket="$(_mariadb_sock)" -uroot "$@"; }

# _mariadb_password USER: the password of dbus or dbus_repl (SECURE=1: the stack's secret).
_mariadb_password() {
  if [ "$SECURE" != 1 ]; then echo "$1"; elif [ "$1" = dbus ]; then secret mariadb-dbus; else secret mariadb-repl; fi
}

# Serving = answering on the TCP port as the dbus user, over TLS (so the init script has run, too). The
# password goes in the environment (MYSQL_PWD), not on a command line.
mariadb_health() {
  MYSQL_PWD=$(_mariadb_password dbus) mariadb-admin --no-defaults --protocol=TCP -h "$STACK_HOST" -P "$MARIADB_PORT" \
    -u dbus --ssl-ca="$TLS_HOME/ca.pem" --connect-timeout=2 ping >/dev/null 2>&1
}

# Up enough for root over the socket (before the init script has created the dbus user).
_mariadb_socket_up() {
  mariadb-admin --defaults-file="$(_mariadb_cnf)" --socket="$(_mariadb_sock)" -uroot \
    --connect-timeout=2 ping >/dev/null 2>&1
}

# TLS offered (my.cnf's ssl_* files, the stack's CA): a server started from an older my.cnf has not
_mariadb_tls_on() { [ "$(_mariadb_root -N -e 'SELECT @@have_ssl' 2>/dev/null)" = YES ]; }

mariadb_start() {
  local dir; dir=$(svc_dir mariadb)
  local marker; marker="$dir/.init-$(sha1sum "$STACK_REPO/conf/stack/mariadb-init.sql" | cut -c1-12)"
  mariadb_health && [ -f "$marker" ] && _mariadb_tls_on && return 0
  if pid_alive "$dir/pid" && _mariadb_socket_up && ! _mariadb_tls_on; then
    log "mariadb: serving without TLS (started from an older my.cnf): restarting"
    mariadb_stop
  fi
  if ! pid_alive "$dir/pid"; then
    port_open "$MARIADB_PORT" && die "port $MARIADB_PORT is taken by something that is not our MariaDB"
    start_bg "$dir/pid" "$dir/log/stdout.log" \
      mariadbd --defaults-file="$(_mariadb_cnf)" --user="$MARIADB_USER"
  fi
  wait_for 60 mariadb "$(_mariadb_log)" running_and "$dir/pid" "$(_mariadb_log)" _mariadb_socket_up
  # Users/databases: (re)apply the init script when it is new or changed since the last run.
  if [ ! -f "$marker" ]; then
    log "applying conf/stack/mariadb-init.sql"
    _mariadb_root < "$STACK_REPO/conf/stack/mariadb-init.sql" || die "mariadb-init.sql failed"
    rm -f "$dir"/.init-*; touch "$marker"
  fi
  if [ "$SECURE" = 1 ] && [ ! -f "$dir/.secrets-set" ]; then
    log "mariadb: the passwords of dbus and dbus_repl from $SECRETS_HOME"
    local u h
    for u in dbus dbus_repl; do
      for h in 127.0.0.1 localhost; do
        printf "ALTER USER '%s'@'%s' IDENTIFIED BY '%s';\n" "$u" "$h" "$(_mariadb_password "$u")"
      done
    done | _mariadb_root || die "mariadb: setting the passwords failed"
    touch "$dir/.secrets-set"
  fi
  wait_for 20 mariadb "$(_mariadb_log)" mariadb_health
}

mariadb_stop() {
  local dir=$MARIADB_HOME
  if [ -S "$(_mariadb_sock)" ] && pid_alive "$dir/pid"; then
    # bounded: a server whose threads do not exit (a binlog dump busy sending) was seen to keep
    # mariadb-admin waiting for minutes; stop_pid then ends it (InnoDB recovers at the next start)
    timeout 30 mariadb-admin --defaults-file="$(_mariadb_cnf)" --socket="$(_mariadb_sock)" -uroot \
      shutdown >/dev/null 2>&1 || true
  fi
  stop_pid mariadb "$dir/pid" 30
}

mariadb_describe() {
  local v; v=$(mariadbd --version 2>/dev/null | grep -oE 'Ver [0-9.]+' | cut -d' ' -f2)
  if [ "$SECURE" = 1 ]; then
    echo "mariadb $v on $STACK_HOST:$MARIADB_PORT, TLS only (users dbus, dbus_repl: passwords in $SECRETS_HOME)"
  else
    echo "mariadb $v on $STACK_HOST:$MARIADB_PORT (users dbus/dbus, dbus_repl/dbus_repl, dbus_tls/dbus_tls over TLS only)"
  fi
}
