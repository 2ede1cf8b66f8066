"""The corpus of real servers ``mcpkit check`` is judged against: what each setup is, and the
command line (stdio) or the command that serves it on a port (HTTP) that runs it.

Every server here is installed by a tools/ script that .ci/run calls, at pinned versions: the Node
ones by tools/install-mcp-servers.sh (npm), the Python reference servers by
tools/install-py-servers.sh (a virtualenv of their own, pinned by tools/py-servers.lock); the
official Python SDK and FastMCP are pins of the dev extra. Each has a reviewed expectation file,
expected/<name>.toml. A server that needs an API key or a network is here only when it starts and
lists without them (a check calls no tool by default).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import component_missing

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
SERVERS = HERE / "servers"


@dataclass
class Peer:
    name: str
    #: the stdio command line, or the command that serves HTTP on {port}
    argv: list[str]
    http: bool = False
    #: variables the server needs ({port} and {tmp} are filled in)
    env: dict[str, str] = field(default_factory=dict)


#: name -> (what it is, for the docs' table; how it runs). Node commands are the bin scripts of
#: their packages, run by path as a client's configuration runs them; "{tmp}" is a fresh directory.
NODE_STDIO: dict[str, tuple[str, list[str]]] = {
    "everything-stdio": ("@modelcontextprotocol/server-everything 2026.8.31", ["mcp-server-everything", "stdio"]),
    "filesystem-stdio": ("@modelcontextprotocol/server-filesystem 2026.8.31", ["mcp-server-filesystem", "{tmp}"]),
    "memory-stdio": ("@modelcontextprotocol/server-memory 2026.8.31", ["mcp-server-memory"]),
    "sequential-thinking-stdio": ("@modelcontextprotocol/server-sequential-thinking 2026.8.31",
                                  ["mcp-server-sequential-thinking"]),
    "github-stdio": ("@modelcontextprotocol/server-github 2025.4.8 (archived reference server), no token",
                     ["mcp-server-github"]),
    "puppeteer-stdio": ("@modelcontextprotocol/server-puppeteer 2025.5.12 (archived reference server)",
                        ["mcp-server-puppeteer"]),
    "aws-kb-retrieval-stdio": ("@modelcontextprotocol/server-aws-kb-retrieval 0.6.2 (archived), no credentials",
                               ["mcp-server-aws-kb-retrieval"]),
    "apps-map-stdio": ("@modelcontextprotocol/server-map 2.0.3 (MCP Apps example)", ["mcp-map-server", "--stdio"]),
    "apps-pdf-stdio": ("@modelcontextprotocol/server-pdf 2.0.4 (MCP Apps example)", ["mcp-pdf-server", "--stdio"]),
    "apps-basic-stdio": ("@modelcontextprotocol/server-basic-vanillajs 2.0.3 (MCP Apps example)",
                         ["mcp-server-basic-vanillajs", "--stdio"]),
    "apps-system-monitor-stdio": ("@modelcontextprotocol/server-system-monitor 2.0.3 (MCP Apps example)",
                                  ["mcp-system-monitor-server", "--stdio"]),
    "playwright-stdio": ("@playwright/mcp 0.0.83", ["playwright-mcp", "--headless", "--isolated"]),
    "chrome-devtools-stdio": ("chrome-devtools-mcp 1.11.0", ["chrome-devtools-mcp", "--headless", "--isolated"]),
    "context7-stdio": ("@upstash/context7-mcp 4.1.1, no API key", ["context7-mcp"]),
    "notion-stdio": ("@notionhq/notion-mcp-server 2.5.2, no token", ["notion-mcp-server"]),
    "chart-stdio": ("@antv/mcp-server-chart 0.9.10", ["mcp-server-chart"]),
    "code-runner-stdio": ("mcp-server-code-runner 0.1.8", ["mcp-server-code-runner"]),
    "git-cyanheads-stdio": ("@cyanheads/git-mcp-server 2.15.3", ["git-mcp-server"]),
    "kubernetes-stdio": ("mcp-server-kubernetes 4.1.7, no cluster", ["mcp-server-kubernetes"]),
    "exa-stdio": ("exa-mcp-server 3.4.1, no API key", ["exa-mcp-server"]),
    "firecrawl-stdio": ("firecrawl-mcp 3.26.0, no API key", ["firecrawl-mcp"]),
    "tavily-stdio": ("tavily-mcp 0.2.22, no API key", ["tavily-mcp"]),
    # --ignore-robots-txt: it fetches airbnb.com's robots.txt at start-up otherwise, and offline that
    # fetch keeps it alive for 10 s after EOF (a finding that would depend on the network)
    "airbnb-stdio": ("@openbnb/mcp-server-airbnb 0.3.0, --ignore-robots-txt", ["mcp-server-airbnb",
                                                                             "--ignore-robots-txt"]),
}
#: the TypeScript SDK's own example servers, shipped in its package (dist/esm/examples/server/)
TS_EXAMPLES: dict[str, tuple[str, str, bool]] = {
    "ts-example-output-schema-stdio": ("TypeScript SDK 1.32.2 example mcpServerOutputSchema", "mcpServerOutputSchema", False),
    "ts-example-sampling-stdio": ("TypeScript SDK 1.32.2 example toolWithSampleServer", "toolWithSampleServer", False),
    "ts-example-streamable-http": ("TypeScript SDK 1.32.2 example simpleStreamableHttp", "simpleStreamableHttp", True),
    "ts-example-json-http": ("TypeScript SDK 1.32.2 example jsonResponseStreamableHttp", "jsonResponseStreamableHttp",
                             True),
    "ts-example-stateless-http": ("TypeScript SDK 1.32.2 example simpleStatelessStreamableHttp",
                                  "simpleStatelessStreamableHttp", True),
}
#: the Python reference servers of PyPI, by their console scripts in tools/install-py-servers.sh's venv
#: (mcp-server-sqlite 2025.4.25, the last release, is not here: it does not start on the mcp 2.x the
#: others need, "'Server' object has no attribute 'list_resources'")
PY_SERVERS: dict[str, tuple[str, list[str]]] = {
    "time-stdio": ("mcp-server-time 2026.10.19 (PyPI)", ["mcp-server-time", "--local-timezone", "UTC"]),
    "fetch-stdio": ("mcp-server-fetch 2026.10.24 (PyPI)", ["mcp-server-fetch"]),
    "git-stdio": ("mcp-server-git 2026.10.19 (PyPI), one repository", ["mcp-server-git", "--repository", "{tmp}"]),
}
OTHERS: dict[str, str] = {
    "sdk-stdio": "official Python SDK mcp 2.3.0 (MCPServer): servers/sdk_server.py",
    "sdk-http": "official Python SDK mcp 2.3.0, Streamable HTTP: servers/sdk_server.py --http",
    "fastmcp-stdio": "FastMCP 4.1.6, an issue tracker: servers/fastmcp_server.py tracker",
    "fastmcp-assistant-stdio": "FastMCP 4.1.6, a writing assistant: servers/fastmcp_server.py assistant",
    "fastmcp-http": "FastMCP 4.1.6, Streamable HTTP: servers/fastmcp_server.py tracker --http",
    "ts-stdio": "TypeScript SDK 1.32.2 (McpServer) as its README shows: servers/ts_server.mjs",
    "ts-http": "TypeScript SDK 1.32.2, Streamable HTTP with sessions: servers/ts_server.mjs --http",
    "everything-http": "@modelcontextprotocol/server-everything 2026.8.31, Streamable HTTP",
}

NAMES: list[str] = sorted([*NODE_STDIO, *TS_EXAMPLES, *PY_SERVERS, *OTHERS])


def describe(name: str) -> str:
    for table in (NODE_STDIO, PY_SERVERS):
        if name in table:
            return table[name][0]  # type: ignore[index]
    if name in TS_EXAMPLES:
        return TS_EXAMPLES[name][0]
    return OTHERS[name]


def node() -> str:
    found = shutil.which("node")
    if found is None:
        component_missing("node is not installed (apt-get install nodejs npm); the Node peers need it")
    return found


def _installed(script: str, what: str) -> Path:
    done = subprocess.run(["bash", str(ROOT / "tools" / script)], capture_output=True, text=True, timeout=900)
    if done.returncode != 0 or not done.stdout.strip():
        component_missing(f"{what} are not installed: tools/{script} failed (exit {done.returncode}): "
                          f"{done.stderr[-2000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


@functools.cache
def node_dir() -> Path:
    """The install of tools/install-mcp-servers.sh (installing it when needed)."""
    node()
    return _installed("install-mcp-servers.sh", "the Node peers")


@functools.cache
def py_venv() -> Path:
    """The virtualenv of tools/install-py-servers.sh (installing it when needed)."""
    return _installed("install-py-servers.sh", "the Python reference servers")


def peer(name: str, tmp: Path) -> Peer:
    """How to run ``name``; ``tmp`` is a fresh directory of its own."""
    def fill(args: list[str]) -> list[str]:
        return [a.replace("{tmp}", str(tmp)) for a in args]

    if name.startswith(("sdk-", "fastmcp-")):
        http = name.endswith("-http")
        argv = [sys.executable, str(SERVERS / "sdk_server.py")] if name.startswith("sdk-") else \
            [sys.executable, str(SERVERS / "fastmcp_server.py"), "assistant" if "assistant" in name else "tracker"]
        return Peer(name, [*argv, *(["--http", "{port}"] if http else [])], http=http)
    if name in PY_SERVERS:
        command, *args = PY_SERVERS[name][1]
        if name == "git-stdio":
            subprocess.run(["git", "init", "-q", str(tmp)], check=True)
        return Peer(name, [str(py_venv() / "bin" / command), *fill(args)])
    base = node_dir()
    if name in ("ts-stdio", "ts-http"):
        http = name == "ts-http"
        return Peer(name, [node(), str(SERVERS / "ts_server.mjs"), *(["--http", "{port}"] if http else [])],
                    http=http, env={"MCP_TS_DIR": str(base)})
    if name == "everything-http":
        return Peer(name, [str(base / "node_modules" / ".bin" / "mcp-server-everything"), "streamableHttp"],
                    http=True, env={"PORT": "{port}"})
    if name in TS_EXAMPLES:
        _, example, http = TS_EXAMPLES[name]
        script = base / "node_modules" / "@modelcontextprotocol" / "sdk" / "dist" / "esm" / "examples" / "server"
        if not http:
            return Peer(name, [node(), str(script / f"{example}.js")])
        return Peer(name, [node(), "--require", str(SERVERS / "loopback.cjs"), str(script / f"{example}.js")],
                    http=True, env={"MCPKIT_PEER_PORT": "{port}", "MCP_PORT": "{port}"})
    if name in NODE_STDIO:
        command, *args = NODE_STDIO[name][1]
        env = {"MEMORY_FILE_PATH": str(tmp / "memory.jsonl")} if name == "memory-stdio" else {}
        if name == "filesystem-stdio":
            (tmp / "notes.txt").write_text("hello\n")
        return Peer(name, [str(base / "node_modules" / ".bin" / command), *fill(args)], env=env)
    raise AssertionError(name)


@contextmanager
def serving(peer: Peer) -> Iterator[tuple[list[str] | str, dict[str, str]]]:
    """(the check target, the variables the server needs): a command line for stdio, or the URL
    of the HTTP server started here on a free loopback port (stopped on exit)."""
    from tests.test_http import free_port, stop_server, wait_listening

    if not peer.http:
        yield peer.argv, dict(peer.env)
        return
    port = free_port()
    argv = [a.replace("{port}", str(port)) for a in peer.argv]
    env = {k: v.replace("{port}", str(port)) for k, v in peer.env.items()}
    errlog = tempfile.TemporaryFile()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog,
                            env={**os.environ, **env})
    proc.errlog = errlog  # type: ignore[attr-defined]  # what stop_server reads
    try:
        wait_listening(proc, port, timeout=120.0)
        yield f"http://127.0.0.1:{port}/mcp", env
    finally:
        stop_server(proc)
