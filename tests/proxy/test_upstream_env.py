"""A server mcpkit spawns (a proxy's stdio upstream, a Client's command, the command line of
``mcpkit call``/``check``) sees an allow-list of its parent's environment, its own ``env`` and
what it was given by name, and none of the parent's secrets (mcpkit.client.environment)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Server
from mcpkit.client import Client
from mcpkit.client.environment import child_environment, inherited_names
from mcpkit.proxy import load_mcp_servers
from mcpkit.proxy.config import ConfigError
from tests.conftest import mcpkit_command
from tests.proxy.test_upstream import close_all

aio = pytest.mark.asyncio
PY = sys.executable
ENVREPORT = str(Path(__file__).parent / "servers" / "envreport.py")
SECRETS = {"SECRET_FOR_OTHER": "token-of-another-upstream", "GITHUB_TOKEN": "ghp_x"}
#: the proxy's own OAuth client secret: set only where no mcpkit server runs in this process or
#: under `mcpkit proxy` without --auth introspection (which would refuse it as a switch that changes nothing)
OWN_SECRET = {"MCPKIT_INTROSPECTION_CLIENT_SECRET": "s3cret"}
#: Python sets LC_CTYPE itself when it starts under the C locale (PEP 538)
PYTHON_ADDS = {"LC_CTYPE"}


@pytest.fixture
def secrets(monkeypatch: Any) -> dict[str, str]:
    for key, value in SECRETS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("SHARED_SETTING", "passed by name")
    return SECRETS


@pytest.fixture
def own_secret(secrets: Any, monkeypatch: Any) -> None:
    for key, value in OWN_SECRET.items():
        monkeypatch.setenv(key, value)


def allowed(*more: str, environ: dict[str, str] | None = None) -> set[str]:
    return set(inherited_names(os.environ if environ is None else environ)) | set(more)


def assert_sees_only(names: list[str] | set[str], expected: set[str]) -> None:
    seen = set(names)
    leaked = seen & ({*SECRETS, *OWN_SECRET} - expected)
    assert not leaked, f"a secret leaked: {sorted(leaked)}"
    assert expected <= seen and seen - expected <= PYTHON_ADDS, (sorted(seen - expected), sorted(expected - seen))


async def names_from(client: Any, tool: str = "environment") -> list[str]:
    return json.loads((await client.call_tool(tool))["content"][0]["text"])


def pythonpath() -> dict[str, str]:
    """What a child ``python -m mcpkit`` needs to import this checkout's mcpkit rather than an
    installed one (set when the tests run from a checkout)."""
    return {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}


# ------------------------------------------------------------------------------------------ the function


def test_the_environment_is_the_allow_list_then_names_then_env() -> None:
    parent = {"HOME": "/home/u", "PATH": "/bin", "LC_TIME": "de_DE.UTF-8", "TZ": "UTC", "SECRET_FOR_OTHER": "x",
              "MCPKIT_INTROSPECTION_CLIENT_SECRET": "y", "SHELL": "() { :; }; evil", "EXTRA": "e"}
    assert child_environment(environ=parent) == {"HOME": "/home/u", "PATH": "/bin", "LC_TIME": "de_DE.UTF-8",
                                                 "TZ": "UTC"}
    # a name that is not set is skipped, as the default names are; env wins, and None removes
    got = child_environment({"OWN": "1", "TZ": "Europe/Paris", "PATH": None}, ["EXTRA", "NOT_SET"], environ=parent)
    assert got == {"HOME": "/home/u", "LC_TIME": "de_DE.UTF-8", "TZ": "Europe/Paris", "EXTRA": "e", "OWN": "1"}
    assert child_environment({"OWN": "1"}, True, environ=parent) == {**parent, "OWN": "1"}
    with pytest.raises(TypeError):
        child_environment(inherit_env="EXTRA", environ=parent)


# ------------------------------------------------------------------------------------------ mcpkit.Client


@aio
async def test_a_clients_command_sees_the_allow_list_its_env_and_the_names_it_was_given(own_secret: Any) -> None:
    async with Client([PY, ENVREPORT]) as client:
        assert_sees_only(await names_from(client), allowed())
    async with Client([PY, ENVREPORT], env={"OWN": "1"}, inherit_env=["SHARED_SETTING", "NOT_SET"]) as client:
        assert_sees_only(await names_from(client), allowed("OWN", "SHARED_SETTING"))
    async with Client([PY, ENVREPORT], inherit_env=True) as client:
        assert {*SECRETS, *OWN_SECRET} <= set(await names_from(client))


# ------------------------------------------------------------------------------------------ Server.proxy / mount


@aio
async def test_a_mounted_command_sees_the_allow_list_and_its_own_env(secrets: Any) -> None:
    server = Server.proxy([PY, ENVREPORT], env={"OWN": "1"})
    try:
        async with Client(server) as client:
            assert_sees_only(await names_from(client), allowed("OWN"))
        server.mount([PY, ENVREPORT], prefix="named", inherit_env=["SHARED_SETTING"])
        async with Client(server) as client:
            assert_sees_only(await names_from(client, "named_environment"), allowed("SHARED_SETTING"))
    finally:
        close_all(server)


# ------------------------------------------------------------------------------------------ mcpkit proxy


def proxy_with_secrets(*args: str, **env: str) -> Client:
    """``mcpkit proxy ARGS`` holding the secrets: it may need them, for its own --auth or for an
    upstream's headers; its upstreams may not."""
    return Client(mcpkit_command("proxy", *args), env={**pythonpath(), **SECRETS, "SHARED_SETTING": "x", **env})


@aio
async def test_the_proxy_commands_upstreams_see_none_of_its_secrets(tmp_path: Path, secrets: Any) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {
        "plain": {"command": PY, "args": [ENVREPORT], "env": {"OWN": "1"}},
        "named": {"command": PY, "args": [ENVREPORT], "inherit_env": ["SHARED_SETTING"]},
        "everything": {"command": PY, "args": [ENVREPORT], "inherit_env": True},
    }}))
    async with proxy_with_secrets("--config", str(config)) as client:
        assert_sees_only(await names_from(client, "plain_environment"), allowed("OWN"))
        assert_sees_only(await names_from(client, "named_environment"), allowed("SHARED_SETTING"))
        # everything, less the proxy's own MCPKIT_* switches (none is set here)
        assert {*SECRETS, "SHARED_SETTING", *pythonpath()} <= set(await names_from(client, "everything_environment"))
    async with proxy_with_secrets("--pass-env", "SHARED_SETTING", "--", PY, ENVREPORT) as client:
        assert_sees_only(await names_from(client), allowed("SHARED_SETTING"))


def test_inherit_env_in_a_config_is_true_false_or_names(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    for value, expected in ((["A", "B"], ["A", "B"]), (True, True), (False, None)):
        config.write_text(json.dumps({"mcpServers": {"s": {"command": "x", "inherit_env": value}}}))
        spec = load_mcp_servers(config)[0]
        assert spec.inherit_env == expected
        assert spec.options().get("inherit_env") == expected
    config.write_text(json.dumps({"mcpServers": {"s": {"command": "x", "inherit_env": "A"}}}))
    with pytest.raises(ConfigError, match="inherit_env must be true, false or a list of variable names"):
        load_mcp_servers(config)


def test_inherit_env_true_still_keeps_the_proxys_switches(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("MCPKIT_READ_ONLY", "1")
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {
        "all": {"command": "x", "inherit_env": True},
        "named": {"command": "x", "inherit_env": ["MCPKIT_READ_ONLY"]}}}))
    everything, named = load_mcp_servers(config)
    assert "MCPKIT_READ_ONLY" not in child_environment(**_env(everything))
    assert child_environment(**_env(named))["MCPKIT_READ_ONLY"] == "1"


def _env(spec: Any) -> dict[str, Any]:
    options = spec.options()
    return {"env": options.get("env"), "inherit_env": options.get("inherit_env")}


def test_pass_env_takes_a_name_not_an_assignment() -> None:
    for command in (("proxy", "--pass-env", "A=1", "--", PY, ENVREPORT), ("call", "--pass-env", "A=1", f"{PY} {ENVREPORT}", "environment"),
                    ("check", "--pass-env", "A=1", PY, ENVREPORT)):
        done = subprocess.run(mcpkit_command(*command), capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)
        assert done.returncode == 2, done.stderr
        assert "--pass-env takes a variable's name, got 'A=1'" in done.stderr and "Traceback" not in done.stderr


# ------------------------------------------------------------------------------------------ mcpkit call / check


def test_mcpkit_call_of_a_command_line_passes_only_the_allow_list_and_pass_env(own_secret: Any) -> None:
    target = f"{PY} {ENVREPORT}"
    env = {**os.environ, **pythonpath()}
    done = subprocess.run(mcpkit_command("call", target, "environment"), capture_output=True, text=True,
                          timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert_sees_only(json.loads(done.stdout), allowed())
    done = subprocess.run(mcpkit_command("call", "--pass-env", "SHARED_SETTING", target, "environment"),
                          capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert_sees_only(json.loads(done.stdout), allowed("SHARED_SETTING"))


def test_mcpkit_check_of_a_command_line_passes_only_the_allow_list_and_pass_env(tmp_path: Path,
                                                                               own_secret: Any) -> None:
    seen = tmp_path / "names.json"
    env = {**os.environ, **pythonpath()}
    for extra, expected in (((), allowed()), (("--pass-env", "SHARED_SETTING"), allowed("SHARED_SETTING"))):
        done = subprocess.run(mcpkit_command("check", "--quick", "--no-tool-calls", "-o", str(tmp_path / "report"),
                                             *extra, PY, ENVREPORT, str(seen)),
                              capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL)
        assert done.returncode in (0, 1), done.stderr  # whatever the rules found: the server ran
        assert_sees_only(json.loads(seen.read_text()), expected)
