"""Argument/result size limits and output sanitizing (policy/limits.py)."""

from __future__ import annotations

import copy
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit._json import dumps
from mcpkit.policy.limits import (
    INHERIT,
    MIN_RESULT_BYTES,
    Limits,
    check_argument_size,
    check_limit,
    json_size,
    sanitize_result,
    strip_control,
    truncate_result,
)
from mcpkit.protocol.errors import E_SCHEMA_VALIDATION, ToolError

# every character that must never survive strip_control
FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

# --- strip_control -------------------------------------------------------------------------


@pytest.mark.req("TL-11")
@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("\x1b[31mred\x1b[0m", "red"),
        ("\x1b[1;38;5;196mbold\x1b[m plain", "bold plain"),
        ("\x1b[2J\x1b[Hcleared", "cleared"),  # clear screen, cursor home
        ("over\x1b[1Awrite", "overwrite"),  # cursor up: rewrites the line above
        ("a\x1b[?25lb", "ab"),  # hide cursor (private parameter)
        # OSC 8 hyperlink, ST-terminated: the visible text stays, the hidden URL goes
        ("\x1b]8;;https://evil.example/\x1b\\click here\x1b]8;;\x1b\\", "click here"),
        ("\x1b]0;pwned title\x07after", "after"),  # window title, BEL-terminated
        ("\x1b]2;title\x1b\\after", "after"),
        ("x\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07y", "xy"),  # clipboard write
        ("x\x1b]52;c;Y3VybA==\x1b\\y", "xy"),
        ("\x1bPq#0;2;0;0;0#0~~@@\x1b\\done", "done"),  # DCS (sixel)
        ("\x1bX sos \x1b\\a", "a"),
        ("\x1b^ pm \x1b\\b", "b"),
        ("\x1b_ apc payload \x1b\\c", "c"),
        ("\x9b31mred\x9b0m", "red"),  # 8-bit CSI
        ("\x9d0;title\x9cok", "ok"),  # 8-bit OSC and ST
        ("\x9d8;;http://x\x07link", "link"),
        ("\x90q data\x9cz", "z"),  # 8-bit DCS
        ("\x1b7saved\x1b8", "saved"),  # two-char escapes
        ("\x1b(Bascii\x1b)0", "ascii"),  # charset designation (intermediate + final)
        ("\x1bcreset", "reset"),
        ("ok\x1b]0;never terminated", "ok"),  # swallowed to the end, as a terminal would
        ("x\x1b[31", "x"),
        ("x\x1b", "x"),
        ("x\x1b\x1b[31my", "xy"),
        ("a\x00b\x07c\x7fd\x08e", "abcde"),
        ("a\x85b\x80c\x9cd", "abcd"),  # lone C1 controls (NEL, PAD, a stray ST)
        ("a\x9fhidden", "a"),  # 8-bit APC: a string to its end
        ("keep\ttabs\r\nand newlines\n", "keep\ttabs\r\nand newlines\n"),
        ("abc\u202edcba", "abcdcba"),  # right-to-left override
        ("\u2066isolated\u2069 \u202aembed\u202c \u2067\u2068x", "isolated embed x"),
    ],
)
def test_strip_control_examples(raw: str, clean: str) -> None:
    assert strip_control(raw) == clean


@pytest.mark.parametrize(
    "text",
    ["", "plain", "tabs\tand\nnewlines\r\n", "ünïcödé ✓ 😀 漢字 עברית", "\u200b zero width kept", "\xa0\xff"],
)
def test_strip_control_returns_clean_text_itself(text: str) -> None:
    assert strip_control(text) is text


_FRAGMENTS = [
    "\x1b", "\x1b[", "\x1b]", "\x1bP", "\x1b_", "\x1b^", "\x1bX", "\x1b\\", "\x07", "\x9b", "\x9c",
    "\x9d", "\x90", "\x1b[31m", "\x1b]8;;http://e/\x1b\\", "\x1b]0;t\x07", "[", "]", ";", "m", "0",
    "\u202e", "\u2066", "\u2069", "\x00", "\x7f", "\x85", "\t", "\n", "\r", "text", "é", "😀",
]
_messy_text = st.lists(st.sampled_from(_FRAGMENTS) | st.text(max_size=5), max_size=30).map("".join)


@pytest.mark.req("TL-11")
@settings(max_examples=200, deadline=None)
@given(_messy_text)
def test_strip_control_leaves_no_control_and_is_idempotent(text: str) -> None:
    clean = strip_control(text)
    assert FORBIDDEN.search(clean) is None
    assert strip_control(clean) is clean


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(exclude_characters="".join(
    chr(c) for c in [*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0x7F, 0xA0),
                     *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
))))
def test_strip_control_keeps_printable_text_as_the_same_object(text: str) -> None:
    assert strip_control(text) is text


# --- sanitize_result -------------------------------------------------------------------------


def test_sanitize_result_without_controls_is_the_same_object() -> None:
    result = {
        "content": [{"type": "text", "text": "fine\n"}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}],
        "structuredContent": {"x": 1},
    }
    assert sanitize_result(result) is result
    empty: dict = {"content": []}
    assert sanitize_result(empty) is empty
    assert sanitize_result({"structuredContent": {}}) == {"structuredContent": {}}


@pytest.mark.req("TL-11")
def test_sanitize_result_cleans_text_without_touching_the_input() -> None:
    image = {"type": "image", "data": "AAAA", "mimeType": "image/png"}
    blob = {"type": "resource", "resource": {"uri": "file:///b", "blob": "\x1b[31m"}}
    result = {
        "content": [
            {"type": "text", "text": "\x1b[31mred\x1b[0m", "annotations": {"priority": 1}},
            image,
            {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "a\u202eb"}},
            {"type": "resource_link", "uri": "file:///c", "name": "c\x1b]0;t\x07", "title": "ok"},
            blob,
        ],
        "structuredContent": {"raw": "\x1b[31m"},
        "isError": False,
    }
    before = copy.deepcopy(result)
    out = sanitize_result(result)
    assert result == before  # input and its blocks unchanged
    assert out is not result
    assert out["content"] == [
        {"type": "text", "text": "red", "annotations": {"priority": 1}},
        image,
        {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "ab"}},
        {"type": "resource_link", "uri": "file:///c", "name": "c", "title": "ok"},
        blob,
    ]
    assert out["content"][1] is image and out["content"][4] is blob  # untouched blocks are shared
    # structured data is the client's to parse, checked against the outputSchema: left as is
    assert out["structuredContent"] is result["structuredContent"]
    assert out["isError"] is False


# --- sizes -----------------------------------------------------------------------------------


def test_json_size_counts_compact_utf8_bytes() -> None:
    assert json_size({"a": "é"}) == len(b'{"a":"\xc3\xa9"}') == 10
    assert json_size([1, 2]) == 5
    assert json_size("\n") == 4


@pytest.mark.req("TL-11")
def test_check_argument_size() -> None:
    args = {"q": "x" * 100}
    size = len(dumps(args))
    assert check_argument_size(args, size, "search") is None  # exactly at the limit is fine
    with pytest.raises(ToolError) as info:
        check_argument_size(args, size - 1, "search")
    err = info.value
    assert err.code == E_SCHEMA_VALIDATION
    assert err.retryable is False
    assert err.details == {"size": size, "limit": size - 1}
    assert err.message == f"The arguments to tool 'search' are {size} bytes, over the {size - 1}-byte limit."
    assert err.suggested_fix is not None and "search" in err.suggested_fix


def test_check_limit() -> None:
    assert check_limit(MIN_RESULT_BYTES) == 200
    with pytest.raises(ValueError, match="at least 200"):
        check_limit(199)
    with pytest.raises(TypeError):
        check_limit(True)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        check_limit(1000.0)  # type: ignore[arg-type]


def _notice(over: int, limit: int) -> dict:
    return {"type": "text", "text": f"[result truncated: {over} bytes over the {limit}-byte limit]"}


def test_truncate_result_that_fits_is_the_same_object() -> None:
    result = {"content": [{"type": "text", "text": "x" * 100}]}
    assert truncate_result(result, json_size(result)) is result


@pytest.mark.req("TL-11")
def test_truncate_text_to_exactly_the_limit() -> None:
    result = {"content": [{"type": "text", "text": "x" * 1000}], "isError": False}
    before = copy.deepcopy(result)
    size = json_size(result)
    out = truncate_result(result, 300)
    assert result == before
    assert json_size(out) == 300  # ASCII: cut to the byte
    text = out["content"][0]["text"]
    assert text == "x" * len(text) and len(text) > 100
    assert out["content"][1] == _notice(size - 300, 300)
    assert out["isError"] is False
    assert len(out["content"]) == 2


@pytest.mark.parametrize("unit", ["😀", "é", "漢", "\n", "\x01", '"', "\\", "a\\u00"])
def test_truncate_never_splits_a_character_or_an_escape(unit: str) -> None:
    result = {"content": [{"type": "text", "text": unit * 1000}]}
    for limit in range(200, 260):
        out = truncate_result(result, limit)
        assert json_size(out) <= limit
        text = out["content"][0]["text"]
        assert text == unit * (len(text) // len(unit)) + unit[: len(text) % len(unit)]
        assert json_size(out) > limit - 7  # as long as it can be: at most one character short


@pytest.mark.req("TL-11")
def test_truncate_replaces_images_and_shortens_the_largest_text() -> None:
    image = {"type": "image", "data": "A" * 5000, "mimeType": "image/png"}
    small = {"type": "text", "text": "header"}
    result = {"content": [small, {"type": "text", "text": "body " * 400}, image]}
    size = json_size(result)
    out = truncate_result(result, 1000)
    assert json_size(out) <= 1000
    assert json_size(out) > 990  # the room the image freed went back to the text
    first, body, omitted, notice = out["content"]
    assert first is small
    assert body["text"].startswith("body body") and len(body["text"]) < 2000
    assert omitted == {"type": "text", "text": f"[image content omitted: {json_size(image)} bytes]"}
    assert notice == _notice(size - 1000, 1000)


def test_truncate_drops_blocks_when_even_notices_do_not_fit() -> None:
    result = {"content": [{"type": "image", "data": "A" * 100, "mimeType": "image/png"}] * 50}
    out = truncate_result(result, 400)
    assert json_size(out) <= 400
    assert out["content"][-1]["text"].startswith("[result truncated: ")
    for block in out["content"][:-1]:
        assert block["text"] == f"[image content omitted: {json_size(result['content'][0])} bytes]"
    many_small = {"content": [{"type": "text", "text": "a"}] * 1000}
    out = truncate_result(many_small, 200)
    assert json_size(out) <= 200 and out["content"][-1]["text"].startswith("[result truncated: ")


def test_truncate_shortens_embedded_text_resources() -> None:
    resource = {"type": "resource", "resource": {"uri": "file:///log", "mimeType": "text/plain", "text": "L" * 5000}}
    out = truncate_result({"content": [resource]}, 500)
    assert json_size(out) <= 500
    kept = out["content"][0]
    assert kept["resource"]["uri"] == "file:///log" and set(kept["resource"]["text"]) == {"L"}
    assert len(resource["resource"]["text"]) == 5000  # input untouched


@pytest.mark.req("TL-11")
def test_truncate_with_oversized_structured_content_is_an_error_result() -> None:
    result = {
        "content": [{"type": "text", "text": "{...}"}],
        "structuredContent": {"rows": ["r" * 100] * 100},
    }
    out = truncate_result(result, 1000)
    assert out["isError"] is True
    assert "structuredContent" not in out
    assert len(out["content"]) == 1
    assert out["content"][0]["text"] == (
        f"Result too large: {json_size(result)} bytes, limit 1000; "
        "its structured content cannot be shortened without breaking its schema."
    )
    # the notice fits the smallest limit even with absurd sizes
    huge = {"structuredContent": {"x": "y" * 10**6}, "_meta": {"m": "z" * 10**6}}
    assert json_size(truncate_result(huge, MIN_RESULT_BYTES)) <= MIN_RESULT_BYTES


def test_truncate_keeps_structured_content_that_fits() -> None:
    structured = {"count": 3}
    result = {"content": [{"type": "text", "text": "t" * 2000}], "structuredContent": structured}
    out = truncate_result(result, 500)
    assert out["structuredContent"] is structured
    assert json_size(out) == 500
    assert "isError" not in out


_text_block = st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=600))
_image_block = st.builds(
    lambda n, kind: {"type": kind, "data": "A" * n, "mimeType": "image/png"},
    st.integers(0, 2000), st.sampled_from(["image", "audio"]),
)
_resource_block = st.builds(
    lambda t, blob: {"type": "resource", "resource": {"uri": "file:///r", "blob" if blob else "text": t}},
    st.text(max_size=600), st.booleans(),
)
_link_block = st.just({"type": "resource_link", "uri": "file:///l", "name": "l"})
_content = st.lists(_text_block | _image_block | _resource_block | _link_block, max_size=12)


@pytest.mark.req("TL-11")
@settings(max_examples=200, deadline=None)
@given(
    content=_content,
    limit=st.integers(MIN_RESULT_BYTES, 5000),
    structured=st.none() | st.dictionaries(st.text(max_size=5), st.text(max_size=50), max_size=5),
)
def test_truncate_result_property(content: list, limit: int, structured: dict | None) -> None:
    result: dict = {"content": content}
    if structured is not None:
        result["structuredContent"] = structured
    before = copy.deepcopy(result)
    out = truncate_result(result, limit)
    assert result == before
    encoded = dumps(out)  # encodable, hence valid UTF-8 all through
    encoded.decode("utf-8")
    assert len(encoded) <= limit
    truncated = json_size(result) > limit
    assert (out is not result) == truncated
    notices = [b for b in out["content"] if b.get("text", "").startswith("[result truncated: ")]
    if not truncated:
        assert notices == []
    elif out.get("isError") is True and "structuredContent" not in out and structured is not None:
        assert out["content"][0]["text"].startswith("Result too large: ")
    else:
        assert notices == [out["content"][-1]]
        assert out.get("structuredContent") == structured
        # every text kept is a prefix of a text the tool returned
        texts = [b.get("text", b.get("resource", {}).get("text")) for b in content]
        for block in out["content"][:-1]:
            kept = block.get("text", block.get("resource", {}).get("text"))
            if kept is not None and not kept.startswith("["):
                assert any(isinstance(t, str) and t.startswith(kept) for t in texts)


# --- Limits ----------------------------------------------------------------------------------


def test_limits_defaults_and_validation() -> None:
    limits = Limits()
    assert (limits.max_argument_bytes, limits.max_result_bytes, limits.timeout, limits.sanitize) == (
        1_000_000, 4_000_000, 60.0, True,
    )
    assert Limits(timeout=5).timeout == 5.0 and isinstance(Limits(timeout=5).timeout, float)
    assert Limits(max_argument_bytes=None, max_result_bytes=None, timeout=None).timeout is None
    for bad in (
        {"max_result_bytes": 100},
        {"max_argument_bytes": 0},
        {"max_argument_bytes": True},
        {"timeout": 0},
        {"timeout": -1.0},
        {"timeout": float("inf")},
        {"timeout": True},
        {"sanitize": "yes"},
    ):
        with pytest.raises(ValueError):
            Limits(**bad)
    with pytest.raises(TypeError):
        Limits(max_result_bytes="4MB")  # type: ignore[arg-type]


def test_limits_merge_inherits_and_overrides() -> None:
    server = Limits(max_result_bytes=10_000, timeout=30.0)
    assert server.merge(None) is server
    assert server.merge({}) is server
    assert server.merge({"timeout": 30.0}) is server
    assert server.merge(Limits.override()) is server
    assert server.merge({"timeout": 5}) == Limits(max_result_bytes=10_000, timeout=5.0)
    assert server.merge({"timeout": INHERIT, "sanitize": False}) == Limits(
        max_result_bytes=10_000, timeout=30.0, sanitize=False
    )
    # None still means "no limit": a tool can lift a server limit
    lifted = server.merge(Limits.override(timeout=None, max_argument_bytes=500))
    assert lifted == Limits(max_argument_bytes=500, max_result_bytes=10_000, timeout=None)
    with pytest.raises(TypeError, match="bogus"):
        server.merge({"bogus": 1})
    with pytest.raises(TypeError, match="bogus"):
        Limits.override(bogus=1)
    with pytest.raises(ValueError):
        server.merge({"max_result_bytes": 10})
    assert repr(INHERIT) == "INHERIT"
