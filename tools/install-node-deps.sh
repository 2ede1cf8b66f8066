#!/usr/bin/env bash
# install-node-deps: install the pinned MCP Inspector (and a Node.js that can run it) into a cache.
#
# Usage:
#   tools/install-node-deps.sh            install if needed; print the wrapper path on stdout
#   tools/install-node-deps.sh --help
#
# Idempotent: a complete install is reused as it is (no network). Everything comes from the npm
# registry through npm: @modelcontextprotocol/inspector at a pinned version, its dependencies
# resolved as of a fixed date, and, when the system node is older than the Inspector needs
# (>= 22.19), Node.js itself from the npm package node-linux-<arch>.
#
# Output (stdout, one line): the absolute path of an executable wrapper, DIR/bin/mcp-inspector, that
# runs the Inspector with the right Node, e.g.
#   "$(tools/install-node-deps.sh)" --cli --method tools/list -- mcpkit serve
# Layout of DIR (the parent of the wrapper's folder):
#   DIR/bin/node            the Node.js the Inspector runs on (a symlink)
#   DIR/bin/mcp-inspector   the wrapper
#   DIR/node_modules/       @modelcontextprotocol/inspector@VERSION and its dependencies, so that
#                           `npx --yes=false @modelcontextprotocol/inspector@VERSION ...` run in DIR,
#                           with DIR/bin first on PATH, uses this install and downloads nothing.
# Progress and errors go to stderr.
#
# Environment:
#   MCPKIT_INSPECTOR_VERSION  Inspector version (default 2.12.0)
#   MCPKIT_NODE_VERSION       Node.js from node-linux-<arch> when the system node is too old
#                             (default 22.23.3)
#   MCPKIT_NPM_BEFORE         npm --before date for the Inspector's dependencies
#                             (default 2026-11-25T00:00:00Z)
#   MCPKIT_NODE_CACHE         cache dir (default ${XDG_CACHE_HOME:-$HOME/.cache}/mcpkit-node)
#
# Exit code: 0 on success; 3 if npm is needed (nothing cached yet) but not installed; 2 on any
# other failure.

set -uo pipefail

INSPECTOR_VERSION="${MCPKIT_INSPECTOR_VERSION:-2.12.0}"
NODE_VERSION="${MCPKIT_NODE_VERSION:-22.23.3}"
NPM_BEFORE="${MCPKIT_NPM_BEFORE:-2026-11-25T00:00:00Z}"
CACHE="${MCPKIT_NODE_CACHE:-${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}/mcpkit-node}"
NEED_MAJOR=22
NEED_MINOR=19   # the Inspector's engines field: node >= 22.19.0
PKG="@modelcontextprotocol/inspector"

die() { echo "install-node-deps: $*" >&2; exit 2; }
say() { echo "install-node-deps: $*" >&2; }

case "${1:-}" in
  -h|--help) sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) die "unknown argument: $1 (see --help)" ;;
esac

need_npm() {
  command -v npm >/dev/null 2>&1 && return 0
  echo "install-node-deps: npm is not installed; it is needed to install $1 from the npm registry" \
    "(on Debian: apt-get install nodejs npm)" >&2
  exit 3
}

# npm install PACKAGES... into a fresh directory, then move it to $1 (so a half-done install is
# never taken for a complete one).
npm_install_into() {
  local dest="$1"; shift
  local tmp
  tmp="$(mktemp -d "$CACHE/.install-XXXXXX")" || die "cannot create a temporary directory in $CACHE"
  if ! (cd "$tmp" && echo '{"private":true}' > package.json &&
        npm install --no-audit --no-fund --loglevel=error --ignore-scripts "$@" >&2); then
    rm -rf "$tmp"; die "npm install $* failed"
  fi
  chmod 755 "$tmp"
  rm -rf "$dest"
  mv "$tmp" "$dest" || { rm -rf "$tmp"; die "cannot move $tmp to $dest"; }
}

node_ok() {  # $1: a node binary; true if it is >= NEED_MAJOR.NEED_MINOR
  "$1" -e "const [a,b]=process.versions.node.split('.').map(Number);
           process.exit(a>$NEED_MAJOR||(a===$NEED_MAJOR&&b>=$NEED_MINOR)?0:1)" >/dev/null 2>&1
}

mkdir -p "$CACHE" || die "cannot create $CACHE"
CACHE="$(cd "$CACHE" && pwd -P)" || die "cannot enter $CACHE"

# One installer at a time per cache (CI and a test may both call this).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$CACHE/.lock" || die "cannot open $CACHE/.lock"
  flock 9 || die "cannot lock $CACHE/.lock"
fi

# ------------------------------------------------------------------ Node.js
if command -v node >/dev/null 2>&1 && node_ok "$(command -v node)"; then
  NODE="$(command -v node)"
else
  case "$(uname -m)" in
    x86_64|amd64) NARCH=x64 ;;
    aarch64|arm64) NARCH=arm64 ;;
    *) die "no Node.js >= $NEED_MAJOR.$NEED_MINOR and no npm package node-linux-* for $(uname -m)" ;;
  esac
  NDIR="$CACHE/node-$NODE_VERSION-$NARCH"
  NODE="$NDIR/node_modules/node-linux-$NARCH/bin/node"
  if [ ! -x "$NODE" ] || ! node_ok "$NODE"; then
    need_npm "Node.js $NODE_VERSION"
    say "installing Node.js $NODE_VERSION (npm package node-linux-$NARCH) into $NDIR"
    npm_install_into "$NDIR" "node-linux-$NARCH@$NODE_VERSION"
    node_ok "$NODE" || die "$NODE does not run, or is older than $NEED_MAJOR.$NEED_MINOR"
  fi
fi

# ------------------------------------------------------------------ the Inspector
DIR="$CACHE/inspector-$INSPECTOR_VERSION-${NPM_BEFORE%%T*}"
ENTRY="$DIR/node_modules/$PKG/clients/launcher/build/index.js"
installed_version() {
  "$NODE" -e "try{process.stdout.write(require(process.argv[1]).version)}catch(e){}" \
    "$DIR/node_modules/$PKG/package.json" 2>/dev/null
}
if [ ! -f "$ENTRY" ] || [ "$(installed_version)" != "$INSPECTOR_VERSION" ]; then
  need_npm "$PKG@$INSPECTOR_VERSION"
  say "installing $PKG@$INSPECTOR_VERSION (dependencies as of $NPM_BEFORE) into $DIR"
  # npm itself runs on the Node chosen above, so that the engines check sees the right version.
  PATH="$(dirname "$NODE"):$PATH" npm_install_into "$DIR" --before="$NPM_BEFORE" "$PKG@$INSPECTOR_VERSION"
  [ -f "$ENTRY" ] || die "the install has no $ENTRY"
fi

# ------------------------------------------------------------------ bin/: node and the wrapper
mkdir -p "$DIR/bin" || die "cannot create $DIR/bin"
if [ "$(readlink "$DIR/bin/node" 2>/dev/null)" != "$NODE" ]; then
  ln -sfn "$NODE" "$DIR/bin/node.tmp" && mv -f "$DIR/bin/node.tmp" "$DIR/bin/node" ||
    die "cannot link $DIR/bin/node"
fi
WRAPPER="$DIR/bin/mcp-inspector"
WRAPPER_TEXT="$(printf '#!/usr/bin/env bash\n# MCP Inspector %s on the Node.js in this folder (written by tools/install-node-deps.sh)\nexec %q %q "$@"\n' \
  "$INSPECTOR_VERSION" "$DIR/bin/node" "$ENTRY")"
if [ ! -x "$WRAPPER" ] || [ "$(cat "$WRAPPER")" != "$WRAPPER_TEXT" ]; then
  printf '%s\n' "$WRAPPER_TEXT" > "$WRAPPER.tmp" && chmod +x "$WRAPPER.tmp" && mv -f "$WRAPPER.tmp" "$WRAPPER" ||
    die "cannot write $WRAPPER"
fi

got="$("$WRAPPER" --version 2>/dev/null)" || die "$WRAPPER --version failed"
case "$got" in
  *"$INSPECTOR_VERSION"*) ;;
  *) die "$WRAPPER --version printed '$got', expected $INSPECTOR_VERSION" ;;
esac
say "$PKG@$INSPECTOR_VERSION on node $("$NODE" --version) is ready"
echo "$WRAPPER"
