"""Collect the tool definitions of real MCP servers into catalog.json (bench/toolsearch).

Each server is started, asked tools/list once (never a call), and stopped; every definition is
stored as the server listed it, with the server it came from. Credentials the servers check at
start-up get a placeholder: no tool is called, so none reaches the service behind it.

    python bench/toolsearch/collect.py NODE_DIR VENVS [--out bench/toolsearch/catalog.json]

NODE_DIR: one or more directories (comma-separated) whose node_modules hold the npm packages
named in SERVERS (``npm install --ignore-scripts PACKAGE@VERSION`` there, the versions of
bench/README.md; tools/install-mcp-servers.sh's cache has the first three); NODE: the Node.js
to run them with (chrome-devtools-mcp and mongodb-mcp-server need 22, which
tools/install-node-deps.sh caches). VENVS: a directory with one virtualenv per PyPI server,
named as the package (``python -m venv VENVS/mcp-server-git && VENVS/mcp-server-git/bin/pip
install mcp-server-git``), each run by its own console script. The versions are read from the
installed packages and stored beside each source. A server that does not list is reported on
stderr and left out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

#: (source, kind, package or path, command after the interpreter, env)
SERVERS: list[tuple[str, str, str, list[str], dict[str, str]]] = [
    ("npm @modelcontextprotocol/server-everything", "npm", "@modelcontextprotocol/server-everything",
     ["dist/index.js"], {}),
    ("npm @modelcontextprotocol/server-filesystem", "npm", "@modelcontextprotocol/server-filesystem",
     ["dist/index.js", "/tmp"], {}),
    ("npm @modelcontextprotocol/server-memory", "npm", "@modelcontextprotocol/server-memory", ["dist/index.js"], {}),
    ("npm @modelcontextprotocol/server-github", "npm", "@modelcontextprotocol/server-github", ["dist/index.js"],
     {"GITHUB_PERSONAL_ACCESS_TOKEN": "placeholder"}),
    ("npm @modelcontextprotocol/server-gitlab", "npm", "@modelcontextprotocol/server-gitlab", ["dist/index.js"],
     {"GITLAB_PERSONAL_ACCESS_TOKEN": "placeholder"}),
    ("npm @modelcontextprotocol/server-slack", "npm", "@modelcontextprotocol/server-slack", ["dist/index.js"],
     {"SLACK_BOT_TOKEN": "placeholder", "SLACK_TEAM_ID": "T0"}),
    ("npm @modelcontextprotocol/server-google-maps", "npm", "@modelcontextprotocol/server-google-maps",
     ["dist/index.js"], {"GOOGLE_MAPS_API_KEY": "placeholder"}),
    ("npm @modelcontextprotocol/server-brave-search", "npm", "@modelcontextprotocol/server-brave-search",
     ["dist/index.js"], {"BRAVE_API_KEY": "placeholder"}),
    ("npm @modelcontextprotocol/server-puppeteer", "npm", "@modelcontextprotocol/server-puppeteer",
     ["dist/index.js"], {}),
    ("npm @modelcontextprotocol/server-sequential-thinking", "npm",
     "@modelcontextprotocol/server-sequential-thinking", ["dist/index.js"], {}),
    ("npm @modelcontextprotocol/server-postgres", "npm", "@modelcontextprotocol/server-postgres",
     ["dist/index.js", "postgresql://127.0.0.1:1/none"], {}),
    ("npm @playwright/mcp", "npm", "@playwright/mcp", ["cli.js", "--caps", "vision,pdf,testing,tracing"], {}),
    ("npm @notionhq/notion-mcp-server", "npm", "@notionhq/notion-mcp-server", ["bin/cli.mjs"],
     {"NOTION_TOKEN": "placeholder"}),
    ("npm chrome-devtools-mcp", "npm", "chrome-devtools-mcp", ["build/src/bin/chrome-devtools-mcp.js"], {}),
    ("npm mongodb-mcp-server", "npm", "mongodb-mcp-server", ["dist/esm/index.js"], {}),
    ("npm mcp-server-kubernetes", "npm", "mcp-server-kubernetes", ["dist/index.js"], {}),
    ("npm @wonderwhy-er/desktop-commander", "npm", "@wonderwhy-er/desktop-commander", ["dist/index.js"], {}),
    ("npm @circleci/mcp-server-circleci", "npm", "@circleci/mcp-server-circleci", ["dist/index.js"],
     {"CIRCLECI_TOKEN": "placeholder"}),
    ("npm firecrawl-mcp", "npm", "firecrawl-mcp", ["dist/index.js"], {"FIRECRAWL_API_KEY": "placeholder"}),
    ("npm tavily-mcp", "npm", "tavily-mcp", ["build/index.js"], {"TAVILY_API_KEY": "placeholder"}),
    ("npm exa-mcp-server", "npm", "exa-mcp-server", ["dist/stdio.cjs"], {"EXA_API_KEY": "placeholder"}),
    ("npm @sentry/mcp-server", "npm", "@sentry/mcp-server", ["dist/index.js"],
     {"SENTRY_ACCESS_TOKEN": "placeholder"}),
    ("pypi mcp-server-git", "py", "mcp-server-git", [], {}),
    ("pypi mcp-server-time", "py", "mcp-server-time", [], {}),
    ("pypi mcp-server-fetch", "py", "mcp-server-fetch", [], {}),
    ("pypi mcp-server-apache-airflow", "py", "mcp-server-apache-airflow", [],
     {"AIRFLOW_HOST": "http://127.0.0.1:1", "AIRFLOW_USERNAME": "x", "AIRFLOW_PASSWORD": "x"}),
    ("pypi mcp-server-ableton-live", "py", "mcp-server-ableton-live", [], {}),
    ("mcpkit examples/weather.py", "repo", "examples/weather.py", [], {}),
    ("mcpkit examples/workspace.py", "repo", "examples/workspace.py", [],
     {"MCPKIT_ALLOW_DESTRUCTIVE": "1", "MCPKIT_ROOT": "/tmp"}),
    ("mcpkit examples/design_api.py", "repo", "examples/design_api.py", [], {"DESIGN_API_KEY": "placeholder"}),
    ("mcpkit reference server", "repo", "mcpkit.reference:server", [], {}),
]


def _package_dir(node_dirs: str, package: str) -> Path:
    for base in node_dirs.split(","):
        found = Path(base) / "node_modules" / package
        if found.is_dir():
            return found
    raise FileNotFoundError(f"{package} is in none of {node_dirs}")


def _version(kind: str, package: str, node_dir: str, venv: Path) -> str:
    if kind == "npm":
        return json.loads((_package_dir(node_dir, package) / "package.json").read_text())["version"]
    if kind == "py":
        out = subprocess.run([str(venv / package / "bin" / "python"), "-m", "pip", "show", package], capture_output=True,
                             text=True).stdout
        return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Version:")), "?")
    return "repo"


def _command(kind: str, package: str, args: list[str], node_dir: str, venv: Path) -> list[str]:
    if kind == "npm":  # NODE: the Node.js to run them with (some need 22)
        return [os.environ.get("NODE", "node"), str(_package_dir(node_dir, package) / args[0]), *args[1:]]
    if kind == "py":
        return [str(venv / package / "bin" / package), *args]
    return [sys.executable, "-m", "mcpkit", "serve", package if ":" in package else str(ROOT / package)]


async def _tools(command: list[str], env: dict[str, str]) -> list[dict[str, Any]]:
    from mcpkit import Client

    async with Client(command, env=env, inherit_env=["PYTHONPATH"], timeout=60) as client:
        return await client.list_tools()


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("node_dir")
    parser.add_argument("venvs", type=Path)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("catalog.json"))
    args = parser.parse_args()
    entries: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for source, kind, package, rest, env in SERVERS:
        try:
            version = _version(kind, package, args.node_dir, args.venvs)
            tools = await asyncio.wait_for(_tools(_command(kind, package, rest, args.node_dir, args.venvs), env), 90)
        except Exception as exc:  # noqa: BLE001 - a server that does not start is reported and skipped
            print(f"{source}: skipped ({type(exc).__name__}: {str(exc)[:200]})", file=sys.stderr)
            continue
        kept = 0
        for tool in tools:
            key = (tool["name"], tool.get("description") or "")
            if key in seen:
                continue
            seen.add(key)
            entries.append({"source": f"{source} {version}", "tool": tool})
            kept += 1
        print(f"{source} {version}: {len(tools)} tools, {kept} new", file=sys.stderr)
    args.out.write_text(json.dumps({"tools": entries}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(entries)} tools -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
