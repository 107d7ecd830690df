#!/bin/sh
# softrdma-run --netdev: the program sees /sys/class/infiniband/softrdma0/device/net/IFNAME (and
# the rest of /sys/class as before), with softrdma preloaded; nothing changes outside its
# namespace. Exit 77 (skipped) where the system allows no mount namespace for this user.
# Usage: run_netdev.sh SOFTRDMA_RUN
run=$1
if [ "$(id -u)" -eq 0 ]; then probe="unshare --mount true"; else probe="unshare --user --map-root-user --mount true"; fi
$probe 2>/dev/null || { echo "no mount namespace available: skipped"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
# shellcheck disable=SC2016  # expanded by the inner shell
out=$("$run" --netdev lo sh -c '
  ls /sys/class/infiniband/softrdma0/device/net/
  [ -d /sys/class/net/lo ] && echo net-class-kept
  case "$LD_PRELOAD" in *libsoftrdma*) echo preloaded ;; esac') || fail "softrdma-run exited $?"
[ "$out" = "lo
net-class-kept
preloaded" ] || fail "unexpected view: $out"
[ -e /sys/class/infiniband/softrdma0 ] && fail "the entry is visible outside the namespace"
"$run" --netdev no-such-if true 2>/dev/null && fail "an unknown interface was taken"
echo ok
