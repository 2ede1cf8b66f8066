"""Secrets in transit (proxy/redaction.py): behind ``mcpkit proxy --redact`` an upstream never
receives a secret from a tool's arguments, and a client never sees one an upstream answers; in
refuse mode the call is refused naming the kind and where; per-upstream and per-tool settings
come from --config; every redaction is audited without the value, and counted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Server
from mcpkit.client import Client, RpcError
from mcpkit.proxy import Upstream
from tests.proxy.servers.leaky import AWS_KEY, GITHUB_TOKEN
from tests.proxy.test_upstream import close_all
from tests.proxy.test_upstream_env import pythonpath

aio = pytest.mark.asyncio
PY = sys.executable
MCPKIT = [PY, "-m", "mcpkit"]
LEAKY = str(Path(__file__).parent / "servers" / "leaky.py")

#: what a model might put in a tool's arguments: a key, a password in a URL, a card, and clean values
PASSWORD = "hunter2-Tr0ub4dor"
ARGUMENTS = {"text": f"deploy with {AWS_KEY} please", "n": 3,
             "nested": {"url": f"postgres://app:{PASSWORD}@db.example.com/prod", "ok": "nothing here"},
             "cards": ["4111 1111 1111 1111"]}
SECRETS = (AWS_KEY, GITHUB_TOKEN, PASSWORD, "4111 1111 1111 1111", "1111 1111 1111 1111")


def received(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def assert_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


async def through_proxy(tmp_path: Path, mode: str, who: str) -> tuple[Path, Path, dict[str, Any]]:
    """Behind `mcpkit proxy --redact MODE`: echo ARGUMENTS, call leak, read config://app, get the
    prompt for ``who``, complete its argument from a value holding a key, echo a clean text. (what the upstream received, the audit file, each
    answer or RpcError, and the proxy's stderr under "stderr")."""
    got, audit = tmp_path / "received.jsonl", tmp_path / "audit.log"
    command = [*MCPKIT, "proxy", "--redact", mode, "--audit", str(audit), "--", PY, LEAKY, str(got)]
    out: dict[str, Any] = {}
    async with Client(command, env=pythonpath()) as client:
        for name, call in (("echo", lambda: client.call_tool("echo", ARGUMENTS)), ("leak", lambda: client.call_tool("leak")),
                           ("read", lambda: client.read_resource("config://app")),
                           ("prompt", lambda: client.get_prompt("setup", {"who": who})),
                           ("complete", lambda: client.complete("setup", "who", f"bo {AWS_KEY}")),
                           ("clean", lambda: client.call_tool("echo", {"text": "no secret here"}))):
            try:
                out[name] = await call()
            except RpcError as exc:
                out[name] = exc
        out["stderr"] = client.stderr
    return got, audit, out


@aio
async def test_mask_keeps_secrets_from_the_upstream_and_the_client_and_audits_without_values(tmp_path: Path) -> None:
    got, audit, out = await through_proxy(tmp_path, "mask", "bob")
    echoed, leaked, contents, prompt, stderr = (out[k] for k in ("echo", "leak", "read", "prompt", "stderr"))
    # what the upstream received: the secrets masked where they were, the rest as sent
    [call, *_, clean] = received(got)
    assert clean["arguments"] == {"text": "no secret here"}
    assert call["arguments"] == {
        "text": "deploy with [redacted:aws-access-key] please", "n": 3,
        "nested": {"url": "postgres://app:[redacted:url-password]@db.example.com/prod", "ok": "nothing here"},
        "cards": ["4[redacted:payment-card]"]}
    assert json.loads(echoed["content"][0]["text"]) == call["arguments"]
    # what the client got back from the upstream: its secrets masked, in text and structuredContent
    assert leaked["content"][0]["text"] == "the deploy key is [redacted:aws-access-key]"
    assert leaked["structuredContent"] == {"key": "[redacted:github-token]"}
    assert contents["contents"][0]["text"] == "AWS_ACCESS_KEY_ID=[redacted:aws-access-key]\nregion=eu-west-1"
    assert prompt["messages"][0]["content"]["text"] == "Hello bob, use token [redacted:github-token]"
    assert out["complete"]["completion"]["values"] == ["bo [redacted:aws-access-key]x", "[redacted:github-token]"]
    assert {"tool": "complete", "arguments": {"value": "bo [redacted:aws-access-key]"}} in received(got)
    # audited: kind, direction, path, tool, upstream; never a value
    text = audit.read_text()
    assert_no_secret(text)
    assert_no_secret(stderr)
    lines = [json.loads(line) for line in text.splitlines() if '"redaction"' in line]
    assert [(line.get("tool") or line.get("method"), line["direction"], line["action"],
             [(f["kind"], f["path"]) for f in line["findings"]]) for line in lines] == [
        ("echo", "arguments", "masked", [("aws-access-key", "/text"), ("url-password", "/nested/url"),
                                         ("payment-card", "/cards/0")]),
        ("leak", "result", "masked", [("aws-access-key", "/content/0/text"), ("github-token", "/structuredContent/key")]),
        ("resources/read", "result", "masked", [("aws-access-key", "/contents/0/text")]),
        ("prompts/get", "result", "masked", [("github-token", "/messages/0/content/text")]),
        ("completion/complete", "arguments", "masked", [("aws-access-key", "/argument/value")]),
        ("completion/complete", "result", "masked", [("github-token", "/completion/values/1")]),
    ]
    assert all(line["upstream"] and line["principal"] == "anonymous" for line in lines)


@aio
async def test_refuse_sends_nothing_up_and_withholds_a_result_naming_kind_and_path(tmp_path: Path) -> None:
    got, audit, out = await through_proxy(tmp_path, "refuse", f"bob {AWS_KEY}")
    refused, withheld, read, prompt, clean, stderr = (out[k] for k in ("echo", "leak", "read", "prompt", "clean", "stderr"))
    # the operator's log says it (masks only at -v: they are in the audit trail)
    assert "tool 'echo': refused 3 secrets in the arguments: aws-access-key at /text" in stderr
    assert_no_secret(stderr)
    assert [c["tool"] for c in received(got)] == ["leak", "echo"]  # the refused echo never reached it
    assert refused["isError"] is True
    error = refused["_meta"]["dev.mcpkit/error"]
    assert error["code"] == "E_PERMISSION_DENIED" and error["retryable"] is False
    assert error["details"]["direction"] == "arguments" and error["details"]["findings"] == [
        {"kind": "aws-access-key", "path": "/text"}, {"kind": "url-password", "path": "/nested/url"},
        {"kind": "payment-card", "path": "/cards/0"}]
    assert "aws-access-key at /text" in error["message"]
    assert withheld["isError"] is True and withheld["_meta"]["dev.mcpkit/error"]["details"]["findings"] == [
        {"kind": "aws-access-key", "path": "/content/0/text"}, {"kind": "github-token", "path": "/structuredContent/key"}]
    assert "structuredContent" not in withheld
    assert json.loads(clean["content"][0]["text"]) == {"text": "no secret here"}
    assert isinstance(read, RpcError) and read.code == -32603 and "aws-access-key at /contents/0/text" in read.message
    assert isinstance(prompt, RpcError) and prompt.code == -32602 and "aws-access-key at /who" in prompt.message
    assert_no_secret(json.dumps([refused, withheld]) + read.message + prompt.message)
    actions = [(line["action"], line["direction"]) for line in map(json.loads, audit.read_text().splitlines())
               if line.get("event") == "redaction"]
    assert actions == [("refused", "arguments"), ("refused", "result"), ("refused", "result"), ("refused", "arguments"),
                       ("refused", "arguments")]
    assert isinstance(out["complete"], RpcError) and "aws-access-key at /argument/value" in out["complete"].message
    assert_no_secret(audit.read_text())


@aio
async def test_per_upstream_and_per_tool_settings_from_the_config(tmp_path: Path) -> None:
    got, config = tmp_path / "received.jsonl", tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"leaky": {
        "command": PY, "args": [LEAKY, str(got)],
        "redact": {"mode": "refuse", "kinds": ["secrets", "email"],
                   "tools": {"login": {"mode": "off"}, "l*": {"mode": "mask", "arguments": False}}}}}}))
    async with Client([*MCPKIT, "proxy", "--config", str(config)], env=pythonpath()) as client:
        login = await client.call_tool("login", {"password": f"{PASSWORD} {AWS_KEY}"})
        leaked = await client.call_tool("leak", {"to": AWS_KEY})
        mail = await client.call_tool("echo", {"to": "alice@example.com"})
    calls = received(got)
    # login: a name wins over the glob, and its mode is off: the password goes up as given
    assert calls[0] == {"tool": "login", "arguments": {"password": f"{PASSWORD} {AWS_KEY}"}}
    assert "isError" not in login
    # leak, by the glob: arguments not scanned, the result masked rather than refused
    assert calls[1] == {"tool": "leak", "arguments": {"to": AWS_KEY}}
    assert leaked["structuredContent"] == {"key": "[redacted:github-token]"}
    # echo, the upstream's setting: refuse, and e-mail addresses are among the kinds
    assert len(calls) == 2 and mail["isError"] is True
    assert mail["_meta"]["dev.mcpkit/error"]["details"]["findings"] == [{"kind": "email", "path": "/to"}]


@aio
async def test_the_cli_default_applies_under_an_upstream_entry_that_says_otherwise(tmp_path: Path) -> None:
    got_a, got_b, config = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {
        "a": {"command": PY, "args": [LEAKY, str(got_a)]},
        "b": {"command": PY, "args": [LEAKY, str(got_b)], "redact": "off"}}}))
    command = [*MCPKIT, "proxy", "--redact", "mask", "--redact-kinds", "secrets,pii", "--config", str(config)]
    async with Client(command, env=pythonpath()) as client:
        await client.call_tool("a_echo", {"to": "alice@example.com", "key": AWS_KEY})
        await client.call_tool("b_echo", {"to": "alice@example.com", "key": AWS_KEY})
    assert received(got_a)[0]["arguments"] == {"to": "[redacted:email]", "key": "[redacted:aws-access-key]"}
    assert received(got_b)[0]["arguments"] == {"to": "alice@example.com", "key": AWS_KEY}


@pytest.mark.parametrize(("args", "config", "message"), [
    (["--redact", "hide"], None, "argument --redact: invalid choice: 'hide'"),
    (["--redact", "mask", "--redact-kinds", "secrets,passport"], None, "--redact-kinds: unknown kind 'passport'"),
    (["--redact-kinds", "pii"], None, "--redact-kinds needs --redact mask or --redact refuse"),
    ([], {"redact": {"mode": "scrub"}}, "mcpServers.x: redact mode must be mask, refuse or off, got 'scrub'"),
    ([], {"redact": {"kinds": ["aws"]}}, "mcpServers.x: unknown kind 'aws'"),
    ([], {"redact": {"kinds": []}}, "mcpServers.x: no kind named; name kinds (private-key"),
    (["--redact", "mask", "--redact-kinds", ","], None, "--redact-kinds: no kind named"),
    ([], {"redact": {"tools": {"t": {"results": "yes"}}}}, "mcpServers.x.tools.t: redact results must be true or false"),
    ([], {"redact": {"mask": True}}, "unknown redact key(s) mask"),
])
def test_a_redaction_mistake_is_one_line_and_exit_2(tmp_path: Path, args: list[str], config: Any, message: str) -> None:
    if config is not None:
        path = tmp_path / "mcp.json"
        path.write_text(json.dumps({"mcpServers": {"x": {"command": PY, "args": [LEAKY], **config}}}))
        args = [*args, "--config", str(path)]
    else:
        args = [*args, "--", PY, LEAKY]
    done = subprocess.run([*MCPKIT, "proxy", *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                          env={**os.environ})
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


@aio
async def test_in_python_mount_takes_redact_and_without_it_nothing_wraps_the_call_path(tmp_path: Path) -> None:
    got = tmp_path / "received.jsonl"
    server = Server("front")
    plain = server.mount([PY, LEAKY, str(got)], prefix="plain")
    guarded = server.mount([PY, LEAKY, str(got)], prefix="guarded", redact="refuse")
    try:
        assert plain.redaction is None and "_forward" not in vars(plain)  # off: the class's own forwarding
        assert guarded.redaction is not None and "_forward" in vars(guarded)
        assert isinstance(plain, Upstream)
        async with Client(server) as client:
            assert "isError" not in await client.call_tool("plain_echo", {"k": AWS_KEY})
            assert (await client.call_tool("guarded_echo", {"k": AWS_KEY}))["isError"] is True
        assert [c["arguments"] for c in received(got)] == [{"k": AWS_KEY}]
    finally:
        close_all(server)


@aio
async def test_redactions_are_counted_in_the_metrics(tmp_path: Path) -> None:
    pytest.importorskip("prometheus_client")
    from mcpkit.observe.metrics import PrometheusMetrics

    server = Server("front")
    metrics = PrometheusMetrics().attach(server)
    server.mount([PY, LEAKY], name="leaky", redact="mask")
    try:
        async with Client(server) as client:
            await client.call_tool("echo", {"a": AWS_KEY, "b": AWS_KEY})
            await client.call_tool("leak")
    finally:
        close_all(server)
    page = metrics.render().decode()
    assert 'mcp_proxy_redactions_total{action="masked",direction="arguments",kind="aws-access-key",upstream="leaky"} 2.0' in page
    assert 'mcp_proxy_redactions_total{action="masked",direction="result",kind="github-token",upstream="leaky"} 1.0' in page


def test_the_walk_names_json_pointers_skips_binary_and_meta_and_never_passes_deep_nesting_unscanned() -> None:
    from mcpkit.policy.detectors import DEFAULT_KINDS
    from mcpkit.policy.redact import Redactor
    from mcpkit.proxy.redaction import MARKER, scan

    redactor = Redactor(kinds=DEFAULT_KINDS, marker=MARKER)
    clean = {"content": [{"type": "text", "text": "nothing"}], "n": 1}
    found: list[tuple[str, str]] = []
    assert scan(clean, redactor, found) is clean and found == []
    binary = [{"type": "image", "data": AWS_KEY, "mimeType": "image/png"}, {"uri": "a://b", "blob": AWS_KEY}]
    value = {"a/b~c": [AWS_KEY], "content": binary, "_meta": {"k": AWS_KEY}, "data": AWS_KEY}
    out = scan(value, redactor, found)
    assert out == {**value, "a/b~c": ["[redacted:aws-access-key]"], "data": "[redacted:aws-access-key]"}
    assert found == [("aws-access-key", "/a~1b~0c/0"), ("aws-access-key", "/data")]
    deep: Any = AWS_KEY
    for _ in range(150):
        deep = [deep]
    found = []
    out = scan({"x": deep}, redactor, found)
    assert found == [("too-deep", "/x" + "/0" * 99)] and AWS_KEY not in json.dumps(out)


def test_without_redact_the_proxy_imports_nothing_of_it() -> None:
    code = ("import sys, argparse\n"
            "from mcpkit.proxy.config import specs_of\n"
            "from mcpkit.proxy.redactcli import redaction_for\n"
            "args = argparse.Namespace(redact=None, redact_kinds=None)\n"
            "specs = specs_of([], ['python', 'x.py'], None, None)\n"
            "assert redaction_for(args, specs[0], specs, SystemExit) is None\n"
            "print(sorted(m for m in sys.modules if m in ('mcpkit.proxy.redaction', 'mcpkit.policy.detectors')))\n")
    done = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
