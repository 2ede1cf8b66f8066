"""``mcpkit check TARGET``: the command line of the checker (the ``mcpkit`` CLI registers it)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sys
from typing import Any

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="+", metavar="TARGET",
                        help="the server: a command line (stdio; quote it or put it after --) or an http(s):// URL")
    parser.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    parser.add_argument("--junit", metavar="FILE", help="also write the report as JUnit XML to FILE")
    parser.add_argument("--call-read-only", action="store_true",
                        help="call the tools annotated readOnlyHint with sample arguments and check their output")
    parser.add_argument("--conformance", action="store_true",
                        help="HTTP only: also run the official conformance suite (needs npm)")
    parser.add_argument("--revision", action="append", metavar="V",
                        help="check only this protocol revision (repeatable; default: every revision)")
    parser.add_argument("--header", action="append", metavar="'K: V'", default=[],
                        help="HTTP: send this header with every request, e.g. 'Authorization: Bearer ...'")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help="how long one request may take (default 10)")
    parser.add_argument("--rule", action="append", metavar="ID", help="run only this rule (repeatable)")
    parser.add_argument("--hosts", metavar="LIST", default=None,
                        help="the hosts whose hosts.* rules run: a comma list of claude, bedrock, vertex, openai, "
                        "openai-strict, gemini, gemini-openapi, cursor, vscode, or 'all' (default claude,openai,gemini)")
    parser.add_argument("--no-color", action="store_true", help="no colors in the table")


def _headers(values: list[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for value in values:
        name, sep, text = value.partition(":")
        if not sep or not name.strip():
            raise SystemExit(f"mcpkit check: --header wants 'Name: value', got {value!r}")
        headers[name.strip()] = text.strip()
    return headers


def _target(parts: list[str]) -> Any:
    if len(parts) == 1:
        one = parts[0]
        return one if one.startswith(("http://", "https://")) else shlex.split(one)
    return parts


def run(args: argparse.Namespace) -> int:
    """Run the checks ``args`` describe, print the report; the exit code (1 when an error-level
    rule failed)."""
    from .render import render_table
    from .runner import run_checks

    options: dict[str, Any] = {
        "revisions": args.revision, "call_read_only": args.call_read_only, "conformance": args.conformance,
        "headers": _headers(args.header), "rules": set(args.rule) if args.rule else None,
        "hosts": args.hosts,
    }
    if args.timeout is not None:
        options["timeout"] = args.timeout
    try:
        report = asyncio.run(run_checks(_target(args.target), **options))
    except ValueError as exc:
        print(f"mcpkit check: {exc}", file=sys.stderr)
        return 2
    if args.junit:
        report.to_junit(args.junit)
    if args.json:
        print(json.dumps(report.to_json(), indent=2, default=str))
    else:
        color = not args.no_color and sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        print(render_table(report, color=color))
    return report.exit_code


def main(argv: list[str] | None = None) -> int:
    """``python -m mcpkit.check.cli TARGET ...`` (the same as ``mcpkit check``)."""
    parser = argparse.ArgumentParser(prog="mcpkit check", description="Check an MCP server against the spec.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
