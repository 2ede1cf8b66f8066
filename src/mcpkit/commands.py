"""The client-side commands of the ``mcpkit`` CLI: list, call, read, prompt, docs and doctor
(``install``/``config`` live in install.py, ``dev`` in dev/, ``check`` in check/).

TARGET (cli_target.py) is a server to talk to, in any of the forms targets.py reads: a ``.py`` file or
``package.module:ATTR`` (launched as ``python -m mcpkit serve``), a command line in quotes (stdio),
or a URL (Streamable HTTP, or legacy SSE with ``--sse``). Imported only when one of these commands
runs. Results go to stdout; progress, log messages and errors to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shlex
import shutil
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from .cli_target import add_target, client_for, print_log, run, stderr_tail, target_of, with_stderr
from .reference_docs import first_line as _first_line

__all__ = ["register"]


# ------------------------------------------------------------------------------------------ list


def _params(schema: dict[str, Any]) -> str:
    props = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    parts = []
    for name, prop in props.items():
        kind = _kind(prop)
        parts.append(f"{name}: {kind}" + ("" if name in required else "?"))
    return ", ".join(parts)


def _kind(prop: Any) -> str:
    """A parameter's type in a word: a model's name for a ``$ref`` (pydantic's ``$defs``), the
    branches of an ``anyOf``/``oneOf`` (``Model|null``), ``any`` only for a schema that says nothing."""
    if not isinstance(prop, dict):
        return "any"
    kind = prop.get("type")
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    if isinstance(kind, str):
        return kind
    if isinstance(prop.get("$ref"), str):
        return prop["$ref"].rsplit("/", 1)[-1]
    for key in ("anyOf", "oneOf"):
        if isinstance(prop.get(key), list):
            return "|".join(dict.fromkeys(_kind(branch) for branch in prop[key]))
    if "enum" in prop or "const" in prop:
        values = prop["enum"] if "enum" in prop else [prop["const"]]
        return "|".join(dict.fromkeys(type(v).__name__ if v is not None else "null" for v in values))
    return "any"


def _table(rows: list[list[str]], headers: list[str]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(out)


async def _listing(client: Any) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    """Every list the server's capabilities announce, and the methods that failed (by name): a
    server without resources/templates/list still gets its tools listed."""
    from .client import RpcError

    caps = client.server_capabilities
    out: dict[str, list[dict[str, Any]]] = {"tools": [], "resources": [], "resourceTemplates": [], "prompts": []}
    failures: dict[str, str] = {}
    # a server with tool search lists its whole catalog here (docs/tool-search.md)
    wanted = [("tools", "tools/list", partial(client.list_tools, full=True)),
              ("resources", "resources/list", client.list_resources),
              ("resourceTemplates", "resources/templates/list", client.list_resource_templates),
              ("prompts", "prompts/list", client.list_prompts)]
    for key, method, call in wanted:
        if method.split("/")[0] not in caps:
            continue
        try:
            out[key] = await call()
        except RpcError as exc:
            failures[method] = str(exc)
    return out, failures


def _report_failures(failures: dict[str, str]) -> None:
    for method, why in failures.items():
        print(f"mcpkit: {method} failed: {why}; showing the rest", file=sys.stderr)


async def _list(args: argparse.Namespace) -> int:
    async with client_for(args) as client:
        found, failures = await _listing(client)
    _report_failures(failures)
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


# ------------------------------------------------------------------------------------------ call, read, prompt


def _schema_types(schema: Any) -> set[str]:
    """The JSON types a schema admits (an unconstrained one: every type)."""
    if not isinstance(schema, dict):
        return set()
    if isinstance(schema.get("type"), str):
        return {schema["type"]}
    if isinstance(schema.get("type"), list):
        return {t for t in schema["type"] if isinstance(t, str)}
    values = schema["enum"] if isinstance(schema.get("enum"), list) else (
        [schema["const"]] if "const" in schema else None)
    if values is not None:
        return {_json_type(v) for v in values}
    found: set[str] = set()
    for key in ("anyOf", "oneOf"):
        for branch in schema.get(key) or ():
            found |= _schema_types(branch)
    return found


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    return "array" if isinstance(value, list) else "object"


def _convert(text: str, schema: Any) -> Any:
    """A key=value value, read by the parameter's schema: a string parameter keeps the text as it
    is (``city=2024`` stays "2024"); other types take the JSON the text spells (``days=3``,
    ``tags='["a"]'``); with no schema, JSON when the text parses, else the text."""
    types = _schema_types(schema)
    if types == {"string"}:
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if not types:
        return value
    kind = _json_type(value)
    if kind in types or (kind == "integer" and "number" in types):
        return value
    return text if "string" in types else value  # a wrong type: the server names the field


def _arguments(args: argparse.Namespace, schema: dict[str, Any] | None) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    if args.json_args is not None:
        raw = sys.stdin.read() if args.json_args == "-" else args.json_args
        try:
            arguments = json.loads(raw)
        except ValueError as exc:
            raise SystemExit(f"mcpkit: --json wants a JSON object ({exc})") from None
        if not isinstance(arguments, dict):
            raise SystemExit("mcpkit: --json wants a JSON object, e.g. --json '{\"city\": \"Paris\"}'")
    props = (schema or {}).get("properties") or {}
    for pair in args.arguments:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"mcpkit: arguments are key=value, got {pair!r}")
        arguments[key] = _convert(value, props.get(key)) if schema is not None else _convert(value, None)
    return arguments


class _Progress:
    """Progress notifications shown live on stderr: rewritten in place on a terminal, one line each
    otherwise."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.shown = False

    def __call__(self, progress: Any, total: Any = None, message: Any = None) -> None:
        amount = f"{progress}/{total}" if total is not None else f"{progress}"
        line = f"progress {amount}" + (f" {message}" if message else "")
        if self.tty:
            print("\r\x1b[2K" + line, end="", file=sys.stderr, flush=True)
            self.shown = True
        else:
            print(line, file=sys.stderr, flush=True)

    def done(self) -> None:
        if self.shown:
            print(file=sys.stderr)


def _print_content(blocks: Any, stream: Any) -> None:
    for block in blocks or ():
        kind = block.get("type")
        if kind == "text":
            print(block["text"], file=stream)
        elif kind == "resource" and "text" in (block.get("resource") or {}):
            print(block["resource"]["text"], file=stream)
        else:
            mime = block.get("mimeType") or (block.get("resource") or {}).get("mimeType")
            size = f", {len(block['data']) * 3 // 4} bytes" if isinstance(block.get("data"), str) else ""
            print(f"[{kind} content{' ' + mime if mime else ''}{size}]", file=stream)


async def _call(args: argparse.Namespace) -> int:
    from .client import RpcError

    progress = _Progress()
    async with client_for(args, on_log=print_log) as client:
        schema = None
        with contextlib.suppress(RpcError):
            for tool in await client.list_tools(full=True):  # a tool found by tool search too
                if tool.get("name") == args.tool:
                    schema = tool.get("inputSchema") or {}
        arguments = _arguments(args, schema)
        try:
            result = await client.call_tool(args.tool, arguments, progress=progress)
        finally:
            progress.done()
    # read once the client is closed: its readers have drained what the server wrote last
    stderr = client.stderr if result.get("isError") else ""
    if args.raw:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    elif result.get("isError"):
        _print_content(result.get("content"), sys.stderr)
    elif "structuredContent" in result:
        print(json.dumps(result["structuredContent"], indent=2, ensure_ascii=False))
    else:
        _print_content(result.get("content"), sys.stdout)
    tail = stderr_tail(stderr)
    if tail:
        print(f"--- the server's stderr ---\n{tail}", file=sys.stderr)
    return 1 if result.get("isError") else 0


async def _read(args: argparse.Namespace) -> int:
    async with client_for(args, on_log=print_log) as client, with_stderr(client):
        result = await client.read_resource(args.uri)
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return 0
    for item in result.get("contents") or ():
        if "text" in item and args.output:
            Path(args.output).write_text(item["text"], encoding="utf-8")
            print(f"wrote {item.get('uri')} ({item.get('mimeType', 'text')}) to {args.output}", file=sys.stderr)
        elif "text" in item:
            sys.stdout.write(item["text"] if item["text"].endswith("\n") else item["text"] + "\n")
        elif args.output:
            import base64

            Path(args.output).write_bytes(base64.b64decode(item.get("blob", "")))
            print(f"wrote {item.get('uri')} ({item.get('mimeType', 'binary')}) to {args.output}", file=sys.stderr)
        else:
            print(f"[binary {item.get('mimeType', '')} content of {item.get('uri')}, "
                  f"{len(item.get('blob', '')) * 3 // 4} bytes: use --output FILE or --json]")
    return 0


async def _prompt(args: argparse.Namespace) -> int:
    arguments: dict[str, str] = {}
    for pair in args.arguments:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"mcpkit: prompt arguments are key=value, got {pair!r}")
        arguments[key] = value  # prompt arguments are strings by the spec
    async with client_for(args, on_log=print_log) as client, with_stderr(client):
        result = await client.get_prompt(args.name, arguments)
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return 0
    if result.get("description"):
        print(f"# {result['description']}\n")
    for message in result.get("messages") or ():
        print(f"{message.get('role', '?')}:")
        _print_content([message.get("content") or {}], sys.stdout)
    return 0


# ------------------------------------------------------------------------------------------ docs


async def _docs(args: argparse.Namespace) -> int:
    from .reference_docs import markdown, server_listing
    from .targets import resolve

    target = resolve(args.target)
    loadable = target.loadable() if not target.is_url else None
    if loadable is not None and loadable.is_mcpkit():
        # in-process: every tool is documented, the ones the gates hide included and marked
        info, found = server_listing(loadable.load())
        text = markdown(info, found)
    else:
        async with client_for(args) as client:
            found, failures = await _listing(client)
            text = markdown(client.server_info, found, failures)
        _report_failures(failures)
    if args.check:
        path = Path(args.check)
        if not path.is_file():
            print(f"mcpkit: {path} does not exist; write it with: mcpkit docs ... --output {path}", file=sys.stderr)
            return 1
        if path.read_text(encoding="utf-8") != text:
            print(f"mcpkit: {path} is stale; regenerate it with: mcpkit docs ... --output {path}", file=sys.stderr)
            return 1
        return 0
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


# ------------------------------------------------------------------------------------------ doctor


def _version(module: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(module)
    except metadata.PackageNotFoundError:
        return None


async def _doctor_server(args: argparse.Namespace, problems: list[str]) -> None:
    target, transport = target_of(args)
    print(f"\nserver: {target if isinstance(target, str) else shlex.join(target)}")
    if transport in ("http", "sse") and _version("httpx") is None:
        print("  not reached: httpx is not installed (listed above)")
        return
    started = time.perf_counter()
    client = client_for(args, target, transport)
    try:
        async with client as connected:
            print(f"  answered initialize in {(time.perf_counter() - started) * 1000:.0f} ms, "
                  f"protocol {connected.protocol_version}, {connected.server_info.get('name')} "
                  f"{connected.server_info.get('version', '')}".rstrip())
            await connected.ping()
            print("  ping: ok")
            noise = list(getattr(connected, "stdout_noise", ()))
    except Exception as exc:  # noqa: BLE001 - every failure is a finding here
        problems.append(f"the server did not start or answer: {exc}")
        return
    if noise:
        problems.append(f"the server wrote {len(noise)} non-protocol line(s) on stdout, e.g. {noise[0][:80]!r} (ST-02)")
    else:
        print("  stdout: only protocol messages")


def _packages() -> list[tuple[str, str, str, str]]:
    """(distribution, import name, what needs it, extra): the core's, then each extra's once."""
    from ._extras import EXTRAS

    out = [("orjson", "orjson", "core", "core"), ("jsonschema-rs", "jsonschema_rs", "core", "core")]
    for extra, spec in EXTRAS.items():
        for module, distribution in spec.packages:
            if all(distribution != listed for listed, *_ in out):
                out.append((distribution, module, spec.used_by, extra))
    return out


def _needed(args: argparse.Namespace) -> set[str]:
    """The optional packages the server and this environment use (import names)."""
    import os

    from .targets import resolve

    needed = set()
    if os.environ.get("MCPKIT_STORE", "").startswith(("redis://", "rediss://", "unix://")):
        needed.add("redis")
    if (os.environ.get("MCPKIT_AUTH") or "").startswith("jwt"):
        needed |= {"jwt", "cryptography"}
    if args.target:
        target = resolve(args.target)
        if target.is_url:
            needed.add("httpx")
        elif target.kind == "file":
            text = Path(target.location).read_text(encoding="utf-8", errors="replace")
            needed |= {name for name in ("pydantic", "redis", "httpx") if f"import {name}" in text or
                       f"from {name}" in text}
            if '"http"' in text or "'http'" in text or "http_app(" in text:
                needed.add("uvicorn")
    return needed


def _imports(module: str) -> bool:
    """Whether ``module`` imports here (installed metadata alone can belong to a broken install)."""
    import importlib

    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def _doctor(args: argparse.Namespace) -> int:
    problems: list[str] = []
    print(f"python {sys.version.split()[0]} ({sys.executable})")
    if sys.version_info < (3, 11):
        problems.append("mcpkit needs Python 3.11 or newer")
    needed = _needed(args)
    for package, module, need, extra in _packages():
        version = _version(package) if _imports(module) else None
        print(f"  {package:17} {version or 'not installed':16} ({need})")
        if version is None and (extra == "core" or module in needed):
            fix = "pip install mcpkit" if extra == "core" else f"pip install 'mcpkit[{extra}]'"
            problems.append(f"{package} is missing and {'mcpkit' if extra == 'core' else 'this server'} needs it "
                            f"({need}): {fix}")
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
    """Add list, call, read, prompt, docs, install (config), check and doctor to the ``mcpkit``
    subparsers."""
    p = sub.add_parser("list", help="list a server's tools, resources, templates and prompts")
    add_target(p)
    p.add_argument("--json", action="store_true", help="print the raw lists as JSON")
    p.set_defaults(func=lambda a: run(_list(a)))

    p = sub.add_parser("call", help="call a tool: mcpkit call TARGET TOOL key=value ...")
    add_target(p)
    p.add_argument("tool", help="the tool's name")
    p.add_argument("arguments", nargs="*", metavar="KEY=VALUE",
                   help="an argument, read by the tool's schema: a string parameter keeps the text, others are JSON")
    p.add_argument("--json", dest="json_args", metavar="OBJECT",
                   help="the arguments as one JSON object ('-' reads it from stdin); key=value pairs add to it")
    p.add_argument("--raw", action="store_true", help="print the whole CallToolResult as JSON")
    p.set_defaults(func=lambda a: run(_call(a)))

    p = sub.add_parser("read", help="read a resource: mcpkit read TARGET URI")
    add_target(p)
    p.add_argument("uri", help="the resource's URI")
    p.add_argument("--json", action="store_true", help="print the whole ReadResourceResult as JSON")
    p.add_argument("--output", metavar="FILE", help="write the resource (text, or a binary resource's bytes) to FILE")
    p.set_defaults(func=lambda a: run(_read(a)))

    p = sub.add_parser("prompt", help="get a prompt: mcpkit prompt TARGET NAME key=value ...")
    add_target(p)
    p.add_argument("name", help="the prompt's name")
    p.add_argument("arguments", nargs="*", metavar="KEY=VALUE", help="a prompt argument (a string)")
    p.add_argument("--json", action="store_true", help="print the whole GetPromptResult as JSON")
    p.set_defaults(func=lambda a: run(_prompt(a)))

    p = sub.add_parser("docs", help="write a Markdown reference of a server's tools, resources and prompts")
    add_target(p)
    p.add_argument("--output", metavar="FILE", help="write here instead of stdout")
    p.add_argument("--check", metavar="FILE", help="exit 1 when FILE differs from what would be written")
    p.set_defaults(func=lambda a: run(_docs(a)))

    from .install import add_parser as add_install

    add_install(sub)

    from .publish import add_parser as add_registry

    add_registry(sub)

    p = sub.add_parser("check", help="check any MCP server's compliance, rule by rule (exit 1 on errors)")
    from .check.cli import add_arguments, run as run_check

    add_arguments(p)
    p.set_defaults(func=run_check)

    p = sub.add_parser("doctor", help="check this installation, and a server's start-up and stdout")
    add_target(p, optional=True)
    p.set_defaults(func=_doctor)
