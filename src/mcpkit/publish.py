"""``mcpkit registry``: a ``server.json`` for the official MCP Registry, from the server and its
pyproject.toml.

The Registry (registry.modelcontextprotocol.io) hosts metadata only: a name in reverse-DNS form,
a description, a version, and where to get the server (a PyPI package run over stdio) or reach
it (a remote URL). The schema is the 2025-12-11 one. What can be read from the project is read;
the namespace (``io.github.USER/NAME`` for GitHub-authenticated publishers) has to be given.
The environment switches offered are the ones this server actually reads: the policy gates only
when it has a policy, the auth settings only for a remote.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

__all__ = ["REGISTRY_SCHEMA", "server_json", "validate_server_json"]

REGISTRY_SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
_NAME = re.compile(r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$")

#: (name, description, is_secret, default) of the switches a policied stdio server reads
_POLICY_SWITCHES = [
    ("MCPKIT_READ_ONLY", "1: only tools declared read-only are listed and run", False, "0"),
    ("MCPKIT_ALLOW_DESTRUCTIVE", "1: also offer tools declared destructive", False, "0"),
    ("MCPKIT_ALLOW_OPEN_WORLD", "1: also offer tools that reach outside systems", False, "0"),
    ("MCPKIT_ROOT", "the directory path arguments are confined to", False, None),
    ("MCPKIT_AUDIT_LOG", "where the audit trail is written (default <root>/.mcpkit/audit.log)", False, None),
]


def _project(pyproject: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(pyproject.read_text())
    except FileNotFoundError:
        raise SystemExit(f"mcpkit registry: no {pyproject}; give --package and --version, or run it in the project") \
            from None
    except tomllib.TOMLDecodeError as exc:
        raise SystemExit(f"mcpkit registry: {pyproject} is not valid TOML ({exc})") from None
    return data.get("project") or {}


def server_json(server: Any, *, name: str, pyproject: Path | None = None, package: str | None = None,
                version: str | None = None, remote_url: str | None = None, entry: str | None = None) -> dict[str, Any]:
    """The ``server.json`` document. ``package``/``version`` default to pyproject's; ``entry``
    is the argument ``mcpkit serve`` takes (a module path), passed after the package's command."""
    project = _project(pyproject) if pyproject is not None else {}
    package = package or project.get("name")
    version = version or project.get("version") or server.version
    description = (server.description or project.get("description") or
                   (server.instructions or "").strip().split("\n", 1)[0] or f"The {server.name} MCP server.")
    doc: dict[str, Any] = {"$schema": REGISTRY_SCHEMA, "name": name, "description": description[:100],
                           "version": version}
    if server.title:
        doc["title"] = server.title
    if server.website_url:
        doc["websiteUrl"] = server.website_url
    urls = project.get("urls") or {}
    repo = next((u for k, u in urls.items() if k.lower() in ("repository", "source", "source code")), None)
    if repo:
        doc["repository"] = {"url": repo, "source": "github" if "github.com" in repo else "git"}
    if package:
        pkg: dict[str, Any] = {"registryType": "pypi", "identifier": package, "version": version,
                               "runtimeHint": "uvx", "transport": {"type": "stdio"}}
        if entry:
            pkg["packageArguments"] = [{"type": "positional", "value": entry}]
        if server._policy is not None:
            pkg["environmentVariables"] = [
                {"name": n, "description": d, "isRequired": False, "isSecret": s, "format": "string",
                 **({"default": default} if default is not None else {})}
                for n, d, s, default in _POLICY_SWITCHES
            ]
        doc["packages"] = [pkg]
    if remote_url:
        doc["remotes"] = [{"type": "streamable-http", "url": remote_url}]
    if "packages" not in doc and "remotes" not in doc:
        raise SystemExit("mcpkit registry: nothing to publish: give the PyPI package (pyproject.toml's "
                         "[project] name, or --package) or a remote URL (--url)")
    problems = validate_server_json(doc)
    if problems:
        raise SystemExit("mcpkit registry: " + "; ".join(problems))
    return doc


def validate_server_json(doc: dict[str, Any]) -> list[str]:
    """The Registry's publishing rules this writer can check without the network."""
    problems = []
    name = doc.get("name", "")
    if not _NAME.match(name) or not 3 <= len(name) <= 200:
        problems.append(f"--name must be reverse-DNS 'namespace/name', e.g. io.github.you/{name or 'server'} "
                        f"(got {name!r})")
    if not 1 <= len(doc.get("description", "")) <= 100:
        problems.append("the description must be 1 to 100 characters")
    version = str(doc.get("version", ""))
    if not version or version == "latest" or re.search(r"^[\^~<>=]|\*|\bx\b", version):
        problems.append(f"the version must be one exact release (got {version!r})")
    return problems


def command(args: Any) -> int:
    """``mcpkit registry TARGET --name NAMESPACE/NAME [--output FILE]``."""
    import json
    import sys

    from .cli import load_server

    server = load_server(args.target)
    entry = args.target if args.target and not args.target.endswith(".py") else None
    doc = server_json(server, name=args.name, pyproject=Path(args.pyproject), package=args.package,
                      version=args.version, remote_url=args.url, entry=entry)
    text = json.dumps(doc, indent=2) + "\n"
    if args.output:
        Path(args.output).write_text(text)
        print(f"wrote {args.output}; the PyPI README must carry the line 'mcp-name: {doc['name']}' "
              "for the Registry to accept the package", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("registry", help="write a server.json for the official MCP Registry")
    p.add_argument("target", help="the server: path/to/server.py[:ATTR] or package.module[:ATTR]")
    p.add_argument("--name", required=True, metavar="NAMESPACE/NAME", help="e.g. io.github.you/weather")
    p.add_argument("--pyproject", default="pyproject.toml", metavar="FILE", help="where the package's name and "
                   "version are read (default ./pyproject.toml)")
    p.add_argument("--package", help="the PyPI package (default: pyproject's [project] name)")
    p.add_argument("--version", help="the version (default: pyproject's, else the server's)")
    p.add_argument("--url", metavar="URL", help="also list a remote Streamable HTTP endpoint")
    p.add_argument("--output", metavar="FILE", help="write here (default: stdout)")
    p.set_defaults(func=command)
