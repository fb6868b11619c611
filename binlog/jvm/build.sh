#!/usr/bin/env bash
# Build the JVM rows decoder (dbus.jvm.*) into OUT_JAR: javac --release 17 against pyspark's jars.
# Idempotent: does nothing when OUT_JAR is newer than every source file.
set -euo pipefail
out=${1:?usage: build.sh OUT_JAR}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
venv=${VENV:-$repo/.venv}
src=$here/src
if [ -f "$out" ] && [ -z "$(find "$src" "$here/build.sh" -newer "$out" -print -quit)" ]; then exit 0; fi
jars=$(ls -d "$venv"/lib/python3*/site-packages/pyspark/jars 2>/dev/null | head -n1)
[ -n "$jars" ] || { echo "build.sh: pyspark is not installed in $venv" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# kafka-clients (DirectSink): the stack's Spark jars beside OUT_JAR (stack/services/spark.sh), or DBUS_JVM_KAFKA_JARS
kafka=${DBUS_JVM_KAFKA_JARS:-$(dirname "$out")/spark}
ls "$kafka"/kafka-clients-*.jar > /dev/null 2>&1 || { echo "build.sh: no kafka-clients jar in $kafka (make stack-up, or dbus jvm build --kafka-jars DIR)" >&2; exit 1; }
javac --release 17 -nowarn -encoding UTF-8 -d "$tmp/classes" -cp "$jars/*:$kafka/*" $(find "$src" -name '*.java' | sort)
mkdir -p "$(dirname "$out")"
jar --create --file "$tmp/out.jar" -C "$tmp/classes" .
mv -f "$tmp/out.jar" "$out"   # atomic: a concurrent reader never sees half a jar
