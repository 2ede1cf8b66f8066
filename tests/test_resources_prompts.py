"""Resources (static, templates, subscriptions), prompts and completion, in-process."""

from __future__ import annotations

import asyncio
import base64
import enum
import logging
import re
from typing import Annotated, Literal

import pytest

import mcpkit
from mcpkit import Context, Server
from tests.harness import RpcError, connect

REVISIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
PNG = b"\x89PNG\r\n\x1a\n\x00\xffdata"
WAV = b"RIFF\x00\x00WAVE"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


async def read(h, uri: str) -> list[dict]:
    return (await h.request("resources/read", {"uri": uri}))["contents"]


async def expect_error(awaitable, code: int) -> RpcError:
    with pytest.raises(RpcError) as err:
        await awaitable
    assert err.value.code == code, (err.value.code, err.value.message)
    return err.value


# --------------------------------------------------------------------------- static resources


@pytest.mark.asyncio
@pytest.mark.req("RS-03", "RS-04")
async def test_static_resources_list_and_read(wire):
    server = Server("t")

    @server.resource("res://readme", mime_type="text/markdown")
    def readme() -> str:
        """The read-me."""
        return "# Hello"

    @server.resource("res://logo", name="logo", mime_type="image/png", size=len(PNG))
    def logo_bytes() -> bytes:
        return PNG

    @server.resource("res://custom")
    def custom() -> dict:
        return {"text": "t", "mimeType": "text/x-custom", "_meta": {"com.example/k": 1}}

    @server.resource("res://raw-blob", mime_type="application/octet-stream")
    def raw_blob() -> dict:
        return {"blob": b"\x00\x01\xfe"}  # bytes in a contents dict are encoded too

    @server.resource("res://dir", mime_type="text/plain")
    async def directory() -> list:
        await asyncio.sleep(0)
        return ["one", b"\x00two", {"uri": "res://dir/three", "text": "three"}]

    async with connect(server, wire) as h:
        assert (await h.request("resources/list"))["resources"] == [
            {"uri": "res://readme", "name": "readme", "description": "The read-me.", "mimeType": "text/markdown"},
            {"uri": "res://logo", "name": "logo", "mimeType": "image/png", "size": len(PNG)},
            {"uri": "res://custom", "name": "custom"},
            {"uri": "res://raw-blob", "name": "raw_blob", "mimeType": "application/octet-stream"},
            {"uri": "res://dir", "name": "directory", "mimeType": "text/plain"},
        ]
        assert await read(h, "res://readme") == [{"uri": "res://readme", "mimeType": "text/markdown", "text": "# Hello"}]
        logo = await read(h, "res://logo")
        assert logo == [{"uri": "res://logo", "mimeType": "image/png", "blob": b64(PNG)}]
        assert base64.b64decode(logo[0]["blob"], validate=True) == PNG
        assert await read(h, "res://custom") == [
            {"uri": "res://custom", "text": "t", "mimeType": "text/x-custom", "_meta": {"com.example/k": 1}}]
        assert await read(h, "res://raw-blob") == [
            {"uri": "res://raw-blob", "blob": b64(b"\x00\x01\xfe"), "mimeType": "application/octet-stream"}]
        assert await read(h, "res://dir") == [
            {"uri": "res://dir", "mimeType": "text/plain", "text": "one"},
            {"uri": "res://dir", "mimeType": "text/plain", "blob": b64(b"\x00two")},
            {"uri": "res://dir/three", "text": "three", "mimeType": "text/plain"},
        ]


@pytest.mark.asyncio
@pytest.mark.req("RS-08")
async def test_an_empty_path_variable_names_no_resource(wire):
    # x://{id} matched x:// with id "": the handler ran for a name nobody gave
    server = Server("t")
    asked: list[str] = []

    @server.resource_template("x://{id}")
    def item(id: str) -> str:
        asked.append(id)
        return f"item {id}"

    @server.resource_template("files://{+path}")
    def file(path: str) -> str:
        asked.append(path)
        return path

    @server.resource_template("search://q{?term}")
    def search(term: str = "") -> str:
        return f"term={term!r}"

    async with connect(server, wire, "2025-11-25") as h:
        for uri in ("x://", "files://"):
            err = await expect_error(read(h, uri), -32002)
            assert err.message == f"Resource not found: {uri}"
        assert asked == []
        assert (await read(h, "x://7"))[0]["text"] == "item 7"
        # a named query variable present and empty is a value given on purpose
        assert (await read(h, "search://q?term="))[0]["text"] == "term=''"
        assert (await read(h, "search://q"))[0]["text"] == "term=''"


def test_a_resource_uri_needs_a_scheme():
    server = Server("t")
    with pytest.raises(ValueError, match="needs a scheme"):
        server.add_resource("no-scheme", lambda: "", name="x")


@pytest.mark.asyncio
@pytest.mark.req("RS-08")
@pytest.mark.parametrize("version", REVISIONS)
async def test_unknown_resource_is_32002_with_the_uri(wire, version):
    server = Server("t")
    server.add_resource("res://known", lambda: "k", name="known")
    server.resource_template("res://items/{id}")(lambda id: id)
    async with connect(server, wire, version) as h:
        for uri in ("res://unknown", "res://items", "res://items/1/2", "other://known"):
            err = await expect_error(read(h, uri), -32002)
            assert err.message == f"Resource not found: {uri}"
            assert err.data == {"uri": uri}
        err = await expect_error(h.request("resources/read", {}), -32602)
        assert err.message == "resources/read needs a string 'uri' parameter."
        await expect_error(h.request("resources/read", {"uri": 5}), -32602)


@pytest.mark.asyncio
@pytest.mark.req("RS-08")
async def test_resource_handler_failures_are_internal_errors(wire, caplog):
    server = Server("t")

    @server.resource("res://broken")
    def broken() -> str:
        raise OSError("disk /secret/path unreadable")

    @server.resource("res://unusable")
    def unusable():
        return 42

    async with connect(server, wire) as h:
        err = await expect_error(read(h, "res://broken"), -32603)
        assert err.message == "Internal error."
        cid = err.data["correlationId"]
        assert re.fullmatch(r"[0-9a-f]{16}", cid)
        assert "secret" not in str(err.data)
        err = await expect_error(read(h, "res://unusable"), -32603)
        assert err.message == "The resource handler for res://unusable returned an unusable value."
    logged = [r for r in caplog.records if cid in r.getMessage()]
    assert len(logged) == 1 and logged[0].levelno == logging.ERROR and logged[0].exc_info is not None
    assert "/secret/path" in caplog.text


@pytest.mark.asyncio
async def test_a_resource_returning_a_data_dict_logs_how_to_send_json(wire, caplog):
    """A dict is the contents object, not data: one without text or blob fails the read, and
    the server's log line says how to send JSON instead (other frameworks serialise it)."""
    server = Server("t")

    @server.resource("res://user")
    def user() -> dict:
        return {"name": "Ann"}

    async with connect(server, wire) as h:
        err = await expect_error(read(h, "res://user"), -32603)
    assert err.message == "The resource handler for res://user returned an unusable value."
    assert ("resources/read res://user: a resource handler returned a dict without 'text' or 'blob': a dict is "
            "read as the contents ({'text': ...} or {'blob': ...}); for JSON data return json.dumps(value) and "
            "register the resource with mime_type='application/json'") in caplog.text


# --------------------------------------------------------------------------- templates


@pytest.mark.asyncio
@pytest.mark.req("RS-03", "RS-05")
async def test_templates_match_with_variables_and_conversion(wire):
    server = Server("t")
    calls = []

    @server.resource_template("res://{kind}/{id}", description="Anything.")
    def generic(kind: str, id: str) -> str:
        calls.append(("generic", kind, id))
        return f"{kind}:{id}"

    @server.resource_template("res://users/{id}", mime_type="application/json")
    def user(id: int) -> str:
        calls.append(("user", id))
        return f'{{"id": {id}}}'

    @server.resource_template("file:///{+path}")
    async def path(path: str) -> str:
        calls.append(("path", path))
        return path

    @server.resource_template("res://search{?q,limit}")
    def search(q: str = "", limit: int = 10) -> str:
        calls.append(("search", q, limit))
        return f"{q}/{limit}"

    @server.resource("res://users/me")
    def me() -> str:
        calls.append(("me",))
        return "me"

    async with connect(server, wire) as h:
        assert (await h.request("resources/templates/list"))["resourceTemplates"] == [
            {"uriTemplate": "res://{kind}/{id}", "name": "generic", "description": "Anything."},
            {"uriTemplate": "res://users/{id}", "name": "user", "mimeType": "application/json"},
            {"uriTemplate": "file:///{+path}", "name": "path"},
            {"uriTemplate": "res://search{?q,limit}", "name": "search"},
        ]
        # the most specific template wins; the int conversion applies
        assert await read(h, "res://users/42") == [
            {"uri": "res://users/42", "mimeType": "application/json", "text": '{"id": 42}'}]
        # "abc" is no int: the users template does not name it, the generic one does
        assert await read(h, "res://users/abc") == [{"uri": "res://users/abc", "text": "users:abc"}]
        # a static resource beats every template
        assert await read(h, "res://users/me") == [{"uri": "res://users/me", "text": "me"}]
        assert await read(h, "res://a%20b/x") == [{"uri": "res://a%20b/x", "text": "a b:x"}]
        assert await read(h, "file:///etc/hosts") == [{"uri": "file:///etc/hosts", "text": "etc/hosts"}]
        assert await read(h, "res://search?q=cats&limit=3") == [
            {"uri": "res://search?q=cats&limit=3", "text": "cats/3"}]
        assert await read(h, "res://search") == [{"uri": "res://search", "text": "/10"}]
    assert calls == [
        ("user", 42), ("generic", "users", "abc"), ("me",), ("generic", "a b", "x"), ("path", "etc/hosts"),
        ("search", "cats", 3), ("search", "", 10),
    ]


@pytest.mark.asyncio
async def test_a_resource_uri_with_variables_is_a_template(wire):
    """``@server.resource("notes://{note_id}")``, as other frameworks write it: braces are not URI
    characters, so the URI names many resources and is served as the template it is."""
    server = Server("t")

    @server.resource("notes://{note_id}", mime_type="text/plain", ttl_ms=5000, scopes=["notes"])
    def note(note_id: int) -> str:
        """One note."""
        return f"note {note_id}"

    assert list(server._resources) == [] and [t.uri_template for t in server._templates] == ["notes://{note_id}"]
    assert (server._templates[0].ttl_ms, server._templates[0].scopes) == (5000, ("notes",))
    async with connect(server, wire) as h:
        assert (await h.request("resources/templates/list"))["resourceTemplates"] == [
            {"uriTemplate": "notes://{note_id}", "name": "note", "description": "One note.", "mimeType": "text/plain"}]
        assert (await h.request("resources/list"))["resources"] == []
        assert await read(h, "notes://7") == [{"uri": "notes://7", "mimeType": "text/plain", "text": "note 7"}]


def test_a_resource_uri_with_variables_is_refused_where_it_cannot_be_a_template():
    server = Server("t")
    with pytest.raises(ValueError, match=r"has \{variables\}, so it names many resources: register it with "
                                         r"add_resource_template"):
        server.add_resource("notes://{note_id}", lambda note_id: "", name="note")
    with pytest.raises(ValueError, match=r"size= describes one resource; drop it"):
        server.resource("notes://{note_id}", size=10)(lambda note_id: "")
    with pytest.raises(ValueError, match="no parameter for variable 'note_id'"):
        server.resource("notes://{note_id}")(lambda: "")
    assert server._resources == {} and server._templates == []


def test_template_variables_need_handler_parameters():
    server = Server("t")
    with pytest.raises(ValueError, match="no parameter for variable 'id'"):
        server.resource_template("res://items/{id}")(lambda other: other)
    assert server._templates == []


@pytest.mark.asyncio
@pytest.mark.req("RS-03")
async def test_resource_handlers_can_take_a_context(wire):
    server = Server("t")

    @server.resource("res://who")
    def who(ctx: Context) -> str:
        return f"{ctx.method} {ctx.protocol_version} {ctx.client_info['name']}"

    @server.resource_template("res://t/{x}")
    async def tpl(x: str, ctx: Context) -> str:
        return f"{x} {ctx.method}"

    async with connect(server, wire, "2025-06-18") as h:
        assert await read(h, "res://who") == [{"uri": "res://who", "text": "resources/read 2025-06-18 mcpkit-tests"}]
        assert await read(h, "res://t/1") == [{"uri": "res://t/1", "text": "1 resources/read"}]


# --------------------------------------------------------------------------- subscriptions


@pytest.mark.asyncio
@pytest.mark.req("RS-10", "RS-08")
async def test_updates_go_only_to_subscribed_sessions(wire):
    server = Server("t")
    server.add_resource("res://dir", lambda: "d", name="dir")
    server.add_resource("res://other", lambda: "o", name="other")
    server.resource_template("res://items/{id}")(lambda id: id)
    async with connect(server, wire) as a, connect(server, wire, "2024-11-05") as b, connect(server, wire) as c:
        err = await expect_error(a.request("resources/subscribe", {"uri": "res://nope"}), -32002)
        assert err.data == {"uri": "res://nope"}
        await expect_error(a.request("resources/subscribe", {}), -32602)
        assert await a.request("resources/subscribe", {"uri": "res://dir"}) == {}
        assert await b.request("resources/subscribe", {"uri": "res://items/7"}) == {}
        # c subscribes to nothing

        for uri in ("res://dir", "res://dir/child", "res://dirx", "res://items/7", "res://other"):
            server.notify_resource_updated(uri)
        await a.wait_notification("notifications/resources/updated", 2)
        await b.wait_notification("notifications/resources/updated", 1)
        await a.request("ping"), await b.request("ping"), await c.request("ping")
        await a.settle()

        def updated(h):
            return [n["params"]["uri"] for n in h.notifications_of("notifications/resources/updated")]

        assert updated(a) == ["res://dir", "res://dir/child"]
        assert updated(b) == ["res://items/7"]
        assert updated(c) == []

        assert await a.request("resources/unsubscribe", {"uri": "res://dir"}) == {}
        # unsubscribing from something never subscribed is harmless
        assert await a.request("resources/unsubscribe", {"uri": "res://never"}) == {}
        server.notify_resource_updated("res://dir")
        await a.request("ping")
        await a.settle()
        assert updated(a) == ["res://dir", "res://dir/child"]


@pytest.mark.asyncio
@pytest.mark.req("RS-10", "RS-09")
async def test_removing_a_resource_drops_its_subscriptions(wire):
    server = Server("t")
    server.add_resource("res://gone", lambda: "g", name="gone")
    async with connect(server, wire) as h:
        assert await h.request("resources/subscribe", {"uri": "res://gone"}) == {}
        server.remove_resource("res://gone")
        server.notify_resource_updated("res://gone")
        await h.wait_notification("notifications/resources/list_changed")
        await h.request("ping")
        await h.settle()
        assert h.notifications_of("notifications/resources/updated") == []
        await expect_error(read(h, "res://gone"), -32002)


# --------------------------------------------------------------------------- prompts


@pytest.mark.asyncio
@pytest.mark.req("PM-03")
async def test_prompt_arguments_come_from_the_signature(wire):
    server = Server("t")

    @server.prompt
    def review(code: Annotated[str, "The code to review"], language: str, tone: str = "kind", ctx: Context = None) -> str:
        """Review some code.

        Args:
            language: The programming language.
        """
        return f"{language} {tone}: {code}"

    @server.prompt(name="bare", title="Bare", description="Explicit.")
    def no_args() -> str:
        return "plain"

    async with connect(server, wire) as h:
        assert (await h.request("prompts/list"))["prompts"] == [
            {
                "name": "review",
                "description": "Review some code.",
                "arguments": [
                    {"name": "code", "description": "The code to review", "required": True},
                    {"name": "language", "description": "The programming language.", "required": True},
                    {"name": "tone", "required": False},
                ],
            },
            {"name": "bare", "title": "Bare", "description": "Explicit."},
        ]
        result = await h.request("prompts/get", {"name": "review", "arguments": {"code": "x=1", "language": "py"}})
        assert result == {
            "description": "Review some code.",
            "messages": [{"role": "user", "content": {"type": "text", "text": "py kind: x=1"}}],
        }
        assert await h.request("prompts/get", {"name": "bare"}) == {
            "description": "Explicit.", "messages": [{"role": "user", "content": {"type": "text", "text": "plain"}}]}


@pytest.mark.asyncio
@pytest.mark.req("PM-05", "PM-06")
@pytest.mark.parametrize("version", ["2024-11-05", "2025-11-25"])
async def test_prompt_argument_errors_are_invalid_params(wire, version):
    server = Server("t")
    calls = []

    @server.prompt
    def greet(name: str, greeting: str = "Hello") -> str:
        calls.append(name)
        return f"{greeting} {name}"

    async with connect(server, wire, version) as h:
        err = await expect_error(h.request("prompts/get", {"name": "nope"}), -32602)
        assert (err.message, err.data) == ("Unknown prompt: nope", {"name": "nope"})
        err = await expect_error(h.request("prompts/get", {"name": "greet", "arguments": {"greeting": "Hi"}}), -32602)
        assert (err.message, err.data) == ("Missing required argument(s) for prompt 'greet': name.", {"missing": ["name"]})
        err = await expect_error(h.request("prompts/get", {"name": "greet", "arguments": {"name": "A", "x": "1"}}), -32602)
        assert err.message == "Unknown argument(s) for prompt 'greet': x."
        assert err.data == {"known": ["greeting", "name"]}
        err = await expect_error(h.request("prompts/get", {"name": "greet", "arguments": {"name": 5}}), -32602)
        assert err.message == "Prompt arguments must be strings: name."
        err = await expect_error(h.request("prompts/get", {"name": "greet", "arguments": ["A"]}), -32602)
        assert err.message == "prompts/get arguments must be an object of strings."
        await expect_error(h.request("prompts/get", {}), -32602)
        ok = await h.request("prompts/get", {"name": "greet", "arguments": {"name": "Ann"}})
        assert ok["messages"] == [{"role": "user", "content": {"type": "text", "text": "Hello Ann"}}]
    assert calls == ["Ann"]


@pytest.mark.asyncio
@pytest.mark.req("PM-03", "PM-04")
async def test_prompt_message_shapes(wire):
    server = Server("t")

    @server.prompt
    def from_str() -> str:
        return "just text"

    @server.prompt
    def from_block():
        return mcpkit.image(PNG, "image/png")

    @server.prompt
    def from_role_dicts():
        return [
            {"role": "user", "content": "What is this?"},
            {"role": "assistant", "content": {"type": "text", "text": "A picture."}},
        ]

    @server.prompt
    async def from_list():
        return [
            "first",
            mcpkit.assistant("second"),
            mcpkit.user(mcpkit.resource("res://doc", text="body", mime_type="text/plain")),
            mcpkit.audio(WAV),
        ]

    @server.prompt
    def whole_result():
        return {"description": "Custom.", "messages": [{"role": "assistant", "content": {"type": "text", "text": "x"}}]}

    @server.prompt
    def broken():
        return 42

    async with connect(server, wire) as h:

        async def messages(name):
            return (await h.request("prompts/get", {"name": name}))["messages"]

        assert await messages("from_str") == [{"role": "user", "content": {"type": "text", "text": "just text"}}]
        image = await messages("from_block")
        assert image == [{"role": "user", "content": {"type": "image", "data": b64(PNG), "mimeType": "image/png"}}]
        assert base64.b64decode(image[0]["content"]["data"], validate=True) == PNG
        assert await messages("from_role_dicts") == [
            {"role": "user", "content": {"type": "text", "text": "What is this?"}},
            {"role": "assistant", "content": {"type": "text", "text": "A picture."}},
        ]
        assert await messages("from_list") == [
            {"role": "user", "content": {"type": "text", "text": "first"}},
            {"role": "assistant", "content": {"type": "text", "text": "second"}},
            {"role": "user", "content": {"type": "resource",
                                         "resource": {"uri": "res://doc", "mimeType": "text/plain", "text": "body"}}},
            {"role": "user", "content": {"type": "audio", "data": b64(WAV), "mimeType": "audio/wav"}},
        ]
        assert await h.request("prompts/get", {"name": "whole_result"}) == {
            "description": "Custom.", "messages": [{"role": "assistant", "content": {"type": "text", "text": "x"}}]}
        await expect_error(h.request("prompts/get", {"name": "broken"}), -32603)

    # 2024-11-05 has no audio content: the block becomes a text notice
    async with connect(server, wire, "2024-11-05") as h:
        last = (await h.request("prompts/get", {"name": "from_list"}))["messages"][-1]
        assert last == {"role": "user", "content": {
            "type": "text", "text": "[audio content (audio/wav) omitted: not supported by protocol 2024-11-05]"}}


# --------------------------------------------------------------------------- completion


def _completion_server() -> Server:
    server = Server("t")
    languages = ["python", "perl", "php", "rust"]

    @server.prompt(completions={"language": lambda value: [x for x in languages if x.startswith(value)]})
    def review(language: str, code: str = "") -> str:
        return code

    async def complete_id(value, context):
        await asyncio.sleep(0)
        owner = context.get("owner", "")
        return [f"{owner}-{i}" for i in range(3) if str(i).startswith(value) or not value]

    @server.resource_template("res://{owner}/items/{id}", completions={"id": complete_id})
    def item(owner: str, id: str) -> str:
        return id

    server.add_resource("res://static", lambda: "s", name="static")
    return server


@pytest.mark.asyncio
@pytest.mark.req("CP-02")
async def test_per_argument_completers_for_prompts_and_templates(wire):
    server = _completion_server()
    async with connect(server, wire) as h:

        async def complete(ref, name, value, context=None):
            params = {"ref": ref, "argument": {"name": name, "value": value}}
            if context is not None:
                params["context"] = {"arguments": context}
            return (await h.request("completion/complete", params))["completion"]

        prompt_ref = {"type": "ref/prompt", "name": "review"}
        assert await complete(prompt_ref, "language", "p") == {
            "values": ["python", "perl", "php"], "total": 3, "hasMore": False}
        assert await complete(prompt_ref, "language", "zz") == {"values": [], "total": 0, "hasMore": False}
        # an argument without a completer (and no fallback): nothing to offer
        assert await complete(prompt_ref, "code", "x") == {"values": [], "total": 0, "hasMore": False}
        template_ref = {"type": "ref/resource", "uri": "res://{owner}/items/{id}"}
        assert await complete(template_ref, "id", "", {"owner": "ann"}) == {
            "values": ["ann-0", "ann-1", "ann-2"], "total": 3, "hasMore": False}
        assert await complete(template_ref, "id", "1", {"owner": "bob"}) == {
            "values": ["bob-1"], "total": 1, "hasMore": False}
        assert await complete({"type": "ref/resource", "uri": "res://static"}, "x", "") == {
            "values": [], "total": 0, "hasMore": False}


class Tone(enum.Enum):
    FORMAL = "formal"
    FRIENDLY = "friendly"


@pytest.mark.asyncio
@pytest.mark.req("CP-02")
async def test_a_prompt_argument_typed_by_its_choices_completes_them(wire):
    """prompts/list carries no schema: completion is how a client (the `mcpkit dev` page, a host's
    argument picker) learns a Literal's or an Enum's values; a completer given replaces them."""
    server = Server("choices")

    @server.prompt(completions={"depth": lambda value: ["shallow-given"]})
    def review(style: Literal["terse", "thorough", "teaching"], tone: Tone, level: Literal[1, 2] | None = None,
               depth: Literal["shallow", "deep"] = "deep", code: str = "") -> str:
        return f"{style} {tone.value} {level} {depth} {code}"

    async with connect(server, wire) as h:

        async def complete(name, value):
            params = {"ref": {"type": "ref/prompt", "name": "review"}, "argument": {"name": name, "value": value}}
            return (await h.request("completion/complete", params))["completion"]["values"]

        assert await complete("style", "t") == ["terse", "thorough", "teaching"]
        assert await complete("style", "th") == ["thorough"]
        assert await complete("tone", "") == ["formal", "friendly"]
        assert await complete("level", "") == ["1", "2"]
        assert await complete("depth", "") == ["shallow-given"]
        assert await complete("code", "x") == []
        got = await h.request("prompts/get", {"name": "review", "arguments": {"style": "terse", "tone": "formal",
                                                                                "level": "2"}})
        assert got["messages"][0]["content"]["text"] == "terse formal 2 deep "


@pytest.mark.asyncio
@pytest.mark.req("CP-02")
async def test_fallback_completer_gets_what_specific_ones_do_not_cover(wire):
    server = _completion_server()
    seen = []

    @server.completion
    def fallback(ref, argument, value, context):
        seen.append((ref, argument, value, context))
        return [f"{argument}:{value}"]

    async with connect(server, wire) as h:
        result = await h.request("completion/complete", {
            "ref": {"type": "ref/prompt", "name": "review"}, "argument": {"name": "code", "value": "pr"},
            "context": {"arguments": {"language": "python"}},
        })
        assert result == {"completion": {"values": ["code:pr"], "total": 1, "hasMore": False}}
        # a specific completer still wins over the fallback
        result = await h.request("completion/complete", {
            "ref": {"type": "ref/prompt", "name": "review"}, "argument": {"name": "language", "value": "ru"}})
        assert result["completion"]["values"] == ["rust"]
        result = await h.request("completion/complete", {
            "ref": {"type": "ref/resource", "uri": "res://static"}, "argument": {"name": "q", "value": ""}})
        assert result["completion"]["values"] == ["q:"]
    assert seen == [
        ({"type": "ref/prompt", "name": "review"}, "code", "pr", {"language": "python"}),
        ({"type": "ref/resource", "uri": "res://static"}, "q", "", {}),
    ]


@pytest.mark.asyncio
@pytest.mark.req("CP-02")
async def test_completion_values_are_capped_at_100(wire):
    server = Server("t")

    @server.prompt(completions={
        "many": lambda v: [f"v{i}" for i in range(150)],
        "exact": lambda v: [f"v{i}" for i in range(100)],
        "shaped": lambda v: {"values": [f"v{i}" for i in range(120)], "total": 500},
        "numbers": lambda v: [1, 2],
    })
    def p(many: str = "", exact: str = "", shaped: str = "", numbers: str = "") -> str:
        return ""

    async with connect(server, wire) as h:

        async def complete(name):
            return (await h.request("completion/complete", {
                "ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": name, "value": ""}}))["completion"]

        many = await complete("many")
        assert many == {"values": [f"v{i}" for i in range(100)], "total": 150, "hasMore": True}
        assert await complete("exact") == {"values": [f"v{i}" for i in range(100)], "total": 100, "hasMore": False}
        assert await complete("shaped") == {"values": [f"v{i}" for i in range(100)], "total": 500, "hasMore": True}
        assert await complete("numbers") == {"values": ["1", "2"], "total": 2, "hasMore": False}


@pytest.mark.asyncio
@pytest.mark.req("CP-03")
@pytest.mark.parametrize("version", ["2025-03-26", "2025-11-25"])
async def test_completion_errors(wire, version):
    server = _completion_server()
    async with connect(server, wire, version) as h:
        err = await expect_error(h.request("completion/complete", {
            "ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "a", "value": ""}}), -32602)
        assert err.message == "Unknown prompt: nope"
        err = await expect_error(h.request("completion/complete", {
            "ref": {"type": "ref/resource", "uri": "res://nowhere/{x}"}, "argument": {"name": "x", "value": ""}}),
            -32602)
        assert err.message == "Unknown resource or template: res://nowhere/{x}"
        err = await expect_error(h.request("completion/complete", {
            "ref": {"type": "ref/tool", "name": "x"}, "argument": {"name": "a", "value": ""}}), -32602)
        assert err.message == "Unknown completion reference type: 'ref/tool'"
        await expect_error(h.request("completion/complete", {"ref": {"type": "ref/prompt", "name": "review"}}), -32602)
        await expect_error(h.request("completion/complete", {
            "ref": {"type": "ref/prompt", "name": "review"}, "argument": {"name": "language", "value": 3}}), -32602)


@pytest.mark.asyncio
@pytest.mark.req("CP-02")
async def test_a_failing_completer_is_an_internal_error(wire):
    server = Server("t")

    def boom(value):
        raise RuntimeError("nope")

    @server.prompt(completions={"a": boom})
    def p(a: str) -> str:
        return a

    async with connect(server, wire) as h:
        err = await expect_error(h.request("completion/complete", {
            "ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": ""}}), -32603)
        assert err.message == "Internal error." and "correlationId" in err.data
        assert await h.request("ping") == {}


# --------------------------------------------------------------------------- completers and the request's context


async def _complete(h, ref: dict, name: str, value: str, context: dict | None = None) -> list[str]:
    params: dict = {"ref": ref, "argument": {"name": name, "value": value}}
    if context is not None:
        params["context"] = {"arguments": context}
    return (await h.request("completion/complete", params))["completion"]["values"]


@pytest.mark.asyncio
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_a_completer_that_declares_a_context_gets_the_requests(wire, is_async):
    """A completer with a parameter annotated ``Context`` gets the request's context, as resource
    and prompt handlers do, e.g. to offer each caller its own values: for a prompt argument and a
    template variable, taking the value alone or the context arguments too, the Context last or
    keyword-only."""
    server = Server("t")
    seen: list[tuple] = []

    def answer(ctx: Context, *given: str) -> list[str]:
        seen.append((ctx.method, ctx.request_id))
        return [f"{ctx.principal}:{':'.join(given)}"]

    if is_async:

        async def language(value: str, ctx: Context) -> list[str]:
            await asyncio.sleep(0)
            return answer(ctx, value)

        async def item_id(value: str, context: dict, *, ctx: Context) -> list[str]:
            await asyncio.sleep(0)
            return answer(ctx, context.get("owner", ""), value)
    else:

        def language(value: str, ctx: Context) -> list[str]:
            return answer(ctx, value)

        def item_id(value: str, context: dict, *, ctx: Context) -> list[str]:
            return answer(ctx, context.get("owner", ""), value)

    @server.prompt(completions={"language": language})
    def review(language: str) -> str:
        return language

    @server.resource_template("res://{owner}/items/{id}", completions={"id": item_id})
    def item(owner: str, id: str) -> str:
        return id

    async with connect(server, wire) as h:
        prompt_ref = {"type": "ref/prompt", "name": "review"}
        template_ref = {"type": "ref/resource", "uri": "res://{owner}/items/{id}"}
        h.session.principal = "alice"
        assert await _complete(h, prompt_ref, "language", "py") == ["alice:py"]
        assert await _complete(h, template_ref, "id", "7", {"owner": "ann"}) == ["alice:ann:7"]
        h.session.principal = "bob"
        assert await _complete(h, prompt_ref, "language", "ru") == ["bob:ru"]
        assert await _complete(h, template_ref, "id", "", {}) == ["bob::"]
    assert [method for method, _ in seen] == ["completion/complete"] * 4
    assert len({request_id for _, request_id in seen}) == 4  # each its own request's context


@pytest.mark.asyncio
async def test_the_fallback_completer_may_declare_a_context_too(wire):
    server = _completion_server()

    @server.completion
    async def fallback(ref, argument, value, context, ctx: Context):
        return [f"{ctx.principal}:{argument}:{value}"]

    async with connect(server, wire) as h:
        h.session.principal = "carol"
        assert await _complete(h, {"type": "ref/prompt", "name": "review"}, "code", "x") == ["carol:code:x"]
        # a specific completer without a Context is called as before
        assert await _complete(h, {"type": "ref/prompt", "name": "review"}, "language", "ru") == ["rust"]


@pytest.mark.asyncio
async def test_a_completer_without_a_context_parameter_is_called_as_before(wire):
    """Only the annotation asks for the context, as for resource and prompt handlers: a second
    positional parameter without it is the context arguments, whatever its name."""
    server = Server("t")

    @server.prompt(completions={
        "a": lambda value: [f"a:{value}"],
        "b": lambda value, ctx: [f"b:{value}:{sorted(ctx)}"],
        "c": lambda value, context=None: [f"c:{value}:{sorted(context)}"],
    })
    def p(a: str = "", b: str = "", c: str = "") -> str:
        return a

    async with connect(server, wire) as h:
        ref = {"type": "ref/prompt", "name": "p"}
        assert await _complete(h, ref, "a", "1", {"b": "x"}) == ["a:1"]
        assert await _complete(h, ref, "b", "2", {"a": "x"}) == ["b:2:['a']"]
        assert await _complete(h, ref, "c", "3", {"a": "x", "b": "y"}) == ["c:3:['a', 'b']"]


def test_a_context_parameter_where_the_value_goes_is_refused_at_registration():
    server = Server("t")

    def first(ctx: Context, value: str) -> list[str]:
        return []

    with pytest.raises(TypeError, match="Context parameter 'ctx' must come after value"):
        server.prompt(completions={"a": first})(lambda a: a)

    def between(value: str, ctx: Context, context: dict) -> list[str]:
        return []

    with pytest.raises(TypeError, match=r"must come after \(value, context\)"):
        server.resource_template("res://{a}", completions={"a": between})(lambda a: a)

    def positional_only(value: str, ctx: Context, /) -> list[str]:  # it is passed by name
        return []

    with pytest.raises(TypeError, match="Context parameter 'ctx' is positional-only"):
        server.prompt(completions={"a": positional_only})(lambda a: a)
    assert not server._prompts and not server._templates  # nothing half-registered


@pytest.mark.asyncio
async def test_the_completion_docs_example_runs_as_written(wire, capsys):
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "completion.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.DOTALL).group(1)  # type: ignore[union-attr]
    namespace: dict = {"__name__": "completion_example"}
    exec(code, namespace)  # noqa: S102 - the docs' own code
    await namespace["main"]()
    assert capsys.readouterr().out.splitlines() == [
        "{'completion': {'values': ['demo', 'docs'], 'total': 2, 'hasMore': False}}",
        "{'completion': {'values': ['README.md'], 'total': 1, 'hasMore': False}}",
    ]
    async with connect(namespace["server"], wire) as h:
        h.session.principal = "alice"
        assert await _complete(h, {"type": "ref/prompt", "name": "summarize"}, "project", "w") == [
            "website", "warehouse"]
        template_ref = {"type": "ref/resource", "uri": "projects://{project}/files/{name}"}
        assert await _complete(h, template_ref, "name", "", {"project": "docs"}) == []
        assert await _complete(h, template_ref, "name", "n", {"project": "website"}) == ["notes.txt"]


@pytest.mark.asyncio
async def test_every_handler_kind_finds_its_context_parameter_as_a_tool_does(wire):
    # resources, templates and completers found the Context only when annotated exactly
    # ``Context``: ``Context | None = None`` (or a Context imported under TYPE_CHECKING) got None,
    # or for a template a variable, while a tool or a prompt written the same way got the context
    server = Server("t")

    @server.resource_template("notes://{user}")
    def note(user: str, ctx: Context | None = None) -> str:
        return f"{user}:{type(ctx).__name__}"

    @server.resource("plain://x")
    def plain(ctx: Annotated[Context, "the request"]) -> str:
        return type(ctx).__name__

    namespace: dict[str, object] = {}
    # as a module that imports Context only `if TYPE_CHECKING:` declares it: a name unresolved
    exec("def later(ctx: 'Context | None' = None) -> str:\n    return type(ctx).__name__", namespace)
    server.add_resource("later://x", namespace["later"], name="later")

    def cities(value: str, ctx: Context | None = None) -> list[str]:
        return [f"{value}:{type(ctx).__name__}"]

    server.add_prompt("ask", lambda city: f"weather in {city}", arguments=[{"name": "city"}],
                      completions={"city": cities})
    async with connect(server, wire) as h:
        assert (await read(h, "notes://al"))[0]["text"] == "al:Context"
        assert (await read(h, "plain://x"))[0]["text"] == "Context"
        assert (await read(h, "later://x"))[0]["text"] == "Context"
        done = await h.request("completion/complete", {"ref": {"type": "ref/prompt", "name": "ask"},
                                                        "argument": {"name": "city", "value": "Os"}})
        assert done["completion"]["values"] == ["Os:Context"]
