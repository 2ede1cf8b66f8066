"""The Server API: decorators and registration, what tools/list advertises, capabilities,
per-revision shaping of the lists, run-time changes and pagination.

Every test builds its own small Server and talks to it in-process (tests/harness.py); what the
server sends is validated against the negotiated revision's official schema by the ``wire``
fixture.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import http.server
import json
import threading
from typing import Annotated, Literal, TypedDict

import jsonschema
import pytest
from pydantic import BaseModel, Field

import mcpkit
from mcpkit import Context, Server
from tests.harness import RpcError, connect

REVISIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
ICON = {"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"]}


# --------------------------------------------------------------------------- module-level types
# (module level so that the annotations resolve)


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


@dataclasses.dataclass
class Point:
    """A point on the plane."""

    x: int
    y: int = 0


class Movie(TypedDict):
    title: str
    year: int


class Person(BaseModel):
    name: str = Field(description="Full name")
    age: int = 0


@dataclasses.dataclass
class Pair:
    left: Point
    right: Point


class Reading(TypedDict):
    sensor: str
    value: float


async def _tools(h) -> list[dict]:
    return (await h.request("tools/list"))["tools"]


async def _tool(h, name: str) -> dict:
    return next(t for t in await _tools(h) if t["name"] == name)


# --------------------------------------------------------------------------- decorators


@pytest.mark.asyncio
@pytest.mark.req("TL-05", "TL-14")
async def test_tool_decorator_forms_and_exact_annotations(wire):
    server = Server("t")

    @server.tool
    def bare(a: int) -> str:
        return str(a)

    @server.tool()
    def called() -> str:
        return "x"

    @server.tool(
        name="renamed", title="Nice Title", read_only=True, destructive=False, idempotent=True, open_world=False
    )
    def original() -> str:
        return "y"

    @server.tool(read_only=False, annotations={"destructiveHint": True, "title": "From annotations"})
    def explicit() -> str:
        return "z"

    # the decorators hand back the function itself, still callable
    assert bare(3) == "3" and called() == "x" and original() == "y"
    assert set(server.tools) == {"bare", "called", "renamed", "explicit"}

    async with connect(server, wire) as h:
        tools = {t["name"]: t for t in await _tools(h)}
    assert list(tools) == ["bare", "called", "renamed", "explicit"]  # registration order
    assert "annotations" not in tools["bare"] and "title" not in tools["bare"]
    assert tools["renamed"]["title"] == "Nice Title"
    assert tools["renamed"]["annotations"] == {
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    # keyword flags and an explicit annotations dict combine; explicit keys win
    assert tools["explicit"]["annotations"] == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "title": "From annotations",
    }
    assert "title" not in tools["explicit"]


@pytest.mark.asyncio
async def test_a_name_given_first_names_the_tool_or_prompt(wire):
    """``@server.tool("name")`` and ``@server.prompt("name")``, as FastMCP and the official SDK
    spell them: the string is the name, not a function to register."""
    server = Server("t")

    @server.tool("sum_two", read_only=True)
    def add(a: int, b: int) -> int:
        return a + b

    @server.prompt("greeting")
    def greet(who: str) -> str:
        return f"Hello {who}"

    @server.tool("same", name="same")
    def same() -> str:
        return "x"

    assert add(1, 2) == 3 and greet("x") == "Hello x"  # the functions are handed back
    assert set(server.tools) == {"sum_two", "same"}
    async with connect(server, wire) as h:
        result = await h.request("tools/call", {"name": "sum_two", "arguments": {"a": 1, "b": 2}})
        prompt = await h.request("prompts/get", {"name": "greeting", "arguments": {"who": "Ann"}})
    assert result["structuredContent"] == {"result": 3}
    assert prompt["messages"][0]["content"]["text"] == "Hello Ann"
    with pytest.raises(TypeError, match=r"^tool named twice: 'a' and name='b'; give one of them$"):
        server.tool("a", name="b")
    with pytest.raises(TypeError, match=r"^prompt named twice: 'a' and name='b'; give one of them$"):
        server.prompt("a", name="b")


@pytest.mark.parametrize("name", ["http", "streamable-http", "sse"])
def test_run_takes_the_http_transports_other_names(monkeypatch, name):
    """``server.run("streamable-http")`` and ``"sse"``, as FastMCP and the official SDK name them,
    serve the one HTTP app that has both transports; an unknown name says the known ones."""
    import mcpkit.transports.serve

    served = []
    monkeypatch.setattr(mcpkit.transports.serve, "serve_http",
                        lambda server, **options: served.append((server, options["host"], options["port"])))
    server = Server("t")
    server.run(name, port=8123)
    assert served == [(server, "127.0.0.1", 8123)]
    with pytest.raises(ValueError, match=r"^unknown transport 'websocket': use 'stdio' or 'http' \(which also "
                                         r"serves 'streamable-http' and 'sse'\)$"):
        server.run("websocket")


def test_a_resource_decorator_without_its_uri_is_refused_at_once():
    """``@server.resource`` alone would make the function the decorator and register nothing."""
    server = Server("t")
    for kind in ("resource", "resource_template"):
        with pytest.raises(TypeError) as err:
            @getattr(server, kind)
            def readme() -> str:
                return "x"
        assert str(err.value) == (f'@server.{kind} takes the URI first: write @server.{kind}("scheme://...") '
                                  f"above readme, not @server.{kind} alone")
    assert server._resources == {} and server._templates == []


@pytest.mark.asyncio
@pytest.mark.req("TL-05")
async def test_docstring_becomes_description_and_parameter_docs_describe_properties(wire):
    server = Server("t")

    @server.tool
    def documented(city: str, days: int = 3) -> str:
        """Forecast the weather.

        Looks the city up first.

        Args:
            city: The city name.
            days: How many days
                to forecast.
        """
        return city

    @server.tool(description="Given explicitly.")
    def overridden() -> str:
        """Not this."""
        return ""

    @server.tool
    def undocumented() -> str:
        return ""

    async with connect(server, wire) as h:
        tools = {t["name"]: t for t in await _tools(h)}
    assert tools["documented"]["description"] == "Forecast the weather.\n\nLooks the city up first."
    assert tools["documented"]["inputSchema"] == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city name."},
            "days": {"type": "integer", "description": "How many days to forecast.", "default": 3},
        },
        "required": ["city"],
        "additionalProperties": False,
    }
    assert tools["overridden"]["description"] == "Given explicitly."
    assert "description" not in tools["undocumented"]
    assert tools["undocumented"]["inputSchema"] == {"type": "object", "properties": {}, "additionalProperties": False}


@pytest.mark.asyncio
@pytest.mark.req("TL-05", "JS-01", "JS-04")
async def test_signature_becomes_the_exact_input_schema(wire):
    server = Server("t")

    @server.tool
    def everything(
        count: Annotated[int, "How many"],
        color: Color,
        mode: Literal["fast", "slow"] = "fast",
        point: Point | None = None,
        movie: Movie | None = None,
        person: Person | None = None,
        ctx: Context | None = None,
    ) -> str:
        return "ok"

    async with connect(server, wire) as h:
        schema = (await _tool(h, "everything"))["inputSchema"]
    assert schema == {
        "type": "object",
        "properties": {
            "count": {"type": "integer", "description": "How many"},
            "color": {"type": "string", "enum": ["red", "green"]},
            "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
            "point": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}], "default": None},
            "movie": {"anyOf": [{"$ref": "#/$defs/Movie"}, {"type": "null"}], "default": None},
            "person": {"anyOf": [{"$ref": "#/$defs/Person"}, {"type": "null"}], "default": None},
        },
        "required": ["count", "color"],
        "additionalProperties": False,
        "$defs": {
            "Point": {
                "type": "object",
                "description": "A point on the plane.",
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
                "required": ["x"],
                "additionalProperties": False,
            },
            "Movie": {
                "type": "object",
                "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
                "required": ["title", "year"],
            },
            "Person": {
                "type": "object",
                "title": "Person",
                "properties": {
                    "name": {"type": "string", "title": "Name", "description": "Full name"},
                    "age": {"type": "integer", "title": "Age", "default": 0},
                },
                "required": ["name"],
            },
        },
    }
    # the Context parameter is injected, never advertised
    assert "ctx" not in schema["properties"]
    # JS-04: what is published is a valid 2020-12 schema
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.asyncio
@pytest.mark.req("TL-11", "JS-01")
async def test_the_generated_schema_is_what_validates_the_call(wire):
    server = Server("t")
    seen = []

    @server.tool
    def place(point: Point, color: Color, movie: Movie) -> str:
        seen.append((point, color, movie))
        return "ok"

    good = {"point": {"x": 1}, "color": "red", "movie": {"title": "Up", "year": 2009}}
    async with connect(server, wire) as h:
        assert (await h.request("tools/call", {"name": "place", "arguments": good}))["content"] == [
            {"type": "text", "text": "ok"}
        ]
        for bad in (
            {**good, "color": "blue"},  # not in the enum
            {**good, "point": {"x": 1, "z": 2}},  # dataclass objects are closed
            {**good, "movie": {"title": "Up"}},  # TypedDict required key missing
            {**good, "extra": 1},  # additionalProperties: false at the root
        ):
            result = await h.request("tools/call", {"name": "place", "arguments": bad})
            assert result["isError"] is True, bad
    # the handler received Python values: the dataclass and the enum member
    assert seen == [(Point(1, 0), Color.RED, {"title": "Up", "year": 2009})]


# --------------------------------------------------------------------------- outputSchema


@pytest.mark.asyncio
@pytest.mark.req("TL-05", "TL-07", "JS-04")
async def test_return_annotation_becomes_output_schema(wire):
    server = Server("t")

    @server.tool
    def number() -> int:
        return 1

    @server.tool
    def numbers() -> list[float]:
        return [1.5]

    @server.tool
    def point() -> Point:
        return Point(1, 2)

    @server.tool
    def reading() -> Reading:
        return {"sensor": "a", "value": 1.0}

    @server.tool
    def pair() -> Pair:
        return Pair(Point(0, 0), Point(1, 1))

    @server.tool
    def plain() -> str:
        return "s"

    @server.tool(structured=False)
    def opted_out() -> int:
        return 1

    async with connect(server, wire) as h:
        tools = {t["name"]: t for t in await _tools(h)}
    assert tools["number"]["outputSchema"] == {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
    }
    assert tools["numbers"]["outputSchema"] == {
        "type": "object",
        "properties": {"result": {"type": "array", "items": {"type": "number"}}},
        "required": ["result"],
    }
    assert tools["point"]["outputSchema"] == {
        "type": "object",
        "description": "A point on the plane.",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
        # a dumped dataclass has every field
        "required": ["x", "y"],
        "additionalProperties": False,
    }
    assert tools["reading"]["outputSchema"] == {
        "type": "object",
        "properties": {"sensor": {"type": "string"}, "value": {"type": "number"}},
        "required": ["sensor", "value"],
    }
    point_def = {
        "type": "object",
        "description": "A point on the plane.",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
        "required": ["x", "y"],
        "additionalProperties": False,
    }
    assert tools["pair"]["outputSchema"] == {
        "type": "object",
        "properties": {"left": {"$ref": "#/$defs/Point"}, "right": {"$ref": "#/$defs/Point"}},
        "required": ["left", "right"],
        "additionalProperties": False,
        "$defs": {"Point": point_def},
    }
    assert "outputSchema" not in tools["plain"]
    assert "outputSchema" not in tools["opted_out"]
    for tool in tools.values():
        jsonschema.Draft202012Validator.check_schema(tool["inputSchema"])
        if "outputSchema" in tool:
            jsonschema.Draft202012Validator.check_schema(tool["outputSchema"])


def test_structured_true_without_a_structured_return_is_refused():
    server = Server("t")
    with pytest.raises(ValueError, match="structured=True"):

        @server.tool(structured=True)
        def text_only() -> str:
            return ""

    assert server.tools == {}


# --------------------------------------------------------------------------- raw schemas


RAW = {
    "type": "object",
    "description": "written by hand",
    "properties": {
        "n": {"type": "integer", "minimum": 10, "maximum": 20},
        "tag": {"type": "string", "pattern": "^[a-z]+$"},
        "p": {"$ref": "#/$defs/P"},
    },
    "required": ["n"],
    "$defs": {"P": {"type": "array", "prefixItems": [{"type": "integer"}]}},
    "x-vendor": {"kept": True},
}


@pytest.mark.asyncio
@pytest.mark.req("TL-05", "TL-11", "JS-01", "JS-04")
async def test_add_tool_lists_the_raw_schema_exactly_and_validates_against_it(wire):
    server = Server("t")
    calls = []

    def handler(arguments):
        calls.append(arguments)
        return f"n={arguments['n']}"

    raw = json.loads(json.dumps(RAW))
    tool = server.add_tool("raw", handler, input_schema=raw, description="Raw tool.")
    assert tool.name == "raw"

    async with connect(server, wire) as h:
        listed = await _tool(h, "raw")
        # exactly as given, key order included
        assert json.dumps(listed["inputSchema"]) == json.dumps(RAW)
        assert listed["description"] == "Raw tool."
        ok = await h.request("tools/call", {"name": "raw", "arguments": {"n": 10, "tag": "abc"}})
        assert ok == {"content": [{"type": "text", "text": "n=10"}]}
        for bad in ({"n": 9}, {"n": 21}, {"n": 15, "tag": "ABC"}, {"tag": "abc"}, {"n": 15, "p": ["x"]}):
            result = await h.request("tools/call", {"name": "raw", "arguments": bad})
            assert result["isError"] is True, bad
            assert result["content"][0]["text"].startswith("Invalid arguments for tool 'raw': ")
        too_small = await h.request("tools/call", {"name": "raw", "arguments": {"n": 9}})
        assert too_small["content"][0]["text"] == "Invalid arguments for tool 'raw': /n: 9 is less than the minimum of 10"
    # the handler received the arguments dict itself, only when valid
    assert calls == [{"n": 10, "tag": "abc"}]


@pytest.mark.asyncio
@pytest.mark.req("TL-10", "TL-11")
async def test_raw_schema_violation_is_invalid_params_before_2025_11_25(wire):
    server = Server("t")
    server.add_tool("raw", lambda a: "ok", input_schema=json.loads(json.dumps(RAW)))
    async with connect(server, wire, "2025-06-18") as h:
        with pytest.raises(RpcError) as err:
            await h.request("tools/call", {"name": "raw", "arguments": {"n": 9}})
    assert err.value.code == -32602
    assert err.value.message == "Invalid arguments for tool 'raw': /n: 9 is less than the minimum of 10"
    assert err.value.data == {"errors": [{"path": "/n", "message": "9 is less than the minimum of 10"}]}


@pytest.mark.asyncio
@pytest.mark.req("JS-02")
async def test_declared_draft07_dialect_is_the_one_validated(wire):
    server = Server("t")
    # draft-07: `items` as an array is tuple validation (2020-12 would spell it prefixItems)
    server.add_tool(
        "d7",
        lambda a: "ok",
        input_schema={
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"p": {"type": "array", "items": [{"type": "integer"}, {"type": "string"}]}},
        },
    )
    # no $schema: 2020-12, where prefixItems applies (draft-07 would ignore it)
    server.add_tool(
        "d2020",
        lambda a: "ok",
        input_schema={"type": "object", "properties": {"p": {"type": "array", "prefixItems": [{"type": "integer"}]}}},
    )
    async with connect(server, wire) as h:

        async def call(name, p):
            return await h.request("tools/call", {"name": name, "arguments": {"p": p}})

        assert "isError" not in await call("d7", [1, "a"])
        assert (await call("d7", ["a", 1]))["isError"] is True
        assert "isError" not in await call("d2020", [1, "anything"])
        assert (await call("d2020", ["a"]))["isError"] is True


@pytest.mark.req("JS-02", "JS-04", "TL-05")
@pytest.mark.parametrize(
    "schema, message",
    [
        ({"type": "object", "properties": {"a": {"type": "nonsense"}}}, "not a valid JSON Schema"),
        ({"type": "object", "required": "a"}, "not a valid JSON Schema"),
        ({"type": "object", "properties": {"a": {"minimum": "ten"}}}, "not a valid JSON Schema"),
        (
            {"$schema": "http://json-schema.org/draft-03/schema#", "type": "object"},
            "unsupported JSON Schema dialect 'http://json-schema.org/draft-03/schema#'",
        ),
        ({"$schema": "https://example.com/my-dialect", "type": "object"}, "unsupported JSON Schema dialect"),
        ({"type": "array"}, 'inputSchema must be a JSON Schema object with "type": "object"'),
        ({"properties": {}}, 'inputSchema must be a JSON Schema object with "type": "object"'),
    ],
)
def test_unusable_raw_schema_is_refused_at_registration(schema, message):
    server = Server("t")
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        server.add_tool("bad", lambda a: "", input_schema=schema)
    assert server.tools == {}


@pytest.mark.req("TL-07")
def test_raw_output_schema_must_be_an_object_schema():
    server = Server("t")
    with pytest.raises(ValueError, match="outputSchema must have"):
        server.add_tool("bad", lambda a: "", input_schema={"type": "object"}, output_schema={"type": "string"})
    with pytest.raises(ValueError, match="not a valid JSON Schema"):
        server.add_tool(
            "bad", lambda a: "", input_schema={"type": "object"}, output_schema={"type": "object", "required": 1}
        )
    assert server.tools == {}


@pytest.mark.req("JS-05")
def test_remote_ref_is_never_fetched_and_the_schema_is_refused():
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            hits.append(self.path)
            body = b'{"type": "integer"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/schema+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/int.json"
        server = Server("t")
        for schema in (
            {"type": "object", "properties": {"a": {"$ref": url}}},
            {"type": "object", "properties": {"a": {"$ref": url + "#/definitions/x"}}},
            {"$id": url, "type": "object", "properties": {"a": {"$ref": "other.json"}}},
        ):
            with pytest.raises(ValueError, match="cannot compile schema"):
                server.add_tool("remote", lambda a: "", input_schema=schema)
        assert server.tools == {}
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert hits == []


# --------------------------------------------------------------------------- tool names


@pytest.mark.req("TL-06")
def test_tool_name_rules():
    server = Server("t")
    server.add_tool("a" * 128, lambda a: "", input_schema={"type": "object"})
    server.add_tool("A-z_0.9", lambda a: "", input_schema={"type": "object"})
    server.add_tool("Case", lambda a: "", input_schema={"type": "object"})
    server.add_tool("case", lambda a: "", input_schema={"type": "object"})  # case-sensitive: distinct
    for bad in ("a" * 129, "", "has space", "comma,name", "slash/name", "émoji", "tab\t"):
        with pytest.raises(ValueError, match="invalid tool name"):
            server.add_tool(bad, lambda a: "", input_schema={"type": "object"})
        with pytest.raises(ValueError, match="invalid tool name"):
            server.tool(name=bad)(lambda: "")
    assert set(server.tools) == {"a" * 128, "A-z_0.9", "Case", "case"}


@pytest.mark.asyncio
@pytest.mark.req("TL-06", "TL-13")
async def test_duplicate_tool_names_are_refused_unless_replace(wire):
    server = Server("t")

    @server.tool
    def tool() -> str:
        """First."""
        return "first"

    with pytest.raises(ValueError, match="already registered"):

        @server.tool(name="tool")
        def other() -> str:
            return "other"

    with pytest.raises(ValueError, match="already registered"):
        server.add_tool("tool", lambda a: "raw", input_schema={"type": "object"})

    async with connect(server, wire) as h:
        assert (await _tool(h, "tool"))["description"] == "First."

        @server.tool(name="tool", replace=True)
        def second() -> str:
            """Second."""
            return "second"

        await h.wait_notification("notifications/tools/list_changed")
        assert [t["description"] for t in await _tools(h)] == ["Second."]
        result = await h.request("tools/call", {"name": "tool"})
        assert result["content"] == [{"type": "text", "text": "second"}]


# --------------------------------------------------------------------------- run-time changes


@pytest.mark.asyncio
@pytest.mark.req("TL-13", "RS-09", "PM-07")
async def test_every_registry_change_sends_list_changed_to_every_session(wire):
    # every feature declared up front, so that sessions opened while it is empty are told of them
    server = Server("t", advertise=("tools", "resources", "prompts"))
    async with connect(server, wire) as a, connect(server, wire, "2024-11-05") as b:
        server.add_tool("t1", lambda x: "", input_schema={"type": "object"})
        server.add_tool("t1", lambda x: "", input_schema={"type": "object"}, replace=True)
        server.remove_tool("t1")
        server.add_resource("res://one", lambda: "1", name="one")
        server.remove_resource("res://one")
        server.resource_template("res://items/{id}")(lambda id: id)
        server.remove_resource_template("res://items/{id}")
        server.prompt(name="p1")(lambda: "hi")
        server.prompt(name="p1", replace=True)(lambda: "hello")
        server.remove_prompt("p1")
        expected = (
            ["notifications/tools/list_changed"] * 3
            + ["notifications/resources/list_changed"] * 4
            + ["notifications/prompts/list_changed"] * 3
        )
        for h in (a, b):
            await h.wait_for(lambda h=h: len(h.notifications) >= len(expected))
            await h.settle()
            assert [n["method"] for n in h.notifications] == expected
            assert all("params" not in n for n in h.notifications)
            assert await _tools(h) == []
            assert (await h.request("resources/list"))["resources"] == []
            assert (await h.request("resources/templates/list"))["resourceTemplates"] == []
            assert (await h.request("prompts/list"))["prompts"] == []


@pytest.mark.asyncio
@pytest.mark.req("TL-13")
async def test_lists_reflect_changes_and_closed_sessions_get_nothing(wire):
    server = Server("t", advertise=("tools",))
    async with connect(server, wire) as a:
        server.add_tool("one", lambda x: "", input_schema={"type": "object"})
        assert [t["name"] for t in await _tools(a)] == ["one"]
    async with connect(server, wire) as b:
        assert [t["name"] for t in await _tools(b)] == ["one"]
        server.add_tool("two", lambda x: "", input_schema={"type": "object"})
        await b.wait_notification("notifications/tools/list_changed")
        assert [t["name"] for t in await _tools(b)] == ["one", "two"]
    # the first session was closed before the change: it got exactly one notification
    assert [n["method"] for n in a.notifications] == ["notifications/tools/list_changed"]


def test_removing_what_is_not_registered_raises_key_error():
    server = Server("t")
    for remove, key in (
        (server.remove_tool, "nope"),
        (server.remove_resource, "res://nope"),
        (server.remove_resource_template, "res://{nope}"),
        (server.remove_prompt, "nope"),
    ):
        with pytest.raises(KeyError):
            remove(key)


def test_duplicate_resources_templates_and_prompts_are_refused_unless_replace():
    server = Server("t")
    server.add_resource("res://a", lambda: "1", name="a")
    with pytest.raises(ValueError, match="already registered"):
        server.add_resource("res://a", lambda: "2", name="a")
    server.add_resource("res://a", lambda: "2", name="a2", replace=True)
    server.resource_template("res://t/{x}")(lambda x: x)
    with pytest.raises(ValueError, match="already registered"):
        server.resource_template("res://t/{x}")(lambda x: x)
    server.resource_template("res://t/{x}", replace=True, name="again")(lambda x: x)
    server.prompt(name="p")(lambda: "")
    with pytest.raises(ValueError, match="already registered"):
        server.prompt(name="p")(lambda: "")
    server.prompt(name="p", replace=True, description="new")(lambda: "")
    assert server._resources["res://a"].name == "a2"
    assert [t.name for t in server._templates] == ["again"]
    assert server._prompts["p"].description == "new"


# --------------------------------------------------------------------------- capabilities


@pytest.mark.asyncio
@pytest.mark.req("LC-01", "LC-06", "TL-01", "RS-01", "PM-01", "LG-01", "CP-01")
@pytest.mark.parametrize("version", REVISIONS)
async def test_capabilities_declare_every_feature_served(wire, version):
    server = Server("caps", "2.0", instructions="Use the tools.")
    server.add_tool("t", lambda args: "", input_schema={"type": "object"})
    server.add_resource("res://one", lambda: "1", name="one")
    server.prompt(name="p")(lambda: "hi")
    async with connect(server, wire, version) as h:
        result = h.initialize_result
    expected = {
        "tools": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "prompts": {"listChanged": True},
        "logging": {},
    }
    if version != "2024-11-05":  # CP-01: the completions capability exists from 2025-03-26
        expected["completions"] = {}
    assert result == {
        "protocolVersion": version,
        "capabilities": expected,
        "serverInfo": {"name": "caps", "version": "2.0"},
        "instructions": "Use the tools.",
    }


@pytest.mark.asyncio
@pytest.mark.req("IC-01", "IC-03", "LC-05")
@pytest.mark.parametrize(
    "version, keys",
    [
        ("2024-11-05", {"name", "version"}),
        ("2025-03-26", {"name", "version"}),
        ("2025-06-18", {"name", "version", "title"}),
        ("2025-11-25", {"name", "version", "title", "description", "websiteUrl", "icons"}),
    ],
)
async def test_server_info_carries_only_what_the_revision_defines(wire, version, keys):
    server = Server(
        "info", "1.2.3", title="Info Server", description="Describes itself.", website_url="https://example.com",
        icons=[ICON],
    )
    full = {
        "name": "info",
        "version": "1.2.3",
        "title": "Info Server",
        "description": "Describes itself.",
        "websiteUrl": "https://example.com",
        "icons": [ICON],
    }
    async with connect(server, wire, version) as h:
        info = h.initialize_result["serverInfo"]
    assert info == {k: v for k, v in full.items() if k in keys}


# --------------------------------------------------------------------------- per-revision lists


def _rich_server() -> Server:
    server = Server("t")

    @server.tool(title="Shown Name", read_only=True, icons=[ICON], meta={"com.example/k": 1})
    def rich(a: int) -> int:
        """Rich tool."""
        return a

    @server.resource("res://doc", title="Doc", mime_type="text/plain", size=3, icons=[ICON],
                     annotations={"audience": ["user"], "priority": 0.5})
    def doc() -> str:
        """A document."""
        return "abc"

    @server.resource_template("res://items/{id}", title="Item", mime_type="application/json", icons=[ICON])
    def item(id: str) -> str:
        """One item."""
        return id

    @server.prompt(title="Greeting", icons=[ICON])
    def greet(name: Annotated[str, "Who to greet"]) -> str:
        """Say hello."""
        return f"Hello {name}"

    return server


@pytest.mark.asyncio
@pytest.mark.req("TL-05", "TL-14", "IC-01", "LC-05")
async def test_tools_list_is_shaped_per_revision(wire):
    server = _rich_server()
    input_schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    output_schema = {"type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]}
    base = {"name": "rich", "description": "Rich tool.", "inputSchema": input_schema}
    expected = {
        "2024-11-05": base,
        # no Tool.title before 2025-06-18: the title rides in annotations.title
        "2025-03-26": {**base, "annotations": {"title": "Shown Name", "readOnlyHint": True}},
        "2025-06-18": {
            **base, "title": "Shown Name", "outputSchema": output_schema, "annotations": {"readOnlyHint": True},
            "_meta": {"com.example/k": 1},
        },
        "2025-11-25": {
            **base, "title": "Shown Name", "outputSchema": output_schema, "annotations": {"readOnlyHint": True},
            "_meta": {"com.example/k": 1}, "icons": [ICON],
        },
    }
    for version, want in expected.items():
        async with connect(server, wire, version) as h:
            assert await _tools(h) == [want], version


@pytest.mark.asyncio
@pytest.mark.req("RS-03", "PM-03", "IC-01", "LC-05")
@pytest.mark.parametrize(
    "version",
    [
        "2024-11-05",
        "2025-03-26",
        "2025-06-18",
        "2025-11-25",
    ],
)
async def test_resource_template_and_prompt_lists_are_shaped_per_revision(wire, version):
    server = _rich_server()
    async with connect(server, wire, version) as h:
        resources = (await h.request("resources/list"))["resources"]
        templates = (await h.request("resources/templates/list"))["resourceTemplates"]
        prompts = (await h.request("prompts/list"))["prompts"]
    # Resource.size and annotations exist in every revision's schema
    resource = {"uri": "res://doc", "name": "doc", "description": "A document.", "mimeType": "text/plain",
                "size": 3, "annotations": {"audience": ["user"], "priority": 0.5}}
    template = {"uriTemplate": "res://items/{id}", "name": "item", "description": "One item.",
                "mimeType": "application/json"}
    prompt = {"name": "greet", "description": "Say hello.",
              "arguments": [{"name": "name", "description": "Who to greet", "required": True}]}
    if version >= "2025-06-18":
        for item, title in ((resource, "Doc"), (template, "Item"), (prompt, "Greeting")):
            item["title"] = title
    if version >= "2025-11-25":
        for item in (resource, template, prompt):
            item["icons"] = [ICON]
    assert templates == [template]
    assert prompts == [prompt]
    assert resources == [resource]


# --------------------------------------------------------------------------- pagination


def _paged_server(page_size: int | None) -> Server:
    server = Server("t", page_size=page_size)
    for i in range(5):
        server.add_tool(f"t{i}", lambda a: "", input_schema={"type": "object"})
        server.add_resource(f"res://r{i}", lambda: "", name=f"r{i}")
        server.resource_template(f"res://tpl{i}/{{x}}", name=f"tpl{i}")(lambda x: x)
        server.prompt(name=f"p{i}")(lambda: "")
    return server


LISTS = [
    ("tools/list", "tools", "name", [f"t{i}" for i in range(5)]),
    ("resources/list", "resources", "uri", [f"res://r{i}" for i in range(5)]),
    ("resources/templates/list", "resourceTemplates", "name", [f"tpl{i}" for i in range(5)]),
    ("prompts/list", "prompts", "name", [f"p{i}" for i in range(5)]),
]


@pytest.mark.asyncio
@pytest.mark.req("PA-01", "PA-03")
@pytest.mark.parametrize("method, key, field, names", LISTS)
async def test_pagination_walks_every_list_with_next_cursor_only_when_more(wire, method, key, field, names):
    server = _paged_server(2)
    async with connect(server, wire) as h:
        pages, cursors = [], []
        params: dict = {}
        while True:
            page = await h.request(method, params)
            assert set(page) <= {key, "nextCursor"}
            pages.append([item[field] for item in page[key]])
            if "nextCursor" not in page:
                break
            cursor = page["nextCursor"]
            assert isinstance(cursor, str) and cursor != ""
            cursors.append(cursor)
            params = {"cursor": cursor}
        assert pages == [names[0:2], names[2:4], names[4:5]]
        assert len(set(cursors)) == 2
        # cursors are stable: the same cursor gives the same page again
        again = await h.request(method, {"cursor": cursors[0]})
        assert [item[field] for item in again[key]] == names[2:4]


@pytest.mark.asyncio
@pytest.mark.req("PA-01")
async def test_pagination_exact_multiple_has_no_trailing_cursor(wire):
    server = Server("t", page_size=2)
    for i in range(4):
        server.prompt(name=f"p{i}")(lambda: "")
    async with connect(server, wire) as h:
        first = await h.request("prompts/list")
        second = await h.request("prompts/list", {"cursor": first["nextCursor"]})
    assert [p["name"] for p in second["prompts"]] == ["p2", "p3"]
    assert "nextCursor" not in second


@pytest.mark.asyncio
@pytest.mark.req("PA-02")
@pytest.mark.parametrize("method, key, field, names", LISTS)
async def test_forged_or_foreign_cursors_are_invalid_params(wire, method, key, field, names):
    server = _paged_server(2)
    async with connect(server, wire) as h:
        cursors = {}
        for other_method, other_key, _, _ in LISTS:
            cursors[other_key] = (await h.request(other_method))["nextCursor"]
        kind = "resourceTemplates" if key == "resourceTemplates" else key
        forged = [
            "2",
            "not base64 !",
            base64.urlsafe_b64encode(f"{kind}:99".encode()).decode(),  # past the end
            base64.urlsafe_b64encode(f"{kind}:-1".encode()).decode(),
            base64.urlsafe_b64encode(b"\xff\xfe").decode(),
            123,
            "",
        ]
        foreign = [c for k, c in cursors.items() if k != key]
        for cursor in forged + foreign:
            with pytest.raises(RpcError) as err:
                await h.request(method, {"cursor": cursor})
            assert err.value.code == -32602, cursor
            assert err.value.message == "Invalid or expired cursor."
            assert err.value.data == {"cursor": cursor}
        # the list's own cursor still works
        page = await h.request(method, {"cursor": cursors[key]})
        assert [item[field] for item in page[key]] == names[2:4]


@pytest.mark.asyncio
@pytest.mark.req("PA-01", "PA-02")
@pytest.mark.parametrize("method, key, field, names", LISTS)
async def test_without_page_size_every_item_comes_in_one_page(wire, method, key, field, names):
    server = _paged_server(None)
    async with connect(server, wire) as h:
        page = await h.request(method)
        assert list(page) == [key]
        assert [item[field] for item in page[key]] == names
        # a cursor that a paginating server would mint for this list is refused: there are no pages
        async with connect(_paged_server(2), wire) as paging:
            cursor = (await paging.request(method))["nextCursor"]
        with pytest.raises(RpcError) as err:
            await h.request(method, {"cursor": cursor})
        assert err.value.code == -32602


def test_page_size_must_be_positive():
    for bad in (0, -1):
        with pytest.raises(ValueError, match="page_size"):
            Server("t", page_size=bad)


def test_public_api_exports():
    assert {"Server", "Context", "ToolError", "ToolResult", "text", "image", "audio", "resource",
            "resource_link", "user", "assistant"} <= set(dir(mcpkit))
    with pytest.raises(AttributeError):
        mcpkit.does_not_exist  # noqa: B018


@pytest.mark.asyncio
@pytest.mark.req("LC-06", "TL-01", "RS-01", "PM-01", "CP-01", "LG-01")
@pytest.mark.parametrize("version", REVISIONS)
async def test_a_tools_only_server_declares_no_resources_prompts_or_completions(wire, version):
    server = Server("tools-only")
    server.add_tool("t", lambda args: "", input_schema={"type": "object"})
    async with connect(server, wire, version) as h:
        assert h.initialize_result["capabilities"] == {"tools": {"listChanged": True}, "logging": {}}
        for method in ("resources/list", "prompts/list", "resources/templates/list"):
            with pytest.raises(RpcError) as err:
                await h.request(method)
            assert err.value.code == -32601  # not declared, so not served
    templated = Server("templated")
    templated.resource_template("res://items/{id}")(lambda id: id)
    async with connect(templated, wire, version) as h:
        caps = h.initialize_result["capabilities"]
        assert set(caps) == ({"resources", "logging", "completions"} if version != "2024-11-05"
                             else {"resources", "logging"})


@pytest.mark.asyncio
@pytest.mark.req("LC-05", "LC-06", "PM-01")
async def test_a_feature_added_at_run_time_reaches_new_sessions_only(wire):
    server = Server("grows")
    server.add_tool("t", lambda args: "", input_schema={"type": "object"})
    async with connect(server, wire) as early:
        server.prompt(name="later")(lambda: "hi")
        server.add_tool("t2", lambda args: "", input_schema={"type": "object"})
        await early.wait_notification("notifications/tools/list_changed")
        await early.settle()
        # the early session negotiated no prompts: it is not sent their changes, nor served them
        assert [n["method"] for n in early.notifications] == ["notifications/tools/list_changed"]
        with pytest.raises(RpcError) as err:
            await early.request("prompts/list")
        assert err.value.code == -32601
        async with connect(server, wire) as late:
            assert "prompts" in late.initialize_result["capabilities"]
            assert [p["name"] for p in (await late.request("prompts/list"))["prompts"]] == ["later"]


def test_advertise_names_only_known_features():
    with pytest.raises(ValueError, match="advertise"):
        Server("x", advertise=("tool",))


@pytest.mark.asyncio
@pytest.mark.req("TL-13", "RS-09")
async def test_a_batch_that_changes_resources_and_templates_sends_one_resources_list_changed(wire):
    # resources and resource templates share one notification: a batch that changes both (a
    # proxy re-listing an upstream's resources does) is one change to announce, not two
    server = Server("t", advertise=("tools", "resources", "prompts"))
    async with connect(server, wire) as a:
        assert (await a.request("resources/templates/list"))["resourceTemplates"] == []  # cached
        assert (await a.request("resources/list"))["resources"] == []
        with server.batch_changes():
            server.add_resource("res://one", lambda: "1", name="one")
            server.resource_template("res://items/{id}")(lambda id: id)
            server.add_tool("t1", lambda x: "", input_schema={"type": "object"})
        await a.wait_for(lambda: len(a.notifications) >= 2)
        await a.settle()
        assert sorted(n["method"] for n in a.notifications) == [
            "notifications/resources/list_changed", "notifications/tools/list_changed"]
        # both lists were dropped from the cache, not only the one whose kind announced
        assert [r["uri"] for r in (await a.request("resources/list"))["resources"]] == ["res://one"]
        templates = (await a.request("resources/templates/list"))["resourceTemplates"]
        assert [t["uriTemplate"] for t in templates] == ["res://items/{id}"]
