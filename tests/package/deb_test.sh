#!/bin/sh
# deb_test.sh PACKAGE_DIR SOURCE_DIR: checks the Debian packages that
# `cpack --preset deb` wrote to PACKAGE_DIR, as an operator would meet them.
#
#  1. lintian finds no error and no warning (justified exceptions are the
#     overrides shipped in the packages, each with its reason).
#  2. The packages install with dpkg into a fresh root (dpkg --root; the
#     maintainer scripts run with DPKG_ROOT, as for a chroot-less install):
#     files are where the units and manuals say, the configuration is a
#     conffile, the system user exists, and the dependencies found by
#     dpkg-shlibdeps name Debian's libraries.
#  3. What was installed works: rdmamsgd checks the installed configuration
#     and serves a client through softrdma-run; the C example builds against
#     the installed headers with pkg-config; the Python module imports; the
#     Java client's jar runs as a tool and the Java examples build against it.
#  4. A local edit of the configuration survives reinstalling the package;
#     removing keeps it; purging removes it.
set -eu
pkgdir=$1
src=$2
fail() {
  echo "deb_test: $*" >&2
  exit 1
}
[ "$(id -u)" -eq 0 ] || fail "run as root: dpkg --root and systemd-sysusers --root set owners"
debs=$(ls "$pkgdir"/*.deb 2>/dev/null) || fail "no .deb in $pkgdir (run cpack --preset deb)"
for p in rdmamsg librdmamsg0 librdmamsg-dev softrdma python3-rdmamsg librdmamsg-java; do
  ls "$pkgdir"/${p}_*.deb >/dev/null 2>&1 || fail "package $p was not built"
done

root=$(mktemp -d /tmp/rdmamsg-deb.XXXXXX)
daemon_pid=""
# Stops the daemon: SIGTERM, then SIGKILL after 10 s; its exit status.
stop_daemon() {
  kill -TERM "$daemon_pid" 2>/dev/null
  i=0
  while kill -0 "$daemon_pid" 2>/dev/null && [ $i -lt 100 ]; do
    i=$((i + 1))
    sleep 0.1
  done
  kill -KILL "$daemon_pid" 2>/dev/null
  wait "$daemon_pid"
  rc=$?
  daemon_pid=""
  return $rc
}
cleanup() {
  [ -n "$daemon_pid" ] && stop_daemon
  rm -rf "$root"
}
trap cleanup EXIT

# --- 1. lintian ---------------------------------------------------------------
if command -v lintian >/dev/null 2>&1; then
  # shellcheck disable=SC2086
  lintian --fail-on error,warning --tag-display-limit 0 $debs ||
    fail "lintian reports problems (above)"
  echo "lintian: no errors or warnings"
else
  fail "lintian is not installed (scripts/install-deps installs it)"
fi

# --- 2. install into a fresh root ---------------------------------------------
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/etc"
: >"$root/var/lib/dpkg/status"
dpkg_root() {
  # The root has no libc or shell of its own: dependencies are the host's,
  # and maintainer scripts run on the host with DPKG_ROOT set.
  dpkg --root="$root" --log=/dev/null --force-depends --force-script-chrootless "$@"
}
# shellcheck disable=SC2086
dpkg_root -i $debs >"$root.log" 2>&1 || {
  cat "$root.log" >&2
  rm -f "$root.log"
  fail "dpkg -i into $root failed"
}
rm -f "$root.log"

for f in usr/sbin/rdmamsgd usr/bin/rdmamsg usr/bin/softrdma-run usr/bin/softrdma-ctl \
  etc/rdmamsg/rdmamsgd.yaml lib/systemd/system/rdmamsgd.service \
  lib/systemd/system/rdmamsgd.socket usr/lib/sysusers.d/rdmamsg.conf \
  usr/lib/tmpfiles.d/rdmamsg.conf usr/include/rdmamsg/client.h usr/include/rdmamsg/rdmamsg.h \
  usr/share/man/man8/rdmamsgd.8.gz usr/share/man/man1/rdmamsg.1.gz \
  usr/share/man/man5/rdmamsgd.yaml.5.gz usr/share/man/man1/softrdma-run.1.gz \
  usr/share/doc/rdmamsg/operations.md usr/share/doc/rdmamsg/copyright \
  usr/lib/python3/dist-packages/rdmamsg/__init__.py \
  usr/lib/python3/dist-packages/rdmamsg/_native.py usr/share/java/rdmamsg.jar \
  usr/share/doc/rdmamsg/java-api/index.html usr/share/doc/rdmamsg/examples/java/Sender.java; do
  [ -e "$root/$f" ] || fail "/$f is not installed"
done
libdir=$(dirname "$(find "$root/usr/lib" -name 'librdmamsg.so.0' | head -n 1)")
[ -d "$libdir" ] || fail "librdmamsg.so.0 is not installed"
[ -e "$libdir/pkgconfig/rdmamsg.pc" ] || fail "rdmamsg.pc is not installed"
[ -L "$libdir/librdmamsg.so" ] || fail "the development symlink librdmamsg.so is not installed"

# The unit runs what the package installed, with the installed configuration.
grep -q '^ExecStart=/usr/sbin/rdmamsgd --config /etc/rdmamsg/rdmamsgd.yaml$' \
  "$root/lib/systemd/system/rdmamsgd.service" || fail "rdmamsgd.service does not start /usr/sbin/rdmamsgd"

conffiles=$(dpkg-query --root="$root" -W -f='${Conffiles}' rdmamsg)
echo "$conffiles" | grep -q '/etc/rdmamsg/rdmamsgd.yaml' ||
  fail "/etc/rdmamsg/rdmamsgd.yaml is not a conffile (Conffiles: $conffiles)"
grep -q '^rdmamsg:' "$root/etc/passwd" 2>/dev/null || fail "postinst did not create the user rdmamsg"
grep -q '^rdmamsg:' "$root/etc/group" 2>/dev/null || fail "postinst did not create the group rdmamsg"
gid=$(awk -F: '$1 == "rdmamsg" { print $3 }' "$root/etc/group")
mode=$(stat -c '%a %u:%g' "$root/etc/rdmamsg/rdmamsgd.yaml")
[ "$mode" = "640 0:$gid" ] ||
  fail "the configuration is $mode, not 640 root:rdmamsg (0:$gid): it names the mesh's addresses"

depends=$(dpkg-query --root="$root" -W -f='${Depends}' rdmamsg)
for d in libibverbs1 librdmacm1 libevent libyaml-cpp librdmamsg0; do
  echo "$depends" | grep -q "$d" || fail "rdmamsg does not depend on $d (Depends: $depends)"
done
version=$(dpkg-query --root="$root" -W -f='${Version}' librdmamsg0)
echo "$depends" | grep -q "librdmamsg0 (= $version)" ||
  fail "rdmamsg does not depend on librdmamsg0 at its exact version $version (Depends: $depends)"
echo "installed into $root: files, conffile, user and dependencies as expected"

# --- 3. what was installed works ----------------------------------------------
export LD_LIBRARY_PATH="$libdir"
"$root/usr/sbin/rdmamsgd" --check-config "$root/etc/rdmamsg/rdmamsgd.yaml" ||
  fail "the installed rdmamsgd rejects the installed configuration"

run=$root/run
mkdir -p "$run"
port=$((20000 + $$ % 20000))
cat >"$run/solo.yaml" <<YAML
node: solo
listen: 127.0.0.1:$port
socket: $run/rdmamsgd.sock
peers: []
YAML
# softrdma-run from the package finds the installed libsoftrdma by itself.
"$root/usr/bin/softrdma-run" "$root/usr/sbin/rdmamsgd" --config "$run/solo.yaml" \
  >"$run/daemon.log" 2>&1 &
daemon_pid=$!
i=0
until "$root/usr/bin/rdmamsg" --socket "$run/rdmamsgd.sock" status >"$run/status" 2>&1; do
  i=$((i + 1))
  if [ $i -ge 200 ] || ! kill -0 "$daemon_pid" 2>/dev/null; then
    cat "$run/daemon.log" >&2
    fail "the installed rdmamsgd did not serve rdmamsg status within 20 s"
  fi
  sleep 0.1
done
grep -q solo "$run/status" || fail "rdmamsg status does not name the node: $(cat "$run/status")"
# The Python module finds the installed librdmamsg next to itself.
node=$(env -u LD_LIBRARY_PATH PYTHONPATH="$root/usr/lib/python3/dist-packages" python3 -c '
import sys, rdmamsg
assert rdmamsg._lib._name.startswith(sys.argv[2]), rdmamsg._lib._name
with rdmamsg.Client(sys.argv[1]) as c:
    print(c.node)' "$run/rdmamsgd.sock" "$root/") || fail "the installed Python module does not reach rdmamsgd"
[ "$node" = solo ] || fail "the Python module reports node '$node', not solo"
# The Java client: the jar's tool reaches the daemon and exits as rdmamsg does.
jar=$root/usr/share/java/rdmamsg.jar
[ -f "$(readlink -f "$jar")" ] || fail "/usr/share/java/rdmamsg.jar does not lead to the versioned jar"
java -jar "$jar" --socket "$run/rdmamsgd.sock" status >"$run/jstatus" 2>&1 ||
  fail "java -jar rdmamsg.jar status failed: $(cat "$run/jstatus")"
grep -q '"solo"' "$run/jstatus" || fail "java -jar rdmamsg.jar status does not name the node: $(cat "$run/jstatus")"
rc=0
java -jar "$jar" --socket "$run/rdmamsgd.sock" send solo/nobody hi 2>"$run/jsend" || rc=$?
[ "$rc" = 5 ] || fail "java -jar rdmamsg.jar send to a missing service exited $rc, not 5: $(cat "$run/jsend")"
stop_daemon || fail "the installed rdmamsgd did not exit 0 on SIGTERM within 10 s"
echo "the installed rdmamsgd served the installed rdmamsg"

cc=${CC:-cc}
PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_LIBDIR=$libdir/pkgconfig \
  pkg-config --cflags --libs rdmamsg >"$run/pc" || fail "pkg-config does not find rdmamsg"
# shellcheck disable=SC2046
"$cc" -std=c11 -Wall -Werror -o "$run/ping" "$src/examples/c/ping.c" $(cat "$run/pc") ||
  fail "examples/c/ping.c does not build against the installed librdmamsg-dev"
echo "the C example builds against the installed headers"
mkdir -p "$run/java"
javac -Xlint:all -Werror -cp "$jar" -d "$run/java" "$src"/examples/java/*.java ||
  fail "examples/java does not build against the installed jar"
echo "the Java examples build against the installed jar"

# --- 4. conffile life cycle ---------------------------------------------------
echo "# edited by the operator" >>"$root/etc/rdmamsg/rdmamsgd.yaml"
# shellcheck disable=SC2086
dpkg_root --force-confold -i "$pkgdir"/rdmamsg_*.deb >/dev/null 2>&1 || fail "reinstalling rdmamsg failed"
grep -q "edited by the operator" "$root/etc/rdmamsg/rdmamsgd.yaml" ||
  fail "reinstalling the package lost the operator's edit"
[ "$(stat -c '%a' "$root/etc/rdmamsg/rdmamsgd.yaml")" = 640 ] ||
  fail "after reinstalling, the configuration is no longer mode 640"
dpkg_root -r python3-rdmamsg librdmamsg-dev rdmamsg >/dev/null 2>&1 || fail "removing rdmamsg failed"
[ -e "$root/usr/sbin/rdmamsgd" ] && fail "removing rdmamsg left /usr/sbin/rdmamsgd"
[ -e "$root/etc/rdmamsg/rdmamsgd.yaml" ] || fail "removing (not purging) rdmamsg deleted the configuration"
dpkg_root -P rdmamsg >/dev/null 2>&1 || fail "purging rdmamsg failed"
[ -e "$root/etc/rdmamsg" ] && fail "purging rdmamsg left /etc/rdmamsg"
echo "the configuration survives a reinstall and a removal, and goes with a purge"
