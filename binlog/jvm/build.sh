#!/usr/bin/env bash
# Build DBus's JVM classes (dbus.jvm.*) into OUT_JAR: javac --release 17 against pyspark's jars, one floor at a
# time, as the Python floors are (tests/unit/test_layers.py): binlog/jvm/src (the raw-event decoder, the sidecar
# protocol, planned stops: what every stage shares) first, then each stage's own <stage>/jvm/src against those
# classes alone, so a stage's Java that uses another stage's class does not compile. One jar holds them all.
# Idempotent: does nothing when OUT_JAR is newer than every source file.
set -euo pipefail
out=${1:?usage: build.sh OUT_JAR}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)   # the checkout, or the site-packages of an installed wheel
venv=${VENV:-$root/.venv}
shared=$here/src
stages=()
for stage in appender dispatcher logprocessor; do
  [ -d "$root/$stage/jvm/src" ] && stages+=("$root/$stage/jvm/src")
done
if [ -f "$out" ] && [ -z "$(find "$shared" "${stages[@]}" "$here/build.sh" -newer "$out" -print -quit)" ]; then exit 0; fi
jars=$(ls -d "$venv"/lib/python3*/site-packages/pyspark/jars 2>/dev/null | head -n1)
[ -n "$jars" ] || { echo "build.sh: pyspark is not installed in $venv" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# kafka-clients (the appender's DirectSink): the stack's Spark jars beside OUT_JAR (stack/services/spark.sh), or DBUS_JVM_KAFKA_JARS
kafka=${DBUS_JVM_KAFKA_JARS:-$(dirname "$out")/spark}
ls "$kafka"/kafka-clients-*.jar > /dev/null 2>&1 || { echo "build.sh: no kafka-clients jar in $kafka (make stack-up, or dbus jvm build --kafka-jars DIR)" >&2; exit 1; }
cp="$jars/*:$kafka/*"
# javac's own JVM with C1 only and the serial collector: the same classes, about half the CPU (a short run
# that C2 would spend more compiling than it saves)
JFLAGS=(-J-XX:TieredStopAtLevel=1 -J-XX:+UseSerialGC)
javac "${JFLAGS[@]}" --release 17 -nowarn -encoding UTF-8 -d "$tmp/shared" -cp "$cp" $(find "$shared" -name '*.java' | sort)
mkdir -p "$tmp/classes"
cp -R "$tmp/shared/." "$tmp/classes/"
for src in "${stages[@]}"; do
  javac "${JFLAGS[@]}" --release 17 -nowarn -encoding UTF-8 -d "$tmp/classes" -cp "$cp:$tmp/shared" $(find "$src" -name '*.java' | sort)
done
mkdir -p "$(dirname "$out")"
jar --create --file "$tmp/out.jar" -C "$tmp/classes" .
mv -f "$tmp/out.jar" "$out"   # atomic: a concurrent reader never sees half a jar
