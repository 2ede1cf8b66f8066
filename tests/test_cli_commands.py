"""The client-side CLI commands: list, call, docs, config and doctor, run as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import mcpkit_command

ROOT = Path(__file__).resolve().parent.parent
#: the reference server as a stdio command line, as a user would quote it
REFERENCE = " ".join([sys.executable, "-m", "mcpkit", "serve"])


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mcpkit_command(*args), capture_output=True, text=True, timeout=120, cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL)


# ------------------------------------------------------------------------------------------ config


def test_config_prints_an_entry_that_serves_the_file(tmp_path):
    server = tmp_path / "notes.py"
    server.write_text("from mcpkit import Server\nserver = Server('notes')\n")
    done = run("config", "claude-desktop", str(server), "--env", "NOTES_DIR=/data")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"mcpServers": {"notes": {
        "command": sys.executable, "args": ["-m", "mcpkit", "serve", str(server)], "env": {"NOTES_DIR": "/data"}}}}


def test_config_for_claude_code_also_prints_the_claude_mcp_add_line(tmp_path):
    server = tmp_path / "notes.py"
    server.write_text("from mcpkit import Server\nserver = Server('notes')\n")
    done = run("config", "claude-code", str(server), "--name", "my-notes")
    assert done.returncode == 0
    assert f"claude mcp add my-notes -- {sys.executable} -m mcpkit serve {server}" in done.stdout


def test_config_write_merges_into_the_existing_file_and_keeps_a_backup(tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"other": {"command": "other-server"}}, "theme": "dark"}))
    done = run("config", "cursor", "https://mcp.example.com/mcp", "--name", "remote", "--write", "--file", str(config))
    assert done.returncode == 0, done.stderr
    assert json.loads(config.read_text()) == {
        "mcpServers": {"other": {"command": "other-server"}, "remote": {"url": "https://mcp.example.com/mcp"}},
        "theme": "dark",
    }
    assert json.loads((tmp_path / "mcp.json.bak").read_text())["mcpServers"] == {"other": {"command": "other-server"}}
    clash = run("config", "cursor", "https://elsewhere.example.com/mcp", "--name", "remote", "--write",
                "--file", str(config))
    assert clash.returncode != 0 and "--force" in clash.stderr
    assert json.loads(config.read_text())["mcpServers"]["remote"] == {"url": "https://mcp.example.com/mcp"}


def test_config_write_refuses_a_broken_file(tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text("{not json")
    (tmp_path / "srv.py").write_text("from mcpkit import Server\nserver = Server('srv')\n")
    done = run("config", "cursor", str(tmp_path / "srv.py"), "--write", "--file", str(config))
    assert done.returncode != 0 and "not valid JSON" in done.stderr
    assert config.read_text() == "{not json"


# ------------------------------------------------------------------------------------------ list, call


def test_list_shows_every_kind_as_tables_and_as_json():
    table = run("list", REFERENCE)
    assert table.returncode == 0, table.stderr
    assert table.stdout.startswith("Tools (")
    assert "add                                         a: integer, b: integer" in table.stdout
    for section in ("Resources (", "Resource templates (", "Prompts ("):
        assert section in table.stdout
    raw = run("list", REFERENCE, "--json")
    found = json.loads(raw.stdout)
    assert set(found) == {"tools", "resources", "resourceTemplates", "prompts"}
    assert "add" in {t["name"] for t in found["tools"]}
    assert "test://static-text" in {r["uri"] for r in found["resources"]}


def test_list_names_a_model_parameter_and_a_nullable_one_by_their_types(tmp_path):
    # a pydantic model is a $ref into $defs, an Optional model an anyOf: neither is "any"
    (tmp_path / "models.py").write_text(
        "from pydantic import BaseModel\nfrom mcpkit import Server\nserver = Server('models')\n"
        "class Note(BaseModel):\n    title: str\n"
        "@server.tool(open_world=False)\ndef keep(note: Note, draft: Note | None = None, tag: str | None = None) -> str:\n"
        "    return note.title\n")
    table = run("list", str(tmp_path / "models.py"))
    assert table.returncode == 0, table.stderr
    assert "note: Note, draft: Note|null?, tag: string|null?" in table.stdout


def test_call_parses_values_as_json_and_reports_tool_errors_in_the_exit_code():
    added = run("call", REFERENCE, "add", "a=2", "b=40")
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout) == {"result": 42}
    echoed = run("call", REFERENCE, "echo", "text=not json")
    assert echoed.stdout == "not json\n"
    failed = run("call", REFERENCE, "test_error_handling")
    assert failed.returncode == 1  # errors on stderr, results on stdout
    assert "This tool intentionally returns an error for testing" in failed.stderr and failed.stdout == ""
    unknown = run("call", REFERENCE, "nope")
    assert unknown.returncode == 1 and "Unknown tool: nope" in unknown.stderr


def test_call_takes_key_value_pairs_after_its_options():
    # `--json OBJECT key=value` ("key=value pairs add to it") and `--raw key=value` used to stop
    # at argparse's "unrecognized arguments: key=value"
    added = run("call", REFERENCE, "add", "--json", '{"a": 2}', "b=40")
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout) == {"result": 42}
    raw = run("call", REFERENCE, "add", "--raw", "a=1", "b=2")
    assert raw.returncode == 0, raw.stderr
    assert json.loads(raw.stdout)["structuredContent"] == {"result": 3}
    prompt = run("prompt", REFERENCE, "test_prompt_with_arguments", "--json", "arg1=x", "arg2=y")
    assert prompt.returncode == 0, prompt.stderr
    assert json.loads(prompt.stdout)["messages"]
    stray = run("call", REFERENCE, "add", "--raw", "a=1", "--nope")
    assert stray.returncode == 2 and "unrecognized arguments: --nope" in stray.stderr


def test_calls_tail_of_the_servers_stderr_has_each_line_whole(tmp_path):
    # it read "... rate 600/min, contract envelopesbridge editor cannot connect: FileNotFoundError...":
    # the bridge's warning, logged at import, had no log format and ran into the start-up line
    import os

    target = f"{REFERENCE} {ROOT / 'examples' / 'workspace.py'} --root {tmp_path} --read-only"
    env = {**os.environ, "MCPKIT_EDITOR_SOCKET": str(tmp_path / "no-editor.sock")}
    done = run("call", target, "write_file", "path=b.txt", "content=x", env=env)
    assert done.returncode == 1
    tail = done.stderr.split("--- the server's stderr ---\n", 1)[1].splitlines()
    # the start-up line says nothing about the error and is left out; the warning is a line of its own
    assert not any("mcpkit: serving" in line for line in tail), tail
    assert any(line.startswith("WARNING mcpkit.bridge: bridge editor cannot connect: ") for line in tail), tail


def test_an_unknown_protocol_revision_is_refused_with_the_known_ones():
    # it was offered, and the server answered its own newest as if nothing had been asked
    done = run("list", REFERENCE, "--protocol-version", "1999-01-01")
    assert done.returncode == 2 and done.stdout == ""
    assert "argument --protocol-version: unknown revision '1999-01-01'; give one of 2024-11-05" in done.stderr
    assert run("list", REFERENCE, "--protocol-version", "2025-06-18").returncode == 0


def test_a_401_says_which_header_carries_the_token(tmp_path):
    # it was "mcpkit: HTTP 401: -32600: Authorization required: send an OAuth bearer token." and
    # exit 1, with no word of --header
    import os

    from mcpkit.auth import hash_token

    token = "cli-test-token-0123456789abcdef"
    env = {**os.environ, "MCPKIT_AUTH_TOKENS": f"{hash_token(token)} alice"}
    proc = subprocess.Popen(mcpkit_command("serve", "--http", "127.0.0.1:0", "--auth", "tokens"), env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("mcpkit: serving"), line
        url = line.split(" on ")[1].split(" ")[0]
        metadata = url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
        missing = run("list", url)
        assert missing.returncode == 2 and missing.stdout == ""
        expected = ("mcpkit: HTTP 401: Authorization required: send an OAuth bearer token; pass a token with "
                    f"--header 'Authorization: Bearer TOKEN' (the server's authorization metadata: {metadata})")
        assert missing.stderr.splitlines() == [expected], missing.stderr
        wrong = run("call", url, "add", "a=1", "b=2", "--header", "Authorization: Bearer not-the-token")
        assert wrong.returncode == 2
        assert wrong.stderr.startswith("mcpkit: HTTP 401: Invalid access token: unknown token; pass a valid token "
                                       "with --header 'Authorization: Bearer TOKEN'"), wrong.stderr
        right = run("call", url, "add", "a=1", "b=2", "--header", f"Authorization: Bearer {token}")
        assert right.returncode == 0 and json.loads(right.stdout) == {"result": 3}, right.stderr
    finally:
        proc.terminate()
        proc.wait(30)


def test_a_401_of_an_api_key_server_names_its_header():
    from mcpkit.client import ClientError
    from mcpkit.cli_target import unauthorized

    refused = ClientError("HTTP 401 from POST https://x.example/mcp: An API key is required.", status=401,
                          headers={"WWW-Authenticate": 'ApiKey realm="designs", header="X-API-Key"'})
    assert unauthorized(refused) == ("HTTP 401 from POST https://x.example/mcp: An API key is required; pass the "
                                      "key with --header 'X-API-Key: KEY'")


def test_read_output_writes_a_text_resource_too(tmp_path):
    # --output used to be ignored for a text resource: printed on stdout, no file written
    out = tmp_path / "r.txt"
    done = run("read", REFERENCE, "test://static-text", "--output", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_text() != "" and done.stdout == ""


# ------------------------------------------------------------------------------------------ docs


def test_docs_writes_a_reference_and_check_catches_a_stale_one(tmp_path):
    server = tmp_path / "notes.py"
    server.write_text(
        "from mcpkit import Server\n"
        "server = Server('notes', '2.0')\n"
        "@server.tool(read_only=True)\n"
        "def find(text: str, limit: int = 10) -> list[str]:\n"
        "    '''Find notes.\n\n    Args:\n        text: what to look for.\n    '''\n"
        "    return []\n"
    )
    out = tmp_path / "TOOLS.md"
    assert run("docs", str(server), "--output", str(out)).returncode == 0
    text = out.read_text()
    assert text.startswith("# notes\n\nVersion 2.0.\n\n## Tools\n\n### `find`\n\nFind notes.\n\n*read-only*\n")
    assert "| `text` | string | yes |  |  | what to look for. |" in text
    assert "| `limit` | integer | no | `10` |  |  |" in text  # the default is documented
    assert run("docs", str(server), "--check", str(out)).returncode == 0
    server.write_text(server.read_text().replace("Find notes.", "Find notes by text."))
    stale = run("docs", str(server), "--check", str(out))
    assert stale.returncode == 1 and "stale" in stale.stderr
    missing = run("docs", str(server), "--check", str(tmp_path / "NOSUCH.md"))
    assert missing.returncode == 1 and "NOSUCH.md does not exist; write it with" in missing.stderr


# ------------------------------------------------------------------------------------------ doctor


def test_doctor_reports_the_installation_and_a_clean_server():
    done = run("doctor", REFERENCE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "orjson" in done.stdout and "answered initialize in" in done.stdout
    assert "stdout: only protocol messages" in done.stdout and "no problems found" in done.stdout


@pytest.mark.req("ST-02")
def test_doctor_finds_a_server_that_prints_on_stdout(tmp_path):
    noisy = tmp_path / "noisy.py"
    noisy.write_text("print('Starting my server v1.0')\nfrom mcpkit.reference import server\nserver.run()\n")
    done = run("doctor", f"{sys.executable} {noisy}")
    assert done.returncode == 1
    assert "non-protocol line(s) on stdout" in done.stderr and "Starting my server" in done.stderr


# ------------------------------------------------------------------------------------------ serve


@pytest.mark.parametrize(("command", "value"), [
    (["dev", "--port"], "99999"),  # served on 34463 too
    (["dev", "--port"], "-3"),     # "cannot resolve host '127.0.0.1' (Servname not supported ...)"
])
def test_dev_refuses_a_port_out_of_range(command, value):
    done = subprocess.run(mcpkit_command(*command, value), capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert "inspector at" not in done.stderr
    assert "argument --port: port must be 0-65535" in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize("value", ["127.0.0.1:99999", "65536", "[::1]:70000"])
def test_serve_refuses_a_port_out_of_range_instead_of_binding_another(value):
    # 99999 used to reach the socket layer, which took it modulo 65536 and served on port 34463
    done = subprocess.run(mcpkit_command("serve", "--http", value), capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert "serving" not in done.stderr
    assert "port must be 0-65535" in done.stderr, done.stderr[-2000:]


def test_a_target_that_exits_at_once_is_one_line_with_its_exit_code_and_stderr():
    # used to be "mcpkit: the server's stdin is closed" (and an asyncio "Future exception was
    # never retrieved" report with a traceback once the exit was known)
    done = run("list", "sh -c \"echo 'Error: missing API key FOO' >&2; exit 3\"")
    assert done.returncode == 1
    assert done.stderr.strip() == "mcpkit: the server exited with code 3; stderr: Error: missing API key FOO"


@pytest.mark.parametrize("target", ["mcpkit-no-such-command-xyz --flag", "/nonexistent/server --stdio"])
def test_a_command_line_that_cannot_start_is_a_mistake_with_exit_code_2(target):
    # a single word that is no command exits 2 ("is no file, command on PATH or importable
    # module"); the same command with an argument used to exit 1, as if the server had failed
    done = run("list", target)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"mcpkit: cannot start {target.split()[0]!r}: "), done.stderr
    assert "Traceback" not in done.stderr


def test_serve_refuses_an_audit_log_it_cannot_write(tmp_path):
    # MCPKIT_AUDIT_LOG under a regular file: the server used to start and lose every audit line
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = run("serve", "--policy", env={**__import__("os").environ, "MCPKIT_AUDIT_LOG": str(blocker / "a.log")})
    assert done.returncode == 2
    assert done.stderr.startswith(f"mcpkit: cannot open the audit log {blocker / 'a.log'}: "), done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("flag", [["--read-only"], ["--root", "."]])
def test_serve_refuses_a_policy_flag_for_a_server_without_a_policy(tmp_path, flag):
    # `mcpkit serve rw.py --read-only` used to say "policy off" and run every tool, writers included
    server = tmp_path / "rw.py"
    server.write_text("from mcpkit import Server\nserver = Server('rw')\n\n@server.tool\ndef wipe() -> str:\n"
                      "    return 'wiped'\n")
    done = run("serve", str(server), *flag, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"mcpkit: {flag[0]} needs a policy, and the server 'rw' has none, so it would "
                                   "change nothing; add --policy (or build the Server with policy=...)  (run with -v "
                                   "for the traceback)")
    assert "serving" not in done.stderr
    served = run("serve", str(server), *flag, "--policy", cwd=tmp_path)  # EOF on stdin: serves, then exits
    assert served.returncode == 0 and "policy: " in served.stderr, served.stderr


WRITER = ("from mcpkit import Server\nfrom mcpkit.policy import Policy\n"
          "server = Server('rw', policy=Policy.secure({extra}))\n\n"
          "@server.tool(open_world=False, destructive=False)\ndef save() -> str:\n    return 'saved'\n")


def test_a_read_only_refusal_names_what_the_user_did(tmp_path):
    # under `mcpkit serve --read-only` it said "(MCPKIT_READ_ONLY is set)", a variable the user never set
    import os

    server = tmp_path / "rw.py"
    server.write_text(WRITER.format(extra=""))
    env = {k: v for k, v in os.environ.items() if k != "MCPKIT_READ_ONLY"}
    flagged = run("call", f"{REFERENCE} {server} --read-only", "save", env=env)
    assert flagged.returncode == 1
    assert "read-only mode (--read-only is given)" in flagged.stderr and "MCPKIT_READ_ONLY" not in flagged.stderr, \
        flagged.stderr
    assert "save: hidden, not declared read-only under --read-only; declare read_only=True or drop --read-only" \
        in flagged.stderr, flagged.stderr
    from_env = run("call", f"{REFERENCE} {server}", "save", env={**env, "MCPKIT_READ_ONLY": "1"})
    assert from_env.returncode == 1 and "read-only mode (MCPKIT_READ_ONLY is set)" in from_env.stderr, from_env.stderr


@pytest.mark.parametrize(("extra", "how"), [
    ("gate_switches={'read_only': 'READ_ONLY_MODE'}", "reads read-only mode from READ_ONLY_MODE: set READ_ONLY_MODE=1"),
    ("read_only=False", "sets read-only mode in its code: change it there"),
])
def test_read_only_on_a_policy_that_does_not_read_it_is_refused(tmp_path, extra, how):
    # --read-only sets MCPKIT_READ_ONLY; a policy reading another switch served every tool
    server = tmp_path / "rw.py"
    server.write_text(WRITER.format(extra=extra))
    done = run("serve", str(server), "--read-only")
    assert done.returncode == 2
    assert done.stderr.strip() == (f"mcpkit: --read-only would change nothing: the policy of the server 'rw' {how}, "
                                   "or drop --read-only"), done.stderr


@pytest.mark.parametrize("reload", [[], ["--reload"]])
def test_dev_refuses_a_policy_flag_for_a_server_without_a_policy(tmp_path, reload):
    # `mcpkit dev rw.py --read-only` served every tool, where serve refuses (and with --reload, the
    # server behind the page did not load, and dev waited for a change that would never fix it)
    server = tmp_path / "rw.py"
    server.write_text("from mcpkit import Server\nserver = Server('rw')\n")
    done = subprocess.run(mcpkit_command("dev", str(server), "--read-only", "--port", "0", *reload),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.strip().startswith("mcpkit: --read-only needs a policy, and the server 'rw' has none"), \
        done.stderr


@pytest.mark.parametrize(("option", "value"), [
    ("--max-sessions", "-1"),            # served, and refused every session with 503
    ("--max-sessions", "0"),             # silently the default 1000
    ("--session-idle-timeout", "-1"),    # served, and every session expired at once (404)
    ("--max-message-bytes", "0"),        # silently the default
    ("--max-sessions-per-client", "0"),  # silently the default
    ("--workers", "0"),                  # silently one process
    ("--shutdown-timeout", "-5"),        # uvicorn's "Cancel 0 running task(s)" at exit
])
def test_serve_refuses_a_count_or_duration_that_is_not_positive(option, value):
    done = subprocess.run(mcpkit_command("serve", "--http", "127.0.0.1:0", option, value), capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert f"argument {option}: must be a positive" in done.stderr or \
        f"argument {option}: must be 0 or more" in done.stderr, done.stderr
    assert "serving" not in done.stderr


def test_serve_refuses_a_trusted_proxy_that_is_not_an_address_or_network():
    # uvicorn takes such an entry as a name no peer ever has: every client would silently stay
    # the balancer's one address
    done = subprocess.run(mcpkit_command("serve", "--http", "127.0.0.1:0", "--forwarded-allow-ips", "10.0.0.1,lb"),
                          capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert "argument --forwarded-allow-ips: 'lb' is not an IP address or network" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "serving" not in done.stderr


def test_serve_refuses_uvicorns_forwarded_allow_ips_variable():
    # uvicorn trusted the proxies it names; mcpkit turns uvicorn's proxy headers off, so it
    # would be ignored and every client behind them counted as one
    done = subprocess.run(mcpkit_command("serve", "--http", "127.0.0.1:0"), capture_output=True, text=True,
                          timeout=30, stdin=subprocess.DEVNULL, env={**os.environ, "FORWARDED_ALLOW_IPS": "10.0.0.5"})
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == ("mcpkit: FORWARDED_ALLOW_IPS is uvicorn's, and mcpkit does not read it; give the "
                                   "proxies with --forwarded-allow-ips (http_app(forwarded_allow_ips=...)) and unset "
                                   "FORWARDED_ALLOW_IPS"), done.stderr
