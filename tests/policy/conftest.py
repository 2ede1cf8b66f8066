"""A server with a policy installs log filters (redaction, correlation ids) on the `mcpkit`
logger and the root handlers when its first session starts; put them back after each test so
no other test sees records rewritten by them."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _restore_log_filters() -> Iterator[None]:
    targets: list[logging.Filterer] = [logging.getLogger("mcpkit"), logging.getLogger()]
    targets += logging.getLogger().handlers + logging.getLogger("mcpkit").handlers
    if logging.lastResort is not None:
        targets.append(logging.lastResort)
    saved = [(t, list(t.filters)) for t in targets]
    yield
    for target, filters in saved:
        target.filters[:] = filters
