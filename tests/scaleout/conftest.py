# The Streamable HTTP test clients of tests/test_http.py.
from tests.test_http import clients  # noqa: F401 - a fixture
