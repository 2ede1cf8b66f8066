import sys
from pathlib import Path

# The repository root, so that ``tests.plugins.compliance`` imports whatever the import mode
# and the working directory.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

pytest_plugins = ["tests.plugins.compliance"]


# ---------------------------------------------------------------------------------------------
# A parallel run (`pytest -n N`, pytest-xdist, `--dist loadgroup` from pyproject's addopts) keeps
# each test module on one worker, so a module's fixtures (a server, a virtualenv, an installed
# suite) are made once, and a module's tests that share a resource never run at the same time
# (the fault suite's cluster, a module's server under load). A module whose tests are independent
# and long (each starts what it needs) says SPLIT_ACROSS_WORKERS = True, and its tests spread.

import pytest  # noqa: E402


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups off the items
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        module = getattr(item, "module", None)
        if item.get_closest_marker("xdist_group") is not None or getattr(module, "SPLIT_ACROSS_WORKERS", False):
            continue
        item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


# ---------------------------------------------------------------------------------------------
# One fixture validates every message the server emits in a test against the schema of the
# revision negotiated on that stream (tests/wire.py). Subprocess servers are wrapped in the tap
# (tests/tap.py), which records their traffic; in-process sessions record what they send.

import os  # noqa: E402
import tempfile  # noqa: E402
from typing import Any, NoReturn  # noqa: E402

import pytest  # noqa: E402

from tests.wire import check_wire_log, validate_server_message  # noqa: E402

TAP = str(Path(__file__).resolve().parent / "tap.py")


class WireRecorder:
    """What a test's servers sent; checked against the official schemas when the test ends."""

    def __init__(self, directory: str) -> None:
        self._dir = directory
        self.logs: list[str] = []
        self.records: list[tuple[Any, str, Any]] = []

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run under the tap: returns the command line to spawn instead."""
        log = os.path.join(self._dir, f"wire-{len(self.logs)}.jsonl")
        self.logs.append(log)
        return [sys.executable, TAP, log, "--", *argv]

    def record(self, message: Any, revision: str, request_method: str | None = None) -> None:
        """An in-process session's outgoing message, to validate at teardown."""
        self.records.append((message, revision, request_method))

    def check(self) -> int:
        checked = 0
        for log in self.logs:
            if os.path.exists(log):
                checked += check_wire_log(log)
        for message, revision, method in self.records:
            validate_server_message(message, revision, method)
            checked += 1
        return checked


@pytest.fixture(autouse=True)
def wire() -> Any:
    with tempfile.TemporaryDirectory(prefix="mcpkit-wire-") as directory:
        recorder = WireRecorder(directory)
        yield recorder
        recorder.check()


def mcpkit_command(*args: str) -> list[str]:
    """The command line that serves with this interpreter's mcpkit."""
    return [sys.executable, "-m", "mcpkit", *args]


def component_missing(reason: str) -> NoReturn:
    """A real component a test drives (Godot, Chromium, HAProxy, a Node peer) is not installed:
    in CI (``CI`` set, as .ci/run runs) that fails the test, because .ci/run installs it;
    elsewhere, e.g. the README's plain ``python -m pytest`` on a fresh machine, the test skips."""
    if os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)
