#!/bin/sh
# install_test.sh CMAKE BUILD_DIR: installs BUILD_DIR into a temporary root at
# the prefix /opt/rdmamsg-relocated and runs the installed programs there.
set -eu
cmake=$1
build=$2
root=$(mktemp -d /tmp/rdmamsg-install.XXXXXX)
trap 'rm -rf "$root"' EXIT
prefix=/opt/rdmamsg-relocated
DESTDIR="$root" "$cmake" --install "$build" --prefix "$prefix" >"$root.log" 2>&1 || {
  cat "$root.log" >&2
  rm -f "$root.log"
  exit 1
}
rm -f "$root.log"
top="$root$prefix"
fail() {
  echo "install_test: $*" >&2
  exit 1
}
find_one() { # find_one NAME: the installed file NAME below the prefix
  f=$(find "$top" -name "$1" -type f -perm -u+x | head -n 1)
  [ -n "$f" ] || fail "$1 was not installed below $prefix"
  echo "$f"
}
rdmamsgd=$(find_one rdmamsgd)
rdmamsg=$(find_one rdmamsg)
softrdma_run=$(find_one softrdma-run)

# The programs run as a user would run them: no library path from outside.
unset LD_LIBRARY_PATH LD_PRELOAD
out=$("$rdmamsgd" --version 2>&1) || fail "installed rdmamsgd --version failed: $out"
echo "$out" | grep -q "rdmamsgd" || fail "rdmamsgd --version printed: $out"
out=$("$rdmamsg" --help 2>&1) || fail "installed rdmamsg --help failed: $out"
echo "$out" | grep -qi "usage" || fail "rdmamsg --help printed: $out"
out=$("$softrdma_run" --help 2>&1) || fail "installed softrdma-run --help failed: $out"
# softrdma-run finds the installed libsoftrdma and runs a program on it.
out=$("$softrdma_run" "$rdmamsgd" --version 2>&1) ||
  fail "installed softrdma-run rdmamsgd --version failed: $out"
echo "$out" | grep -q "rdmamsgd" || fail "softrdma-run rdmamsgd --version printed: $out"
# The Java client's jar, under <datadir>/java with its version, runs as a tool.
jar=$top/share/java/rdmamsg.jar
[ -e "$jar" ] || fail "share/java/rdmamsg.jar was not installed below $prefix"
ls "$top"/share/java/rdmamsg-*.jar >/dev/null 2>&1 || fail "no versioned rdmamsg-VERSION.jar below $prefix"
out=$(java -jar "$jar" --help 2>&1) || fail "java -jar rdmamsg.jar --help failed: $out"
echo "$out" | grep -q "usage" || fail "java -jar rdmamsg.jar --help printed: $out"
echo "installed at $prefix (in $root): rdmamsgd, rdmamsg and softrdma-run run"
