# Kafka Connect for the interoperability tests and the peer benchmark: the worker's jars and three plugins from Maven Central
# (conf/stack/connect-pom.xml, one profile per folder), under .stack/jars/connect:
#   runtime/                      the worker's classpath (connect-runtime, connect-json: the broker's Kafka version)
#   plugins/debezium-jdbc/        Debezium's JDBC sink connector and its drivers (PostgreSQL, MariaDB...)
#   plugins/apicurio-converter/   Apicurio Registry's AvroConverter (io.apicurio.registry.utils.converter)
# plugin.path is plugins/. No worker runs by default: each test starts its own on a free loopback port with
# its own folder (tests/integration/connect.py), so start/stop only check that the jars are there.

CONNECT_JARS=$STACK_CACHE/jars/connect
CONNECT_PROFILES="runtime debezium-jdbc apicurio-converter debezium-mariadb"

_connect_dir() {  # the folder of a profile
  if [ "$1" = runtime ]; then echo "$CONNECT_JARS/runtime"; else echo "$CONNECT_JARS/plugins/$1"; fi
}

# _connect_resolve PROFILE: mvn_copy's way (a marker of the pom's hash and of this choice) for one profile
# of the pom. The plugins leave out Kafka's own jars and Jackson's core, which the worker provides: with a
# second Jackson in the plugin, the plugin's ObjectMapper finds the worker's Jdk8Module through the
# ServiceLoader and Hibernate fails ("Jdk8Module not a subtype").
CONNECT_EXCLUDE=org.apache.kafka,com.fasterxml.jackson.core
_connect_resolve() {
  local pom=$STACK_REPO/conf/stack/connect-pom.xml profile=$1 out; out=$(_connect_dir "$1")
  local marker; marker="$out/.resolved-$( (cat "$pom"; echo "$CONNECT_EXCLUDE") | sha1sum | cut -c1-12)"
  [ -f "$marker" ] && return 0
  log "resolving connect-pom.xml profile $profile into $out (Maven, cached in ~/.m2)"
  local exclude=(); [ "$profile" = runtime ] || exclude=(-DexcludeGroupIds="$CONNECT_EXCLUDE")
  rm -rf "$out"; mkdir -p "$out"
  mvn -q -B -f "$pom" -P "$profile" dependency:copy-dependencies -DoutputDirectory="$out" \
    -DincludeScope=runtime "${exclude[@]}" >"$STACK_CACHE/mvn-connect-$profile.log" 2>&1 \
    || die "Maven could not resolve profile $profile of $pom; see $STACK_CACHE/mvn-connect-$profile.log"
  touch "$marker"
}

connect_install() {
  local p; for p in $CONNECT_PROFILES; do _connect_resolve "$p"; done
}

connect_health() {
  local p; for p in $CONNECT_PROFILES; do ls "$(_connect_dir "$p")"/.resolved-* >/dev/null 2>&1 || return 1; done
  command -v java >/dev/null
}

connect_start() {
  connect_health || die "connect: jars missing under $CONNECT_JARS (bash stack/stack.sh install connect)"
}
connect_stop() { :; }

connect_describe() {
  local jar v; jar=$(ls "$CONNECT_JARS"/runtime/connect-runtime-[0-9]*.jar 2>/dev/null | head -n1)
  v=${jar##*/connect-runtime-}; v=${v%.jar}
  local dbz; dbz=$(ls "$CONNECT_JARS"/plugins/debezium-jdbc/debezium-connector-jdbc-*.jar 2>/dev/null | head -n1)
  dbz=${dbz##*/debezium-connector-jdbc-}; dbz=${dbz%.jar}
  local api; api=$(ls "$CONNECT_JARS"/plugins/apicurio-converter/apicurio-registry-utils-converter-*.jar 2>/dev/null | head -n1)
  api=${api##*/apicurio-registry-utils-converter-}; api=${api%.jar}
  local src; src=$(ls "$CONNECT_JARS"/plugins/debezium-mariadb/debezium-connector-mariadb-*.jar 2>/dev/null | head -n1)
  src=${src##*/debezium-connector-mariadb-}; src=${src%.jar}
  echo "kafka connect ${v:-?} (not running: tests start workers), plugins: debezium jdbc sink ${dbz:-?}," \
    "apicurio converter ${api:-?}, debezium mariadb source ${src:-?}, in $CONNECT_JARS"
}
