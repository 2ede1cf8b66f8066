#!/usr/bin/env bash
# Start a redis-server on loopback for the tests and print its URL (installs the Debian package
# when redis-server is missing). `start-redis.sh --stop` stops the one it started.
# Durable as docs/deployment.md recommends ("Redis: durability, outages and restarts"): an
# append-only file fsynced every second (a restart loses at most the last second of writes) and
# noeviction (a full Redis refuses writes rather than dropping live sessions). Its files live in
# $TMPDIR/mcpkit-redis (/tmp without TMPDIR); each start begins with an empty one.
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
if [ -f "$DIR/redis.pid" ] && kill -0 "$(cat "$DIR/redis.pid")" 2>/dev/null; then
  # one server per directory: two would write the same append-only file
  echo "a redis-server started by this script still runs in $DIR; stop it with: bash $0 --stop" >&2
  exit 1
fi
rm -rf "$DIR"
mkdir -p "$DIR"
PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
redis-server --port "$PORT" --bind 127.0.0.1 --save "" \
  --appendonly yes --appendfsync everysec --maxmemory-policy noeviction --daemonize yes \
  --pidfile "$DIR/redis.pid" --logfile "$DIR/redis.log" --dir "$DIR" >&2
for _ in $(seq 1 50); do
  if redis-cli -p "$PORT" ping >/dev/null 2>&1; then echo "redis://127.0.0.1:$PORT/0"; exit 0; fi
  sleep 0.1
done
echo "redis-server did not start; see $DIR/redis.log" >&2
exit 1
