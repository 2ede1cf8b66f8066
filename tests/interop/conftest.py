"""The event loops the HTTP interop runs are served on: every server and proxy these tests start
with ``--http`` runs once under asyncio and once under uvloop (what ``mcpkit[fast]`` and
``uvicorn[standard]`` install, and what uvicorn picks by itself when it is there)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import component_missing

SERVING_LOOPS = ("asyncio", "uvloop")


@pytest.fixture(scope="module", params=SERVING_LOOPS)
def serving_loop(request: pytest.FixtureRequest) -> Iterator[str]:
    """MCPKIT_LOOP for every process started while it is in use (``mcpkit serve --http``,
    ``mcpkit proxy --http`` and the upstreams they start inherit it)."""
    if request.param == "uvloop":
        try:
            import uvloop  # noqa: F401
        except ImportError:
            component_missing("uvloop is not installed: pip install -e '.[dev]' installs it")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MCPKIT_LOOP", request.param)
        yield request.param
