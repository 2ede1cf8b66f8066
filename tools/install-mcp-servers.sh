#!/usr/bin/env bash
# install-mcp-servers: install the pinned Node MCP servers the tests run against, into one cache
# directory: the reference servers the proxy tests put mcpkit in front of
# (tests/interop/test_proxy_interop.py) and the corpus of real servers tests/check/peers/ runs
# `mcpkit check` against (the reference servers, the MCP Apps examples, and well-known servers that
# start and list their tools offline, without an API key).
#
# Usage:
#   tools/install-mcp-servers.sh            install if needed; print the install directory on stdout
#   tools/install-mcp-servers.sh --help
#
# Idempotent: a complete install is reused as it is (no network). Everything comes from the npm
# registry through npm, at pinned versions, their dependencies resolved as of a fixed date.
#
# Output (stdout, one line): the absolute path of DIR, where
#   DIR/node_modules/@modelcontextprotocol/sdk                the TypeScript SDK (for a tiny server script)
#   DIR/node_modules/@modelcontextprotocol/server-everything  dist/index.js
#   DIR/node_modules/@modelcontextprotocol/server-filesystem  dist/index.js
#   DIR/node_modules/@modelcontextprotocol/server-memory      dist/index.js
#   DIR/node_modules/.bin/mcp-server-everything               server-everything's command
#   DIR/node_modules/.bin/mcp-server-filesystem               server-filesystem's command
#   DIR/node_modules/.bin/NAME                                 the command of each package of CORPUS below
# Run them with NODE_PATH=DIR/node_modules and any Node.js >= 18 (the system node, or the Node 22
# that tools/install-node-deps.sh caches). Progress and errors go to stderr.
#
# Environment:
#   MCPKIT_TS_SDK_VERSION             default 1.32.2
#   MCPKIT_SERVER_EVERYTHING_VERSION  default 2026.8.31
#   MCPKIT_SERVER_FILESYSTEM_VERSION  default 2026.8.31
#   MCPKIT_SERVER_MEMORY_VERSION      default 2026.8.31
#   MCPKIT_NPM_BEFORE                 npm --before date for their dependencies (default 2026-11-25T00:00:00Z)
#   MCPKIT_NODE_CACHE                 cache dir (default ${XDG_CACHE_HOME:-$HOME/.cache}/mcpkit-node)
#
# Exit code: 0 on success; 3 if node or npm is needed but not installed; 2 on any other failure.

set -uo pipefail

SDK_VERSION="${MCPKIT_TS_SDK_VERSION:-1.32.2}"
EV_VERSION="${MCPKIT_SERVER_EVERYTHING_VERSION:-2026.8.31}"
FS_VERSION="${MCPKIT_SERVER_FILESYSTEM_VERSION:-2026.8.31}"
MEM_VERSION="${MCPKIT_SERVER_MEMORY_VERSION:-2026.8.31}"
NPM_BEFORE="${MCPKIT_NPM_BEFORE:-2026-11-25T00:00:00Z}"
CACHE="${MCPKIT_NODE_CACHE:-${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}/mcpkit-node}"

die() { echo "install-mcp-servers: $*" >&2; exit 2; }
say() { echo "install-mcp-servers: $*" >&2; }

case "${1:-}" in
  -h|--help) sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) die "unknown argument: $1 (see --help)" ;;
esac

command -v node >/dev/null 2>&1 || {
  echo "install-mcp-servers: node is not installed (on Debian: apt-get install nodejs npm)" >&2
  exit 3
}
mkdir -p "$CACHE" || die "cannot create $CACHE"
CACHE="$(cd "$CACHE" && pwd -P)" || die "cannot enter $CACHE"
# The corpus of tests/check/peers (tests/check/peers/corpus.py names their commands), pinned.
# --ignore-scripts keeps the browser servers from downloading a browser: listing needs none.
CORPUS=(
  "@modelcontextprotocol/server-sequential-thinking@2026.8.31"
  "@modelcontextprotocol/server-github@2025.4.8"
  "@modelcontextprotocol/server-puppeteer@2025.5.12"
  "@modelcontextprotocol/server-aws-kb-retrieval@0.6.2"
  "@modelcontextprotocol/server-map@2.0.3"
  "@modelcontextprotocol/server-pdf@2.0.4"
  "@modelcontextprotocol/server-basic-vanillajs@2.0.3"
  "@modelcontextprotocol/server-system-monitor@2.0.3"
  "@playwright/mcp@0.0.83"
  "chrome-devtools-mcp@1.11.0"
  "@upstash/context7-mcp@4.1.1"
  "@notionhq/notion-mcp-server@2.5.2"
  "@antv/mcp-server-chart@0.9.10"
  "mcp-server-code-runner@0.1.8"
  "@cyanheads/git-mcp-server@2.15.3"
  "mcp-server-kubernetes@4.1.7"
  "exa-mcp-server@3.4.1"
  "firecrawl-mcp@3.26.0"
  "tavily-mcp@0.2.22"
  "@openbnb/mcp-server-airbnb@0.3.0"
)
PACKAGES=(
  "@modelcontextprotocol/sdk@$SDK_VERSION"
  "@modelcontextprotocol/server-everything@$EV_VERSION"
  "@modelcontextprotocol/server-filesystem@$FS_VERSION"
  "@modelcontextprotocol/server-memory@$MEM_VERSION"
  "${CORPUS[@]}"
)
COMMANDS=(mcp-server-everything mcp-server-filesystem mcp-server-sequential-thinking mcp-server-github
  mcp-server-puppeteer mcp-server-aws-kb-retrieval mcp-map-server mcp-pdf-server mcp-server-basic-vanillajs
  mcp-system-monitor-server playwright-mcp chrome-devtools-mcp context7-mcp notion-mcp-server mcp-server-chart
  mcp-server-code-runner git-mcp-server mcp-server-kubernetes exa-mcp-server firecrawl-mcp tavily-mcp
  mcp-server-airbnb)
# the directory is named by everything it holds: a change of any pin installs afresh beside it
KEY="$(printf '%s\n' "${PACKAGES[@]}" "$NPM_BEFORE" | sha256sum | cut -c1-12)"
DIR="$CACHE/servers-$KEY-${NPM_BEFORE%%T*}"

installed() {  # $1: name@version; true when DIR holds exactly that version
  local name="${1%@*}" version="${1##*@}"
  node -e "try{process.exit(require(process.argv[1]).version===process.argv[2]?0:1)}catch(e){process.exit(1)}" \
    "$DIR/node_modules/$name/package.json" "$version" 2>/dev/null
}
complete() {
  local p c
  for p in "${PACKAGES[@]}"; do installed "$p" || return 1; done
  for c in "${COMMANDS[@]}"; do [ -x "$DIR/node_modules/.bin/$c" ] || return 1; done
}

if complete; then echo "$DIR"; exit 0; fi

command -v npm >/dev/null 2>&1 || {
  echo "install-mcp-servers: npm is not installed; it is needed to install the Node MCP servers" \
    "(on Debian: apt-get install nodejs npm)" >&2
  exit 3
}
# One installer at a time per cache (CI and a test may both call this).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$CACHE/.lock-servers" || die "cannot open $CACHE/.lock-servers"
  flock 9 || die "cannot lock $CACHE/.lock-servers"
fi
if complete; then echo "$DIR"; exit 0; fi

say "installing ${PACKAGES[*]} (dependencies as of $NPM_BEFORE) into $DIR"
tmp="$(mktemp -d "$CACHE/.install-XXXXXX")" || die "cannot create a temporary directory in $CACHE"
if ! (cd "$tmp" && echo '{"private":true}' > package.json &&
      npm install --no-audit --no-fund --loglevel=error --ignore-scripts --before="$NPM_BEFORE" \
        "${PACKAGES[@]}" >&2); then
  rm -rf "$tmp"; die "npm install failed"
fi
chmod 755 "$tmp"
rm -rf "$DIR"
mv "$tmp" "$DIR" || { rm -rf "$tmp"; die "cannot move $tmp to $DIR"; }
complete || die "the install in $DIR lacks one of ${PACKAGES[*]} or of the commands ${COMMANDS[*]}"
say "ready"
echo "$DIR"
