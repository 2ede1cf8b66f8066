#!/usr/bin/env bash
# Start a throwaway redis-server for the tests and print its URL (installs the Debian package
# when redis-server is missing). `start-redis.sh --stop` stops the one it started.
# No persistence: a restart loses everything, which is what tests want and no deployment should
# (docs/deployment.md, "Redis: durability, outages and restarts", has the durable settings).
set -euo pipefail
DIR="${TMPDIR:-/tmp}/mcpkit-redis"
if [ "${1:-}" = "--stop" ]; then
  if [ -f "$DIR/redis.pid" ]; then kill "$(cat "$DIR/redis.pid")" 2>/dev/null || true; fi
  exit 0
fi
if ! command -v redis-server >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
  {
    $SUDO apt-get install -y -q redis-server || { $SUDO apt-get update -q && $SUDO apt-get install -y -q redis-server; }
  } >&2
fi
mkdir -p "$DIR"
PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
  --pidfile "$DIR/redis.pid" --logfile "$DIR/redis.log" --dir "$DIR" >&2
for _ in $(seq 1 50); do
  if redis-cli -p "$PORT" ping >/dev/null 2>&1; then echo "redis://127.0.0.1:$PORT/0"; exit 0; fi
  sleep 0.1
done
echo "redis-server did not start; see $DIR/redis.log" >&2
exit 1
