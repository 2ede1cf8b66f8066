#!/usr/bin/env bash
# Create the peer environments that run-matrix uses, OUTSIDE the repository.
#   BENCH_ENV (default /tmp/mcp-bench-env)/
#     venv-mcp      official Python SDK (PyPI mcp) + uvicorn
#     venv-fastmcp  FastMCP (PyPI fastmcp) + uvicorn
#     venv-floor    orjson + uvicorn, for the hand-written floor servers
#     ts/           npm @modelcontextprotocol/sdk + zod (node)
#     venv-mcpkit   this repository (editable), the server under test
#     venv-mcpkit-fast, venv-floor-fast   the same with uvloop + httptools
# Pins can be overridden: MCP_VERSION, FASTMCP_VERSION, TS_SDK_VERSION, ZOD_VERSION.
# For wrk cross-checks (optional): apt-get install wrk
set -euo pipefail
ENV_DIR=${BENCH_ENV:-/tmp/mcp-bench-env}
MCP_VERSION=${MCP_VERSION:-2.3.0}
FASTMCP_VERSION=${FASTMCP_VERSION:-4.1.6}
TS_SDK_VERSION=${TS_SDK_VERSION:-1.32.2}
ZOD_VERSION=${ZOD_VERSION:-4}
PY=${PYTHON:-python3}

mkdir -p "$ENV_DIR"
mkvenv() {  # name, packages...
  local dir="$ENV_DIR/$1"; shift
  [ -x "$dir/bin/python" ] || "$PY" -m venv "$dir"
  "$dir/bin/pip" install -q --disable-pip-version-check "$@"
}
mkvenv venv-mcp "mcp==$MCP_VERSION" uvicorn
mkvenv venv-fastmcp "fastmcp==$FASTMCP_VERSION" uvicorn
mkvenv venv-floor orjson uvicorn
mkvenv venv-mcpkit -e "$(cd "$(dirname "$0")/.." && pwd)[http]"
# the same with uvloop + httptools (uvicorn picks them up when installed)
mkvenv venv-mcpkit-fast -e "$(cd "$(dirname "$0")/.." && pwd)[fast]"
mkvenv venv-floor-fast orjson "uvicorn[standard]"
mkdir -p "$ENV_DIR/ts"
[ -f "$ENV_DIR/ts/package.json" ] || (cd "$ENV_DIR/ts" && npm init -y >/dev/null)
(cd "$ENV_DIR/ts" && npm install --silent --no-audit --no-fund "@modelcontextprotocol/sdk@$TS_SDK_VERSION" "zod@$ZOD_VERSION")
echo "environments ready in $ENV_DIR"
