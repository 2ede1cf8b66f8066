"""``mcpkit check TARGET``: the command line of the checker (the ``mcpkit`` CLI registers it).

Exit codes: 0 clean (no failure at or above --fail-on), 1 findings, 2 the checker could not do
its job (the server could not be started or reached, it exited before answering, a bad option
such as an unknown rule id, or --deadline ran out before anything failed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

from .model import EXIT_INFRASTRUCTURE, SEVERITIES

__all__ = ["add_arguments", "run"]

FORMATS = ("text", "json", "junit", "sarif", "markdown")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="*", metavar="TARGET",
                        help="the server: server.py, package.module:ATTR, a command line (stdio; quote it or put "
                        "it after --), or an http(s):// URL")
    out = parser.add_argument_group("report")
    out.add_argument("--format", choices=FORMATS, default=None,
                     help="text (default), json, junit (JUnit XML), sarif (SARIF 2.1.0); markdown for --list-rules")
    out.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
    out.add_argument("--json", action="store_true", help="the same as --format json")
    out.add_argument("--junit", metavar="FILE", help="also write the report as JUnit XML to FILE")
    out.add_argument("--list-rules", action="store_true",
                     help="list the rules (id, severity, spec keyword, requirements, revisions) and exit; "
                     "--format json or markdown")
    out.add_argument("--no-color", action="store_true", help="no colors in the table")
    sel = parser.add_argument_group("what to check")
    sel.add_argument("--rule", action="append", metavar="ID",
                     help="run only this rule or family, e.g. http or tools.name (repeatable)")
    sel.add_argument("--skip", action="append", metavar="ID", help="do not run this rule or family (repeatable)")
    sel.add_argument("--revision", action="append", metavar="V",
                     help="check only this protocol revision (repeatable; default: every revision)")
    sel.add_argument("--quick", action="store_true",
                     help="check the latest handshake revision only (one connection)")
    tools = sel.add_mutually_exclusive_group()
    tools.add_argument("--call-tools", "--call-read-only", dest="call_tools", action="store_true",
                       help="call the tools annotated readOnlyHint: true (never any other) with sample and "
                       "invalid arguments, to check their results and errors")
    tools.add_argument("--no-tool-calls", dest="call_tools", action="store_const", const=None,
                       help="call no tool (the default)")
    sel.add_argument("--safe-tool", action="append", metavar="NAME", default=[],
                     help="also call this tool (a name or a glob such as 'notes_*'; repeatable) with sample and "
                     "invalid arguments, as --call-tools does read-only ones: you vouch that running it with "
                     "made-up arguments changes nothing that matters")
    sel.add_argument("--hosts", metavar="LIST", default=None,
                     help="the hosts whose hosts.* rules run: a comma list of claude, bedrock, vertex, openai, "
                     "openai-strict, gemini, gemini-openapi, cursor, vscode, or 'all' (default claude,openai,gemini)")
    from ..proxy.pincli import add_check_arguments

    add_check_arguments(sel)
    sel.add_argument("--conformance", action="store_true",
                     help="HTTP only: also run the official conformance suite (needs npm)")
    ci = parser.add_argument_group("CI")
    ci.add_argument("--fail-on", choices=SEVERITIES, default="error",
                    help="the lowest severity that fails the run (default: error)")
    ci.add_argument("--baseline", metavar="FILE",
                    help="a JSON report of an earlier run (--format json): its failures are reported but do not "
                    "fail the run; new ones do")
    ci.add_argument("--deadline", type=float, metavar="SECONDS", help="stop the whole run after SECONDS")
    ci.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                    help="how long one request may take (default 10)")
    ci.add_argument("--jobs", type=int, default=None, metavar="N",
                    help="connections at once after the first (default: all the others at once; 1 for a server "
                    "that cannot run twice)")
    conn = parser.add_argument_group("connection")
    conn.add_argument("--header", action="append", metavar="'K: V'", default=[],
                      help="HTTP: send this header with every request, e.g. 'Authorization: Bearer ...'")
    conn.add_argument("--pass-env", action="append", default=[], metavar="NAME",
                      help="pass this variable to a command line's server (repeatable; it gets only HOME, PATH, "
                      "the locale and a few more, docs/check.md); server.py and module targets get everything")
    conn.add_argument("--sse", action="store_true", help="the URL is a legacy HTTP+SSE endpoint (2024-11-05)")


def _headers(values: list[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for value in values:
        name, sep, text = value.partition(":")
        if not sep or not name.strip():
            raise SystemExit(f"mcpkit check: --header wants 'Name: value', got {value!r}")
        headers[name.strip()] = text.strip()
    return headers


def _target(parts: list[str]) -> Any:
    """TARGET as every mcpkit command reads it (mcpkit.targets): a server.py or package.module:ATTR
    (run as ``python -m mcpkit serve``; a file on another SDK as itself), a command line, or a URL."""
    if len(parts) == 1:
        from ..targets import resolve

        return resolve(parts[0]).client_target()[0]
    return parts


def _inherit_env(parts: list[str], names: list[str]) -> bool | list[str]:
    """What of our environment the server gets beyond the allow-list (mcpkit.client.environment):
    everything for the user's own server (Target.runs_own_code), as under ``mcpkit serve``; only
    ``names`` (--pass-env) for another's program."""
    from ..targets import Target, resolve

    found = resolve(parts[0]) if len(parts) == 1 else Target("command", " ".join(parts), argv=tuple(parts))
    return True if found.runs_own_code() else names


def _fail(message: str) -> int:
    print(f"mcpkit check: {message}", file=sys.stderr)
    return EXIT_INFRASTRUCTURE


def _emit(text: str, output: str | None) -> None:
    text = text.rstrip("\n")
    if output:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    else:
        print(text)


def run(args: argparse.Namespace) -> int:
    """Run the checks ``args`` describe, print the report; the exit code."""
    from .formats import junit_xml, rules_listing, sarif
    from ..hosts import parse_hosts
    from .registry import resolve
    from .render import render_table
    from .runner import load_baseline, run_checks

    fmt = args.format or ("json" if args.json else "text")
    if args.list_rules:
        _emit(rules_listing(fmt), args.output)
        return 0
    if fmt == "markdown":
        return _fail("--format markdown is for --list-rules; a report is text, json, junit or sarif")
    if not args.target:
        return _fail("give a TARGET: a command line in quotes (stdio) or an http(s):// URL")
    try:
        resolve(args.rule)
        resolve(args.skip)
        parse_hosts(args.hosts)  # an unknown host is a usage error, before anything runs
        baseline = load_baseline(args.baseline) if args.baseline else None
        if args.pin:
            from ..proxy.pincli import usable_lockfile

            usable_lockfile(args.pin)  # a missing or broken one is a usage error, before anything runs
    except ValueError as exc:
        return _fail(str(exc))
    target = _target(args.target)
    from ..client.environment import misnamed

    if misnamed(args.pass_env):
        return _fail(str(misnamed(args.pass_env)))
    if isinstance(target, str):  # a URL: the client's HTTP transport
        from .._extras import MissingExtra, require

        try:
            require(("a URL target", "client"))
        except MissingExtra as exc:
            return _fail(str(exc))
    transport = "auto"
    if args.sse:
        if not isinstance(target, str):
            return _fail("--sse needs an http(s):// URL")
        transport = "sse"
    if args.call_tools is None and args.safe_tool:
        return _fail("--no-tool-calls and --safe-tool contradict each other; drop one")
    options: dict[str, Any] = {
        "revisions": args.revision, "call_read_only": bool(args.call_tools), "conformance": args.conformance,
        "safe_tools": tuple(args.safe_tool),
        "headers": _headers(args.header), "rules": args.rule, "skip": args.skip, "quick": args.quick,
        "deadline": args.deadline, "fail_on": args.fail_on, "baseline": baseline, "transport": transport,
        "hosts": args.hosts, "pin": args.pin, "pin_key": args.pin_key,
        "inherit_env": _inherit_env(args.target, args.pass_env),
    }
    if args.timeout is not None:
        options["timeout"] = args.timeout
    if args.jobs is not None:
        options["jobs"] = args.jobs
    try:
        report = asyncio.run(run_checks(target, **options))
    except ValueError as exc:
        return _fail(str(exc))
    if args.junit:
        with open(args.junit, "w", encoding="utf-8") as fh:
            fh.write(junit_xml(report))
    if fmt == "json":
        _emit(json.dumps(report.to_json(), indent=2, default=str), args.output)
    elif fmt == "junit":
        _emit(junit_xml(report), args.output)
    elif fmt == "sarif":
        _emit(json.dumps(sarif(report), indent=2, default=str), args.output)
    elif report.error is not None:
        # nothing was judged: no table, no advice on fixing the server
        return _fail(report.error)
    else:
        color = not args.no_color and not args.output and sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        _emit(render_table(report, color=color), args.output)
    if report.error is not None:
        print(f"mcpkit check: {report.error}", file=sys.stderr)
    return report.exit_code


def main(argv: list[str] | None = None) -> int:
    """``python -m mcpkit.check.cli TARGET ...`` (the same as ``mcpkit check``)."""
    parser = argparse.ArgumentParser(prog="mcpkit check", description="Check an MCP server against the spec.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
