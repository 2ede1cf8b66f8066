"""``mcpkit skills TARGET``: list, show NAME, fetch NAME DIR, with every fetched file verified."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

from tests.conftest import mcpkit_command

SERVER = """\
from mcpkit import Middleware, Server

server = Server("skills")
server.add_skill("pdf-processing", {
    "SKILL.md": "---\\nname: pdf-processing\\ndescription: Extract PDFs\\n---\\n# PDF\\n",
    "references/FORMS.md": "# Forms\\n",
    "logo.bin": bytes(range(256)),
})
server.add_skill("acme/refunds", {"SKILL.md": "---\\nname: refunds\\ndescription: Refund money\\n---\\n# R\\n"})
server.add_skill("team/refunds", {"SKILL.md": "---\\nname: refunds\\ndescription: Refund more\\n---\\n# R\\n"})
"""

TAMPER = """

class Tamper(Middleware):
    def on_read_resource(self, ctx, call_next):
        result = call_next(ctx)
        if ctx.name.endswith("FORMS.md"):
            return {"contents": [{**result["contents"][0], "text": "# Farms\\n"}]}
        return result


server.add_middleware(Tamper())
"""


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mcpkit_command("skills", *args), capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def serve(tmp_path: Path, extra: str = "") -> str:
    path = tmp_path / "server.py"
    path.write_text(SERVER + extra)
    return str(path)


def test_list_and_show(tmp_path):
    target = serve(tmp_path)
    done = run(target)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:2] == ["pdf-processing  skill://pdf-processing/SKILL.md  (3 files, 325 bytes)",
                                            "    Extract PDFs"]
    entries = json.loads(run(target, "--json").stdout)
    assert [e["uri"] for e in entries] == ["skill://pdf-processing/SKILL.md", "skill://acme/refunds/SKILL.md",
                                           "skill://team/refunds/SKILL.md"]
    shown = run(target, "show", "pdf-processing")
    assert shown.returncode == 0, shown.stderr
    assert "skill://pdf-processing/logo.bin  256 bytes  sha256:" in shown.stdout
    assert shown.stdout.endswith("---\nname: pdf-processing\ndescription: Extract PDFs\n---\n# PDF\n")


def test_fetch_writes_every_file_as_served(tmp_path):
    out = tmp_path / "out"
    done = run(serve(tmp_path), "fetch", "pdf-processing", str(out))
    assert done.returncode == 0, done.stderr
    assert "wrote 3 files of skill://pdf-processing/SKILL.md" in done.stderr
    assert (out / "logo.bin").read_bytes() == bytes(range(256))
    assert (out / "references" / "FORMS.md").read_text() == "# Forms\n"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "SKILL.md", "logo.bin", "references/FORMS.md"]


def test_a_file_that_fails_verification_is_not_written_and_the_command_fails(tmp_path):
    out = tmp_path / "out"
    done = run(serve(tmp_path, TAMPER), "fetch", "pdf-processing", str(out))
    assert done.returncode == 1
    assert "skill://pdf-processing/references/FORMS.md: the content's digest" in done.stderr
    assert not out.exists()


def test_a_shared_name_asks_for_the_uri_and_the_uri_reaches_the_skill(tmp_path):
    target = serve(tmp_path)
    done = run(target, "show", "refunds")
    assert done.returncode == 2
    assert done.stderr.strip() == ("mcpkit: 2 skills are named 'refunds': skill://acme/refunds/SKILL.md, "
                                   "skill://team/refunds/SKILL.md; give the URI of the one you mean")
    by_uri = run(target, "show", "skill://team/refunds/SKILL.md")
    assert by_uri.returncode == 0 and "Refund more" in by_uri.stdout


def test_mistakes_are_one_line_and_exit_2(tmp_path):
    target = serve(tmp_path)
    for args, says in ((("show",), "needs a skill NAME"), (("fetch", "pdf-processing"), "needs the DIR"),
                       (("show", "nope"), "no skill named 'nope' (listed: pdf-processing, refunds)")):
        done = run(target, *args)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and says in done.stderr, done
    plain = tmp_path / "plain.py"
    plain.write_text(textwrap.dedent("""\
        from mcpkit import Server
        server = Server("plain")
        server.resource("a://b")(lambda: "x")
        """))
    done = run(str(plain))
    assert done.returncode == 1
    assert done.stderr.strip() == ("mcpkit: skills/list: the server does not declare the "
                                   "io.modelcontextprotocol/skills extension")
