"""The proxy's cap on an upstream answer (--max-response-bytes, proxy/sizecap.py): read past
without holding it (client/oversize.py), the call refused with a typed error, the next call served."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpkit.client import Client
from tests.test_http import free_port, wait_listening

aio = pytest.mark.asyncio
PY = sys.executable
NOTES = str(Path(__file__).parent / "servers" / "notes.py")
SERVE_NOTES = [PY, "-m", "mcpkit", "serve", NOTES]
PROXY = [PY, "-m", "mcpkit", "proxy"]
#: the proxy is this checkout's mcpkit (a spawned command sees only an allow-list of the environment)
MINE = ["PYTHONPATH"]


def _refusal(result: dict[str, Any]) -> str:
    assert result.get("isError") is True, result
    return str(result["content"][0]["text"])


async def _over_then_under(client: Client, starts: Path | None = None) -> None:
    text = _refusal(await client.call_tool("blob", {"size": 300_000}))
    assert "E_TOO_LARGE" in text or "over the proxy's limit of 100000 bytes" in text, text
    assert "100000" in text and "--max-response-bytes" in text, text
    assert (await client.call_tool("blob", {"size": 50}))["content"][0]["text"] == "x" * 50  # the link carries on
    if starts is not None:
        assert len(starts.read_text().split()) == 1  # not reconnected: the upstream was never restarted


@aio
async def test_a_stdio_upstreams_answer_over_the_cap_is_refused_and_the_next_call_works(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    async with Client([*PROXY, "--max-response-bytes", "100000", "--pass-env", "NOTES_STARTS", "--", *SERVE_NOTES],
                      env={"NOTES_STARTS": str(starts)}, inherit_env=MINE) as client:
        await _over_then_under(client, starts)


@contextlib.contextmanager
def _http_upstream(*options: str) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([*SERVE_NOTES, "--http", f"127.0.0.1:{port}", *options], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(proc, port, timeout=60)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(15)


@aio
@pytest.mark.parametrize("mode", [[], ["--json"]], ids=["sse", "json"])
async def test_an_http_upstreams_answer_over_the_cap_is_refused_and_the_next_call_works(mode: list[str]) -> None:
    with _http_upstream(*mode) as url:
        async with Client([*PROXY, "--max-response-bytes", "100000", url], inherit_env=MINE) as client:
            await _over_then_under(client)


@aio
async def test_the_cap_from_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"notes": {"command": PY, "args": SERVE_NOTES[1:]}},
                                  "max_response_bytes": 100000}))
    async with Client([*PROXY, "--config", str(config)], inherit_env=MINE) as client:
        text = _refusal(await client.call_tool("blob", {"size": 300_000}))
        assert "100000" in text, text
    config.write_text(json.dumps({"mcpServers": {"notes": {"command": PY, "args": SERVE_NOTES[1:]}},
                                  "max_response_bytes": "1MB"}))
    done = subprocess.run([*PROXY, "--config", str(config)], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and '"max_response_bytes" must be a positive number of bytes' in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@aio
async def test_a_client_with_max_message_bytes_fails_only_the_request_answered_too_large() -> None:
    from mcpkit.client import MessageTooLarge

    async with Client(SERVE_NOTES, max_message_bytes=100_000) as client:
        with pytest.raises(MessageTooLarge) as refused:
            await client.call_tool("blob", {"size": 300_000})
        assert refused.value.limit == 100_000 and refused.value.size > 300_000
        assert (await client.call_tool("blob", {"size": 5}))["content"][0]["text"] == "xxxxx"


@pytest.mark.parametrize(("head", "tail", "found"), [
    (b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"id":3,"text":"xx', b'xx"}]}}', 7),  # mcpkit, Python SDK
    (b'{"result":{"content":[{"id":3,"text":"xx', b'xx"}]},"jsonrpc":"2.0","id":"a"}', "a"),  # TypeScript SDK
    (b'{"result":{"items":[{"id":3}', b'{"id":3}]}}', None),  # only nested ids
    (b'{"jsonrpc":"2.0","id":4,"method":"sampling/createMessage","params":{', b'}}', None),  # the server's request
    (b'{"method":"notifications/message","params":{"data":"xx', b'xx","id":5}}', None),
])
def test_the_id_of_a_message_read_past_is_found_in_its_ends(head: bytes, tail: bytes, found: Any) -> None:
    from mcpkit.client.oversize import message_id

    assert message_id(head, tail) == found


class _Chunks:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


@aio
async def test_sse_lines_past_the_limit_come_as_their_ends() -> None:
    from mcpkit.client.oversize import Edges, bounded_lines

    body = [b"data: short\r", b"\ndata: " + b"y" * 50, b"y" * 50 + b"\n\nid: 1\rdata: z\n"]
    lines = [line async for line in bounded_lines(_Chunks(body), 40)]
    assert lines[0] == "data: short"
    assert isinstance(lines[1], Edges) and lines[1].size == 106 and lines[1].tail.endswith(b"y" * 50)
    assert lines[2:] == ["", "id: 1", "data: z"]


@aio
async def test_the_default_cap_is_16_mib() -> None:
    async with Client([*PROXY, "--", *SERVE_NOTES], inherit_env=MINE, timeout=120) as client:
        text = _refusal(await client.call_tool("blob", {"size": 17 * 1024 * 1024}))
        assert "over the proxy's limit of 16777216 bytes" in text, text
        assert len((await client.call_tool("blob", {"size": 1024 * 1024}))["content"][0]["text"]) == 1024 * 1024


@aio
async def test_an_http_error_page_over_the_cap_is_read_past_not_held() -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from mcpkit.client import ClientError

    class Huge(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            self.rfile.read(int(self.headers.get("content-length", 0)))
            size = 20 * 1024 * 1024
            self.send_response(500)
            self.send_header("content-type", "text/plain")
            self.send_header("content-length", str(size))
            self.end_headers()
            chunk = b"e" * 65536
            for _ in range(size // len(chunk)):
                self.wfile.write(chunk)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Huge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
        with pytest.raises(ClientError) as refused:
            async with Client(url, max_message_bytes=100_000) as client:
                await client.list_tools()
        assert refused.value.status == 500 and 0 < len(refused.value.body) <= 4096, len(refused.value.body)
    finally:
        server.shutdown()
        server.server_close()
