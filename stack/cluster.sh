#!/usr/bin/env bash
# A local Spark standalone cluster for integration tests and benchmarks, one Worker "on another machine":
#   bash stack/cluster.sh {up|down|status|master-url|executor-env|kill-worker N|start-worker N}
#
# - up: the executors' Python environment (executor-env), a Master on 127.0.0.1:$CLUSTER_MASTER_PORT
#   (web UI :$CLUSTER_UI_PORT, whose /json lists workers and apps) and two Workers, each with
#   $CLUSTER_WORKER_CORES cores (more than the machine has on purpose: real-time mode needs one task slot
#   per Kafka partition, and its tasks mostly wait) and $CLUSTER_WORKER_MEMORY. Idempotent: a no-op when
#   healthy. Prints the master URL on stdout.
# - Worker 1 runs here, from the venv's pyspark (SPARK_HOME = the pyspark package dir).
# - Worker 2 runs in its own mount (and UTS) namespace, as on a second machine: the checkout
#   ($STACK_REPO), $STACK_HOME and so the venv are hidden under empty tmpfs mounts, its SPARK_HOME is the
#   same pyspark dir bind-mounted at $CLUSTER_SPARK_HOME2, its hostname is dbus-worker2, and its work dir
#   and log are under $CLUSTER_OUTSIDE (outside the checkout).
# - Neither Worker has PYSPARK_PYTHON, VIRTUAL_ENV, PYTHONPATH or the venv's bin/ on PATH: executors
#   get their Python from the job, the Spark-documented way:
#     --archives "$(bash stack/cluster.sh executor-env)#env" --conf spark.pyspark.python=./env/bin/python
#   (with spark-submit also --conf spark.pyspark.driver.python=.venv/bin/python; a driver started from
#   Python sets PYSPARK_PYTHON=./env/bin/python in its environment before creating the session).
#   The archive holds pyproject.toml's runtime dependencies but pyspark (executors import pyspark from
#   their Spark install's python/lib/pyspark.zip); the project's own code goes by --py-files.
# - kill-worker N: kill -9 of Worker N's JVM alone (its executors end by themselves); start-worker N
#   starts it again. Both wait until the master and the process table agree.
# Pid files and logs: $STACK_HOME/cluster/ (worker2.log is a link to the log under $CLUSTER_OUTSIDE).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/lib.sh"

CLUSTER_MASTER_PORT=${CLUSTER_MASTER_PORT:-17077}
CLUSTER_UI_PORT=${CLUSTER_UI_PORT:-18080}
CLUSTER_WORKER_PORT=${CLUSTER_WORKER_PORT:-17080}        # worker N listens on CLUSTER_WORKER_PORT + N
CLUSTER_WORKER_UI_PORT=${CLUSTER_WORKER_UI_PORT:-18080}  # worker N's web UI on CLUSTER_WORKER_UI_PORT + N
CLUSTER_WORKER_CORES=${CLUSTER_WORKER_CORES:-8}
CLUSTER_WORKER_MEMORY=${CLUSTER_WORKER_MEMORY:-3g}
CLUSTER_DAEMON_MEMORY=${CLUSTER_DAEMON_MEMORY:-256m}     # heap of the Master and Worker JVMs
CLUSTER_TIMEOUT=${CLUSTER_TIMEOUT:-90}                   # seconds to wait for any condition
CLUSTER_DIR=$STACK_HOME/cluster
CLUSTER_OUTSIDE=${CLUSTER_OUTSIDE:-/var/tmp/dbus-cluster-$(printf %s "$STACK_REPO" | sha1sum | cut -c1-8)}
CLUSTER_SPARK_HOME2=${CLUSTER_SPARK_HOME2:-/opt/dbus-cluster/spark}
EXECUTOR_VENV=$CLUSTER_DIR/executor-venv
EXECUTOR_ENV=$CLUSTER_DIR/executor-env.tar.gz
EXECUTOR_ENV_STAMP=$CLUSTER_DIR/executor-env.stamp
VENV_PACK_REQ="venv-pack==0.2.0"
MASTER_URL=spark://$STACK_HOST:$CLUSTER_MASTER_PORT
MASTER_CLASS=org.apache.spark.deploy.master.Master
WORKER_CLASS=org.apache.spark.deploy.worker.Worker
EXECUTOR_CLASS=org.apache.spark.executor.CoarseGrainedExecutorBackend

_pyspark_home() {
  local d; d=$(ls -d "$VENV"/lib/python3*/site-packages/pyspark 2>/dev/null | head -n1)
  [ -n "$d" ] && [ -x "$d/bin/spark-class" ] || die "pyspark is not installed in $VENV (make venv first)"
  echo "$d"
}

# _jvm PIDFILE CLASS: true when the pid file names a running JVM of CLASS (not a recycled pid, not the
# wrapper that is about to exec it).
_jvm() {
  [ -f "$1" ] || return 1
  local pid; pid=$(cat "$1")
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = java ] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF " $2 "
}

# _ours PIDFILE CLASS: true when the pid file names a running process of ours: the JVM of CLASS or the
# wrapper about to exec it (a pid file naming anything else is stale: the pid was recycled).
_ours() {
  pid_alive "$1" && tr '\0' ' ' < "/proc/$(cat "$1")/cmdline" 2>/dev/null | grep -qF "$2"
}

_worker_port() { echo $((CLUSTER_WORKER_PORT + $1)); }
_worker_pidfile() { echo "$CLUSTER_DIR/worker$1.pid"; }
_worker_log() {   # worker 2's is outside the checkout (its namespace has none)
  if [ "$1" = 2 ]; then echo "$CLUSTER_OUTSIDE/worker2/worker.log"; else echo "$CLUSTER_DIR/worker$1.log"; fi
}

# _json_workers: one line per worker the master knows: PORT STATE ID CORES CORESUSED; fails when the master
# does not answer.
_json_workers() {
  "$VENV/bin/python" - "$CLUSTER_UI_PORT" 2>/dev/null <<'EOF'
import json, sys, urllib.request
d = json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/json/", timeout=3))
for w in d["workers"]:
    print(w["port"], w["state"], w["id"], w["cores"], w["coresused"])
EOF
}

# _alive N: true when the master shows worker N ALIVE.
_alive() {
  local port; port=$(_worker_port "$1")
  _json_workers | awk -v p="$port" '$1 == p && $2 == "ALIVE" {ok = 1} END {exit !ok}'
}

# _executors N: pids of the executors worker N started (found by the worker URL they were given; they
# outlive a killed worker for a moment, reparented).
_executors() {
  pgrep -f "$EXECUTOR_CLASS .*--worker-url spark://Worker@$STACK_HOST:$(_worker_port "$1")( |\$)" || true
}

# _wait_gone SECONDS WHAT PID...: wait until none of the pids runs; on timeout kill -9 them and say so.
_wait_gone() {
  local secs=$1 what=$2; shift 2
  local deadline=$((SECONDS + secs)) p left
  while :; do
    left=""
    for p in "$@"; do kill -0 "$p" 2>/dev/null && left="$left $p"; done
    [ -z "$left" ] && return 0
    if [ $SECONDS -ge $deadline ]; then
      log "$what still running after ${secs}s (pids$left); killing"
      for p in $left; do kill -KILL "$p" 2>/dev/null || true; done
      return 0
    fi
    sleep 0.2
  done
}

# _wait SECONDS WHAT CHECK...: poll CHECK until it succeeds; on timeout die showing the tail of every
# cluster log.
_wait() {
  local secs=$1 what=$2; shift 2
  local deadline=$((SECONDS + secs)) f
  until "$@"; do
    if [ $SECONDS -ge $deadline ]; then
      for f in "$CLUSTER_DIR/master.log" "$(_worker_log 1)" "$(_worker_log 2)"; do
        [ -f "$f" ] && { printf -- '--- %s\n' "$f" >&2; tail -n 20 "$f" >&2; }
      done
      die "$what: not within ${secs}s (logs above; status: bash stack/cluster.sh status)"
    fi
    sleep 0.3
  done
}

# _running PIDFILE WHAT LOG: dies at once (showing LOG) when the process of PIDFILE has exited.
_running() {
  pid_alive "$1" && return 0
  tail -n 30 "$3" >&2 2>/dev/null || true
  die "$2 (pid file $1) exited; see $3"
}

# ---- the executors' Python environment -------------------------------------------------------------

# the project's runtime dependencies (the base ones and the server extra's: the stages' tasks run on the
# executors) but pyspark, as written in pyproject.toml, one a line; then venv-pack
_env_requirements() {
  "$VENV/bin/python" - "$STACK_REPO/pyproject.toml" <<'EOF'
import re, sys, tomllib
with open(sys.argv[1], "rb") as f:
    project = tomllib.load(f)["project"]
for dep in [*project["dependencies"], *project["optional-dependencies"]["server"]]:
    name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", dep).group(0)
    if re.sub(r"[-_.]+", "-", name).lower() != "pyspark":
        print(dep)
EOF
  echo "$VENV_PACK_REQ"
}

executor_env() {
  mkdir -p "$CLUSTER_DIR"
  local reqs base stamp
  reqs=$(_env_requirements) || die "cannot read the [project] dependencies and the server extra of $STACK_REPO/pyproject.toml"
  base=$("$VENV/bin/python" -c 'import sys; print(sys._base_executable)') || die "no Python in $VENV"
  stamp=$(printf '%s\n%s\n' "$base" "$reqs" | sha1sum | cut -c1-16)
  if [ -s "$EXECUTOR_ENV" ] && [ "$(cat "$EXECUTOR_ENV_STAMP" 2>/dev/null)" = "$stamp" ]; then
    echo "$EXECUTOR_ENV"; return 0
  fi
  local buildlog=$CLUSTER_DIR/executor-env.log reqfile=$CLUSTER_DIR/executor-env.txt
  log "executor-env: building $EXECUTOR_ENV ($(wc -l <<<"$reqs") packages, Python $base); log $buildlog"
  rm -rf "$EXECUTOR_VENV" "$EXECUTOR_ENV" "$EXECUTOR_ENV_STAMP"
  # Every executor unpacks the archive (per app): leave out what no task runs (packages' own tests, C
  # headers, pip), about a quarter of it.
  local sp='lib/python*/site-packages'
  local packless=(--exclude "$sp/*/tests/*" --exclude "$sp/pyarrow/include/*" --exclude "$sp/pyarrow/src/*"
    --exclude "$sp/pip/*" --exclude "$sp/pip-*")
  printf '%s\n' "$reqs" > "$reqfile"
  { "$base" -m venv "$EXECUTOR_VENV" \
      && "$EXECUTOR_VENV/bin/pip" install --disable-pip-version-check -r "$reqfile" \
      && "$EXECUTOR_VENV/bin/venv-pack" -p "$EXECUTOR_VENV" --format tar.gz -o "$EXECUTOR_ENV.tmp" --force \
           --quiet "${packless[@]}"
  } >"$buildlog" 2>&1 || { tail -n 30 "$buildlog" >&2; die "executor-env: building failed; see $buildlog"; }
  mv -f "$EXECUTOR_ENV.tmp" "$EXECUTOR_ENV"
  echo "$stamp" > "$EXECUTOR_ENV_STAMP"
  log "executor-env: $(du -h "$EXECUTOR_ENV" | cut -f1) $EXECUTOR_ENV"
  echo "$EXECUTOR_ENV"
}

# ---- the daemons ------------------------------------------------------------------------------------

# DAEMON_ENV: the env(1) command line every daemon starts with: no Python of ours (executors get theirs
# from the job), small JVMs (C1 only, serial GC: the machine's cores are for the executors).
_daemon_env() {
  local path; path=$(tr : '\n' <<<"$PATH" | grep -vxF "$VENV/bin" | paste -sd: -)
  DAEMON_ENV=(env -u PYSPARK_PYTHON -u PYSPARK_DRIVER_PYTHON -u VIRTUAL_ENV -u PYTHONPATH -u PYTHONHOME
    -u SPARK_CONF_DIR -u SPARK_ENV_LOADED "PATH=$path" "SPARK_LOCAL_IP=$STACK_HOST"
    "SPARK_DAEMON_MEMORY=$CLUSTER_DAEMON_MEMORY" "SPARK_DAEMON_JAVA_OPTS=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
}

_master_start() {
  local pidfile=$CLUSTER_DIR/master.pid logf=$CLUSTER_DIR/master.log home
  _jvm "$pidfile" "$MASTER_CLASS" && return 0
  home=$(_pyspark_home)
  port_open "$CLUSTER_MASTER_PORT" && die "port $CLUSTER_MASTER_PORT is taken (not by a master of ours)"
  log "starting the master on $MASTER_URL (web UI http://$STACK_HOST:$CLUSTER_UI_PORT); log $logf"
  _daemon_env
  start_bg "$pidfile" "$logf" "${DAEMON_ENV[@]}" SPARK_HOME="$home" \
    "$home/bin/spark-class" "$MASTER_CLASS" --host "$STACK_HOST" --port "$CLUSTER_MASTER_PORT" \
    --webui-port "$CLUSTER_UI_PORT"
}

# worker 2's side of unshare: hide the checkout and the stack's home, then become the Worker JVM.
# shellcheck disable=SC2016 # expanded by the inner bash
NS_SCRIPT='set -eu
pyspark=$1 home=$2 repo=$3 stack=$4 hosts=$5; shift 5
mount --bind "$pyspark" "$home"                      # SPARK_HOME outside the checkout, before hiding it
mount -t tmpfs -o size=1m,mode=755 dbus-no-checkout "$repo"
case "$stack/" in "$repo"/*) ;; *) mount -t tmpfs -o size=1m,mode=755 dbus-no-stack "$stack" ;; esac
hostname dbus-worker2
mount --bind "$hosts" /etc/hosts                     # dbus-worker2 resolves, to 127.0.0.1
cd /
exec "$home/bin/spark-class" "$@"'

# _worker_start N [prune]: start worker N (no-op when running); with prune, first delete the app dirs that
# the stopped worker left.
_worker_start() {
  local n=$1 prune=${2:-} pidfile logf home port ui workdir
  pidfile=$(_worker_pidfile "$n"); logf=$(_worker_log "$n")
  _jvm "$pidfile" "$WORKER_CLASS" && return 0
  home=$(_pyspark_home); port=$(_worker_port "$n"); ui=$((CLUSTER_WORKER_UI_PORT + n))
  port_open "$port" && die "port $port (worker $n) is taken by another process (no worker of ours)"
  local args=("$WORKER_CLASS" "$MASTER_URL" --host "$STACK_HOST" --port "$port" --webui-port "$ui"
    --cores "$CLUSTER_WORKER_CORES" --memory "$CLUSTER_WORKER_MEMORY")
  # An executor's dir holds the unpacked executor-env (about 340 MB): the worker deletes those of ended
  # apps 15 minutes on (checked every 5), and `up` those a stopped worker left.
  local opts="-Dspark.worker.cleanup.enabled=true -Dspark.worker.cleanup.interval=300"
  opts="$opts -Dspark.worker.cleanup.appDataTtl=900"
  _daemon_env
  case $n in
    1)
      workdir=$CLUSTER_DIR/worker1/work; mkdir -p "$workdir"
      [ -z "$prune" ] || rm -rf "$workdir"/app-*
      log "starting worker 1 (127.0.0.1:$port, $CLUSTER_WORKER_CORES cores, $CLUSTER_WORKER_MEMORY); log $logf"
      start_bg "$pidfile" "$logf" "${DAEMON_ENV[@]}" SPARK_WORKER_OPTS="$opts" \
        SPARK_HOME="$home" "$home/bin/spark-class" "${args[@]}" --work-dir "$workdir" ;;
    2)
      command -v unshare >/dev/null || die "unshare (util-linux) is missing"
      case "$CLUSTER_OUTSIDE/" in
        "$STACK_REPO"/*|"$STACK_HOME"/*) die "CLUSTER_OUTSIDE must be outside $STACK_REPO and $STACK_HOME" ;;
      esac
      workdir=$CLUSTER_OUTSIDE/worker2/work; mkdir -p "$workdir" "$CLUSTER_SPARK_HOME2"
      [ -z "$prune" ] || rm -rf "$workdir"/app-*
      local hosts=$CLUSTER_OUTSIDE/worker2/hosts
      { cat /etc/hosts; echo "127.0.0.1 dbus-worker2"; } > "$hosts"
      ln -sfn "$logf" "$CLUSTER_DIR/worker2.log"
      log "starting worker 2 (127.0.0.1:$port, own mount namespace without $STACK_REPO); log $logf"
      # unshare execs (no --fork) and so do bash and spark-class: the recorded pid becomes the JVM's
      start_bg "$pidfile" "$logf" "${DAEMON_ENV[@]}" SPARK_WORKER_OPTS="$opts" \
        SPARK_HOME="$CLUSTER_SPARK_HOME2" \
        unshare --mount --uts --propagation private -- bash -c "$NS_SCRIPT" worker2 \
        "$home" "$CLUSTER_SPARK_HOME2" "$STACK_REPO" "$STACK_HOME" "$hosts" \
        "${args[@]}" --work-dir "$workdir" ;;
    *) die "no worker $n (1 or 2)" ;;
  esac
}

# _worker_up N: worker N's JVM runs and the master shows it ALIVE (fails at once when it exited)
_worker_up() {
  _running "$(_worker_pidfile "$1")" "worker $1" "$(_worker_log "$1")"
  _jvm "$(_worker_pidfile "$1")" "$WORKER_CLASS" && _alive "$1"
}

_master_up() {
  _running "$CLUSTER_DIR/master.pid" master "$CLUSTER_DIR/master.log"
  _jvm "$CLUSTER_DIR/master.pid" "$MASTER_CLASS" && _json_workers >/dev/null
}

_healthy() {
  _jvm "$CLUSTER_DIR/master.pid" "$MASTER_CLASS" || return 1
  local w; w=$(_json_workers) || return 1
  local n
  for n in 1 2; do
    _jvm "$(_worker_pidfile "$n")" "$WORKER_CLASS" || return 1
    awk -v p="$(_worker_port "$n")" '$1 == p && $2 == "ALIVE" {ok = 1} END {exit !ok}' <<<"$w" || return 1
  done
}

_worker_stop() {
  local n=$1 pidfile; pidfile=$(_worker_pidfile "$n")
  if pid_alive "$pidfile" && ! _ours "$pidfile" "$WORKER_CLASS"; then
    log "worker $n: pid file names no Worker of ours; dropping it"; rm -f "$pidfile"
  fi
  stop_pid "worker $n" "$pidfile" 30   # TERM to its process group: the Worker and its executors
  # executors that outlived it: an orphan of a kill-worker whose app still runs, or one started meanwhile
  local execs; execs=$(_executors "$n")
  [ -z "$execs" ] && return 0
  # shellcheck disable=SC2086 # one pid a word
  { kill -TERM $execs 2>/dev/null || true; _wait_gone 30 "executors of worker $n" $execs; }
}

up() {
  mkdir -p "$CLUSTER_DIR"
  executor_env >/dev/null
  if _healthy; then echo "$MASTER_URL"; return 0; fi
  _master_start
  _wait "$CLUSTER_TIMEOUT" "master answering on http://$STACK_HOST:$CLUSTER_UI_PORT/json" _master_up
  _worker_start 1 prune
  _worker_start 2 prune
  _wait "$CLUSTER_TIMEOUT" "2 workers ALIVE on $MASTER_URL" eval '_worker_up 1 && _worker_up 2'
  log "up: $MASTER_URL, 2 workers x $CLUSTER_WORKER_CORES cores, $CLUSTER_WORKER_MEMORY" \
    "(web UI http://$STACK_HOST:$CLUSTER_UI_PORT)"
  echo "$MASTER_URL"
}

# The master goes first: it would otherwise give a running app new executors on the worker still up.
down() {
  if pid_alive "$CLUSTER_DIR/master.pid" && ! _ours "$CLUSTER_DIR/master.pid" "$MASTER_CLASS"; then
    log "master: pid file names no Master of ours; dropping it"; rm -f "$CLUSTER_DIR/master.pid"
  fi
  stop_pid master "$CLUSTER_DIR/master.pid" 30
  _worker_stop 2
  _worker_stop 1
  log "down: cluster stopped"
}

status() {
  local rc=0 w n line where
  if _jvm "$CLUSTER_DIR/master.pid" "$MASTER_CLASS" && w=$(_json_workers); then
    echo "master: up   $MASTER_URL (web UI http://$STACK_HOST:$CLUSTER_UI_PORT)," \
      "pid $(cat "$CLUSTER_DIR/master.pid")"
  else
    echo "master: DOWN $MASTER_URL"; w=""; rc=1
  fi
  for n in 1 2; do
    where=""; [ "$n" = 1 ] || where=" (own mount namespace: no $STACK_REPO, hostname dbus-worker2)"
    line=$(awk -v p="$(_worker_port "$n")" '$1 == p && $2 == "ALIVE" {print; exit}' <<<"$w")
    if [ -n "$line" ] && _jvm "$(_worker_pidfile "$n")" "$WORKER_CLASS"; then
      set -- $line
      echo "worker $n: ALIVE $3 cores $5/$4 used, pid $(cat "$(_worker_pidfile "$n")")$where"
    else
      line=$(awk -v p="$(_worker_port "$n")" '$1 == p {s = $2} END {print s}' <<<"$w")
      echo "worker $n: DOWN (master shows ${line:-nothing}; pid file $(_worker_pidfile "$n"))"; rc=1
    fi
  done
  return $rc
}

kill_worker() {
  local n=$1 pidfile; pidfile=$(_worker_pidfile "$n")
  case $n in 1|2) ;; *) die "no worker $n (1 or 2)" ;; esac
  _jvm "$pidfile" "$WORKER_CLASS" || die "worker $n is not running (pid file $pidfile)"
  local pid execs; pid=$(cat "$pidfile"); execs=$(_executors "$n")
  log "kill-worker $n: kill -9 $pid (executors, which end by themselves:" ${execs:-none}")"
  kill -KILL "$pid"
  _wait "$CLUSTER_TIMEOUT" "worker $n (pid $pid) gone" eval "! kill -0 $pid 2>/dev/null"
  rm -f "$pidfile"
  _wait "$CLUSTER_TIMEOUT" "executors of worker $n ended" eval "[ -z \"\$(_executors $n)\" ]"
  _wait "$CLUSTER_TIMEOUT" "master no longer shows worker $n ALIVE" eval "! _alive $n"
}

start_worker() {
  local n=$1
  case $n in 1|2) ;; *) die "no worker $n (1 or 2)" ;; esac
  _jvm "$CLUSTER_DIR/master.pid" "$MASTER_CLASS" || die "the master is not running (bash stack/cluster.sh up)"
  _worker_start "$n"
  _wait "$CLUSTER_TIMEOUT" "worker $n ALIVE on $MASTER_URL" _worker_up "$n"
  log "start-worker $n: ALIVE"
}

cmd=${1:-status}; shift || true
case "$cmd" in
  up)           up ;;
  down)         down ;;
  status)       status ;;
  master-url)   echo "$MASTER_URL" ;;
  executor-env) executor_env ;;
  kill-worker)  [ $# -eq 1 ] || die "usage: cluster.sh kill-worker N"; kill_worker "$1" ;;
  start-worker) [ $# -eq 1 ] || die "usage: cluster.sh start-worker N"; start_worker "$1" ;;
  *) die "usage: cluster.sh {up|down|status|master-url|executor-env|kill-worker N|start-worker N}" ;;
esac
