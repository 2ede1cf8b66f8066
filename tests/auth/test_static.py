"""StaticTokens: hashed storage, file and environment formats, permissions, constant-time compare."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

import pytest

from mcpkit.auth import AccessToken, InvalidToken, StaticTokens, hash_token, static
from tests.auth.conftest import Clock

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-fedcba9876543210xyz"


def test_hash_token_is_sha256_hex() -> None:
    assert hash_token("x") == "sha256:" + hashlib.sha256(b"x").hexdigest()
    assert hash_token(ALICE).startswith("sha256:") and len(hash_token(ALICE)) == 7 + 64


@pytest.mark.req("AU-14")
@pytest.mark.asyncio
async def test_hashed_and_plain_entries_verify() -> None:
    tokens = StaticTokens({
        hash_token(ALICE): {"subject": "alice", "scopes": ["files:read", "files:write"]},
        BOB: {"subject": "bob", "scopes": "files:read", "client_id": "ci"},
    })
    assert await tokens.verify(ALICE) == AccessToken(subject="alice", scopes=frozenset({"files:read", "files:write"}))
    bob = await tokens.verify(BOB)
    assert (bob.subject, bob.client_id, bob.scopes) == ("bob", "ci", {"files:read"})
    assert ALICE not in repr(tokens) and BOB not in repr(vars(tokens))  # plain tokens are not kept
    assert tokens.plain_count == 1 and len(tokens) == 2


@pytest.mark.req("AU-05")
@pytest.mark.asyncio
async def test_unknown_tokens_are_refused() -> None:
    tokens = StaticTokens({ALICE: {"subject": "alice"}})
    for wrong in ("", ALICE[:-1], ALICE + "x", hash_token(ALICE), "x" * 1000):
        with pytest.raises(InvalidToken, match="unknown token"):
            await tokens.verify(wrong)


@pytest.mark.asyncio
async def test_every_entry_is_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[bytes, bytes]] = []
    real = static.hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(static.hmac, "compare_digest", counting)
    tokens = StaticTokens({f"token-number-{i:04d}-padding": {"subject": f"u{i}"} for i in range(5)})
    assert (await tokens.verify("token-number-0000-padding")).subject == "u0"  # first entry: no early exit
    assert len(calls) == 5
    with pytest.raises(InvalidToken):
        await tokens.verify("nope")
    assert len(calls) == 10
    assert all(len(a) == len(b) == 32 for a, b in calls)  # digests, never the raw token


@pytest.mark.asyncio
async def test_expiry(clock: Clock) -> None:
    tokens = StaticTokens({ALICE: {"subject": "alice", "expires_at": clock.now + 10}}, clock=clock)
    assert (await tokens.verify(ALICE)).expires_at == clock.now + 10
    clock.now += 10
    with pytest.raises(InvalidToken, match="token expired"):
        await tokens.verify(ALICE)


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ({"short-token": {"subject": "a"}}, "shorter than 16"),
        ({"sha256:abc": {"subject": "a"}}, "64 hex digits"),
        ({ALICE + " x": {"subject": "a"}}, "whitespace"),
        ({ALICE: {"subject": ""}}, "subject"),
        ({ALICE: {"subject": "a b"}}, "subject"),
        ({ALICE: {"subject": "a", "scopes": 3}}, "scopes"),
        ({ALICE: {"subject": "a", "expires_at": "soon"}}, "expires_at"),
        ({ALICE: {"subject": "a", "role": "admin"}}, "unknown keys"),
        ({ALICE: {"subject": "a"}, hash_token(ALICE): {"subject": "b"}}, "twice"),
        ({ALICE: "alice"}, "expected an object"),
    ],
)
def test_bad_entries_are_refused_without_echoing_the_token(entries: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        StaticTokens(entries)
    assert ALICE not in str(info.value) and "short-token" not in str(info.value)


def _write(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    os.chmod(path, mode)
    return path


LINES = f"""# team tokens
{hash_token(ALICE)}  alice  files:read files:write   # laptop

{BOB} bob
"""


@pytest.mark.req("AU-14")
@pytest.mark.asyncio
async def test_lines_file_with_comments_and_a_warning_for_plain_tokens(tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="mcpkit.auth"):
        tokens = StaticTokens.from_file(_write(tmp_path / "tokens", LINES))
    assert (await tokens.verify(ALICE)).scopes == {"files:read", "files:write"}
    assert (await tokens.verify(BOB)).scopes == frozenset()
    assert "1 plain token" in caplog.text and BOB not in caplog.text


@pytest.mark.asyncio
async def test_json_file_with_hashes_only_does_not_warn(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                        clock: Clock) -> None:
    data = {hash_token(ALICE): {"subject": "alice", "scopes": ["a"], "expires_at": clock.now + 5}}
    with caplog.at_level(logging.WARNING, logger="mcpkit.auth"):
        tokens = StaticTokens.from_file(_write(tmp_path / "tokens.json", json.dumps(data)), clock=clock)
    assert caplog.text == ""
    assert (await tokens.verify(ALICE)).expires_at == clock.now + 5


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="line 2"):
        StaticTokens.from_file(_write(tmp_path / "a", f"{hash_token(ALICE)} alice\nlonely-token-without-subject\n"))
    with pytest.raises(ValueError, match="invalid JSON"):
        StaticTokens.from_file(_write(tmp_path / "b", "{not json"))
    with pytest.raises(ValueError, match="line 1.*shorter"):
        StaticTokens.from_file(_write(tmp_path / "c", "weak alice"))
    with pytest.raises(ValueError, match="no tokens"):
        StaticTokens.from_file(_write(tmp_path / "d", "# nothing yet\n"))


@pytest.mark.req("AU-14")
@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o602])
def test_files_open_to_group_or_others_are_refused(tmp_path: Path, mode: int) -> None:
    path = _write(tmp_path / "tokens", LINES, mode)
    with pytest.raises(PermissionError, match=f"{mode:04o}.*chmod 600"):
        StaticTokens.from_file(path)
    assert len(StaticTokens.from_file(path, allow_insecure_permissions=True)) == 2
    os.chmod(path, 0o400)
    assert len(StaticTokens.from_file(path)) == 2


@pytest.mark.asyncio
async def test_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPKIT_AUTH_TOKENS", f"{hash_token(ALICE)} alice files:read; {BOB} bob a b")
    tokens = StaticTokens.from_env()
    assert (await tokens.verify(ALICE)).subject == "alice"
    assert (await tokens.verify(BOB)).scopes == {"a", "b"}
    newline = StaticTokens.from_env("TOKENS", environ={"TOKENS": f"# ci\n{BOB} bob x\n"})
    assert (await newline.verify(BOB)).scopes == {"x"}
    monkeypatch.delenv("MCPKIT_AUTH_TOKENS")
    with pytest.raises(ValueError, match="MCPKIT_AUTH_TOKENS is not set"):
        StaticTokens.from_env()
    with pytest.raises(ValueError, match="shorter"):
        StaticTokens.from_env("T", environ={"T": "abc alice"})
    with pytest.raises(ValueError, match="no tokens"):
        StaticTokens.from_env("T", environ={"T": " ; # nobody"})


# -- the shared types (mcpkit.auth.tokens) ---------------------------------------------------


def test_access_token_is_immutable_and_scope_helpers_take_strings_or_lists() -> None:
    from mcpkit.auth import TokenVerifier, parse_scopes

    token = AccessToken("alice", scopes=frozenset({"a", "b"}), audience=["https://x"], claims={"k": [1]})
    assert token.audience == ("https://x",) and token.has_scopes("a b") and token.has_scopes(["a"])
    assert token.missing_scopes("c a") == ["c"] and not token.has_scopes(["a", "z"])
    with pytest.raises(AttributeError):
        token.subject = "mallory"  # type: ignore[misc]
    with pytest.raises(TypeError):
        token.claims["k"] = 2  # type: ignore[index]
    assert "claims" not in repr(token) and hash(token) == hash(AccessToken("alice", scopes=frozenset({"a", "b"}),
                                                                          audience=("https://x",)))
    assert isinstance(StaticTokens({}), TokenVerifier)
    assert parse_scopes(" a  b ") == {"a", "b"} and parse_scopes(["a", "b c"]) == {"a", "b", "c"}
    assert parse_scopes(None) == frozenset()
    for bad in (3, {"a": 1}, [1], b"a"):
        with pytest.raises(TypeError):
            parse_scopes(bad)  # type: ignore[arg-type]


@pytest.mark.req("AU-06")
def test_invalid_token_descriptions_are_safe_in_a_header() -> None:
    described = InvalidToken('bad "token"\\ é\r\nWWW-Authenticate: x' + "y" * 500).description
    assert described.isascii() and '"' not in described and "\\" not in described
    assert "\r" not in described and "\n" not in described and len(described) <= 200
    assert InvalidToken("").description == "invalid token" and InvalidToken("").error == "invalid_token"
