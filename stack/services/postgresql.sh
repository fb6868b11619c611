# PostgreSQL from Debian (the `postgresql` package), run from its own data dir under .stack/postgresql
# (never the system cluster of pg_ctlcluster). The replica target of `dbus replicate` and the SQL sink's
# tests (dbusclient/sink_sql.py). Settings are given on the server's command line (below); the account
# dbus/dbus (CREATEDB) and the database dbus are made once, after initdb.

# PostgreSQL refuses to run as root: when the stack runs as root, the server runs as the package's
# `postgres` user, which owns the data dir. When that user cannot reach $STACK_HOME (a checkout under a
# private folder), .stack/postgresql is a symlink to /var/lib/postgresql/dbus-stack-<hash of STACK_HOME>,
# and the server is given the resolved paths.
POSTGRESQL_HOME=$(readlink -f "$STACK_HOME/postgresql" 2>/dev/null || echo "$STACK_HOME/postgresql")

_pg_bin() {  # the newest installed major version's bin/ (Debian installs them side by side)
  local d; d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$d" ] && echo "$d"
}

_pg_owner() { if [ "$(id -u)" = 0 ]; then echo postgres; else id -un; fi; }

# _pg_as CMD...: run CMD as the server's owner (setpriv execs it: a pid file names the server itself).
_pg_as() {
  if [ "$(id -u)" = 0 ]; then setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"; else "$@"; fi
}
_pg_as_argv() {  # the same prefix as words, for start_bg (which cannot run a shell function)
  if [ "$(id -u)" = 0 ]; then echo setpriv --reuid=postgres --regid=postgres --init-groups --; fi
}

postgresql_install() {
  if [ -z "$(_pg_bin)" ]; then
    apt_install_server postgresql  # its system service not started (stack/lib.sh)
    if pgrep -x postgres >/dev/null && ! pid_alive "$POSTGRESQL_HOME/pid"; then
      log "stopping the system PostgreSQL service started by the package"
      { systemctl disable --now postgresql || service postgresql stop; } >/dev/null 2>&1 || true
    fi
  fi
  [ -n "$(_pg_bin)" ] || die "no PostgreSQL under /usr/lib/postgresql after installing the package"
  _pg_place
  local dir=$POSTGRESQL_HOME
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    log "initialising PostgreSQL data dir $dir/data"
    rm -rf "$dir/data"; mkdir -p "$dir/data"
    chown -R "$(_pg_owner)" "$dir"; chmod 700 "$dir/data"
    # socket: trust (the owner, for the set-up below); TCP: passwords (scram-sha-256)
    _pg_as "$(_pg_bin)/initdb" -D "$dir/data" -U postgres -E UTF8 --locale=C.UTF-8 \
      --auth-local=trust --auth-host=scram-sha-256 >"$dir/log/initdb.log" 2>&1 \
      || die "initdb failed; see $dir/log/initdb.log"
  fi
  # TLS with the stack's CA: the server's own copies (the server's user must own its key, 0600)
  tls_install
  mkdir -p "$dir/tls"
  cp "$TLS_HOME/server.pem" "$TLS_HOME/server.key" "$TLS_HOME/ca.pem" "$dir/tls/"
  chmod 600 "$dir/tls/server.key"
  # dbus_tls may connect over TLS only (SECURE=1: every account): plaintext connections are rejected before
  # any password
  local who=dbus_tls; if [ "$SECURE" = 1 ]; then who=all; fi
  if ! grep -q "^hostnossl all $who" "$dir/data/pg_hba.conf"; then
    { echo "hostnossl all $who all reject"; cat "$dir/data/pg_hba.conf"; } >"$dir/data/pg_hba.conf.new"
    mv -f "$dir/data/pg_hba.conf.new" "$dir/data/pg_hba.conf"
  fi
  chown -R "$(_pg_owner)" "$dir"
}

# TLS on (ssl=on from the command line below): a server started by an older version of this file is not
_pg_tls_on() { [ "$(_pg_psql -d postgres -tAc 'SHOW ssl' 2>/dev/null)" = on ]; }

# _pg_place: make .stack/postgresql (data/, log/) where the server's user can reach it; set POSTGRESQL_HOME.
_pg_place() {
  local link=$STACK_HOME/postgresql
  if [ "$(id -u)" = 0 ] && [ ! -L "$link" ] && [ ! -f "$link/data/PG_VERSION" ] \
      && ! _pg_as test -x "$STACK_HOME"; then
    local real; real=/var/lib/postgresql/dbus-stack-$(echo "$STACK_HOME" | sha1sum | cut -c1-12)
    log "user postgres cannot reach $STACK_HOME: PostgreSQL's data dir is $real ($link links to it)"
    rm -rf "$real" "$link"  # a missing link means a new stack (make clean-stack removes the link)
    mkdir -p "$real"; ln -s "$real" "$link"
  fi
  svc_dir postgresql >/dev/null
  POSTGRESQL_HOME=$(readlink -f "$link")
}

_pg_psql() {
  _pg_as "$(_pg_bin)/psql" -X -q -v ON_ERROR_STOP=1 -h "$POSTGRESQL_HOME" -p "$POSTGRESQL_PORT" -U postgres "$@"
}

# Serving = accepting connections on the TCP port (pg_isready), and the dbus account made.
postgresql_health() {
  "$(_pg_bin)/pg_isready" -q -h "$STACK_HOST" -p "$POSTGRESQL_PORT" -t 2 >/dev/null 2>&1 \
    && [ -f "$POSTGRESQL_HOME/.init-done" ] && [ -f "$POSTGRESQL_HOME/.init-tls" ]
}

_pg_socket_up() { "$(_pg_bin)/pg_isready" -q -h "$POSTGRESQL_HOME" -p "$POSTGRESQL_PORT" -t 2 >/dev/null 2>&1; }

postgresql_start() {
  _pg_place
  local dir=$POSTGRESQL_HOME
  postgresql_health && _pg_tls_on && return 0
  if pid_alive "$dir/pid" && _pg_socket_up && ! _pg_tls_on; then
    log "postgresql: serving without TLS (started by an older stack/services/postgresql.sh): restarting"
    postgresql_stop
  fi
  if ! pid_alive "$dir/pid"; then
    port_open "$POSTGRESQL_PORT" && die "port $POSTGRESQL_PORT is taken by something that is not our PostgreSQL"
    chown "$(_pg_owner)" "$dir/log"
    # synchronous_commit=off: a commit does not wait for the WAL flush (a crash may lose the last
    # moments, never corrupt), as MariaDB's innodb_flush_log_at_trx_commit=2 here
    # shellcheck disable=SC2046
    start_bg "$dir/pid" "$dir/log/stdout.log" $(_pg_as_argv) "$(_pg_bin)/postgres" -D "$dir/data" \
      -p "$POSTGRESQL_PORT" -c listen_addresses="$STACK_HOST" -c unix_socket_directories="$dir" \
      -c logging_collector=off -c log_destination=stderr -c shared_buffers=128MB \
      -c synchronous_commit=off -c max_connections=100 -c ssl=on -c ssl_cert_file="$dir/tls/server.pem" \
      -c ssl_key_file="$dir/tls/server.key" -c ssl_ca_file="$dir/tls/ca.pem"
  fi
  wait_for 30 postgresql "$dir/log/stdout.log" running_and "$dir/pid" "$dir/log/stdout.log" _pg_socket_up
  if [ ! -f "$dir/.init-done" ] || [ ! -f "$dir/.init-tls" ]; then
    log "creating the PostgreSQL accounts dbus and dbus_tls (TLS only) and the database dbus"
    _pg_psql -d postgres <<'SQL' || die "creating the dbus accounts failed"
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'dbus') THEN
    CREATE ROLE dbus LOGIN CREATEDB PASSWORD 'dbus';
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'dbus_tls') THEN
    CREATE ROLE dbus_tls LOGIN CREATEDB PASSWORD 'dbus_tls';
  END IF;
END $$;
SQL
    if ! _pg_psql -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'dbus'" | grep -q 1; then
      _pg_psql -d postgres -c "CREATE DATABASE dbus OWNER dbus" || die "creating the database dbus failed"
    fi
    touch "$dir/.init-done" "$dir/.init-tls"
  fi
  if [ "$SECURE" = 1 ] && [ ! -f "$dir/.secrets-set" ]; then
    log "postgresql: the password of dbus from $SECRETS_HOME/postgresql-dbus"
    printf "ALTER ROLE dbus PASSWORD '%s';\n" "$(secret postgresql-dbus)" | _pg_psql -d postgres \
      || die "postgresql: setting the password of dbus failed"
    touch "$dir/.secrets-set"
  fi
  if [ "$SECURE" = 1 ]; then  # libpq's password file (PGPASSFILE) for clients of the secure stack
    (umask 077; echo "$STACK_HOST:$POSTGRESQL_PORT:*:dbus:$(secret postgresql-dbus)" >"$SECRETS_HOME/pgpass")
  fi
  wait_for 20 postgresql "$dir/log/stdout.log" postgresql_health
}

postgresql_stop() {
  local dir=$POSTGRESQL_HOME
  if pid_alive "$dir/pid" && [ -f "$dir/data/postmaster.pid" ]; then
    # fast: ends the sessions (smart, the TERM default, waits for every client to leave)
    _pg_as "$(_pg_bin)/pg_ctl" -D "$dir/data" -m fast -t 30 stop >/dev/null 2>&1 || true
  fi
  stop_pid postgresql "$dir/pid" 30
}

postgresql_describe() {
  local v; v=$("$(_pg_bin)/postgres" --version 2>/dev/null | grep -oE '[0-9]+\.[0-9]+' | head -n 1)
  if [ "$SECURE" = 1 ]; then
    echo "postgresql $v on $STACK_HOST:$POSTGRESQL_PORT, TLS only (user dbus: password in $SECRETS_HOME; database dbus)"
  else
    echo "postgresql $v on $STACK_HOST:$POSTGRESQL_PORT (users dbus/dbus, dbus_tls/dbus_tls over TLS only; database dbus)"
  fi
}
