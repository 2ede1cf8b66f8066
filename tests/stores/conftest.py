"""A Redis server for the store tests.

``MCPKIT_TEST_REDIS=redis://host:port/db`` points the tests at a server of your own (nothing is
started then); otherwise one ``redis-server`` is started on a free port for the whole session,
without persistence, and stopped at the end. Without either the Redis tests are skipped. Each
test gets a key prefix of its own (``prefix``) and its keys are deleted afterwards.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

REDIS_SERVER = shutil.which("redis-server")
ENV_URL = "MCPKIT_TEST_REDIS"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def ping(url: str, timeout: float) -> bool:
    """Does a Redis at ``url`` answer PING within ``timeout`` seconds?"""
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                return bool(client.ping())
            except (redis.ConnectionError, redis.TimeoutError):
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.05)
    finally:
        client.close()


class RedisProcess:
    """A throwaway ``redis-server`` on ``port`` (a free one by default): no persistence."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert REDIS_SERVER is not None
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--daemonize", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if not ping(self.url, 10.0):
            self.stop()
            raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    pytest.importorskip("redis", reason="the Redis store tests need the redis package (pip install 'mcpkit[redis]')")
    url = os.environ.get(ENV_URL)
    if url:
        if not ping(url, 5.0):
            pytest.fail(f"{ENV_URL}={url} does not answer PING")
        yield url
        return
    if REDIS_SERVER is None:
        pytest.skip(f"no Redis for the store tests: install redis-server, or set {ENV_URL}=redis://host:port/db")
    server = RedisProcess()
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def redis_process() -> Iterator[RedisProcess]:
    """A redis-server of this test's own, which the test may stop and start again."""
    pytest.importorskip("redis", reason="the Redis store tests need the redis package")
    if REDIS_SERVER is None:
        pytest.skip("this test starts and stops a redis-server of its own, and there is none installed")
    server = RedisProcess()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    """A key prefix no other test uses; its keys are deleted when the test ends."""
    value = f"mcpkit-test:{uuid.uuid4().hex[:12]}:"
    yield value
    import redis

    client = redis.Redis.from_url(redis_url, socket_connect_timeout=1, socket_timeout=2)
    try:
        keys = list(client.scan_iter(match=value + "*", count=1000))
        if keys:
            client.delete(*keys)
    except (redis.ConnectionError, redis.TimeoutError):
        pass
    finally:
        client.close()


@pytest.fixture
def rclient(redis_url: str) -> Iterator[Any]:
    """A plain synchronous client, to look at what the stores wrote."""
    import redis

    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def dead_url() -> str:
    """A Redis URL where nothing listens."""
    return f"redis://127.0.0.1:{free_port()}/0"
