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
javac --release 17 -nowarn -encoding UTF-8 -d "$tmp/classes" -cp "$jars/*" $(find "$src" -name '*.java' | sort)
mkdir -p "$(dirname "$out")"
jar --create --file "$tmp/out.jar" -C "$tmp/classes" .
mv -f "$tmp/out.jar" "$out"   # atomic: a concurrent reader never sees half a jar
