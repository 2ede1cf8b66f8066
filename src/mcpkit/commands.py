"""The client-side commands of the ``mcpkit`` CLI: list, call, docs, config and doctor.

TARGET is a server to talk to: a URL (Streamable HTTP, or legacy SSE with ``--sse``), a command
line in quotes (stdio), or, for ``docs``, also a Python file or module with a Server (driven
in-process). Imported only when one of these commands runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["register"]


# ------------------------------------------------------------------------------------------ targets


def _target(args: argparse.Namespace) -> tuple[Any, str]:
    """(target for mcpkit.client.Client, transport) from TARGET: a URL or a quoted command line."""
    target = args.target
    if not target:
        raise SystemExit("mcpkit: give a TARGET: a URL, or a command line in quotes")
    if target.startswith(("http://", "https://")):
        return target, "sse" if getattr(args, "sse", False) else "http"
    return shlex.split(target), "stdio"


def _headers(args: argparse.Namespace) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in getattr(args, "header", None) or ():
        name, sep, value = item.partition(":")
        if not sep:
            raise SystemExit(f"mcpkit: --header wants 'Name: value', got {item!r}")
        out[name.strip()] = value.strip()
    return out


def _client(args: argparse.Namespace, target: Any = None, transport: str | None = None) -> Any:
    from .client import Client

    if target is None:
        target, transport = _target(args)
    return Client(target, transport=transport or "auto", headers=_headers(args) or None,
                  protocol_version=getattr(args, "protocol_version", None), timeout=args.timeout)


def _add_target(parser: argparse.ArgumentParser, *, sse: bool = True, optional: bool = False) -> None:
    parser.add_argument("target", nargs="?" if optional else None,
                        help="a URL, or a command line in quotes, e.g. \"python server.py\"")
    parser.add_argument("--header", action="append", metavar="'NAME: VALUE'", help="an HTTP header (repeatable)")
    parser.add_argument("--protocol-version", metavar="V", help="the revision to offer (default: the newest)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for each answer")
    if sse:
        parser.add_argument("--sse", action="store_true", help="the URL is a legacy HTTP+SSE endpoint")


def _run(coro: Any) -> int:
    from .client import ClientError, RpcError

    try:
        return int(asyncio.run(coro) or 0)
    except (ClientError, RpcError, OSError) as exc:
        print(f"mcpkit: {exc}", file=sys.stderr)
        return 1


# ------------------------------------------------------------------------------------------ list


def _first_line(text: str | None, width: int = 70) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def _params(schema: dict[str, Any]) -> str:
    props = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    parts = []
    for name, prop in props.items():
        kind = prop.get("type", "any") if isinstance(prop, dict) else "any"
        kind = "|".join(kind) if isinstance(kind, list) else kind
        parts.append(f"{name}: {kind}" + ("" if name in required else "?"))
    return ", ".join(parts)


def _table(rows: list[list[str]], headers: list[str]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(out)


async def _listing(client: Any) -> dict[str, list[dict[str, Any]]]:
    caps = client.server_capabilities
    out: dict[str, list[dict[str, Any]]] = {"tools": [], "resources": [], "resourceTemplates": [], "prompts": []}
    if "tools" in caps:
        out["tools"] = await client.list_tools()
    if "resources" in caps:
        out["resources"] = await client.list_resources()
        out["resourceTemplates"] = await client.list_resource_templates()
    if "prompts" in caps:
        out["prompts"] = await client.list_prompts()
    return out


async def _list(args: argparse.Namespace) -> int:
    async with _client(args) as client:
        found = await _listing(client)
    if args.json:
        print(json.dumps(found, indent=2, ensure_ascii=False))
        return 0
    sections = [
        ("Tools", ["name", "parameters", "description"],
         [[t["name"], _params(t.get("inputSchema") or {}), _first_line(t.get("description"))] for t in found["tools"]]),
        ("Resources", ["uri", "name", "mime type"],
         [[r["uri"], r.get("name", ""), r.get("mimeType", "")] for r in found["resources"]]),
        ("Resource templates", ["uri template", "name", "description"],
         [[t["uriTemplate"], t.get("name", ""), _first_line(t.get("description"))]
          for t in found["resourceTemplates"]]),
        ("Prompts", ["name", "arguments", "description"],
         [[p["name"], ", ".join(a["name"] + ("" if a.get("required") else "?") for a in p.get("arguments") or ()),
           _first_line(p.get("description"))] for p in found["prompts"]]),
    ]
    blocks = [f"{title} ({len(rows)})\n{_table(rows, headers)}" for title, headers, rows in sections if rows]
    print("\n\n".join(blocks) if blocks else "The server offers no tools, resources or prompts.")
    return 0


# ------------------------------------------------------------------------------------------ call


def _value(text: str) -> Any:
    """A key=value value: JSON when it parses (numbers, booleans, objects), else the string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


async def _call(args: argparse.Namespace) -> int:
    arguments: dict[str, Any] = {}
    for pair in args.arguments:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"mcpkit: arguments are key=value, got {pair!r}")
        arguments[key] = _value(value)
    async with _client(args) as client:
        result = await client.call_tool(args.tool, arguments)
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    elif "structuredContent" in result and not result.get("isError"):
        print(json.dumps(result["structuredContent"], indent=2, ensure_ascii=False))
    else:
        for block in result.get("content") or ():
            if block.get("type") == "text":
                print(block["text"])
            else:
                print(f"[{block.get('type')} content{' ' + block['mimeType'] if 'mimeType' in block else ''}]")
    return 1 if result.get("isError") else 0


# ------------------------------------------------------------------------------------------ docs


def _docs_markdown(info: dict[str, Any], found: dict[str, list[dict[str, Any]]]) -> str:
    name = info.get("title") or info.get("name", "server")
    out = [f"# {name}", ""]
    if info.get("version"):
        out += [f"Version {info['version']}.", ""]
    if found["tools"]:
        out += ["## Tools", ""]
        for tool in found["tools"]:
            out += [f"### `{tool['name']}`", ""]
            if tool.get("description"):
                out += [tool["description"].strip(), ""]
            ann = tool.get("annotations") or {}
            hints = [h for h, k in (("read-only", "readOnlyHint"), ("destructive", "destructiveHint"),
                                    ("idempotent", "idempotentHint"), ("open-world", "openWorldHint")) if ann.get(k)]
            if hints:
                out += [f"*{', '.join(hints)}*", ""]
            schema = tool.get("inputSchema") or {}
            props = schema.get("properties") or {}
            if props:
                required = set(schema.get("required") or ())
                out += ["| parameter | type | required | description |", "|---|---|---|---|"]
                for pname, prop in props.items():
                    kind = prop.get("type", "") if isinstance(prop, dict) else ""
                    kind = " \\| ".join(kind) if isinstance(kind, list) else kind
                    desc = _first_line(prop.get("description"), 200) if isinstance(prop, dict) else ""
                    out.append(f"| `{pname}` | {kind} | {'yes' if pname in required else 'no'} | {desc} |")
                out.append("")
    if found["resources"] or found["resourceTemplates"]:
        out += ["## Resources", ""]
        for res in found["resources"]:
            about = _first_line(res.get("description") or res.get("name"), 200)
            out.append(f"- `{res['uri']}` ({res.get('mimeType', 'no mime type')}): {about}")
        for tpl in found["resourceTemplates"]:
            about = _first_line(tpl.get("description") or tpl.get("name"), 200)
            out.append(f"- `{tpl['uriTemplate']}` (template): {about}")
        out.append("")
    if found["prompts"]:
        out += ["## Prompts", ""]
        for prompt in found["prompts"]:
            args_ = ", ".join(f"`{a['name']}`" + ("" if a.get("required") else " (optional)")
                              for a in prompt.get("arguments") or ())
            about = _first_line(prompt.get("description"), 200)
            out.append(f"- `{prompt['name']}`{': ' + args_ if args_ else ''}: {about}")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


async def _docs(args: argparse.Namespace) -> int:
    target, transport = _docs_target(args)
    async with _client(args, target, transport) as client:
        found = await _listing(client)
        text = _docs_markdown(client.server_info, found)
    if args.check:
        path = Path(args.check)
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current != text:
            print(f"mcpkit: {path} is stale; regenerate it with: mcpkit docs ... --output {path}", file=sys.stderr)
            return 1
        return 0
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def _docs_target(args: argparse.Namespace) -> tuple[Any, str]:
    """A Python file or module with a Server is driven in-process; anything else as for list."""
    target = args.target or ""
    if not target.startswith(("http://", "https://")) and (
            target.endswith(".py") or ":" in target or (target and " " not in target and not shutil.which(target))):
        from .cli import load_server

        return load_server(target), "memory"
    return _target(args)


# ------------------------------------------------------------------------------------------ config


def _config_entry(args: argparse.Namespace) -> dict[str, Any]:
    server = args.server
    if server.startswith(("http://", "https://")):
        entry: dict[str, Any] = {"url": server} if args.client != "claude-code" else {"type": "http", "url": server}
    else:
        path = os.path.abspath(server) if os.path.exists(server) else server
        entry = {"command": sys.executable, "args": ["-m", "mcpkit", "serve", path, *args.serve_arg]}
    if args.env:
        entry["env"] = dict(item.split("=", 1) for item in args.env)
    return entry


def _config_path(client: str) -> Path:
    home = Path.home()
    if client == "claude-code":
        return Path.cwd() / ".mcp.json"  # the project's shared MCP configuration
    if client == "cursor":
        return home / ".cursor" / "mcp.json"
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    if os.name == "nt":
        return Path(os.environ.get("APPDATA", home)) / "Claude" / "claude_desktop_config.json"
    return home / ".config" / "Claude" / "claude_desktop_config.json"


def _config(args: argparse.Namespace) -> int:
    name = args.name or Path(args.server.rstrip("/")).stem or "mcp-server"
    entry = _config_entry(args)
    if not args.write:
        print(json.dumps({"mcpServers": {name: entry}}, indent=2))
        if args.client == "claude-code" and "command" in entry:
            command = shlex.join([entry["command"], *entry["args"]])
            print(f"\n# or: claude mcp add {shlex.quote(name)} -- {command}")
        return 0
    path = Path(args.file) if args.file else _config_path(args.client)
    config: dict[str, Any] = {}
    if path.exists():
        try:
            config = json.loads(path.read_text(encoding="utf-8") or "{}")
        except ValueError as exc:
            raise SystemExit(f"mcpkit: {path} is not valid JSON ({exc}); fix or move it first") from None
        shutil.copy2(path, path.with_name(path.name + ".bak"))
    servers = config.setdefault("mcpServers", {})
    if name in servers and servers[name] != entry and not args.force:
        raise SystemExit(f"mcpkit: {path} already has a server named {name!r}; pass --force to replace it")
    servers[name] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    print(f"wrote server {name!r} to {path}")
    return 0


# ------------------------------------------------------------------------------------------ doctor


def _version(module: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(module)
    except metadata.PackageNotFoundError:
        return None


async def _doctor_server(args: argparse.Namespace, problems: list[str]) -> None:
    target, transport = _target(args)
    print(f"\nserver: {target if isinstance(target, str) else shlex.join(target)}")
    started = time.perf_counter()
    client = _client(args, target, transport)
    try:
        async with client:
            print(f"  answered initialize in {(time.perf_counter() - started) * 1000:.0f} ms, "
                  f"protocol {client.protocol_version}, {client.server_info.get('name')} "
                  f"{client.server_info.get('version', '')}".rstrip())
            await client.ping()
            print("  ping: ok")
            noise = list(getattr(client, "stdout_noise", ()))
    except Exception as exc:  # noqa: BLE001 - every failure is a finding here
        problems.append(f"the server did not start or answer: {exc}")
        return
    if noise:
        problems.append(f"the server wrote {len(noise)} non-protocol line(s) on stdout, e.g. {noise[0][:80]!r} (ST-02)")
    else:
        print("  stdout: only protocol messages")


def _doctor(args: argparse.Namespace) -> int:
    problems: list[str] = []
    print(f"python {sys.version.split()[0]} ({sys.executable})")
    if sys.version_info < (3, 11):
        problems.append("mcpkit needs Python 3.11 or newer")
    for package, need in (("mcpkit", "core"), ("orjson", "core"), ("jsonschema-rs", "core"), ("uvicorn", "http"),
                          ("httpx", "client"), ("cryptography", "auth"), ("PyJWT", "auth"), ("redis", "redis")):
        version = _version(package)
        print(f"  {package:14} {version or 'not installed':16} ({need})")
        if version is None and need == "core":
            problems.append(f"{package} is missing: pip install mcpkit")
    node = shutil.which("node")
    print(f"node {'found at ' + node if node else 'not found'} (needed only by mcpkit check --conformance)")
    if args.target:
        asyncio.run(_doctor_server(args, problems))
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    print("no problems found" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


# ------------------------------------------------------------------------------------------ parser


def register(sub: Any) -> None:
    """Add list, call, docs, config, check and doctor to the ``mcpkit`` subparsers."""
    p = sub.add_parser("list", help="list a server's tools, resources, templates and prompts")
    _add_target(p)
    p.add_argument("--json", action="store_true", help="print the raw lists as JSON")
    p.set_defaults(func=lambda a: _run(_list(a)))

    p = sub.add_parser("call", help="call a tool: mcpkit call TARGET TOOL key=value ...")
    _add_target(p)
    p.add_argument("tool", help="the tool's name")
    p.add_argument("arguments", nargs="*", metavar="KEY=VALUE", help="an argument; the value is JSON when it parses")
    p.add_argument("--json", action="store_true", help="print the whole CallToolResult as JSON")
    p.set_defaults(func=lambda a: _run(_call(a)))

    p = sub.add_parser("docs", help="write a Markdown reference of a server's tools, resources and prompts")
    _add_target(p)
    p.add_argument("--output", metavar="FILE", help="write here instead of stdout")
    p.add_argument("--check", metavar="FILE", help="exit 1 when FILE differs from what would be written")
    p.set_defaults(func=lambda a: _run(_docs(a)))

    p = sub.add_parser("config", help="the MCP client configuration entry for a server")
    p.add_argument("client", choices=["claude-code", "claude-desktop", "cursor"])
    p.add_argument("server", help="a server file or module for mcpkit serve, or a URL")
    p.add_argument("--name", help="the server's name in the configuration (default: the file's stem)")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="an environment variable")
    p.add_argument("--serve-arg", action="append", default=[], metavar="ARG", help="an extra mcpkit serve argument")
    p.add_argument("--write", action="store_true", help="merge it into the client's configuration file")
    p.add_argument("--file", help="with --write: this configuration file instead of the client's default")
    p.add_argument("--force", action="store_true", help="with --write: replace an entry of the same name")
    p.set_defaults(func=_config)

    from .publish import add_parser as add_registry

    add_registry(sub)

    p = sub.add_parser("check", help="check any MCP server's compliance, rule by rule (exit 1 on errors)")
    from .check.cli import add_arguments, run as run_check

    add_arguments(p)
    p.set_defaults(func=run_check)

    p = sub.add_parser("doctor", help="check this installation, and a server's start-up and stdout")
    _add_target(p, optional=True)
    p.set_defaults(func=_doctor)
