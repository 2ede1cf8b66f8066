"""Servers with a policy install log filters when their first session starts; the policy tests'
fixture puts them back after each test here too."""

from tests.policy.conftest import _restore_log_filters  # noqa: F401 - an autouse fixture
