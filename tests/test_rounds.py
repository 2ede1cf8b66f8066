"""Multi-round-trip requests of 2026-07-28 (InputRequiredResult) against the reference server."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest

from tests.conftest import mcpkit_command

V = "2026-07-28"
ALL_CAPS = {"sampling": {}, "elicitation": {}, "roots": {"listChanged": True}}
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def _call(rid: int, tool: str, *, caps: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    params = {"name": tool, "arguments": {}, **extra,
              "_meta": {"io.modelcontextprotocol/protocolVersion": V,
                        "io.modelcontextprotocol/clientCapabilities": ALL_CAPS if caps is None else caps}}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


#: every round runs in a fresh process here, as it may behind a load balancer: they share the key
SHARED_KEY = {"MCPKIT_STATE_KEY": "5e" * 32}


def _run(wire: Any, messages: list[dict[str, Any]], env: dict[str, str] | None = None) -> dict[Any, Any]:
    stdin = "".join(json.dumps(m) + "\n" for m in messages)
    done = subprocess.run(wire.command(mcpkit_command("serve")), input=stdin, capture_output=True, text=True,
                          timeout=60, env={**os.environ, **SHARED_KEY, **(env or {})})
    assert done.returncode == 0, done.stderr[-2000:]
    return {m["id"]: m for m in map(json.loads, done.stdout.splitlines()) if "id" in m}


def _text(answer: dict[str, Any]) -> str:
    return answer["result"]["content"][0]["text"]


@pytest.mark.req("MR-01", "MR-03", "MR-04", "MR-10", "BP-10", "TL-15", "CA-03")
def test_one_round_trip(wire) -> None:
    first = _run(wire, [_call(1, "test_input_required_result_elicitation")])[1]["result"]
    assert first["resultType"] == "input_required"
    assert first["inputRequests"] == {"user_name": {"method": "elicitation/create", "params": {
        "message": "What is your name?", "requestedSchema": NAME_SCHEMA, "mode": "form"}}}
    assert isinstance(first["requestState"], str) and "ttlMs" not in first
    answer = {"user_name": {"action": "accept", "content": {"name": "Alice"}}}
    done = _run(wire, [_call(2, "test_input_required_result_elicitation",
                             inputResponses=answer, requestState=first["requestState"])])[2]
    assert done["result"]["resultType"] == "complete"
    assert _text(done) == "Hello, Alice!"


@pytest.mark.req("MR-04", "MR-09")
def test_several_inputs_at_once_then_several_rounds(wire) -> None:
    first = _run(wire, [_call(1, "test_input_required_result_multiple_inputs")])[1]["result"]
    assert set(first["inputRequests"]) == {"user_name", "greeting", "client_roots"}
    assert {r["method"] for r in first["inputRequests"].values()} == {
        "elicitation/create", "sampling/createMessage", "roots/list"}
    answers = {
        "user_name": {"action": "accept", "content": {"name": "Alice"}},
        "greeting": {"role": "assistant", "content": {"type": "text", "text": "Hello there!"}, "model": "m",
                     "stopReason": "endTurn"},
        "client_roots": {"roots": [{"uri": "file:///test/root", "name": "Test Root"}]},
        "unknown_extra": {"ignored": True},  # MR-09: unknown keys are ignored
    }
    done = _run(wire, [_call(2, "test_input_required_result_multiple_inputs", inputResponses=answers,
                             requestState=first["requestState"])])[2]
    assert _text(done) == "All inputs received."

    r1 = _run(wire, [_call(3, "test_input_required_result_multi_round")])[3]["result"]
    r2 = _run(wire, [_call(4, "test_input_required_result_multi_round", requestState=r1["requestState"],
                           inputResponses={"step1": {"action": "accept", "content": {"name": "Alice"}}})])[4]["result"]
    assert r2["resultType"] == "input_required" and list(r2["inputRequests"]) == ["step2"]
    assert r2["requestState"] != r1["requestState"]  # it now carries the first answer
    r3 = _run(wire, [_call(5, "test_input_required_result_multi_round", requestState=r2["requestState"],
                           inputResponses={"step2": {"action": "accept", "content": {"color": "blue"}}})])[5]
    assert _text(r3) == "Alice likes blue."


@pytest.mark.req("MR-06", "MR-07")
def test_a_forged_or_transplanted_state_is_refused(wire) -> None:
    first = _run(wire, [_call(1, "test_input_required_result_tampered_state")])[1]["result"]
    answer = {"confirm": {"action": "accept", "content": {"ok": True}}}
    out = _run(wire, [
        _call(2, "test_input_required_result_tampered_state", inputResponses=answer,
              requestState=first["requestState"] + "-TAMPERED"),
        # a state sealed for one tool does not open for another
        _call(3, "test_input_required_result_request_state", inputResponses=answer, requestState=first["requestState"]),
    ])
    assert out[2]["error"]["code"] == -32602 and "requestState" in out[2]["error"]["message"]
    assert out[3]["error"]["code"] == -32602


@pytest.mark.req("MR-08", "MR-09")
def test_missing_or_invalid_answers_are_asked_again(wire) -> None:
    out = _run(wire, [
        _call(1, "test_input_required_result_elicitation", inputResponses={"wrong_key": {"action": "accept"}}),
        _call(2, "test_input_required_result_elicitation", inputResponses={"user_name": 12345}),
        _call(3, "test_input_required_result_elicitation", inputResponses=None),
    ])
    for rid in (1, 2, 3):
        assert out[rid]["result"]["resultType"] == "input_required"
        assert list(out[rid]["result"]["inputRequests"]) == ["user_name"]


@pytest.mark.req("MR-05", "MT-08")
def test_only_what_this_request_declared_is_asked(wire) -> None:
    out = _run(wire, [_call(1, "test_input_required_result_capabilities", caps={"sampling": {}})])
    requests = out[1]["result"]["inputRequests"]
    assert [r["method"] for r in requests.values()] == ["sampling/createMessage"]


@pytest.mark.req("PM-08", "MR-02")
def test_a_prompt_can_ask_for_input(wire) -> None:
    meta = {"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": ALL_CAPS}
    get = {"jsonrpc": "2.0", "id": 1, "method": "prompts/get",
           "params": {"name": "test_input_required_result_prompt", "_meta": meta}}
    first = _run(wire, [get])[1]["result"]
    assert list(first["inputRequests"]) == ["user_context"]
    retry = json.loads(json.dumps(get))
    retry["id"] = 2
    retry["params"]["inputResponses"] = {"user_context": {"action": "accept", "content": {"context": "test context"}}}
    retry["params"]["requestState"] = first["requestState"]
    done = _run(wire, [retry])[2]["result"]
    assert done["messages"] == [{"role": "user", "content": {"type": "text", "text": "Use the following context: test context"}}]


@pytest.mark.req("MR-06", "MR-10")
def test_another_process_with_the_key_resumes_the_request(wire) -> None:
    key = {"MCPKIT_STATE_KEY": "11" * 32}
    first = _run(wire, [_call(1, "test_input_required_result_request_state")], env=key)[1]["result"]
    answer = {"confirm": {"action": "accept", "content": {"ok": True}}}
    retry = _call(2, "test_input_required_result_request_state", inputResponses=answer,
                  requestState=first["requestState"])
    assert _text(_run(wire, [retry], env=key)[2]) == "state-ok: confirmation received"
    # without the key, another process cannot open it
    other = _run(wire, [retry], env={"MCPKIT_STATE_KEY": "22" * 32})[2]
    assert other["error"]["code"] == -32602
