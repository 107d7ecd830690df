# Sourced by bench/compare.sh and bench/java.sh: the two daemons both measure against.
# alpha on 127.0.0.1 and beta on 127.0.0.2, one port, sockets in DIR.

# mesh_configs DIR PORT: DIR/alpha.yaml and DIR/beta.yaml.
mesh_configs() {
  local node
  for node in alpha beta; do
    cat >"$1/$node.yaml" <<YAML
socket: $1/$node.sock
peers:
  - name: alpha
    address: 127.0.0.1:$2
  - name: beta
    address: 127.0.0.2:$2
log_level: warn
YAML
  done
}

# mesh_wait RDMAMSG DIR: until both daemons see each other established (bounded: 10 s).
mesh_wait() {
  local up node
  for _ in $(seq 100); do
    up=0
    for node in alpha beta; do
      if "$1" --socket "$2/$node.sock" status --json 2>/dev/null |
        grep -Eq '"state": *"established"'; then up=$((up + 1)); fi
    done
    [ "$up" -eq 2 ] && return 0
    sleep 0.1
  done
  return 1
}

# service_wait RDMAMSG SOCKET NAME: until the daemon lists the service (bounded: 5 s).
service_wait() {
  for _ in $(seq 100); do
    "$1" --socket "$2" status --json | grep -q "\"$3\"" && return 0
    sleep 0.05
  done
  return 1
}
