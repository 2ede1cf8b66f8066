"""``mcpkit check`` against the corpus of real servers nobody here wrote (corpus.py: the reference
servers on npm and PyPI, the MCP Apps and TypeScript SDK examples, the official Python SDK, FastMCP,
and well-known servers that start without an API key). Each run must report exactly the findings
of the setup's reviewed expectation file (expected/<name>.toml: rule, severity, revisions, why,
spec quote; a rule's usual why and quote come from expected/findings.toml) with its exit code, and
every finding there is verified again by sending the same request raw (raw.py).

The setups run a few at a time in a thread pool (one event loop each) and each gets a test of its
own. Without node, npm or an install, a setup's test fails in CI (.ci/run installs them) and skips
elsewhere (tests/conftest.py ``component_missing``).
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import tomllib
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mcpkit.check import run_checks
from mcpkit.protocol.revisions import CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY
from tests.check.peers.corpus import NAMES, Peer, node_dir, peer, py_venv, serving
from tests.check.peers.raw import RawHttp, RawStdio, initialize

HERE = Path(__file__).resolve().parent
EXPECTED = HERE / "expected"
#: rule -> its usual why, quote and probe, for the expectation files to refer to
CATALOGUE = tomllib.loads((EXPECTED / "findings.toml").read_text(encoding="utf-8"))
EVIL_ORIGIN = "https://evil.example"
#: setups checked at once: each runs up to six connections itself, on a 2-core machine
WORKERS = 2


def expectations(name: str) -> dict[str, Any]:
    """expected/<name>.toml, each finding completed from the catalogue (the file's own words win)."""
    spec = tomllib.loads((EXPECTED / f"{name}.toml").read_text(encoding="utf-8"))
    spec["finding"] = [{**CATALOGUE.get(item["rule"], {}), **item} for item in spec.get("finding", [])]
    return spec


def _expected_failures(spec: dict[str, Any]) -> set[tuple[str, str, str | None]]:
    out = set()
    for item in spec["finding"]:
        for revision in item.get("revisions") or [None]:
            out.add((item["rule"], item["severity"], revision))
    return out


# ------------------------------------------------------------------ raw verification of each finding


def _modern(method: str, params: dict[str, Any], rid: int) -> dict[str, Any]:
    meta = {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: {}}
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": meta}}


async def _stdio_answer(argv: list[str], env: dict[str, str], revision: str, method: str,
                        params: dict[str, Any]) -> dict[str, Any]:
    async with RawStdio(argv, env={**os.environ, **env}) as raw:
        if revision == "2026-07-28":
            await raw.send(_modern(method, params, 7))
            return await raw.answer(7)
        opened = await raw.open(revision)
        assert opened["result"]["protocolVersion"] == revision
        return await raw.request(7, method, params)


async def _http_answer(url: str, revision: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    async with RawHttp(url) as raw:
        if revision == "2026-07-28":
            status, _, message = await raw.post(_modern(method, params, 7), **{
                "MCP-Protocol-Version": revision, "Mcp-Method": method, **(
                    {"Mcp-Name": params["name"]} if "name" in params else {})})
            assert status == 200, status
            return message
        opened = await raw.open(revision)
        assert opened["result"]["protocolVersion"] == revision
        return await raw.request(7, method, params)


async def _answer(p: Peer, target: Any, env: dict[str, str], revision: str, method: str,
                  params: dict[str, Any]) -> dict[str, Any]:
    if p.http:
        return await _http_answer(target, revision, method, params)
    return await _stdio_answer(target, env, revision, method, params)


async def _verify(p: Peer, target: Any, env: dict[str, str], item: dict[str, Any]) -> None:
    """Send the request behind ``item`` raw and see the behaviour the finding describes."""
    probe = item["probe"]
    if probe == "unknown-tool":
        for revision in item["revisions"]:
            answer = await _answer(p, target, env, revision, "tools/call",
                                   {"name": "raw-probe-no-such-tool", "arguments": {}})
            assert "error" not in answer and answer["result"].get("isError") is True, (revision, answer)
    elif probe == "resource-not-found":
        for revision in item["revisions"]:
            answer = await _answer(p, target, env, revision, "resources/read", {"uri": item["uri"]})
            assert answer.get("error", {}).get("code") == item.get("code", -32602), (revision, answer)
    elif probe in ("origin", "host"):
        async with RawHttp(target) as raw:
            extra = {"Origin": EVIL_ORIGIN} if probe == "origin" else {"Host": "evil.example"}
            status, headers, message = await raw.post(initialize("2025-11-25"), **extra)
            raw.session = headers.get("mcp-session-id")  # closed on exit
        assert status == 200 and message["result"]["protocolVersion"] == "2025-11-25", (status, message)
    elif probe in ("session-ended", "session-unknown"):
        async with RawHttp(target) as raw:
            await raw.open("2025-11-25")
            if probe == "session-ended":
                ended = await raw.http.delete(raw.url, headers=raw.headers())
                assert 200 <= ended.status_code < 300, ended.status_code
            else:
                raw.session = "raw-probe-" + uuid.uuid4().hex
            status, _, _ = await raw.post({"jsonrpc": "2.0", "id": 9, "method": "ping"})
            raw.session = None
        assert status == 400, status  # 404 is what the spec asks for
    elif probe == "unknown-tool-code":
        for revision in item["revisions"]:
            answer = await _answer(p, target, env, revision, "tools/call",
                                   {"name": "raw-probe-no-such-tool", "arguments": {}})
            assert answer.get("error", {}).get("code") == item["code"], (revision, answer)
    elif probe in ("tool-description", "tool-schema"):
        revision = (item.get("revisions") or ["2025-11-25"])[0]
        tools = (await _answer(p, target, env, revision, "tools/list", {}))["result"]["tools"]
        [tool] = [t for t in tools if t["name"] == item["tool"]]
        if probe == "tool-description":  # the description, or one in its inputSchema
            longest = max(_strings(tool), key=len)
            assert len(longest) > item["over"], len(longest)
        else:
            assert item["contains"] in json.dumps(tool["inputSchema"]), tool["inputSchema"]
    elif probe == "stdout-noise":
        lines = await _stdout_lines(target, env)
        assert item["line"] in lines, lines
    else:
        raise AssertionError(f"no raw probe {probe!r}")


def _strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        node = list(node.values())
    return [text for child in node for text in _strings(child)] if isinstance(node, list) else []


async def _stdout_lines(argv: list[str], env: dict[str, str]) -> list[str]:
    """What a stdio server writes on stdout up to its answer to initialize, line by line."""
    proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.DEVNULL, env={**os.environ, **env},
                                                limit=2**24)
    assert proc.stdin is not None and proc.stdout is not None
    lines = []
    try:
        proc.stdin.write(json.dumps(initialize("2025-11-25")).encode() + b"\n")
        await proc.stdin.drain()
        async with asyncio.timeout(60):
            while line := await proc.stdout.readline():
                lines.append(line.decode(errors="replace").rstrip("\n"))
                if line.startswith(b"{") and json.loads(line).get("id") == 1:
                    break
    finally:
        proc.kill()
        await proc.wait()
    return lines


# ------------------------------------------------------------------ the runs, a few at a time


@dataclass
class Outcome:
    failed: set[tuple[str, str, str | None]] = field(default_factory=set)
    failures: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    incomplete: str | None = None
    exit_code: int = -1
    tools_called: list[Any] = field(default_factory=list)
    #: why a finding could not be seen again raw, or None
    unverified: str | None = None


async def _check(name: str, tmp: Path) -> Outcome:
    spec = expectations(name)
    p = peer(name, tmp)
    with serving(p) as (target, env):
        # a rule's request gets 30 s, not 10: the corpus judges findings, not speed (bench/
        # check_corpus.py measures that), and no expected finding is a timeout; setups run two
        # at a time beside the rest of the suite, where a loaded machine answered late
        report = await run_checks(target, progress=False, env=env, timeout=30.0)
        out = Outcome({(f.rule, f.severity, f.revision) for f in report.failed()},
                      [f.to_dict() for f in report.failed()], report.error, report.incomplete, report.exit_code,
                      report.tools_called)
        if out.failed == _expected_failures(spec):
            for item in spec["finding"]:
                try:
                    await _verify(p, target, env, item)
                except Exception as exc:  # noqa: BLE001 - reported by the setup's test
                    out.unverified = f"{item['rule']} ({item['probe']}): {type(exc).__name__}: {exc}"
                    break
    return out


def _one(name: str) -> Outcome | BaseException:
    try:
        with tempfile.TemporaryDirectory(prefix=f"peer-{name}-") as tmp:
            return asyncio.run(_check(name, Path(tmp)))
    except BaseException as exc:  # noqa: BLE001 - a skip or failure belongs to the setup's own test
        return exc


@pytest.fixture(scope="module")
def outcomes(request: pytest.FixtureRequest) -> dict[str, Outcome | BaseException]:
    """The run of every setup whose test was selected (-k one runs one)."""
    names = [item.callspec.params["name"] for item in request.session.items
             if getattr(item, "originalname", None) == "test_a_peer_gets_exactly_its_reviewed_findings"]
    node_dir()  # installed once, before the threads ask for them
    py_venv()
    with ThreadPoolExecutor(WORKERS) as pool:
        return dict(zip(names, pool.map(_one, names)))


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("name", NAMES)
def test_a_peer_gets_exactly_its_reviewed_findings(name: str, outcomes: dict[str, Any]) -> None:
    spec = expectations(name)
    out = outcomes[name]
    if isinstance(out, BaseException):
        raise out
    assert out.failed == _expected_failures(spec), out.failures
    assert out.error is None and out.incomplete is None, (out.error, out.incomplete)
    assert out.exit_code == spec["exit_code"]
    assert out.tools_called == []  # the default calls no tool
    assert out.unverified is None, out.unverified


def test_every_expectation_file_is_reviewed() -> None:
    """Each finding says why it is right and quotes the spec; each file belongs to a setup."""
    assert sorted(p.stem for p in EXPECTED.glob("*.toml") if p.stem != "findings") == sorted(NAMES)
    for name in NAMES:
        spec = expectations(name)
        assert spec["peer"] and spec["exit_code"] in (0, 1)
        must = any(item["severity"] == "error" for item in spec["finding"])
        assert spec["exit_code"] == (1 if must else 0), name  # a MUST-clean server exits 0
        for item in spec["finding"]:
            assert item["why"].strip() and item["quote"].strip() and item["probe"], (name, item["rule"])
