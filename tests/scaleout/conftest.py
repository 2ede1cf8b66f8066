# The Streamable HTTP test clients of tests/test_http.py, and the Redis of the store tests.
from tests.stores.conftest import redis_url  # noqa: F401 - a fixture
from tests.test_http import clients  # noqa: F401 - a fixture
