#!/usr/bin/env bash
# install-ts-sdk: install the pinned TypeScript MCP SDK (@modelcontextprotocol/sdk) into a cache, for
# the tests that drive mcpkit with the SDK's own client (tests/interop/test_ts_sdk_client.py).
#
# Usage:
#   tools/install-ts-sdk.sh            install if needed; print the install directory on stdout
#
# Idempotent: a complete install is reused as it is (no network). The package comes from the npm
# registry through npm, its dependencies resolved as of a fixed date.
# Output (stdout, one line): DIR, with DIR/node_modules/@modelcontextprotocol/sdk; run scripts with
# NODE_PATH=DIR/node_modules. Node.js >= 18 must be on PATH (the SDK's engines field).
#
# Environment:
#   MCPKIT_TS_SDK_VERSION  SDK version (default 1.32.2)
#   MCPKIT_NPM_BEFORE      npm --before date (default 2026-11-25T00:00:00Z)
#   MCPKIT_NODE_CACHE      cache dir (default ${XDG_CACHE_HOME:-$HOME/.cache}/mcpkit-node)
#
# Exit code: 0 on success; 3 if npm or node is missing; 2 on any other failure.

set -uo pipefail

VERSION="${MCPKIT_TS_SDK_VERSION:-1.32.2}"
NPM_BEFORE="${MCPKIT_NPM_BEFORE:-2026-11-25T00:00:00Z}"
CACHE="${MCPKIT_NODE_CACHE:-${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}/mcpkit-node}"
PKG="@modelcontextprotocol/sdk"

die() { echo "install-ts-sdk: $*" >&2; exit 2; }

command -v node >/dev/null 2>&1 || { echo "install-ts-sdk: node is not installed (apt-get install nodejs npm)" >&2; exit 3; }
mkdir -p "$CACHE" || die "cannot create $CACHE"
CACHE="$(cd "$CACHE" && pwd -P)" || die "cannot enter $CACHE"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$CACHE/.lock-ts-sdk" || die "cannot open $CACHE/.lock-ts-sdk"
  flock 9 || die "cannot lock $CACHE/.lock-ts-sdk"
fi

DIR="$CACHE/ts-sdk-$VERSION-${NPM_BEFORE%%T*}"
installed() {
  node -e "try{process.stdout.write(require(process.argv[1]).version)}catch(e){}" \
    "$DIR/node_modules/$PKG/package.json" 2>/dev/null
}
if [ "$(installed)" != "$VERSION" ]; then
  command -v npm >/dev/null 2>&1 || { echo "install-ts-sdk: npm is not installed (apt-get install nodejs npm)" >&2; exit 3; }
  echo "install-ts-sdk: installing $PKG@$VERSION into $DIR" >&2
  tmp="$(mktemp -d "$CACHE/.install-XXXXXX")" || die "cannot create a temporary directory in $CACHE"
  if ! (cd "$tmp" && echo '{"private":true}' > package.json &&
        npm install --no-audit --no-fund --loglevel=error --ignore-scripts --before="$NPM_BEFORE" \
          "$PKG@$VERSION" >&2); then
    rm -rf "$tmp"; die "npm install $PKG@$VERSION failed"
  fi
  chmod 755 "$tmp"; rm -rf "$DIR"; mv "$tmp" "$DIR" || die "cannot move $tmp to $DIR"
  [ "$(installed)" = "$VERSION" ] || die "the install in $DIR has no $PKG@$VERSION"
fi
echo "$DIR"
