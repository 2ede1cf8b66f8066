"""A Redis server for the store tests.

``MCPKIT_TEST_REDIS=redis://host:port/db`` points the tests at a server of your own (nothing is
started then); otherwise one ``redis-server`` is started on a free port for the whole session,
without persistence, and stopped at the end. Every store test also runs on a Redis Cluster of
three masters with a replica each (``MCPKIT_TEST_REDIS_CLUSTER``, or started by
tools/start-redis-cluster.sh). Without a redis-server the Redis tests are skipped, except in CI
(``CI`` set), where they fail. Each test gets a key prefix of its own (``prefix``) and its keys
are deleted afterwards.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

REDIS_SERVER = shutil.which("redis-server")
ENV_URL = "MCPKIT_TEST_REDIS"
ENV_CLUSTER_URL = "MCPKIT_TEST_REDIS_CLUSTER"
CLUSTER_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                              "tools", "start-redis-cluster.sh")


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
    """A throwaway ``redis-server`` on ``port`` (a free one by default): no persistence, unless
    ``aof_dir`` is given: then an append-only file there (``appendfsync everysec``, the durable
    setting docs/deployment.md recommends), which a restart reads back."""

    def __init__(self, port: int | None = None, *, aof_dir: str | None = None) -> None:
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.aof_dir = aof_dir
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert REDIS_SERVER is not None
        persistence = (["--appendonly", "yes", "--appendfsync", "everysec", "--dir", self.aof_dir]
                       if self.aof_dir is not None else ["--appendonly", "no"])
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", *persistence,
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
def plain_redis_url() -> Iterator[str]:
    """One redis-server (not a cluster)."""
    pytest.importorskip("redis", reason="the Redis store tests need the redis package (pip install 'mcpkit[redis]')")
    url = os.environ.get(ENV_URL)
    if url:
        if not ping(url, 5.0):
            pytest.fail(f"{ENV_URL}={url} does not answer PING")
        _URLS.append(url)
        yield url
        return
    if REDIS_SERVER is None:
        _missing(f"no Redis for the store tests: install redis-server, or set {ENV_URL}=redis://host:port/db")
    server = RedisProcess()
    server.start()
    _URLS.append(server.url)
    try:
        yield server.url
    finally:
        server.stop()


def _missing(reason: str) -> None:
    """In CI a missing component fails the test (.ci/run installs it); elsewhere it skips."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def cluster_url() -> Iterator[str]:
    """A Redis Cluster of three masters with a replica each: ``MCPKIT_TEST_REDIS_CLUSTER`` (as
    .ci/run sets it), or one started here by tools/start-redis-cluster.sh and stopped at the end."""
    pytest.importorskip("redis", reason="the Redis store tests need the redis package (pip install 'mcpkit[redis]')")
    url = os.environ.get(ENV_CLUSTER_URL)
    if url:
        if not ping_cluster(url, 10.0):
            pytest.fail(f"{ENV_CLUSTER_URL}={url} does not answer as a Redis Cluster")
        _URLS.append(url)
        yield url
        return
    if REDIS_SERVER is None or shutil.which("redis-cli") is None:
        _missing(f"no Redis Cluster for the store tests: install redis-server, or set {ENV_CLUSTER_URL}")
    cluster = ClusterProcess(tempfile.mkdtemp(prefix="mcpkit-cluster-"))
    url = cluster.start()
    _URLS.append(url)
    try:
        yield url
    finally:
        cluster.stop()
        shutil.rmtree(cluster.tmpdir, ignore_errors=True)


class ClusterProcess:
    """A Redis Cluster of tools/start-redis-cluster.sh (three masters, a replica each) in a
    directory of its own (its TMPDIR), which a test may stop nodes of."""

    def __init__(self, tmpdir: str) -> None:
        self.tmpdir = tmpdir
        self.url = ""

    def start(self) -> str:
        env = {**os.environ, "TMPDIR": self.tmpdir}
        started = subprocess.run(["bash", CLUSTER_SCRIPT], capture_output=True, text=True, env=env, timeout=90)
        if started.returncode != 0:
            pytest.fail(f"tools/start-redis-cluster.sh failed: {started.stderr[-800:]}")
        self.url = started.stdout.strip()
        return self.url

    def stop(self) -> None:
        subprocess.run(["bash", CLUSTER_SCRIPT, "--stop"], env={**os.environ, "TMPDIR": self.tmpdir}, timeout=30)

    def pid(self, port: int) -> int:
        """The process id of the node on ``port``."""
        with open(os.path.join(self.tmpdir, "mcpkit-redis-cluster", f"node-{port}", "redis.pid")) as file:
            return int(file.read().strip())


def ping_cluster(url: str, timeout: float) -> bool:
    from redis.cluster import RedisCluster

    from mcpkit.stores.redis_base import cluster_url as split

    deadline = time.monotonic() + timeout
    while True:
        try:
            client = RedisCluster.from_url(split(url)[0], socket_connect_timeout=0.5, socket_timeout=1)
            try:
                return bool(client.ping())
            finally:
                client.close()
        except Exception:  # noqa: BLE001 - not up yet
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)


@pytest.fixture(scope="session", params=["redis", "cluster"])
def redis_url(request: pytest.FixtureRequest) -> str:
    """Every store test runs on one redis-server and on a Redis Cluster (three masters, a replica each)."""
    name = "plain_redis_url" if request.param == "redis" else "cluster_url"
    return str(request.getfixturevalue(name))


def sync_redis(url: str, **options: Any) -> Any:
    """A plain client for ``url``: ``redis.Redis``, or ``RedisCluster`` for ``?cluster=1``."""
    import redis
    from redis.cluster import RedisCluster

    from mcpkit.stores.redis_base import cluster_url as split

    clean, cluster = split(url)
    return RedisCluster.from_url(clean, **options) if cluster else redis.Redis.from_url(clean, **options)


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


#: the Redis URLs this session's fixtures handed out, whose keys ``prefix`` cleans up
_URLS: list[str] = []


@pytest.fixture
def prefix() -> Iterator[str]:
    """A key prefix no other test uses; its keys are deleted when the test ends."""
    value = f"mcpkit-test:{uuid.uuid4().hex[:12]}:"
    yield value
    import redis

    for url in _URLS:
        try:
            client = sync_redis(url, socket_connect_timeout=1, socket_timeout=2)
        except redis.RedisError:
            continue
        try:
            for key in list(client.scan_iter(match=value + "*", count=1000)):
                client.delete(key)  # one at a time: on a cluster the keys live in many slots
        except redis.RedisError:
            pass
        finally:
            client.close()


@pytest.fixture
def rclient(redis_url: str) -> Iterator[Any]:
    """A plain synchronous client, to look at what the stores wrote."""
    client = sync_redis(redis_url)
    yield client
    client.close()


@pytest.fixture
def dead_url() -> str:
    """A Redis URL where nothing listens."""
    return f"redis://127.0.0.1:{free_port()}/0"
