#!/usr/bin/env bash
# install-py-servers: install the pinned Python MCP servers of PyPI that tests/check/peers runs
# `mcpkit check` against (the reference servers mcp-server-time, -fetch and -git) into a
# virtualenv of their own: their dependencies (an older `mcp`, among others) must not change the
# test environment's.
#
# Usage:
#   tools/install-py-servers.sh            install if needed; print the virtualenv's directory on stdout
#   tools/install-py-servers.sh --help
#
# Idempotent: a complete install is reused as it is (no network). Every package, dependencies
# included, is pinned by tools/py-servers.lock (pip freeze of the install); the virtualenv is named by
# the lock's digest, so a changed lock installs afresh beside the old one.
#
# Output (stdout, one line): VENV, with VENV/bin/mcp-server-time, -fetch and -git (console
# scripts: `mcpkit check VENV/bin/mcp-server-time` runs one with the virtualenv's Python).
#
# Environment:
#   MCPKIT_PY_SERVERS_CACHE  cache dir (default ${XDG_CACHE_HOME:-$HOME/.cache}/mcpkit-py-servers)
#   PYTHON                   the Python to build the virtualenv with (default python3)
#
# Exit code: 0 on success; 2 on any failure.

set -uo pipefail

HERE="$(cd "$(dirname "$0")" && pwd -P)"
LOCK="$HERE/py-servers.lock"
PY="${PYTHON:-python3}"
CACHE="${MCPKIT_PY_SERVERS_CACHE:-${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}/mcpkit-py-servers}"
COMMANDS=(mcp-server-time mcp-server-fetch mcp-server-git)

die() { echo "install-py-servers: $*" >&2; exit 2; }

case "${1:-}" in
  -h|--help) sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) die "unknown argument: $1 (see --help)" ;;
esac

[ -f "$LOCK" ] || die "no lock file $LOCK"
mkdir -p "$CACHE" || die "cannot create $CACHE"
CACHE="$(cd "$CACHE" && pwd -P)" || die "cannot enter $CACHE"
VENV="$CACHE/venv-$(sha256sum "$LOCK" | cut -c1-12)"

complete() {
  local c
  [ -f "$VENV/.complete" ] || return 1
  for c in "${COMMANDS[@]}"; do [ -x "$VENV/bin/$c" ] || return 1; done
}

if complete; then echo "$VENV"; exit 0; fi
# One installer at a time per cache (CI and a test may both call this).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$CACHE/.lock" || die "cannot open $CACHE/.lock"
  flock 9 || die "cannot lock $CACHE/.lock"
fi
if complete; then echo "$VENV"; exit 0; fi

echo "install-py-servers: installing ${COMMANDS[*]} (pinned by $LOCK) into $VENV" >&2
rm -rf "$VENV"
"$PY" -m venv "$VENV" >&2 || die "cannot create the virtualenv $VENV"
PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV/bin/python" -m pip install -q --no-deps -r "$LOCK" >&2 \
  || { rm -rf "$VENV"; die "pip install failed"; }
for c in "${COMMANDS[@]}"; do [ -x "$VENV/bin/$c" ] || { rm -rf "$VENV"; die "the install lacks $c"; }; done
touch "$VENV/.complete"
echo "install-py-servers: ready" >&2
echo "$VENV"
