#!/usr/bin/env bash
# install-mcp-servers: install the pinned reference MCP servers (Node) the proxy tests put mcpkit in
# front of, into a cache.
#
# Usage:
#   tools/install-mcp-servers.sh            install if needed; print the install directory on stdout
#   tools/install-mcp-servers.sh --help
#
# Idempotent: a complete install is reused as it is (no network). Everything comes from the npm
# registry through npm, at pinned versions, their dependencies resolved as of a fixed date.
#
# Output (stdout, one line): the absolute path of DIR, where
#   DIR/node_modules/.bin/mcp-server-filesystem   @modelcontextprotocol/server-filesystem
#   DIR/node_modules/.bin/mcp-server-everything   @modelcontextprotocol/server-everything
# Progress and errors go to stderr.
#
# Environment:
#   MCPKIT_SERVER_FILESYSTEM_VERSION  default 2026.8.31
#   MCPKIT_SERVER_EVERYTHING_VERSION  default 2026.8.31
#   MCPKIT_NPM_BEFORE                 npm --before date for their dependencies (default 2026-11-25T00:00:00Z)
#   MCPKIT_NODE_CACHE                 cache dir (default ${XDG_CACHE_HOME:-$HOME/.cache}/mcpkit-node)
#
# Exit code: 0 on success; 3 if npm is needed (nothing cached yet) but not installed; 2 on any
# other failure.

set -uo pipefail

FS_VERSION="${MCPKIT_SERVER_FILESYSTEM_VERSION:-2026.8.31}"
EV_VERSION="${MCPKIT_SERVER_EVERYTHING_VERSION:-2026.8.31}"
NPM_BEFORE="${MCPKIT_NPM_BEFORE:-2026-11-25T00:00:00Z}"
CACHE="${MCPKIT_NODE_CACHE:-${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}/mcpkit-node}"

die() { echo "install-mcp-servers: $*" >&2; exit 2; }
say() { echo "install-mcp-servers: $*" >&2; }

case "${1:-}" in
  -h|--help) sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) die "unknown argument: $1 (see --help)" ;;
esac

mkdir -p "$CACHE" || die "cannot create $CACHE"
CACHE="$(cd "$CACHE" && pwd -P)" || die "cannot enter $CACHE"
DIR="$CACHE/servers-fs$FS_VERSION-ev$EV_VERSION-${NPM_BEFORE%%T*}"

installed() {  # $1: package name, $2: version
  node -e "try{process.exit(require(process.argv[1]).version===process.argv[2]?0:1)}catch(e){process.exit(1)}" \
    "$DIR/node_modules/$1/package.json" "$2" 2>/dev/null
}

if installed @modelcontextprotocol/server-filesystem "$FS_VERSION" &&
   installed @modelcontextprotocol/server-everything "$EV_VERSION" &&
   [ -x "$DIR/node_modules/.bin/mcp-server-filesystem" ] && [ -x "$DIR/node_modules/.bin/mcp-server-everything" ]; then
  echo "$DIR"
  exit 0
fi

command -v npm >/dev/null 2>&1 || {
  echo "install-mcp-servers: npm is not installed; it is needed to install the reference MCP servers" \
    "(on Debian: apt-get install nodejs npm)" >&2
  exit 3
}

# One installer at a time per cache (CI and a test may both call this).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$CACHE/.lock-servers" || die "cannot open $CACHE/.lock-servers"
  flock 9 || die "cannot lock $CACHE/.lock-servers"
fi

say "installing @modelcontextprotocol/server-filesystem@$FS_VERSION and server-everything@$EV_VERSION" \
    "(dependencies as of $NPM_BEFORE) into $DIR"
tmp="$(mktemp -d "$CACHE/.install-XXXXXX")" || die "cannot create a temporary directory in $CACHE"
if ! (cd "$tmp" && echo '{"private":true}' > package.json &&
      npm install --no-audit --no-fund --loglevel=error --before="$NPM_BEFORE" \
        "@modelcontextprotocol/server-filesystem@$FS_VERSION" \
        "@modelcontextprotocol/server-everything@$EV_VERSION" >&2); then
  rm -rf "$tmp"; die "npm install failed"
fi
chmod 755 "$tmp"
rm -rf "$DIR"
mv "$tmp" "$DIR" || { rm -rf "$tmp"; die "cannot move $tmp to $DIR"; }
installed @modelcontextprotocol/server-filesystem "$FS_VERSION" || die "server-filesystem did not install"
installed @modelcontextprotocol/server-everything "$EV_VERSION" || die "server-everything did not install"
say "ready"
echo "$DIR"
