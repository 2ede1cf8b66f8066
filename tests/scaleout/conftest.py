# The Streamable HTTP test clients of tests/test_http.py, and the Redis of the store tests: the
# multi-process tests here run on one redis-server (``redis_url``); test_cluster.py runs on a
# Redis Cluster (``cluster_url``).
import pytest

from tests.stores.conftest import cluster_url, plain_redis_url  # noqa: F401 - fixtures
from tests.test_http import clients  # noqa: F401 - a fixture


@pytest.fixture(scope="session")
def redis_url(plain_redis_url: str) -> str:  # noqa: F811
    return plain_redis_url
