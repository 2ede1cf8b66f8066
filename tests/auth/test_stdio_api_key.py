"""An API key over stdio, the same way as over HTTP: ``Server(auth=ApiKeyAuth(...))`` reads the
key from the environment once when stdio serving starts, and handlers get it with
``api_key(ctx)`` and ``ctx.principal`` as an X-API-Key request's; audit lines name the
principal, never the key; a missing or refused key is one line and exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import mcpkit
from mcpkit import Client
from tests.conftest import mcpkit_command

#: the mcpkit under test, for the server processes
SRC = str(Path(mcpkit.__file__).resolve().parents[1])
KEY = "dk_alice_0123456789abcdef"

SERVER = '''
import hashlib, sys
from mcpkit import Context, Server
from mcpkit.auth import ApiKeyAuth, api_key
from mcpkit.policy import Gates, Policy
from mcpkit.policy.audit import AuditLog

auth = ApiKeyAuth(keys={"sha256:" + hashlib.sha256(b"%(key)s").hexdigest(): {"subject": "alice"}}, env="DESIGN_API_KEY")
server = Server("keyed", auth=auth, policy=Policy(gates=Gates(), audit=AuditLog(%(audit)r)))

@server.tool(read_only=True, open_world=False)
def whoami(ctx: Context) -> dict:
    key = api_key(ctx)
    return {"principal": ctx.principal, "subject": ctx.access_token.subject, "keyLength": len(key),
            "keyMatches": key == "%(key)s"}

if __name__ == "__main__":
    server.run()
'''


@pytest.fixture
def served(tmp_path: Path) -> tuple[Path, Path]:
    audit = tmp_path / "audit.log"
    path = tmp_path / "keyed.py"
    path.write_text(SERVER % {"key": KEY, "audit": str(audit)})
    return path, audit


@pytest.mark.asyncio
@pytest.mark.req("AU-01")
@pytest.mark.parametrize("how", ["python", "mcpkit serve"])
async def test_the_key_in_the_environment_is_the_callers_as_over_http(served, how):
    path, audit = served
    command = [sys.executable, str(path)] if how == "python" else mcpkit_command("serve", str(path))
    async with Client(command, env={"PYTHONPATH": SRC, "DESIGN_API_KEY": KEY}) as client:
        result = await client.call_tool("whoami", {})
    assert result["structuredContent"] == {"principal": "alice", "subject": "alice", "keyLength": len(KEY),
                                           "keyMatches": True}
    text = audit.read_text()
    assert KEY not in text
    assert [json.loads(line)["principal"] for line in text.splitlines()] == ["alice"]


@pytest.mark.req("AU-01")
@pytest.mark.parametrize(("value", "says"), [
    (None, "this server needs an API key on stdio, and DESIGN_API_KEY is not set"),
    ("dk_mallory_0123456789abc", "the API key in DESIGN_API_KEY is not valid"),
])
@pytest.mark.parametrize("how", ["python", "mcpkit serve"])
def test_a_missing_or_refused_key_is_one_line_and_exit_2(served, how, value, says):
    path, _ = served
    command = [sys.executable, str(path)] if how == "python" else mcpkit_command("serve", str(path))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": SRC, **({"DESIGN_API_KEY": value} if value else {})}
    done = subprocess.run(command, env=env, input=b"", capture_output=True, timeout=60)
    assert done.returncode == 2, done.stderr.decode()
    errors = [line for line in done.stderr.decode().splitlines() if not line.startswith("mcpkit: serving")]
    assert len(errors) == 1 and says in errors[0] and "--env DESIGN_API_KEY=" in errors[0], errors
    assert "Traceback" not in done.stderr.decode() and (value is None or value not in done.stderr.decode())
    assert done.stdout == b""


def test_the_access_is_checked_as_a_header_key_is():
    from mcpkit.auth import ApiKeyAuth
    from mcpkit.switches import SwitchError

    passthrough = ApiKeyAuth(passthrough=True)
    access = passthrough.stdio_access({"MCPKIT_API_KEY": KEY})
    assert access.key == KEY and access.subject.startswith("key:") and KEY not in repr(access)
    with pytest.raises(SwitchError, match="malformed"):
        passthrough.stdio_access({"MCPKIT_API_KEY": "two words"})
    scoped = ApiKeyAuth(keys={KEY: {"subject": "ci", "scopes": "designs:read"}}, required_scopes=["designs:write"])
    with pytest.raises(SwitchError, match="lacks designs:write"):
        scoped.stdio_access({"MCPKIT_API_KEY": KEY})
