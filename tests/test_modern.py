"""The 2026-07-28 revision over stdio: per-request _meta, discover, resultType, cache hints, errors.

Every exchange runs through the traffic tap, so each answer is also validated against the
2026-07-28 schema (tests/wire.py judges a stream by the _meta version its requests carry).
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.conftest import mcpkit_command

V = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {}}
SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def _exchange(wire: Any, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Send every message, close stdin, return everything the server wrote (it answers all first)."""
    stdin = "".join(json.dumps(m) + "\n" for m in messages)
    done = subprocess.run(
        wire.command(mcpkit_command("serve")), input=stdin, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


def _req(rid: int, method: str, params: dict[str, Any] | None = None, meta: dict[str, Any] | None = None) -> dict:
    params = dict(params or {})
    params["_meta"] = {**META, **(meta or {})}
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def _by_id(out: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {m["id"]: m for m in out if "id" in m}


@pytest.mark.req("VN-01", "VN-03", "VN-04", "BP-10", "MT-06", "CA-01", "CA-02")
def test_discover_needs_no_handshake_and_says_what_is_served(wire) -> None:
    out = _by_id(_exchange(wire, [_req(1, "server/discover")]))
    result = out[1]["result"]
    assert result["supportedVersions"] == ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", V]
    assert result["resultType"] == "complete"
    assert result["ttlMs"] == 0 and result["cacheScope"] == "public"
    assert result["capabilities"] == {
        # changes reach subscriptions/listen streams (SB-07)
        "tools": {"listChanged": True}, "resources": {"subscribe": True, "listChanged": True},
        "prompts": {"listChanged": True}, "logging": {}, "completions": {},
        "extensions": {"io.modelcontextprotocol/tasks": {},  # TX-01; no v1 "tasks" capability
                       "io.modelcontextprotocol/skills": {"directoryRead": True}},  # SEP-2640
    }
    assert result["_meta"][SERVER_INFO]["name"] == "mcpkit-reference"


@pytest.mark.req("BP-10", "BP-14", "MT-06", "TL-10", "CA-01", "PA-04")
def test_every_result_is_complete_and_lists_carry_cache_hints(wire) -> None:
    out = _by_id(_exchange(wire, [
        _req(1, "tools/list"),
        _req(2, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}),
        _req(3, "tools/call", {"name": "add", "arguments": {"a": "x", "b": 3}}),
        _req(4, "resources/read", {"uri": "test://static-text"}),
        _req(5, "prompts/list"),
        _req(6, "resources/templates/list"),
        _req(7, "completion/complete", {"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
                                        "argument": {"name": "arg1", "value": "pa"}}),
    ]))
    for rid in range(1, 8):
        assert out[rid]["result"]["resultType"] == "complete", out[rid]
        assert out[rid]["result"]["_meta"][SERVER_INFO]["version"]
    for rid in (1, 4, 5, 6):
        assert (out[rid]["result"]["ttlMs"], out[rid]["result"]["cacheScope"]) == (0, "public")
    assert "ttlMs" not in out[2]["result"]  # a call result is not cacheable
    assert out[2]["result"]["structuredContent"] == {"result": 5}
    assert out[3]["result"]["isError"] is True  # invalid arguments are a tool error (TL-10)
    assert "execution" not in json.dumps(out[1]["result"]["tools"])


@pytest.mark.req("VN-02", "MT-05", "RS-08", "PG-03", "EC-03", "LG-03")
def test_modern_errors(wire) -> None:
    missing_caps = {"jsonrpc": "2.0", "id": 3, "method": "tools/list",
                    "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": V}}}
    out = _by_id(_exchange(wire, [
        _req(1, "tools/list", meta={"io.modelcontextprotocol/protocolVersion": "2099-01-01"}),
        _req(2, "resources/read", {"uri": "test://nope"}),
        missing_caps,
        _req(4, "ping"),
        _req(5, "logging/setLevel", {"level": "debug"}),
        _req(6, "resources/subscribe", {"uri": "test://watched-resource"}),
        _req(7, "tools/list", meta={"io.modelcontextprotocol/logLevel": "loud"}),
    ]))
    assert out[1]["error"]["code"] == -32022
    assert out[1]["error"]["data"] == {"supported": ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", V],
                                       "requested": "2099-01-01"}
    assert out[2]["error"] == {"code": -32602, "message": "Resource not found: test://nope", "data": {"uri": "test://nope"}}
    assert out[3]["error"]["code"] == -32602
    assert "io.modelcontextprotocol/clientCapabilities" in out[3]["error"]["message"]
    for rid in (4, 5, 6):  # gone in this revision
        assert out[rid]["error"]["code"] == -32601
    assert out[7]["error"]["code"] == -32602


@pytest.mark.req("LG-03", "PR-01", "BP-12")
def test_log_messages_only_for_requests_that_ask_for_them(wire) -> None:
    out = _exchange(wire, [
        _req(1, "tools/call", {"name": "test_tool_with_logging", "arguments": {}},
             meta={"io.modelcontextprotocol/logLevel": "info"}),
    ])
    assert [m["params"]["data"] for m in out if m.get("method") == "notifications/message"] == [
        "Tool execution started", "Tool processing data", "Tool execution completed"]
    out = _exchange(wire, [_req(2, "tools/call", {"name": "test_tool_with_logging", "arguments": {}})])
    assert [m for m in out if m.get("method") == "notifications/message"] == []
    out = _exchange(wire, [
        _req(3, "tools/call", {"name": "test_tool_with_logging", "arguments": {}},
             meta={"io.modelcontextprotocol/logLevel": "error"}),
    ])
    assert [m for m in out if m.get("method") == "notifications/message"] == []


@pytest.mark.req("VN-06", "BP-14", "LC-01")
def test_one_stdio_process_serves_both_eras_request_by_request(wire) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}
    out = _by_id(_exchange(wire, [
        init,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 1}}},
        _req(3, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}),
        {"jsonrpc": "2.0", "id": 4, "method": "ping"},
        _req(5, "ping"),
        {"jsonrpc": "2.0", "id": 6, "method": "resources/read", "params": {"uri": "test://nope"}},
        _req(7, "resources/read", {"uri": "test://nope"}),
    ]))
    assert out[1]["result"]["protocolVersion"] == "2025-06-18"
    assert "resultType" not in out[2]["result"] and out[2]["result"]["structuredContent"] == {"result": 2}
    assert out[3]["result"]["resultType"] == "complete" and out[3]["result"]["structuredContent"] == {"result": 3}
    assert out[4]["result"] == {}
    assert out[5]["error"]["code"] == -32601
    assert out[6]["error"]["code"] == -32002  # the session's revision
    assert out[7]["error"]["code"] == -32602  # this request's revision


@pytest.mark.req("SB-01", "SB-02", "SB-03", "SB-05", "SB-07", "MT-09", "TL-13", "RS-09", "RS-10", "PM-07", "ST-09")
def test_listen_streams_get_what_they_asked_for(wire) -> None:
    listen = _req("L1", "subscriptions/listen", {"notifications": {
        "toolsListChanged": True, "resourceSubscriptions": ["test://watched-resource"]}})
    out = _exchange(wire, [
        listen,
        _req(2, "tools/call", {"name": "test_trigger_tool_change", "arguments": {}}),
        _req(3, "tools/call", {"name": "test_trigger_prompt_change", "arguments": {}}),
        _req(4, "tools/call", {"name": "test_trigger_resource_update", "arguments": {}}),
        _req(5, "tools/call", {"name": "test_trigger_resource_update", "arguments": {"uri": "test://static-text"}}),
    ])
    tagged = [m for m in out if m.get("params", {}).get("_meta", {}).get("io.modelcontextprotocol/subscriptionId") == "L1"]
    assert tagged[0]["method"] == "notifications/subscriptions/acknowledged"  # first, before any change
    assert tagged[0]["params"]["notifications"] == {"toolsListChanged": True,
                                                    "resourceSubscriptions": ["test://watched-resource"]}
    methods = [m["method"] for m in tagged[1:]]
    assert methods.count("notifications/tools/list_changed") == 2  # added, then removed
    assert "notifications/prompts/list_changed" not in methods  # not asked for
    assert [m["params"]["uri"] for m in tagged if m["method"] == "notifications/resources/updated"] == [
        "test://watched-resource"]
    # at the end of input the server ends the stream gracefully, with a result
    end = _by_id(out)["L1"]["result"]
    assert end["resultType"] == "complete" and end["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L1"
    # progress and logs never ride a listen stream: nothing else carries the id
    assert all(m["method"].startswith(("notifications/subscriptions", "notifications/tools", "notifications/resources"))
               for m in tagged)
