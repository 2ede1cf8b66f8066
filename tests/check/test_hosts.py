"""The host-compatibility table (mcpkit/hosts.py) and the hosts.* rules of ``mcpkit check``."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Server
from mcpkit.check import all_rules
from mcpkit.check.cli import main as check_main
from mcpkit.check.runner import run_checks
from mcpkit.hosts import DEFAULT_HOSTS, HOSTS, parse_hosts, server_problems, tool_problems
from tests.policy.conftest import _restore_log_filters  # noqa: F401 - the examples' policies filter the logs

ROOT = Path(__file__).resolve().parents[2]


def test_every_entry_cites_a_public_source() -> None:
    assert set(DEFAULT_HOSTS) <= set(HOSTS)
    assert {"claude", "bedrock", "vertex", "openai", "openai-strict", "gemini", "cursor", "vscode"} <= set(HOSTS)
    features = set()
    for host in HOSTS.values():
        assert host.limits, host.id
        for limit in host.limits:
            assert limit.source.startswith("https://"), (host.id, limit.feature)
            assert limit.effect in ("rejects", "ignores")
            features.add(limit.feature)
    assert {"root-combinator", "ref", "format", "additional-properties", "dialect", "name", "description-length",
            "tool-count"} <= features


def tool(name: str = "t", schema: dict[str, Any] | None = None, description: str = "Does a thing.") -> dict[str, Any]:
    return {"name": name, "description": description,
            "inputSchema": schema or {"type": "object", "properties": {"a": {"type": "string"}}}}


def test_each_host_refuses_what_its_sources_show() -> None:
    union = tool(schema={"type": "object", "anyOf": [{"required": ["a"]}, {"required": ["b"]}]})
    assert {(p.host, p.feature) for p in tool_problems(union)} == {
        ("claude", "root-combinator"), ("openai", "root-combinator"), ("gemini", "root-combinator")}
    dotted = tool("files.read")
    assert {p.host for p in tool_problems(dotted)} == {"claude", "openai"}  # Gemini allows dots
    long = tool(description="x" * 1500)
    (problem,) = tool_problems(long)
    assert problem.host == "openai" and problem.feature == "description-length" and not problem.confirmed
    assert "1500 characters (at most 1024)" in problem.message
    ref_in_union = tool(schema={"type": "object", "properties": {"p": {"anyOf": [{"$ref": "#/$defs/P"},
                                                                                 {"type": "null"}]}},
                                "$defs": {"P": {"type": "object"}}})
    assert [(p.host, p.feature) for p in tool_problems(ref_in_union)] == [("gemini", "ref")]
    draft7_tuple = tool(schema={"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                                "properties": {"xy": {"type": "array", "items": [{"type": "number"}, 3]}}})
    assert ("claude", "dialect") in {(p.host, p.feature) for p in tool_problems(draft7_tuple)}
    assert tool_problems(tool(description=""), ["bedrock"])[0].feature == "description-length"
    optional = tool(schema={"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False})
    assert tool_problems(optional, ["openai-strict"])[0].feature == "strict-required"
    assert [p.feature for p in tool_problems(tool(schema={"type": "object", "properties": {
        "n": {"type": ["integer", "null"]}}}), ["gemini-openapi"])] == ["type-array"]


def test_claude_names_are_64_characters_at_most_as_the_api_documents() -> None:
    assert tool_problems(tool("t" * 64), ["claude"]) == []
    (problem,) = tool_problems(tool("t" * 65), ["claude"])
    assert problem.feature == "name" and "^[a-zA-Z0-9_-]{1,64}$" in problem.message
    assert problem.source == "https://docs.anthropic.com/en/docs/build-with-claude/tool-use/overview"


def test_gemini_refuses_refs_and_another_dialect_and_its_legacy_subset_refuses_more() -> None:
    ref = tool(schema={"type": "object", "properties": {"p": {"$ref": "#/$defs/P", "title": "P"}},
                       "$defs": {"P": {"type": "object", "properties": {"x": {"type": "string"}}}}})
    (problem,) = tool_problems(ref)
    assert (problem.host, problem.feature) == ("gemini", "ref")
    assert "/properties/p has $ref next to title" in problem.message
    described = tool(schema={**ref["inputSchema"], "properties": {"p": {"$ref": "#/$defs/P", "description": "A P."}}})
    assert tool_problems(described, ["gemini"]) == []  # description and default may stand next to it
    dialect = tool(schema={"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
                           "properties": {"a": {"type": "string"}}})
    assert [(p.host, p.feature) for p in tool_problems(dialect)] == [("gemini", "dialect")]
    # what mcpkit generates for def f(a: str, n: int = 3): fine for the JSON Schema form, not the subset
    generated = tool(schema={"type": "object", "properties": {"a": {"type": "string"},
                                                              "n": {"type": "integer", "default": 3}},
                             "required": ["a"], "additionalProperties": False})
    assert tool_problems(generated, ["gemini"]) == []
    assert {(p.feature, p.effect) for p in tool_problems(generated, ["gemini-openapi"])} == {
        ("additional-properties", "rejects"), ("keyword", "rejects")}
    assert "uses default" in next(p.message for p in tool_problems(generated, ["gemini-openapi"])
                                  if p.feature == "keyword")
    for schema in (ref, described, dialect):
        assert "gemini-openapi" in {p.host for p in tool_problems(schema, ["gemini-openapi"])}


def test_openai_strict_refuses_default_other_keywords_and_deep_nesting() -> None:
    closed = {"type": "object", "properties": {"a": {"type": "string", "default": "x"}}, "required": ["a"],
              "additionalProperties": False}
    (problem,) = tool_problems(tool(schema=closed), ["openai-strict"])
    assert problem.feature == "keyword" and "/properties/a uses default" in problem.message
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(11):
        deep = {"type": "object", "properties": {"x": deep}, "required": ["x"], "additionalProperties": False}
    (problem,) = tool_problems(tool(schema=deep), ["openai-strict"])
    assert problem.feature == "size" and "nests 11 objects deep (at most 10)" in problem.message


def test_tool_counts_are_a_server_wide_problem_and_the_claude_code_prefix_counts() -> None:
    many = [tool(f"t{i}") for i in range(41)]
    problems = server_problems(many, ["cursor", "openai", "vscode"])
    assert [(p.host, p.tool, p.effect) for p in problems] == [("cursor", None, "ignores")]
    assert "41 tools listed (at most 40" in str(problems[0])
    assert len(server_problems([tool(f"t{i}") for i in range(129)], ["openai", "vscode"])) == 2


def test_parse_hosts() -> None:
    assert parse_hosts(None) == DEFAULT_HOSTS
    assert parse_hosts("claude, cursor,claude") == ("claude", "cursor")
    assert parse_hosts("all") == tuple(HOSTS)
    with pytest.raises(ValueError, match="unknown host 'claud'; known: claude"):
        parse_hosts("claud")


def test_one_info_rule_per_host() -> None:
    """What a host accepts is no spec text: advice, so info (docs/rules.md's mapping)."""
    rules = all_rules()
    for host_id in HOSTS:
        assert rules[f"hosts.{host_id}"].severity == "info"


def broken_server() -> Server:
    server = Server("broken")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server.add_tool("pick.one", lambda a: "ok", description="Pick one.",
                        input_schema={"type": "object", "oneOf": [
                            {"properties": {"id": {"type": "string"}}, "required": ["id"]},
                            {"properties": {"path": {"type": "string"}}, "required": ["path"]}]})

    @server.tool
    def fine(a: int) -> int:
        """Fine everywhere."""
        return a

    return server


@pytest.mark.asyncio
async def test_check_reports_per_tool_which_hosts_reject_it_and_why() -> None:
    report = await run_checks(broken_server(), revisions=["2025-06-18", "2025-11-25"], progress=False,
                              rules={"hosts.claude", "hosts.openai", "hosts.gemini", "hosts.cursor"})
    assert set(report.rules) == {"hosts.claude", "hosts.openai", "hosts.gemini"}  # cursor: not asked for
    failed = [f for f in report.findings if f.status == "fail"]
    assert {(f.rule, p["feature"]) for f in failed for p in f.detail["problems"]} == {
        ("hosts.claude", "root-combinator"), ("hosts.claude", "name"), ("hosts.openai", "root-combinator"),
        ("hosts.openai", "name"), ("hosts.gemini", "root-combinator")}
    assert all(f.severity == "info" and f.detail["tools"] == ["pick.one"] for f in failed)
    assert len({f.revision for f in failed}) == 1  # checked once, not per revision
    claude = next(f for f in failed if f.rule == "hosts.claude")
    assert claude.message.startswith("Claude (Anthropic API, Claude Code, Claude Desktop) would not take 1 of 2 tool(s) "
                                     "('pick.one') as listed: ")
    assert "would reject tool 'pick.one': inputSchema has oneOf at its root" in claude.message
    assert "https://github.com/anthropics/claude-code/issues/657" in claude.message
    assert report.exit_code == 0  # advice: info


@pytest.mark.asyncio
async def test_a_host_rule_fails_once_listing_every_tool_it_would_not_take() -> None:
    """Eight tools with a root oneOf each: one finding per host, naming the eight, not 8 x 3."""
    server = Server("many")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(8):
            server.add_tool(f"pick_{i}", lambda a: "ok", description="Pick one.",
                            input_schema={"type": "object", "oneOf": [
                                {"properties": {"id": {"type": "string"}}, "required": ["id"]},
                                {"properties": {"path": {"type": "string"}}, "required": ["path"]}]})
    report = await run_checks(server, revisions=["2025-11-25"], progress=False,
                              rules={"hosts.claude", "hosts.openai", "hosts.gemini"})
    failed = report.failed()
    assert sorted(f.rule for f in failed) == ["hosts.claude", "hosts.gemini", "hosts.openai"]
    for finding in failed:
        assert finding.detail["tools"] == [f"pick_{i}" for i in range(8)]
        assert len(finding.detail["problems"]) == 8 and finding.message.count("would reject tool ") == 8


@pytest.mark.asyncio
async def test_hosts_picks_the_rules() -> None:
    report = await run_checks(broken_server(), revisions=["2025-11-25"], progress=False, hosts="cursor,vscode")
    assert {r for r in report.rules if r.startswith("hosts.")} == {"hosts.cursor", "hosts.vscode"}


def test_an_unknown_host_is_a_usage_error(capsys) -> None:  # type: ignore[no-untyped-def]
    assert check_main(["--hosts", "claude,nope", "python -c pass"]) == 2
    assert "unknown host 'nope'" in capsys.readouterr().err


# ------------------------------------------------------------------ every schema the repo generates


def _example_servers(tmp_path: Path, reference: bool = True) -> list[Server]:
    from mcpkit.reference import server as reference_server

    os.environ.setdefault("MCPKIT_ROOT", str(tmp_path))
    # examples/openapi_example.py reads its API's document when imported: the test API's own
    from tests.bridge.designs_api import DesignsApi

    document = tmp_path / "designs-openapi.json"
    document.write_text(json.dumps(DesignsApi().app.openapi()))
    kept = os.environ.get("DESIGN_OPENAPI")
    os.environ["DESIGN_OPENAPI"] = str(document)
    servers = [reference_server] if reference else []
    for path in [*sorted((ROOT / "examples").glob("*.py")), ROOT / "examples" / "godot" / "server.py"]:
        spec = importlib.util.spec_from_file_location(f"_example_{path.parent.name}_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        servers.append(module.server)
    if kept is None:  # what a later test reads is its own
        del os.environ["DESIGN_OPENAPI"]
    else:
        os.environ["DESIGN_OPENAPI"] = kept
    for server in servers:
        for manager in [t for t in server._tools.values() if t.actions is not None]:
            manager.rebuild(None)  # every action, whatever the environment's gates
    return servers


async def _host_findings(server: Server, hosts: set[str]) -> list[str]:
    """What `mcpkit check --hosts ...` reports against ``server`` (its hosts.* rules, in memory)."""
    report = await run_checks(server, revisions=["2025-11-25"], progress=False, hosts=sorted(hosts),
                              rules={f"hosts.{h}" for h in hosts})
    assert {r for r in report.rules if r.startswith("hosts.")} == {f"hosts.{h}" for h in hosts}
    return [f"{server.name}: {f.message}" for f in report.findings if f.status == "fail"]


@pytest.mark.asyncio
async def test_every_example_passes_claude_openai_and_gemini_and_strict_with_host_schemas(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    for name, value in (("MCPKIT_ROOT", tmp_path), ("GODOT_PROJECT", tmp_path), ("GODOT_BRIDGE_TOKEN", "t" * 16)):
        monkeypatch.setenv(name, str(value))
    checked = 0
    for server in _example_servers(tmp_path, reference=False):
        assert await _host_findings(server, set(DEFAULT_HOSTS)) == []
        server.host_schemas = "openai-strict"
        try:
            assert await _host_findings(server, {"openai-strict"}) == []
        finally:
            server.host_schemas = None
        checked += len(server._tools)
    assert checked > 25


def test_every_tool_in_the_repo_as_each_host_is_served_it_passes_that_host(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Every tool, gated or not, the reference server's too: as registered it passes claude, openai and
    gemini; and each host of host_schemas passes with the copy it is served (openai-strict, gemini-openapi
    included, which refuse what mcpkit generates: optional properties, additionalProperties, default)."""
    from mcpkit.hostschemas import TARGETS, served_tool, target_for

    for name, value in (("MCPKIT_ROOT", tmp_path), ("GODOT_PROJECT", tmp_path), ("GODOT_BRIDGE_TOKEN", "t" * 16)):
        monkeypatch.setenv(name, str(value))
    checked = 0
    for server in _example_servers(tmp_path):
        tools = [t.describe() for t in server._tools.values()]
        for host in TARGETS:
            served = [served_tool(t, host, server.name) for t in tools]
            hosts = DEFAULT_HOSTS if host == "portable" else [host]
            for problem in server_problems(served, hosts, server_name=server.name):
                pytest.fail(f"{server.name} as {host} is served it: {problem}")
        if server.host_schemas is not None:  # examples/proxy.py: the copies it lists a client not known
            tools = [served_tool(t, target_for(server.host_schemas, None) or "", server.name) for t in tools]
        raw = {(p.host, p.tool) for p in server_problems(tools, DEFAULT_HOSTS, server_name=server.name)}
        # the reference server lists the conformance suite's tools as the suite names and writes them: a
        # name 65 characters long in Claude Code, and a schema that declares 2020-12 on purpose
        expected = {("claude", "test_input_required_result_multiple_inputs"), ("gemini", "json_schema_2020_12_tool")}
        assert raw == (expected if server.name == "mcpkit-reference" else set()), raw
        checked += len(tools)
    assert checked > 40


def test_claude_code_counts_its_prefix_in_the_name() -> None:
    name = "t" * 50
    assert tool_problems(tool(name), ["claude"]) == []
    (problem,) = tool_problems(tool(name), ["claude"], server_name="a-long-server-name")
    assert problem.feature == "name" and not problem.confirmed
    assert f"'mcp__a-long-server-name__{name}', is 75 characters (at most 64)" in problem.message
