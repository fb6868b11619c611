#!/usr/bin/env bash
# Build the Canal flat-message reader (src/FlatMessageDump.java) into OUT_DIR/canal-reader.jar against Canal's
# own jars: canal-pom.xml resolved once into OUT_DIR/lib by Maven (stack/lib.sh's mvn_copy: a marker file names the
# pom's hash, so a second run does nothing), then javac --release 17. Prints the classpath to run it with.
# Idempotent: the jar is rebuilt only when the source or this script is newer.
set -euo pipefail
out=${1:?usage: build.sh OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
STACK_HOME=${STACK_HOME:-$repo/.stack}
STACK_CACHE=${STACK_CACHE:-$repo/.stack}   # stack/lib.sh keeps Maven's logs there (stack/env.sh)
STACK_HOST=127.0.0.1
# shellcheck source=../../../stack/lib.sh
. "$repo/stack/lib.sh"
mkdir -p "$out"
out=$(cd "$out" && pwd)
mvn_copy "$here/canal-pom.xml" "$out/lib"
jar=$out/canal-reader.jar
if [ ! -f "$jar" ] || [ -n "$(find "$here/src" "$here/build.sh" -newer "$jar" -print -quit)" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  javac -J-XX:TieredStopAtLevel=1 -J-XX:+UseSerialGC --release 17 -nowarn -encoding UTF-8 -d "$tmp/classes" -cp "$out/lib/*" "$here"/src/*.java
  cp "$here/src/logback.xml" "$tmp/classes/"
  jar --create --file "$tmp/out.jar" -C "$tmp/classes" .
  mv -f "$tmp/out.jar" "$jar"   # atomic: a concurrent reader never sees half a jar
fi
echo "$jar:$out/lib/*"
