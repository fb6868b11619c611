# Apicurio Registry 2.0.2.Final, a Confluent-compatible schema registry (the `avro` output format,
# docs/formats.md#registry), built once from Maven Central artifacts (conf/stack/registry-pom.xml: Quarkus's
# build goal over the apicurio-registry-app module) and run with java. Its Confluent API is
# http://127.0.0.1:$REGISTRY_PORT/apis/ccompat/v6 (conf/dbus.yaml's endpoints.registry.url); Apicurio's own
# API is /apis/registry/v2 (Apicurio's converters speak it).
# Storage: Apicurio's SQL storage on an H2 database in a file, .stack/registry/data/registry.mv.db, so a
# registry restart keeps every schema and its id, as Kafka keeps the records that name those ids
# (docs/stack.md#schema-registry). `make clean-stack` removes it with Kafka's data.

REGISTRY_HOME=$STACK_HOME/registry
REGISTRY_BUILD=$STACK_CACHE/jars/registry-build
REGISTRY_RUNNER=$REGISTRY_BUILD/target/registry-runtime-1-runner.jar
REGISTRY_URL=http://$STACK_HOST:$REGISTRY_PORT/apis/ccompat/v6

registry_install() {
  svc_dir registry >/dev/null
  command -v curl >/dev/null || apt_install curl
  local pom=$STACK_REPO/conf/stack/registry-pom.xml props=$STACK_REPO/conf/stack/registry.properties
  local marker; marker="$REGISTRY_BUILD/.built-$(cat "$pom" "$props" | sha1sum | cut -c1-12)"
  [ -f "$marker" ] && [ -f "$REGISTRY_RUNNER" ] && return 0
  log "building Apicurio Registry into $REGISTRY_BUILD (Maven and Quarkus, cached in ~/.m2)"
  rm -rf "$REGISTRY_BUILD"; mkdir -p "$REGISTRY_BUILD/src/main/resources" "$REGISTRY_BUILD/app"
  cp "$pom" "$REGISTRY_BUILD/pom.xml"
  local mlog=$STACK_CACHE/mvn-registry-pom.xml.log
  # -DskipDefault: keeps Apicurio's parent from adding repositories outside Maven Central (see the pom)
  local mvn=(mvn -q -B -DskipDefault -f "$REGISTRY_BUILD/pom.xml")
  "${mvn[@]}" dependency:copy-dependencies -DincludeArtifactIds=apicurio-registry-app \
    -DoutputDirectory="$REGISTRY_BUILD/app" >"$mlog" 2>&1 \
    || die "Maven could not resolve $pom; see $mlog"
  # The build's configuration: the app's own application.properties, then ours (later keys win).
  local app; app=$(ls "$REGISTRY_BUILD"/app/apicurio-registry-app-*.jar)
  { python3 -c 'import sys, zipfile; sys.stdout.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]).decode())' \
      "$app" application.properties; echo; cat "$props"; } \
    >"$REGISTRY_BUILD/src/main/resources/application.properties" \
    || die "no application.properties in $app"
  "${mvn[@]}" package -DskipTests >>"$mlog" 2>&1 || die "building the registry failed; see $mlog"
  [ -f "$REGISTRY_RUNNER" ] || die "the registry build made no $REGISTRY_RUNNER; see $mlog"
  touch "$marker"
}

# Serving = the Confluent API lists the subjects (a JSON array).
registry_health() { curl -sf --max-time 3 "$REGISTRY_URL/subjects" 2>/dev/null | grep -q '^\['; }

registry_start() {
  registry_health && return 0
  local dir; dir=$(svc_dir registry)
  if ! pid_alive "$dir/pid"; then
    port_open "$REGISTRY_PORT" && die "port $REGISTRY_PORT is taken by something that is not our registry"
    # HTTP_PORT and REGISTRY_DATASOURCE_URL are Apicurio's own settings (its application.properties). It
    # runs in its own directory: its transaction manager (Narayana) writes ./ObjectStore there.
    start_bg "$dir/pid" "$dir/log/stdout.log" \
      env -C "$dir" HTTP_PORT="$REGISTRY_PORT" REGISTRY_DATASOURCE_URL="jdbc:h2:file:$dir/data/registry" \
      java -Xms64m -Xmx384m -XX:+UseSerialGC -Djava.awt.headless=true \
        -Dquarkus.http.host="$STACK_HOST" -jar "$REGISTRY_RUNNER"
  fi
  wait_for 90 registry "$dir/log/stdout.log" running_and "$dir/pid" "$dir/log/stdout.log" registry_health
}

registry_stop() { stop_pid registry "$REGISTRY_HOME/pid" 20; }

registry_describe() {
  local v; v=$(ls "$REGISTRY_BUILD"/app/apicurio-registry-app-*.jar 2>/dev/null | head -n1)
  v=${v##*/apicurio-registry-app-}; v=${v%.jar}
  echo "registry apicurio ${v:-?} (Confluent API) on $REGISTRY_URL, H2 file storage"
}
