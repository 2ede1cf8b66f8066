#!/usr/bin/env bash
# Start a throwaway Redis Cluster of three masters on loopback for the tests and print its URL
# (redis://127.0.0.1:PORT/0?cluster=1, the form MCPKIT_STORE takes); installs the Debian package
# when redis-server is missing. `start-redis-cluster.sh --stop` stops the nodes it started.
set -euo pipefail
DIR="${TMPDIR:-/tmp}/mcpkit-redis-cluster"
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
rm -rf "$DIR"
mkdir -p "$DIR"
# three free ports, each with its cluster bus port (PORT + 10000) free too
PORTS="$(python3 - <<'PY'
import socket
ports = []
while len(ports) < 3:
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
  redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
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
redis-cli --cluster create $NODES --cluster-replicas 0 --cluster-yes >&2
FIRST="${PORTS%% *}"
for _ in $(seq 1 100); do
  if redis-cli -p "$FIRST" cluster info 2>/dev/null | grep -q "cluster_state:ok"; then
    echo "redis://127.0.0.1:$FIRST/0?cluster=1"
    exit 0
  fi
  sleep 0.1
done
echo "the Redis Cluster did not reach cluster_state:ok; see $DIR/node-*/redis.log" >&2
exit 1
