"""``mcpkit install CLIENT TARGET`` (alias ``config``): a server's entry in an MCP client's
configuration, in the form that client's file accepts.

- An mcpkit server (a file importing mcpkit, or ``package.module:ATTR``) runs as
  ``python -m mcpkit serve FILE`` with this interpreter.
- Anything else runs as its own command (``node build/index.js``, a Python file using another
  SDK, ``uvx mcp-server-time``): never as ``mcpkit serve`` of something that is not an mcpkit server.
- A URL: Claude Code and VS Code take ``{"type": "http"|"sse", "url"}``, Cursor ``{"url"}``; Claude
  Desktop's file takes only commands, so a URL goes through the ``mcp-remote`` stdio bridge.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

__all__ = ["CLIENTS", "config_entry", "add_parser"]

CLIENTS = ("claude-code", "claude-desktop", "cursor", "vscode")
#: the stdio bridge Claude Desktop's configuration uses for a remote server
MCP_REMOTE = "mcp-remote"
def _absolute(argv: list[str]) -> list[str]:
    """Paths made absolute: a client starts the server from a directory of its own choosing."""
    out = [shutil.which(argv[0]) or argv[0]] if argv else []
    for arg in argv[1:]:
        out.append(os.path.abspath(arg) if not arg.startswith("-") and os.path.exists(arg) else arg)
    return out


def config_entry(client: str, text: str, *, sse: bool = False, serve_args: list[str] | None = None,
                 env: dict[str, str] | None = None) -> dict[str, Any]:
    """The configuration entry for TARGET ``text`` in ``client``'s file."""
    from .targets import resolve

    target = resolve(text)
    serve_args = list(serve_args or ())
    entry: dict[str, Any]
    if target.kind == "url":
        kind = "sse" if sse else "http"
        if client in ("claude-code", "vscode"):
            entry = {"type": kind, "url": target.text}
        elif client == "cursor":
            entry = {"url": target.text}
        else:  # claude-desktop: commands only
            entry = {"command": "npx", "args": ["-y", MCP_REMOTE, target.text, *(["--transport", "sse-only"]
                                                                                 if sse else [])]}
        if serve_args:
            raise SystemExit("mcpkit: --serve-arg is for a server mcpkit serves, not a URL")
    else:
        if target.is_mcpkit():
            served = [] if target.kind == "reference" else [
                target.location + (f":{target.attribute}" if target.attribute else "")
                if target.kind == "file" else target.text]
            command = [sys.executable, "-m", "mcpkit", "serve", *served, *serve_args]
        else:
            if serve_args:
                raise SystemExit(f"mcpkit: --serve-arg is for an mcpkit server; {text!r} is not one "
                                 "(give its own arguments in the quoted command line)")
            command = [sys.executable, target.location] if target.kind == "file" else _absolute(list(target.argv))
        entry = {"command": command[0], "args": command[1:]}
        if client == "vscode":
            entry = {"type": "stdio", **entry}
    if env:
        entry["env"] = dict(env)
    return entry


def _default_name(text: str) -> str:
    from .targets import resolve

    target = resolve(text)
    if target.kind == "url":
        host = urlsplit(target.text).hostname or "mcp-server"
        return host.split(".")[0] if host not in ("127.0.0.1", "localhost", "::1") else "local"
    if target.kind == "command":
        files = [a for a in target.argv[1:] if not a.startswith("-")]
        base = files[-1] if files else target.argv[0]
        return Path(base.rstrip("/")).stem or "mcp-server"
    if target.kind == "module":
        return target.location.split(".")[-1]
    if target.kind == "reference":
        return "mcpkit-reference"
    return Path(target.location).stem


def _config_path(client: str) -> Path:
    home = Path.home()
    if client == "claude-code":
        return Path.cwd() / ".mcp.json"  # the project's shared MCP configuration
    if client == "vscode":
        return Path.cwd() / ".vscode" / "mcp.json"  # the workspace's MCP configuration
    if client == "cursor":
        return home / ".cursor" / "mcp.json"
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    if os.name == "nt":
        return Path(os.environ.get("APPDATA", home)) / "Claude" / "claude_desktop_config.json"
    return home / ".config" / "Claude" / "claude_desktop_config.json"


def _env(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"mcpkit: --env wants KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def _run(args: argparse.Namespace) -> int:
    name = args.name or _default_name(args.server)
    entry = config_entry(args.client, args.server, sse=args.sse, serve_args=args.serve_arg, env=_env(args.env))
    key = "servers" if args.client == "vscode" else "mcpServers"  # VS Code's mcp.json names it "servers"
    if not args.write:
        print(json.dumps({key: {name: entry}}, indent=2))
        if args.client == "claude-code":
            if "command" in entry:
                line = f"claude mcp add {shlex.quote(name)} -- {shlex.join([entry['command'], *entry['args']])}"
            else:
                line = f"claude mcp add --transport {entry['type']} {shlex.quote(name)} {entry['url']}"
            print(f"\n# or: {line}")
        return 0
    path = Path(args.file) if args.file else _config_path(args.client)
    config: dict[str, Any] = {}
    if path.exists():
        try:
            config = json.loads(path.read_text(encoding="utf-8") or "{}")
        except ValueError as exc:
            raise SystemExit(f"mcpkit: {path} is not valid JSON ({exc}); fix or move it first") from None
        shutil.copy2(path, path.with_name(path.name + ".bak"))
    servers = config.setdefault(key, {})
    if name in servers and servers[name] != entry and not args.force:
        raise SystemExit(f"mcpkit: {path} already has a server named {name!r}; pass --force to replace it")
    servers[name] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    print(f"wrote server {name!r} to {path}")
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("install", aliases=["config"],
                       help="add a server to an MCP client's configuration (claude-desktop, claude-code, cursor, vscode)")
    p.add_argument("client", choices=CLIENTS)
    p.add_argument("server", metavar="TARGET",
                   help="a server.py, package.module:ATTR, a command line in quotes, or a URL")
    p.add_argument("--name", help="the server's name in the configuration (default: from the target)")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="an environment variable")
    p.add_argument("--serve-arg", action="append", default=[], metavar="ARG",
                   help="an extra mcpkit serve argument (mcpkit servers only)")
    p.add_argument("--sse", action="store_true", help="the URL is a legacy HTTP+SSE endpoint")
    p.add_argument("--write", action="store_true", help="merge it into the client's configuration file")
    p.add_argument("--file", help="with --write: this configuration file instead of the client's default")
    p.add_argument("--force", action="store_true", help="with --write: replace an entry of the same name")
    p.set_defaults(func=_run)
