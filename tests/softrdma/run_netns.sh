#!/bin/bash
# Runs run_pair.sh inside a private network namespace that has only a
# loopback interface, for programs that listen on every address.
# Exit 77 (skipped) where network namespaces cannot be created.
set -u
here=$(dirname "$0")
unshare -n true 2>/dev/null || { echo "SKIP: cannot create a network namespace"; exit 77; }
exec unshare -n bash -c 'ip link set lo up && exec "$0" "$@"' "$here/run_pair.sh" "$@"
