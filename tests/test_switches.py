"""The MCPKIT_* environment switches (mcpkit/switches.py, docs/environment.md): a bad value, or one
nothing would read, stops the server at start-up with one line, whoever starts it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mcpkit import switches
from mcpkit.switches import SWITCHES, SwitchError, check
from tests.conftest import mcpkit_command

DOCS = Path(__file__).resolve().parent.parent / "docs" / "environment.md"

#: a value each switch refuses; the switches missing here take any text (a path, a secret, an
#: --auth option's value, which the option's own parser reads)
BAD = {
    "MCPKIT_POLICY": "maybe", "MCPKIT_READ_ONLY": "maybe", "MCPKIT_ALLOW_DESTRUCTIVE": "2",
    "MCPKIT_ALLOW_OPEN_WORLD": "y", "MCPKIT_CONTRACT": "sure", "MCPKIT_AUDIT_MAX_BYTES": "-1",
    "MCPKIT_AUDIT_BACKUPS": "many", "MCPKIT_AUDIT_MAX_ARGUMENT_BYTES": "4k", "MCPKIT_AUDIT_KEEP_RECENT": "1h",
    "MCPKIT_AUDIT_MAX_BACKUPS": "lots", "MCPKIT_ISOLATION_WORKERS": "0", "MCPKIT_ISOLATION_START": "thread",
    "MCPKIT_RATE_LIMIT": "5/fortnight", "MCPKIT_TOOL_TIMEOUT": "soon", "MCPKIT_MAX_ARGUMENT_BYTES": "1MB",
    "MCPKIT_MAX_RESULT_BYTES": "-5", "MCPKIT_STORE": "mysql://db", "MCPKIT_STATE_KEY": "short",
    "MCPKIT_OTEL": "maybe", "MCPKIT_SERVE_ARGV": "serve x.py", "MCPKIT_LOOP": "trio",
}
FREE_TEXT = {"MCPKIT_ROOT", "MCPKIT_AUDIT_LOG", "MCPKIT_CONFORMANCE", "MCPKIT_AUTH_TOKENS",
             "MCPKIT_INTROSPECTION_CLIENT_SECRET", "MCPKIT_API_KEY",
             *(name for name in SWITCHES if name.startswith("MCPKIT_AUTH"))}

#: a value of each policy switch that asks for something (refused without a policy), and its off value
POLICY = {
    "MCPKIT_READ_ONLY": ("1", "0"), "MCPKIT_ALLOW_DESTRUCTIVE": ("true", "false"),
    "MCPKIT_ALLOW_OPEN_WORLD": ("yes", "no"), "MCPKIT_ROOT": ("/srv", None), "MCPKIT_CONTRACT": ("on", "off"),
    "MCPKIT_AUDIT_LOG": ("/var/log/a.log", None), "MCPKIT_AUDIT_MAX_BYTES": ("0", None),
    "MCPKIT_AUDIT_BACKUPS": ("2", None), "MCPKIT_AUDIT_MAX_ARGUMENT_BYTES": ("100", None),
    "MCPKIT_AUDIT_KEEP_RECENT": ("60", None), "MCPKIT_AUDIT_MAX_BACKUPS": ("3", None),
    "MCPKIT_RATE_LIMIT": ("60/min", "off"), "MCPKIT_TOOL_TIMEOUT": ("5", "0"),
    "MCPKIT_MAX_ARGUMENT_BYTES": ("1000", "0"), "MCPKIT_MAX_RESULT_BYTES": ("1000", "0"),
}


@pytest.fixture(autouse=True)
def _nothing_claimed(monkeypatch):
    # what an in-process mcpkit command claimed or set from a flag must not leak into these
    monkeypatch.setattr(switches, "_claimed", set())
    monkeypatch.setattr(switches, "_flags", {})


def test_the_docs_table_is_the_registry():
    documented = set(re.findall(r"^\| `(MCPKIT_[A-Z_]+)` \|", DOCS.read_text(), re.MULTILINE))
    assert documented == set(SWITCHES)


def test_every_switch_that_can_be_wrong_has_a_bad_value_here():
    assert set(BAD) | FREE_TEXT == set(SWITCHES)
    assert set(POLICY) == {name for name, s in SWITCHES.items() if s.reader == "policy"}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_value_is_one_line_naming_the_variable_the_value_and_what_it_takes(name):
    with pytest.raises(SwitchError) as info:
        check(environ={name: BAD[name]})
    line = str(info.value)
    assert "\n" not in line and line.startswith(name)
    if SWITCHES[name].secret:  # a store URL or a key: never in a message
        assert BAD[name] not in line and "(its value is not shown)" in line
    else:
        assert line.startswith(f"{name}={BAD[name]!r} is not ")
    assert re.search(r": (use|give) ", line), line  # what it takes


@pytest.mark.parametrize("name", sorted(POLICY))
def test_a_policy_switch_needs_a_policy_unless_it_is_off(name):
    on, off = POLICY[name]
    with pytest.raises(SwitchError) as info:
        check(server="notes", policy=False, environ={name: on})
    assert str(info.value) == (
        f"{name}={on} needs a policy, and the server 'notes' has none, so it would change nothing; set "
        f"MCPKIT_POLICY=1 (mcpkit serve --policy, or build the Server with policy=...), or unset {name}")
    check(server="notes", policy=True, environ={name: on})
    if off is not None:
        check(server="notes", policy=False, environ={name: off})  # not a request for anything


def test_several_policy_switches_are_named_in_one_line():
    with pytest.raises(SwitchError, match=r"^MCPKIT_READ_ONLY=1 and MCPKIT_TOOL_TIMEOUT=5 need a policy, .* so they "
                                          r"would change nothing; .*, or unset MCPKIT_READ_ONLY and MCPKIT_TOOL_TIMEOUT$"):
        check(server="notes", environ={"MCPKIT_READ_ONLY": "1", "MCPKIT_TOOL_TIMEOUT": "5"})


@pytest.mark.parametrize(("name", "value"), [("MCPKIT_AUTH", "jwt"), ("MCPKIT_AUTH_TOKENS", "t0ken alice"),
                                             ("MCPKIT_OTEL", "1")])
def test_a_switch_only_the_mcpkit_command_reads_is_refused_where_it_did_not(name, value):
    with pytest.raises(SwitchError, match=f"^{name}.* is read only by mcpkit serve") as info:
        check(server="notes", policy=True, environ={name: value})
    assert (value not in str(info.value)) == SWITCHES[name].secret
    switches.claim(name)
    check(server="notes", policy=True, environ={name: value})


def test_an_unset_or_empty_switch_asks_for_nothing():
    check(server="notes", environ={"MCPKIT_READ_ONLY": "", "MCPKIT_TOOL_TIMEOUT": " ", "MCPKIT_OTEL": "0"})


# ------------------------------------------------------------------------------- real processes

NOTES = """\
import pathlib
import sys
from mcpkit import Server

server = Server("notes", "1.0"{policy})
NOTE = pathlib.Path(__file__).with_name("note.txt")


@server.tool(destructive=True, open_world=False)
def delete_note(note_id: str) -> str:
    NOTE.unlink()
    return "deleted"


if __name__ == "__main__":
    server.run(*sys.argv[1:])
"""


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    (tmp_path / "note.txt").write_text("keep me")
    (tmp_path / "notes.py").write_text(NOTES.format(policy=""))
    (tmp_path / "policed.py").write_text(NOTES.format(policy=", policy=True"))
    return tmp_path


def run(cwd: Path, argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in SWITCHES}
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=cwd, stdin=subprocess.DEVNULL,
                          env={**clean, **env}, check=False)


def test_read_only_from_the_environment_on_a_server_without_a_policy_refuses_to_start(notes):
    # it deleted the note: rc 0, start-up line "policy off"
    done = run(notes, mcpkit_command("call", "notes.py", "delete_note", "note_id=1"), {"MCPKIT_READ_ONLY": "1"})
    assert done.returncode != 0 and (notes / "note.txt").exists(), done.stdout + done.stderr
    assert "MCPKIT_READ_ONLY=1 needs a policy, and the server 'notes' has none" in done.stderr
    assert "MCPKIT_POLICY=1" in done.stderr and "--policy" in done.stderr
    # its off value asks for nothing
    done = run(notes, mcpkit_command("call", "notes.py", "delete_note", "note_id=1"), {"MCPKIT_READ_ONLY": "0"})
    assert done.returncode == 0 and not (notes / "note.txt").exists(), done.stderr


@pytest.mark.parametrize("argv", [["python", "notes.py"], ["mcpkit", "serve", "notes.py"],
                                  ["mcpkit", "proxy", "--", sys.executable, "notes.py"],
                                  ["mcpkit", "dev", "notes.py", "--port", "0"]])
@pytest.mark.parametrize(("env", "line"), [
    ({"MCPKIT_READ_ONLY": "maybe"}, "MCPKIT_READ_ONLY='maybe' is not a boolean: use 1/true/yes/on or 0/false/no/off"),
    ({"MCPKIT_TOOL_TIMEOUT": "soon"}, "MCPKIT_TOOL_TIMEOUT='soon' is not a number of seconds: give a positive number "
                                      "of seconds, or 0 for no timeout"),
    ({"MCPKIT_ISOLATION_START": "thread"}, "MCPKIT_ISOLATION_START='thread' is not a start method: use fork, spawn "
                                           "or forkserver"),
    ({"MCPKIT_READ_ONLY": "1"}, "MCPKIT_READ_ONLY=1 needs a policy, and the server "),
])
def test_every_way_of_serving_refuses_a_bad_environment_in_one_line(notes, argv, env, line):
    # all of these started the server (a server without a policy read none of them)
    command = [sys.executable, *argv[1:]] if argv[0] == "python" else mcpkit_command(*argv[1:])
    done = run(notes, command, env)
    if argv[1] == "proxy" and env == {"MCPKIT_READ_ONLY": "1"}:
        # the proxy's own gate: it reads the switch, and its upstream starts without it
        # (tests/proxy/test_proxy_cli.py::test_the_proxys_own_switches_stay_the_proxys)
        assert done.returncode == 0 and not done.stderr, done.stderr
        return
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and f"mcpkit: {line}" in lines[0], done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(("env", "line"), [
    # the policy the code asks for reads a bad value: a traceback from Server(...), exit 1
    ({"MCPKIT_TOOL_TIMEOUT": "soon"}, "mcpkit: MCPKIT_TOOL_TIMEOUT='soon' is not a number of seconds"),
    ({"MCPKIT_ROOT": "/no/such/root"}, "mcpkit: sandbox root '/no/such/root' does not exist or is not a directory"),
    # read only by mcpkit serve --http: python server.py served without authorization
    ({"MCPKIT_AUTH": "jwt"}, "mcpkit: MCPKIT_AUTH=jwt is read only by mcpkit serve --http and mcpkit proxy --http, "
                             "not here, so it would change nothing; serve with mcpkit serve"),
])
def test_python_server_py_refuses_a_bad_environment_in_one_line(notes, env, line):
    done = run(notes, [sys.executable, "policed.py"], env)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(line), done.stderr


def test_a_good_environment_still_serves(notes):
    done = run(notes, [sys.executable, "policed.py"], {"MCPKIT_READ_ONLY": "1", "MCPKIT_TOOL_TIMEOUT": "5",
                                                        "MCPKIT_ROOT": str(notes), "MCPKIT_OTEL": "0"})
    assert done.returncode == 0 and "mcpkit: serving notes 1.0 on stdio" in done.stderr, done.stderr


def test_tokens_in_the_environment_without_auth_are_refused_not_ignored(notes):
    # `MCPKIT_AUTH_TOKENS=... mcpkit serve --http` without --auth served every request unauthenticated
    done = run(notes, mcpkit_command("serve", "notes.py", "--http", "127.0.0.1:0"),
               {"MCPKIT_AUTH_TOKENS": "a-long-enough-token-for-the-test-0123456789 alice"})
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("mcpkit: MCPKIT_AUTH_TOKENS (its value is not shown) is read only by mcpkit serve "
                                  "--http and mcpkit proxy --http with --auth tokens"), done.stderr
    assert "a-long-enough-token" not in done.stderr


# ------------------------------------------------------- switches set where nothing would read them

@pytest.mark.parametrize(("name", "meant"), [("MCPKIT_READONLY", "MCPKIT_READ_ONLY"),
                                             ("mcpkit_read_only", "MCPKIT_READ_ONLY"),
                                             ("MCPKIT_ALLOW_DESTRUCTION", "MCPKIT_ALLOW_DESTRUCTIVE"),
                                             ("MCPKIT_RATELIMIT", "MCPKIT_RATE_LIMIT"),
                                             ("MCPKIT_ROOTS", "MCPKIT_ROOT")])
def test_a_misspelled_switch_is_refused_naming_the_one_meant(name, meant):
    with pytest.raises(SwitchError) as info:
        check(server="notes", policy=True, environ={name: "1"})
    assert str(info.value) == (f"{name} is not an mcpkit switch, so it would change nothing; did you mean {meant}? "
                               f"Rename it to {meant} or unset it (docs/environment.md lists the switches)")


def test_names_far_from_every_switch_are_left_alone():
    # a tool's own settings and the test suite's variables share the prefix
    check(server="notes", policy=True, environ={"MCPKIT_TEST_REDIS": "redis://x", "MCPKIT_INSPECTOR": "/bin/x",
                                                "MCPKIT_EDITOR_SOCKET": "/tmp/s", "MCPKIT_READONLY": ""})


HAND_BUILT = """\
import sys
from mcpkit import Server
from mcpkit.policy import Gates, Policy

policy = {policy}
server = Server("notes", "1.0", policy=policy)


@server.tool(destructive=True, open_world=False)
def delete_note(note_id: str) -> str:
    return "deleted"


if __name__ == "__main__":
    server.run(*sys.argv[1:])
"""


@pytest.mark.parametrize(("policy", "refused"), [
    ("Policy(gates=Gates(read_only=False))", True),  # by hand: reads no switch
    ("Policy.secure(env_prefix='GODOT_')", True),  # reads GODOT_READ_ONLY instead
    ("Policy.secure(read_only=False)", True),  # the gate is set in code
    ("Policy.secure(environ={})", True),  # its own environment
    ("Policy.secure()", False),
    # the user's own code reading it through mcpkit counts
    ("Policy(gates=Gates(read_only=__import__('mcpkit.switches', fromlist=['read']).read('MCPKIT_READ_ONLY', "
     "default=False)))", False),
])
def test_a_policy_switch_the_policy_never_read_is_refused(tmp_path, policy, refused):
    # MCPKIT_READ_ONLY=1 with a hand-built policy served delete_note: the user's read-only was ignored
    (tmp_path / "server.py").write_text(HAND_BUILT.format(policy=policy))
    done = run(tmp_path, [sys.executable, "server.py"], {"MCPKIT_READ_ONLY": "1"})
    if not refused:
        assert done.returncode == 0 and "serving notes 1.0 on stdio" in done.stderr, done.stderr
        return
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "mcpkit: MCPKIT_READ_ONLY=1 is set, but the policy of the server 'notes' was built without reading it (by "
        "hand, with its own environ or switch names, or the setting given in code), so it would change nothing; "
        "build the policy with Policy.secure(), which reads the MCPKIT_* switches, or unset MCPKIT_READ_ONLY\n")


def test_a_misspelled_switch_stops_a_real_server(notes):
    done = run(notes, [sys.executable, "policed.py"], {"MCPKIT_READONLY": "1"})
    assert done.returncode == 2 and done.stderr.startswith(
        "mcpkit: MCPKIT_READONLY is not an mcpkit switch, so it would change nothing; did you mean MCPKIT_READ_ONLY?"), \
        done.stderr


KEYED = """\
import sys
from mcpkit import Server
from mcpkit.auth import ApiKeyAuth

server = Server("keyed", "1.0"{auth})


@server.tool(read_only=True, open_world=False)
def ping() -> str:
    return "pong"


if __name__ == "__main__":
    server.run(*sys.argv[1:])
"""


@pytest.mark.parametrize(("auth", "reads"), [
    ("", "it has no ApiKeyAuth to read it"),
    (", auth=ApiKeyAuth(passthrough=True, env='DESIGN_API_KEY')", "its ApiKeyAuth reads DESIGN_API_KEY"),
    (", auth=ApiKeyAuth(passthrough=True)", None),
])
def test_an_api_key_the_server_does_not_read_is_refused(tmp_path, auth, reads):
    # MCPKIT_API_KEY beside a server without ApiKeyAuth served every call without the identity
    (tmp_path / "keyed.py").write_text(KEYED.format(auth=auth))
    done = run(tmp_path, [sys.executable, "keyed.py"], {"MCPKIT_API_KEY": "dk_live_0123456789abcdef"})
    if reads is None:
        assert done.returncode == 0 and "serving keyed 1.0 on stdio" in done.stderr, done.stderr
        return
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"mcpkit: MCPKIT_API_KEY (its value is not shown) is set, but the server 'keyed' does not "
                           f"read it: {reads}, so it would change nothing; give the key in the variable the server "
                           f"reads, or unset MCPKIT_API_KEY\n")
    assert "dk_live" not in done.stderr
