#!/usr/bin/env bash
# Start a Redis Cluster on loopback for the tests and print its URL (redis://127.0.0.1:PORT/0?cluster=1,
# the form MCPKIT_STORE takes); installs the Debian package when redis-server is missing.
# `start-redis-cluster.sh --stop` stops the nodes it started.
# The setup docs/deployment.md recommends: three masters with one replica each (six nodes), every
# node with an append-only file fsynced every second and noeviction. cluster-node-timeout is 2 s,
# so a replica takes over a master that died within seconds. The script returns once every slot
# has a master and every master a replica whose replication link is up. Nodes live in
# $TMPDIR/mcpkit-redis-cluster/node-PORT (/tmp without TMPDIR), emptied at each start.
set -euo pipefail
DIR="${TMPDIR:-/tmp}/mcpkit-redis-cluster"
MASTERS=3
if [ "${1:-}" = "--stop" ]; then
  for pid in "$DIR"/node-*/redis.pid; do
    [ -f "$pid" ] && kill "$(cat "$pid")" 2>/dev/null || true
  done
  exit 0
fi
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
  {
    $SUDO apt-get install -y -q redis-server || { $SUDO apt-get update -q && $SUDO apt-get install -y -q redis-server; }
  } >&2
fi
for pid in "$DIR"/node-*/redis.pid; do
  if [ -f "$pid" ] && kill -0 "$(cat "$pid")" 2>/dev/null; then
    echo "a Redis Cluster started by this script still runs in $DIR; stop it with: bash $0 --stop" >&2
    exit 1
  fi
done
rm -rf "$DIR"
mkdir -p "$DIR"
# six free ports, each with its cluster bus port (PORT + 10000) free too
PORTS="$(python3 - "$((MASTERS * 2))" <<'PY'
import socket, sys
ports = []
while len(ports) < int(sys.argv[1]):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close()
    if p + 10000 > 65535 or p in ports:
        continue
    t = socket.socket()
    try:
        t.bind(("127.0.0.1", p + 10000))
    except OSError:
        continue
    finally:
        t.close()
    ports.append(p)
print(" ".join(map(str, ports)))
PY
)"
NODES=""
for PORT in $PORTS; do
  mkdir -p "$DIR/node-$PORT"
  redis-server --port "$PORT" --bind 127.0.0.1 --save "" \
    --appendonly yes --appendfsync everysec --maxmemory-policy noeviction --daemonize yes \
    --cluster-enabled yes --cluster-config-file "$DIR/node-$PORT/nodes.conf" --cluster-node-timeout 2000 \
    --pidfile "$DIR/node-$PORT/redis.pid" --logfile "$DIR/node-$PORT/redis.log" --dir "$DIR/node-$PORT" >&2
  NODES="$NODES 127.0.0.1:$PORT"
done
for PORT in $PORTS; do
  for _ in $(seq 1 50); do
    redis-cli -p "$PORT" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
done
# shellcheck disable=SC2086
redis-cli --cluster create $NODES --cluster-replicas 1 --cluster-yes >&2
FIRST="${PORTS%% *}"
# ready when every node sees the whole cluster ok and every replica's link to its master is up
ready() {
  local port masters=0 replicas=0
  for port in $PORTS; do
    redis-cli -p "$port" cluster info 2>/dev/null | grep -q "cluster_state:ok" || return 1
    case "$(redis-cli -p "$port" info replication 2>/dev/null | tr -d '\r')" in
      *role:master*) masters=$((masters + 1)) ;;
      *master_link_status:up*) replicas=$((replicas + 1)) ;;
      *) return 1 ;;
    esac
  done
  [ "$masters" = "$MASTERS" ] && [ "$replicas" = "$MASTERS" ]
}
for _ in $(seq 1 300); do
  if ready; then
    echo "redis://127.0.0.1:$FIRST/0?cluster=1"
    exit 0
  fi
  sleep 0.1
done
echo "the Redis Cluster did not get a master and a replica for every slot; see $DIR/node-*/redis.log" >&2
exit 1
