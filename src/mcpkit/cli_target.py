"""What every command that talks to a server shares: the TARGET argument and its options
(``--header``, ``--protocol-version``, ``--timeout``, ``--pass-env``, ``--sse``), the client
built from them, and running a command with the one-line errors of the CLI (exit 1, or 2 for a
mistake in the asking). commands.py, the skills command and cli.py's own parsers take them from here.

TARGET is a server to talk to, in any of the forms targets.py reads: a ``.py`` file or
``package.module:ATTR`` (launched as ``python -m mcpkit serve``), a command line in quotes (stdio),
or a URL (Streamable HTTP, or legacy SSE with ``--sse``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_target", "client_for", "headers_of", "inherit_env_of", "print_log", "revision", "run", "stderr_tail",
           "target_of", "unauthorized", "with_stderr"]


def revision(value: str) -> str:
    """A protocol revision mcpkit speaks (argparse type): an unknown one would be offered and
    silently negotiated away, or refused by the server after the connection is made."""
    from .protocol.revisions import SUPPORTED_VERSIONS

    if value not in SUPPORTED_VERSIONS:
        raise argparse.ArgumentTypeError(f"unknown revision {value!r}; give one of {', '.join(SUPPORTED_VERSIONS)}")
    return value


def target_of(args: argparse.Namespace) -> tuple[Any, str]:
    """(target for mcpkit.client.Client, transport) from TARGET (targets.py)."""
    from .targets import resolve

    if not args.target:
        raise SystemExit("mcpkit: give a TARGET: server.py, package.module:ATTR, a command line in quotes, or a URL")
    target = resolve(args.target)
    if not target.is_url:
        # options that do not apply to a stdio server are refused, not ignored
        for flag, given in (("--sse", getattr(args, "sse", False)), ("--header", getattr(args, "header", None))):
            if given:
                raise SystemExit(f"mcpkit: {flag} applies to a URL target only; {args.target!r} runs on stdio")
    return target.client_target(sse=getattr(args, "sse", False))


def headers_of(args: argparse.Namespace) -> dict[str, str]:
    """The --header options as a dict."""
    out: dict[str, str] = {}
    for item in getattr(args, "header", None) or ():
        name, sep, value = item.partition(":")
        if not sep:
            raise SystemExit(f"mcpkit: --header wants 'Name: value', got {item!r}")
        out[name.strip()] = value.strip()
    return out


def print_log(params: dict[str, Any]) -> None:
    """A notifications/message from the server, on stderr."""
    import json

    data = params.get("data")
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    logger = f" {params['logger']}" if params.get("logger") else ""
    print(f"[{params.get('level', 'info')}{logger}] {text}", file=sys.stderr, flush=True)


def client_for(args: argparse.Namespace, target: Any = None, transport: str | None = None, **options: Any) -> Any:
    from ._extras import require
    from .client import Client

    if target is None:
        target, transport = target_of(args)
    if transport in ("http", "sse"):
        require(("a URL target", "client"))
    return _Closing(Client(target, transport=transport or "auto", headers=headers_of(args) or None,
                           protocol_version=getattr(args, "protocol_version", None), timeout=args.timeout,
                           inherit_env=inherit_env_of(args), **options))


def inherit_env_of(args: argparse.Namespace) -> bool | list[str]:
    """A command line is a program we may not have written: it sees an allow-list of our
    environment and what --pass-env names (mcpkit.client.environment); the user's own server
    (Target.runs_own_code) sees everything, as under ``mcpkit serve``."""
    from .client.environment import misnamed
    from .targets import resolve

    names = getattr(args, "pass_env", None) or []
    if misnamed(names):
        raise SystemExit(f"mcpkit: {misnamed(names)}")
    return True if resolve(args.target).runs_own_code() else names


class _Closing:
    """The client as a context manager that says once when closing a stdio server took the
    5 s EOF grace period because it did not exit when its stdin closed (ST-07)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def __aenter__(self) -> Any:
        await self.client.__aenter__()
        return self.client

    async def __aexit__(self, *exc: Any) -> None:
        await self.client.__aexit__(*exc)
        if getattr(self.client.transport, "ignored_eof", False):
            print("mcpkit: note: the server did not exit when its stdin closed; it was stopped after a "
                  "5 s wait (a stdio server should exit on EOF, ST-07)", file=sys.stderr)


def add_target(parser: argparse.ArgumentParser, *, sse: bool = True, optional: bool = False) -> None:
    parser.add_argument("target", nargs="?" if optional else None, metavar="TARGET",
                        help="server.py, package.module:ATTR, a command line in quotes (\"node build/index.js\"), "
                        "or a URL")
    parser.add_argument("--header", action="append", metavar="'NAME: VALUE'", help="an HTTP header (repeatable)")
    parser.add_argument("--protocol-version", type=revision, metavar="V",
                        help="the revision to offer (default: the newest)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for each answer")
    parser.add_argument("--pass-env", action="append", default=[], metavar="NAME",
                        help="pass this variable to a command line's server (repeatable; it gets only HOME, PATH, "
                        "the locale and a few more, docs/cli.md); server.py and module targets get everything")
    if sse:
        parser.add_argument("--sse", action="store_true", help="the URL is a legacy HTTP+SSE endpoint")


def run(coro: Any) -> int:
    import asyncio

    from .client import ClientError, RpcError

    try:
        return int(asyncio.run(coro) or 0)
    except BrokenPipeError:
        raise  # the reader of our output went (`| head`): not the server's error (cli.main)
    except (ClientError, RpcError, OSError) as exc:
        if getattr(exc, "status", None) == 401:  # no credentials, or the wrong ones: a mistake in the asking
            print(f"mcpkit: {unauthorized(exc)}", file=sys.stderr)
            return 2
        message = str(exc)
        data = getattr(exc, "data", None)
        cid = data.get("correlationId") if isinstance(data, dict) else None
        if isinstance(cid, str) and cid not in message:
            # the server's log line about it names this id (an opaque -32603 names nothing else)
            message = f"{message.rstrip('.')} (correlation id {cid})."
        print(f"mcpkit: {message}", file=sys.stderr)
        # read now, the client closed: its readers have drained what the server wrote last
        tail = stderr_tail(getattr(getattr(exc, "stderr_of", None), "stderr", ""))
        if tail:
            print(f"--- the server's stderr ---\n{tail}", file=sys.stderr)
        # a command line that cannot be started is a mistake in the TARGET, as a missing file is
        return 2 if isinstance(exc, ClientError) and isinstance(exc.__cause__, OSError) else 1


def stderr_tail(stderr: str, lines: int = 20) -> str:
    """The end of a stdio server's stderr worth showing with an error: its start-up line
    ("mcpkit: serving ...") says nothing about the error, and is left out."""
    kept = [line for line in (stderr or "").strip().splitlines() if not line.startswith("mcpkit: serving ")]
    return "\n".join(kept[-lines:])


class with_stderr:  # noqa: N801 - used as a context manager, read as a phrase
    """``async with client_for(...) as client, with_stderr(client):`` an RpcError leaving the
    block carries the client (``stderr_of``), for :func:`run` to show the server's stderr with
    it once the client is closed: a server writes about a failure as it answers, or just after."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, kind: Any, exc: Any, tb: Any) -> None:
        from .client import RpcError

        if isinstance(exc, RpcError):
            exc.stderr_of = self.client  # type: ignore[attr-defined]


def unauthorized(exc: Any) -> str:
    """A 401, with the --header that would carry what the server's challenge asks for."""
    import re

    message = getattr(exc, "message", None) or str(exc)
    text = message if message.startswith("HTTP 401") else f"HTTP 401: {message}"
    headers = {str(k).lower(): str(v) for k, v in (getattr(exc, "headers", None) or {}).items()}
    challenge = headers.get("www-authenticate", "")
    params = dict(re.findall(r'([A-Za-z_]+)="([^"]*)"', challenge))
    if challenge.split(" ", 1)[0].lower() == "apikey" and params.get("header"):
        return f"{text.rstrip('.')}; pass the key with --header '{params['header']}: KEY'"
    fix = "pass a valid token" if params.get("error") == "invalid_token" else "pass a token"
    where = f" (the server's authorization metadata: {params['resource_metadata']})" \
        if params.get("resource_metadata") else ""
    return f"{text.rstrip('.')}; {fix} with --header 'Authorization: Bearer TOKEN'{where}"
