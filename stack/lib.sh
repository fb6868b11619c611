# Helpers shared by stack/services/*.sh. Sourced by stack.sh after env.sh.
set -o pipefail

# Maven's builds here are short runs (resolving jars, the registry's Quarkus build): its JVM with C1 alone and
# the serial collector takes about half the CPU (the registry's build: 19.6 -> 10.7 CPU-s) for the same
# output. A MAVEN_OPTS of your own is kept.
export MAVEN_OPTS=${MAVEN_OPTS:--XX:TieredStopAtLevel=1 -XX:+UseSerialGC}

log()  { printf '[stack] %s\n' "$*" >&2; }
die()  { printf '[stack] ERROR: %s\n' "$*" >&2; exit 1; }

# svc_dir NAME -> .stack/NAME (created), with data/ and log/ below it.
svc_dir() { mkdir -p "$STACK_HOME/$1/data" "$STACK_HOME/$1/log"; echo "$STACK_HOME/$1"; }

# _started PID: the process's start time (clock ticks since boot, /proc/PID/stat field 22), empty when gone.
_started() {
  local stat; stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  set -- ${stat##*) }  # past "pid (comm) ": field 3 onwards (comm may hold spaces)
  echo "${20}"
}

# pid_alive PIDFILE: true when the pid file names a running process, the one start_bg started. A pid
# recycled after a reboot or a kill -9 is not alive: another process (PIDFILE.start differs) or a thread
# of one (kill -0 accepts a thread's id; its Tgid is another process's pid).
pid_alive() {
  [ -f "$1" ] || return 1
  local pid; pid=$(cat "$1")
  kill -0 "$pid" 2>/dev/null || return 1
  grep -qx "Tgid:[[:space:]]*$pid" "/proc/$pid/status" 2>/dev/null || return 1
  [ ! -f "$1.start" ] || [ "$(_started "$pid")" = "$(cat "$1.start")" ]
}

# port_open PORT: true when something accepts TCP connections on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/$STACK_HOST/$1") 2>/dev/null; }

# start_bg PIDFILE LOGFILE CMD...: start CMD detached (own session), stdout+stderr to LOGFILE.
start_bg() {
  local pidfile=$1 logfile=$2; shift 2
  setsid "$@" >>"$logfile" 2>&1 < /dev/null &
  echo $! > "$pidfile"
  _started $! > "$pidfile.start"
}

# wait_for SECONDS NAME LOGFILE CHECK...: poll CHECK until it succeeds; on timeout fail naming the log.
wait_for() {
  local secs=$1 name=$2 logfile=$3; shift 3
  local deadline=$((SECONDS + secs))
  until "$@"; do
    if [ $SECONDS -ge $deadline ]; then
      tail -n 30 "$logfile" >&2 2>/dev/null || true
      die "$name did not become healthy within ${secs}s; see $logfile"
    fi
    sleep 0.3
  done
}

# running_and PIDFILE LOGFILE CHECK...: CHECK for wait_for that fails at once, naming LOGFILE, when the
# process of PIDFILE has exited (instead of polling a dead server until the timeout).
running_and() {
  local pidfile=$1 logfile=$2; shift 2
  if ! pid_alive "$pidfile"; then
    tail -n 30 "$logfile" >&2 2>/dev/null || true
    die "process of $pidfile exited; see $logfile"
  fi
  "$@"
}

# stop_pid NAME PIDFILE [SECONDS]: TERM the process group, then KILL after SECONDS (default 20).
stop_pid() {
  local name=$1 pidfile=$2 secs=${3:-20}
  pid_alive "$pidfile" || { rm -f "$pidfile" "$pidfile.start"; return 0; }
  local pid; pid=$(cat "$pidfile")
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + secs))
  while kill -0 "$pid" 2>/dev/null; do
    if [ $SECONDS -ge $deadline ]; then
      log "$name did not stop in ${secs}s; killing"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.2
  done
  rm -f "$pidfile" "$pidfile.start"
}

# apt_install PKG...: install Debian packages that are missing (apt-get update once per run).
apt_install() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  if [ -z "${STACK_APT_UPDATED:-}" ]; then apt-get update -qq >/dev/null; STACK_APT_UPDATED=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
}

# apt_install_server PKG...: apt_install, keeping the packages from starting their system service (a
# policy-rc.d answering 101 tells invoke-rc.d not to start anything; only ours is removed again): the
# stack runs its own server from its own folder, on its own port.
apt_install_server() {
  local own_policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d
    own_policy=1
  fi
  apt_install "$@"
  if [ -n "$own_policy" ]; then rm -f /usr/sbin/policy-rc.d; fi
}

# mvn_copy POM OUTDIR: resolve POM's dependencies into OUTDIR once (marker file keeps it idempotent).
mvn_copy() {
  local pom=$1 out=$2
  case $out in /*) ;; *) out=$PWD/$out ;; esac   # Maven resolves relative paths against the pom
  local marker; marker="$out/.resolved-$(sha1sum "$pom" | cut -c1-12)"
  [ -f "$marker" ] && return 0
  log "resolving $(basename "$pom") into $out (Maven, cached in ~/.m2)"
  rm -rf "$out"; mkdir -p "$out"
  mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$out" -DincludeScope=runtime \
    >"$STACK_CACHE/mvn-$(basename "$pom").log" 2>&1 \
    || die "Maven could not resolve $pom; see $STACK_CACHE/mvn-$(basename "$pom").log"
  touch "$marker"
}

# render TEMPLATE OUT VAR...: copy TEMPLATE to OUT replacing each @VAR@ by the value of $VAR.
# OUT is only rewritten when its content changes (keeps mtimes and Maven markers stable).
render() {
  local tpl=$1 out=$2 tmp; shift 2
  tmp=$(mktemp "$out.XXXXXX")
  cp "$tpl" "$tmp"
  local v val
  for v in "$@"; do
    val=${!v}; val=${val//\\/\\\\}; val=${val//|/\\|}; val=${val//&/\\&}
    sed -i "s|@$v@|$val|g" "$tmp"
  done
  if cmp -s "$tmp" "$out"; then rm -f "$tmp"; else mv -f "$tmp" "$out"; fi
}

# tls_install: the stack's CA and the certificates it signs (PEM, PKCS#8 keys), made once with openssl:
# server (Kafka's SASL_SSL listener's and MariaDB's: 127.0.0.1 and localhost), client (mutual TLS);
# kafka-password, the SASL user "dbus"'s. DBus reads them through endpoints.kafka.security and
# sources.<ds>.mysql.tls (docs/security.md).
TLS_HOME=$STACK_CACHE/tls

tls_install() {
  local d=$TLS_HOME name
  [ -f "$d/client.pem" ] && [ -f "$d/kafka-password" ] && return 0
  log "making the stack's CA and certificates in $d (openssl)"
  mkdir -p "$d" && chmod 700 "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=DBus local stack CA" \
    -keyout "$d/ca.key" -out "$d/ca.pem" >"$d/openssl.log" 2>&1 || die "openssl: see $d/openssl.log"
  for name in server client; do
    openssl req -newkey rsa:2048 -nodes -subj "/CN=dbus-stack-$name" -keyout "$d/$name.key" -out "$d/$name.csr" \
      >>"$d/openssl.log" 2>&1 || die "openssl: see $d/openssl.log"
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$d/$name.ext"
    openssl x509 -req -in "$d/$name.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial -days 3650 \
      -extfile "$d/$name.ext" -out "$d/$name.pem" >>"$d/openssl.log" 2>&1 || die "openssl: see $d/openssl.log"
  done
  cat "$d/server.key" "$d/server.pem" >"$d/server-keystore.pem"   # the broker's PEM keystore: key, then chain
  new_password "$d/kafka-password"
  chmod 600 "$d"/*.key "$d/server-keystore.pem"
}

# new_password FILE: 24 random URL-safe characters into FILE (0600).
new_password() { (umask 077; head -c 18 /dev/urandom | base64 | tr '+/' '-_' >"$1"); }

# secret NAME: a password of this stack, made once: 24 random URL-safe characters in $STACK_HOME/secrets/NAME
# (0600). SECURE=1 gives every account one (docs/security.md, The secure stack); conf/dbus-secure.yaml reads
# them with ${file:...}.
SECRETS_HOME=$STACK_HOME/secrets

secret() {
  local f=$SECRETS_HOME/$1
  if [ ! -s "$f" ]; then
    mkdir -p "$SECRETS_HOME" && chmod 700 "$SECRETS_HOME"
    new_password "$f"
  fi
  cat "$f"
}
