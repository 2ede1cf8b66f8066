"""Hostile clients of the HTTP app, in process: what one client must not be able to do to the
server or to other clients (Origin tricks, repeated headers, media-type games, session floods,
worker starvation, slow bodies, big bodies on the event loop).

Each test drives the ASGI app directly (``call``): a scope built here, the body fed through
``receive``, the answer collected from ``send``; a client's address is the scope's ``client``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from mcpkit import Server
from mcpkit.protocol.revisions import HANDSHAKE_VERSIONS

pytestmark = pytest.mark.reliability

LATEST = HANDSHAKE_VERSIONS[-1]
BOTH = "application/json, text/event-stream"
STEP = 10.0  # bound on one wait: generous, never a performance assertion


class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def json(self) -> Any:
        return json.loads(self.body)

    def messages(self) -> list[Any]:
        """The JSON-RPC messages of a JSON body or of an SSE stream."""
        if self.headers.get("content-type", "").startswith("text/event-stream"):
            out = []
            for block in self.body.decode().split("\n\n"):
                data = [line[6:] for line in block.split("\n") if line.startswith("data: ")]
                if data and data[0].strip():
                    out.append(json.loads("\n".join(data)))
            return out
        return [self.json()]


async def call(
    app: Any, method: str = "POST", body: bytes | Any = b"", *, headers: list[tuple[str, str]] | None = None,
    client: str = "127.0.0.1", path: str = "/mcp", chunks: list[bytes] | None = None, hang: bool = False,
) -> Answer:
    """One request to the app; ``chunks`` sends the body in pieces, ``hang`` never ends it."""
    if not isinstance(body, bytes):
        body = json.dumps(body).encode()
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or [])]
    if not any(k == b"host" for k, _ in raw):
        raw.append((b"host", b"127.0.0.1:8000"))
    scope = {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
        "method": method, "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "headers": raw, "client": (client, 40000), "server": ("127.0.0.1", 8000),
    }
    pieces = chunks if chunks is not None else [body]
    incoming: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for i, piece in enumerate(pieces):
        incoming.put_nowait({"type": "http.request", "body": piece, "more_body": hang or i < len(pieces) - 1})
    started: dict[str, Any] = {}
    parts: list[bytes] = []
    ended = asyncio.Event()

    async def receive() -> dict[str, Any]:
        return await incoming.get()

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            started.update(message)
        else:
            parts.append(message.get("body", b""))
            if not message.get("more_body"):
                ended.set()

    task = asyncio.ensure_future(app({**scope}, receive, send))
    try:
        await asyncio.wait_for(ended.wait(), STEP)
    finally:
        incoming.put_nowait({"type": "http.disconnect"})
        await asyncio.wait_for(task, STEP)
    hdrs = {k.decode("latin-1"): v.decode("latin-1") for k, v in started.get("headers", [])}
    return Answer(started["status"], hdrs, b"".join(parts))


def rpc(method: str, params: dict[str, Any] | None = None, rid: int | None = 1) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if rid is not None:
        msg["id"] = rid
    if params is not None:
        msg["params"] = params
    return msg


def initialize(rid: int = 1) -> dict[str, Any]:
    return rpc("initialize", {"protocolVersion": LATEST, "capabilities": {},
                              "clientInfo": {"name": "hostile", "version": "1"}}, rid)


def mcp_headers(session: str | None = None, **extra: str) -> list[tuple[str, str]]:
    out = [("content-type", "application/json"), ("accept", BOTH)]
    if session is not None:
        out += [("mcp-session-id", session), ("mcp-protocol-version", LATEST)]
    out += [(k.replace("_", "-"), v) for k, v in extra.items()]
    return out


async def open_session(app: Any, client: str = "127.0.0.1", headers: list[tuple[str, str]] | None = None) -> str:
    answer = await call(app, body=initialize(), headers=(headers or []) + mcp_headers(), client=client)
    assert answer.status == 200, (answer.status, answer.body)
    session = answer.headers["mcp-session-id"]
    done = await call(app, body=rpc("notifications/initialized", rid=None), client=client,
                      headers=(headers or []) + mcp_headers(session))
    assert done.status == 202
    return session


async def ping(app: Any, session: str, client: str = "127.0.0.1", headers: list[tuple[str, str]] | None = None) -> int:
    answer = await call(app, body=rpc("ping", rid=7), headers=(headers or []) + mcp_headers(session), client=client)
    return answer.status


def small_server() -> Server:
    server = Server("hostile-transport", "1.0")

    @server.tool
    def add(a: int, b: int) -> int:
        return a + b

    return server


@pytest.fixture
def app_factory():
    made: list[Any] = []

    def make(server: Server | None = None, **options: Any) -> Any:
        app = (server or small_server()).http_app(**options)
        made.append(app)
        return app

    yield make
    for app in made:
        app.close_all()


aio = pytest.mark.asyncio


# ============================================================================ 3, 13: Origin


@aio
@pytest.mark.req("HS-02")
@pytest.mark.parametrize("origin", ["null", "http://evil.example", "https://evil.example:8000", "file://",
                                    "http://127.0.0.1.evil.example"])
async def test_any_host_does_not_switch_the_origin_check_off(app_factory, origin):
    app = app_factory(allowed_hosts=["*"])
    answer = await call(app, body=initialize(), headers=mcp_headers(origin=origin, host="anything.example"))
    assert answer.status == 403, answer.body
    assert "configure allowed_origins" in answer.json()["error"]["message"]
    assert app.sessions == {}
    # the Host list still opens the door to requests without an Origin, and to listed origins
    assert (await call(app, body=initialize(), headers=mcp_headers(host="anything.example"))).status == 200
    listed = app_factory(allowed_hosts=["*"], allowed_origins=["https://app.example"])
    ok = await call(listed, body=initialize(), headers=mcp_headers(origin="https://app.example"))
    assert ok.status == 200


@aio
@pytest.mark.parametrize("name, values", [
    ("origin", ["http://127.0.0.1:8000", "http://evil.example"]),
    ("origin", ["http://evil.example", "http://127.0.0.1:8000"]),
    ("host", ["127.0.0.1:8000", "evil.example"]),
    ("mcp-session-id", ["a", "b"]),
    ("content-type", ["application/json", "text/plain"]),
])
async def test_a_repeated_single_valued_header_is_refused(app_factory, name, values):
    app = app_factory()
    headers = [(k, v) for k, v in mcp_headers() if k != name] + [(name, v) for v in values]
    answer = await call(app, body=initialize(), headers=headers)
    assert answer.status == 400, (answer.status, answer.body)
    assert f"The {name} header was sent more than once" in answer.json()["error"]["message"]
    assert app.sessions == {}


# ============================================================================ 16, 17: media types


@aio
@pytest.mark.parametrize("ctype, status", [
    ("Application/JSON", 200),
    ("application/json; charset=UTF-8", 200),
    ('application/json ; charset="utf-8"', 200),
    ("application/jsonp", 415),
    ("application/json-seq", 415),
    ("application/json; charset=iso-8859-1", 415),
    ("text/json", 415),
])
async def test_content_type_is_read_as_a_media_type(app_factory, ctype, status):
    app = app_factory(json_response=True)
    headers = [("content-type", ctype), ("accept", BOTH)]
    assert (await call(app, body=initialize(), headers=headers)).status == status


@aio
@pytest.mark.parametrize("accept, status, kind", [
    ("application/*", 200, "application/json"),
    ("text/*", 200, "text/event-stream"),
    ("*/*", 200, None),
    ("application/json;q=0, text/event-stream;q=0", 406, None),
    ("*/*;q=0", 406, None),
    ("application/json;q=0, text/*", 200, "text/event-stream"),
    ("text/event-stream;q=0, */*", 200, "application/json"),
    ("text/html", 406, None),
])
async def test_accept_is_negotiated_with_ranges_and_weights(app_factory, accept, status, kind):
    app = app_factory()
    answer = await call(app, body=initialize(), headers=[("content-type", "application/json"), ("accept", accept)])
    assert answer.status == status, (answer.status, answer.body)
    if kind is not None:
        assert answer.headers["content-type"].startswith(kind)
        assert answer.messages()[-1]["result"]["protocolVersion"] == LATEST


@aio
async def test_a_get_stream_honours_accept_weights(app_factory):
    app = app_factory()
    session = await open_session(app)
    hdrs = [("mcp-session-id", session), ("mcp-protocol-version", LATEST)]
    refused = await call(app, "GET", headers=hdrs + [("accept", "text/event-stream;q=0, */*")])
    assert refused.status == 406


# ============================================================================ 4: session floods


@aio
async def test_a_session_flood_from_one_address_never_ends_another_clients_session(app_factory):
    app = app_factory(max_sessions=50, max_sessions_per_client=10)
    victim = await open_session(app, client="10.0.0.1")
    for _ in range(200):  # what ~1000 initialize/s does in a fraction of a second
        answer = await call(app, body=initialize(), headers=mcp_headers(), client="10.0.0.66")
        assert answer.status == 200
    assert await ping(app, victim, client="10.0.0.1") == 200
    assert app.quotas.count("address:10.0.0.66") == 10 and len(app.sessions) == 11


@aio
async def test_behind_a_trusted_proxy_each_forwarded_address_has_its_own_quota(app_factory):
    # every request arrives from the balancer (10.9.9.9); X-Forwarded-For names the client
    app = app_factory(max_sessions=50, max_sessions_per_client=10, forwarded_allow_ips="10.9.9.9")
    victim = await open_session(app, client="10.9.9.9", headers=[("x-forwarded-for", "10.0.0.1")])
    for _ in range(30):
        # a hop the flooder wrote itself, left of what the balancer appended, is not taken
        answer = await call(app, body=initialize(), client="10.9.9.9",
                            headers=[("x-forwarded-for", "10.0.0.1, 10.0.0.66")] + mcp_headers())
        assert answer.status == 200
    assert await ping(app, victim, client="10.9.9.9", headers=[("x-forwarded-for", "10.0.0.1")]) == 200
    assert app.quotas.count("address:10.0.0.66") == 10 and app.quotas.count("address:10.0.0.1") == 1


@aio
async def test_x_forwarded_for_from_an_untrusted_peer_is_ignored(app_factory):
    for trusted in ({}, {"forwarded_allow_ips": "10.9.9.9"}):  # by default no peer is trusted
        app = app_factory(max_sessions=50, max_sessions_per_client=10, **trusted)
        victim = await open_session(app, client="10.0.0.1")
        for _ in range(30):  # the flooder names the victim: it is still counted as itself
            answer = await call(app, body=initialize(), client="10.0.0.66",
                                headers=[("x-forwarded-for", "10.0.0.1")] + mcp_headers())
            assert answer.status == 200
        assert await ping(app, victim, client="10.0.0.1") == 200
        assert app.quotas.count("address:10.0.0.66") == 10 and app.quotas.count("address:10.0.0.1") == 1


@pytest.mark.parametrize(("trusted", "headers", "client"), [
    # a balancer appending to what the client sent (nginx's $proxy_add_x_forwarded_for): with '*'
    # the client's own text on the left named it anything it liked (uvicorn takes the leftmost)
    ("*", [("x-forwarded-for", "6.6.6.6, 10.0.0.1")], "10.0.0.1"),
    ("*", [("x-forwarded-for", "6.6.6.6"), ("x-forwarded-for", "10.0.0.1")], "10.0.0.1"),  # one list, in order
    ("10.9.9.9", [("x-forwarded-for", "6.6.6.6"), ("x-forwarded-for", "10.0.0.1")], "10.0.0.1"),
    ("10.9.9.9, 10.8.0.0/16", [("x-forwarded-for", "6.6.6.6, 10.0.0.1, 10.8.1.1")], "10.0.0.1"),
    ("10.9.9.9, 10.8.0.0/16", [("x-forwarded-for", "10.8.2.2, 10.8.1.1")], "10.8.2.2"),  # all proxies: the first
    # an entry that is no address: the list is not read, the peer stays the client
    ("*", [("x-forwarded-for", "not-an-ip")], "10.9.9.9"),
    ("10.9.9.9", [("x-forwarded-for", "10.0.0.1, garbage")], "10.9.9.9"),
    ("10.9.9.9", [], "10.9.9.9"),
    ("10.9.9.8", [("x-forwarded-for", "10.0.0.1")], "10.9.9.9"),  # an untrusted peer
])
def test_the_client_behind_trusted_proxies_is_the_rightmost_untrusted_address(trusted, headers, client):
    import asyncio

    from mcpkit.transports.forwarded import behind_proxies

    seen = []

    async def app(scope, receive, send):
        seen.append(scope["client"][0])

    scope = {"type": "http", "client": ("10.9.9.9", 4000),
             "headers": [(k.encode(), v.encode()) for k, v in headers]}
    asyncio.run(behind_proxies(app, trusted)(scope, None, None))
    assert seen == [client]


def test_forwarded_allow_ips_takes_addresses_and_networks_only():
    from mcpkit.transports.forwarded import trusted_proxies

    assert trusted_proxies("10.0.0.5, 10.1.0.0/16,::1") == ["10.0.0.5", "10.1.0.0/16", "::1"]
    assert trusted_proxies(["10.0.0.5", "*"]) == ["*"]
    assert trusted_proxies(None) == trusted_proxies("") == []
    with pytest.raises(ValueError, match="'balancer' is not an IP address or network"):
        trusted_proxies("10.0.0.5,balancer")


@aio
async def test_at_the_global_cap_the_heaviest_client_gives_way(app_factory):
    app = app_factory(max_sessions=12, max_sessions_per_client=10)
    victims = [await open_session(app, client=f"10.0.1.{n}") for n in range(2)]
    for n in range(10):
        await open_session(app, client="10.0.0.66")
    for n in range(3):  # a third light client arrives at the cap: the flooder makes room
        await open_session(app, client=f"10.0.2.{n}")
    for n, victim in enumerate(victims):
        assert await ping(app, victim, client=f"10.0.1.{n}") == 200
    assert app.quotas.count("address:10.0.0.66") == 7


@aio
async def test_a_client_whose_sessions_are_all_busy_gets_429_with_retry_after(app_factory):
    app = app_factory(max_sessions_per_client=2)
    for _ in range(2):
        await open_session(app, client="10.0.0.66")
    for hs in app.sessions.values():
        hs.active += 1  # a connection open on each (a GET stream, a long call)
    answer = await call(app, body=initialize(), headers=mcp_headers(), client="10.0.0.66")
    assert answer.status == 429 and int(answer.headers["retry-after"]) > 0
    assert answer.json()["error"]["code"] == -32600
    for hs in app.sessions.values():
        hs.active -= 1


@aio
async def test_with_auth_one_principals_sessions_never_evict_anothers(app_factory):
    from mcpkit.auth import StaticTokens
    from mcpkit.auth.resource import ResourceServer

    tokens = StaticTokens.from_lines("tok-alice-0123456789abcdef alice; tok-mallory-0123456789abcdef mallory")
    auth = ResourceServer(tokens, resource="http://127.0.0.1:8000/mcp")
    app = app_factory(auth=auth, max_sessions=20, max_sessions_per_client=5)
    alice = [("authorization", "Bearer tok-alice-0123456789abcdef")]
    mallory = [("authorization", "Bearer tok-mallory-0123456789abcdef")]
    session = await open_session(app, headers=alice)
    for _ in range(100):  # the same address: the principal is what counts
        answer = await call(app, body=initialize(), headers=mallory + mcp_headers())
        assert answer.status == 200
    assert await ping(app, session, headers=alice) == 200
    assert app.quotas.count("principal:mallory") == 5


# ============================================================================ 5: fair workers


@aio
async def test_one_session_with_many_slow_sync_calls_does_not_starve_another(app_factory):
    server = small_server()
    release = threading.Event()

    @server.tool
    def block() -> str:
        release.wait(30)
        return "released"

    app = app_factory(server, json_response=True)
    hog, other = await open_session(app, client="10.0.0.66"), await open_session(app, client="10.0.0.1")
    try:
        slow = [asyncio.ensure_future(call(app, body=rpc("tools/call", {"name": "block", "arguments": {}}, n),
                                           headers=mcp_headers(hog), client="10.0.0.66")) for n in range(40)]
        await asyncio.sleep(0.2)  # the 40 calls are in: every worker the hog may have is blocked
        # answered while all 40 still block: the hog holds its share of the workers, not all of them
        answer = await call(app, body=rpc("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}, 99),
                            headers=mcp_headers(other), client="10.0.0.1")
        assert answer.json()["result"]["structuredContent"] == {"result": 5}
        assert not any(task.done() for task in slow)
    finally:
        release.set()
    results = await asyncio.wait_for(asyncio.gather(*slow), STEP * 3)
    assert all(r.json()["result"]["content"][0]["text"] == "released" for r in results)


class _Shares:
    """Jobs per key that note how many of theirs run at once, and wait at one gate."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.running: dict[str, int] = {"a": 0, "b": 0}
        self.most: dict[str, int] = {"a": 0, "b": 0}
        self.order: list[str] = []
        self.lock = threading.Lock()
        self.finished = threading.Semaphore(0)

    def submit(self, pool: Any, key: str) -> None:
        def run() -> None:
            with self.lock:
                self.running[key] += 1
                self.most[key] = max(self.most[key], self.running[key])
                self.order.append(key)
            self.gate.wait(10)
            with self.lock:
                self.running[key] -= 1

        pool.submit(run, lambda r, e: self.finished.release(), key)

    def started(self, n: int) -> None:
        """A bounded wait for ``n`` jobs to have started, then time for a wrong one to show."""
        for _ in range(500):
            with self.lock:
                if len(self.order) >= n:
                    break
            threading.Event().wait(0.02)
        threading.Event().wait(0.1)

    def finish(self, n: int) -> None:
        self.gate.set()
        for _ in range(n):
            assert self.finished.acquire(timeout=STEP)


def test_worker_turns_go_round_robin_and_respect_each_keys_share():
    from mcpkit.server.workers import WorkerPool

    pool = WorkerPool(4, max_per_key=2)
    jobs = _Shares()
    for _ in range(6):
        jobs.submit(pool, "a")
    for _ in range(3):
        jobs.submit(pool, "b")
    jobs.started(4)  # had a fifth job (a third of a) wrongly started, it would show now
    assert sorted(jobs.order) == ["a", "a", "b", "b"]  # b got its two workers although a came first
    jobs.finish(9)
    assert jobs.most == {"a": 2, "b": 2}
    pool.shutdown()


def test_jobs_handed_straight_to_idle_workers_keep_each_keys_share():
    # Four idle workers and six jobs at once: however many workers are free, a key gets no more
    # than its share of them.
    from mcpkit.server.workers import WorkerPool

    pool = WorkerPool(4, max_per_key=2)
    warm = threading.Semaphore(0)
    hold = threading.Event()
    for _ in range(4):  # four workers started, then idle
        pool.submit(lambda: hold.wait(10), lambda r, e: warm.release(), None)
    hold.set()
    for _ in range(4):
        assert warm.acquire(timeout=STEP)
    for _ in range(200):
        with pool._lock:
            if len(pool._sleepers) == 4:
                break
        threading.Event().wait(0.01)
    jobs = _Shares()
    for _ in range(5):
        jobs.submit(pool, "a")
    jobs.submit(pool, "b")
    jobs.started(3)  # had a third job of a wrongly started, it would show now
    with jobs.lock:
        assert jobs.running == {"a": 2, "b": 1}  # a held to its two although four workers were free
    jobs.finish(6)
    assert jobs.most == {"a": 2, "b": 1}
    pool.shutdown()


def test_a_worker_woken_for_one_job_is_not_counted_free_for_the_next():
    # One idle worker, two jobs in a row: the first takes it; the second must start another
    # worker, not wait behind the first (which runs for seconds).
    from mcpkit.server.workers import WorkerPool

    pool = WorkerPool(4, max_per_key=2)
    warm = threading.Event()
    pool.submit(lambda: None, lambda r, e: warm.set(), "warm")
    assert warm.wait(STEP)
    for _ in range(200):
        with pool._lock:
            if len(pool._sleepers) == 1:
                break
        threading.Event().wait(0.01)
    release = threading.Event()
    fast_ran = threading.Event()
    pool.submit(lambda: release.wait(10), lambda r, e: None, "alice")
    pool.submit(fast_ran.set, lambda r, e: None, "bob")
    try:
        assert fast_ran.wait(2.0), "bob's job waited behind alice's"
    finally:
        release.set()
    pool.shutdown()


def test_a_slow_job_amid_a_stream_of_fast_ones_does_not_hold_another_clients_call():
    # The pool keeps few threads by letting a job wait for the busy worker that will come back
    # for it. Here that worker takes alice's slow job out of carol's stream of fast ones: bob's
    # call, and carol's next, must still get a worker of their own (within milliseconds; the
    # bound asserted is generous), not wait behind alice's.
    from mcpkit.server.workers import WorkerPool

    pool = WorkerPool(4, max_per_key=2)
    stop = threading.Event()
    streamed = threading.Semaphore(0)

    def stream() -> None:
        done = threading.Semaphore(0)
        while not stop.is_set():
            pool.submit(lambda: None, lambda r, e: done.release(), "carol")
            if done.acquire(timeout=STEP):
                streamed.release()

    streamer = threading.Thread(target=stream, daemon=True)
    streamer.start()
    release = threading.Event()
    fast_ran = threading.Event()
    try:
        for _ in range(50):
            assert streamed.acquire(timeout=STEP)  # the stream flows
        pool.submit(lambda: release.wait(STEP), lambda r, e: None, "alice")
        pool.submit(fast_ran.set, lambda r, e: None, "bob")
        assert fast_ran.wait(2.0), "bob's job waited behind alice's"
        while streamed.acquire(blocking=False):
            pass
        for _ in range(50):
            assert streamed.acquire(timeout=2.0), "carol's stream stopped behind alice's job"
    finally:
        stop.set()
        release.set()
    streamer.join(STEP)
    pool.shutdown()


# ============================================================================ 14, 15: bodies


@aio
async def test_a_body_that_never_finishes_gets_408_after_the_body_timeout(app_factory):
    app = app_factory(body_timeout=0.3)
    answer = await call(app, body=b'{"jsonrpc":"2.0",', headers=mcp_headers(), hang=True)
    assert answer.status == 408, answer.body
    assert "body" in answer.json()["error"]["message"]


@aio
async def test_large_bodies_are_parsed_off_the_event_loop_and_small_ones_on_it(app_factory, monkeypatch):
    from mcpkit import _json

    seen: list[tuple[int, int]] = []
    real = _json.loads

    def loads(data: Any) -> Any:
        seen.append((len(data), threading.get_ident()))
        return real(data)

    monkeypatch.setattr(_json, "loads", loads)
    app = app_factory(json_response=True)
    session = await open_session(app)
    loop_thread = threading.get_ident()
    seen.clear()
    big = rpc("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}, "_meta": {"pad": "x" * (3 << 20)}}, 5)
    answer = await call(app, body=big, headers=mcp_headers(session))
    assert answer.json()["result"]["structuredContent"] == {"result": 3}
    [(size, thread)] = [entry for entry in seen if entry[0] > 1 << 20]
    assert thread != loop_thread, "a 3 MiB body was parsed on the event loop"
    seen.clear()
    assert (await call(app, body=rpc("ping", rid=6), headers=mcp_headers(session))).status == 200
    assert all(thread == loop_thread for _size, thread in seen)  # the fast path stays on the loop


@aio
@pytest.mark.parametrize("name, auth", [
    ("x-api-key", "apikey"),  # the header an API-key scheme reads
    ("authorization", "bearer"),
    ("mcp-session-id", "apikey"),
])
async def test_a_repeated_credential_header_is_refused_before_either_value_is_checked(app_factory, name, auth):
    from mcpkit.auth import ApiKeyAuth

    good = "good-key-0123456789abcdef01"
    scheme = ApiKeyAuth({good: {"subject": "studio-7"}}, header="Authorization" if auth == "bearer" else "X-API-Key")
    app = app_factory(auth=scheme)
    credential = [("authorization", f"Bearer {good}")] if auth == "bearer" else [("x-api-key", good)]
    # alone, the good credential opens a session
    assert (await call(app, body=initialize(), headers=mcp_headers() + credential)).status == 200
    values = {"x-api-key": ["wrong-key-0000000000000000", good],
              "authorization": ["Bearer wrong-key-0000000000000000", f"Bearer {good}"],
              "mcp-session-id": ["a", "b"]}[name]
    headers = [(k, v) for k, v in mcp_headers() + credential if k != name] + [(name, v) for v in values]
    answer = await call(app, body=initialize(), headers=headers)
    assert answer.status == 400, (answer.status, answer.body)
    assert f"The {name} header was sent more than once" in answer.json()["error"]["message"]
    assert len(app.sessions) == 1
