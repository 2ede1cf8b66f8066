"""Tools from an OpenAPI document (mcpkit.bridge.openapi), against a real API served locally with the
document FastAPI generates for it (tests/bridge/designs_api.py)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcpkit import Server
from mcpkit.bridge import OpenApiError, Upstream
from mcpkit.hosts import server_problems
from mcpkit.policy import Gates, Policy
from tests.bridge.designs_api import KEY, DesignsApi
from tests.harness import connect

ALL = ["adminStats", "createDesign", "deleteDesign", "designs_export", "getDesign", "listDesigns"]


@pytest.fixture
def api() -> Iterator[DesignsApi]:
    served = DesignsApi().start()
    yield served
    served.stop()


def doc_url(api: DesignsApi) -> str:
    return api.url + "/openapi.json"


async def listed(h: Any) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in (await h.request("tools/list"))["tools"]}


@pytest.mark.asyncio
async def test_each_operation_is_a_tool_with_merged_inputs_inlined_refs_and_safe_hints(api: DesignsApi,
                                                                                        wire: Any) -> None:
    server = Server("designs")
    server.openapi(doc_url(api), base_url=api.url, auth=KEY)
    async with connect(server, wire) as h:
        tools = await listed(h)
    assert sorted(tools) == ALL  # "designs.export" made host-safe
    create = tools["createDesign"]
    assert create["description"] == "Create a design\n\nBlank, or from a template."
    schema = create["inputSchema"]
    # the body's properties, its $ref'd Size inlined; FastAPI's document $refs NewDesign and Size
    assert set(schema["properties"]) == {"title", "size", "template_id"} and schema["required"] == ["title"]
    assert schema["properties"]["size"]["properties"]["width"]["maximum"] == 8000
    assert "$ref" not in json.dumps(tools) and "$defs" not in json.dumps(tools)
    # the recursive Element is cut at its second visit
    element = create["outputSchema"]["properties"]["elements"]["items"]
    assert element["properties"]["children"]["items"] == {"description": "A Element (recursive)."}
    assert set(tools["listDesigns"]["inputSchema"]["properties"]) == {"page", "q"}
    assert tools["getDesign"]["inputSchema"]["required"] == ["design_id"]
    assert tools["getDesign"]["annotations"] == {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": True}
    assert tools["deleteDesign"]["annotations"]["destructiveHint"] is True
    assert tools["createDesign"]["annotations"]["destructiveHint"] is True
    assert tools["createDesign"]["annotations"]["readOnlyHint"] is False
    # what the three default hosts of mcpkit check accept, as registered
    assert server_problems(list(tools.values()), ["claude", "openai", "gemini"]) == []


@pytest.mark.asyncio
async def test_get_and_post_reach_the_api_with_the_key(api: DesignsApi, wire: Any) -> None:
    server = Server("designs")
    server.openapi(doc_url(api), base_url=api.url, auth=lambda ctx: KEY)
    async with connect(server, wire) as h:
        made = await h.request("tools/call", {"name": "createDesign",
                                              "arguments": {"title": "Sale", "size": {"width": 500, "height": 400}}})
        assert not made.get("isError"), made
        assert made["structuredContent"] == {"id": "d2", "title": "Sale", "size": {"width": 500, "height": 400},
                                             "elements": []}
        found = await h.request("tools/call", {"name": "listDesigns", "arguments": {"q": "sale", "page": 2}})
        assert found["structuredContent"]["page"] == 2
        assert [d["id"] for d in found["structuredContent"]["designs"]] == ["d2"]
        one = await h.request("tools/call", {"name": "getDesign", "arguments": {"design_id": "d1"}})
        assert one["structuredContent"]["elements"][0]["children"][0]["text"] == "Hello"
    assert ("POST", "/designs", KEY) in api.requests and ("GET", "/designs/d1", KEY) in api.requests


@pytest.mark.asyncio
async def test_a_4xx_is_an_error_result_with_the_apis_message(api: DesignsApi, wire: Any) -> None:
    server = Server("designs")
    server.openapi(doc_url(api), base_url=api.url, auth=KEY)
    async with connect(server, wire) as h:
        missing = await h.request("tools/call", {"name": "getDesign", "arguments": {"design_id": "nope"}})
        assert missing["isError"] is True
        assert "Design API answered 404: design not found" in missing["content"][0]["text"]
        # a path segment is escaped: "a/b" is one id, not a way to another route
        # (unescaped, httpx would resolve the dot segments and call GET /admin/stats)
        other = await h.request("tools/call", {"name": "getDesign", "arguments": {"design_id": "../admin/stats"}})
        assert other["isError"] is True and "answered 404" in other["content"][0]["text"]
    assert not any(path == "/admin/stats" for _, path, _ in api.requests)
    server = Server("designs")
    server.openapi(doc_url(api), base_url=api.url, auth="wrong")
    async with connect(server, wire) as h:
        refused = await h.request("tools/call", {"name": "listDesigns", "arguments": {}})
        assert refused["isError"] is True and "answered 401: invalid API key" in refused["content"][0]["text"]


@pytest.mark.asyncio
async def test_a_429_is_waited_out_per_retry_after_then_reported_retryable(api: DesignsApi, wire: Any) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    upstream = Upstream(api.url, name="Design API", auth_header="X-API-Key", auth_scheme=None, retries=2,
                        max_retry_after=10, sleep=sleep)
    server = Server("designs", policy=Policy(gates=Gates(allow_destructive=True, allow_open_world=True),
                                             contract=True))
    server.openapi(doc_url(api), upstream=upstream, auth=KEY)
    api.limited, api.retry_after = 1, "7"
    async with connect(server, wire) as h:
        done = await h.request("tools/call", {"name": "designs_export", "arguments": {"design_id": "d1"}})
        assert not done.get("isError"), done
        assert waits == [7.0]
        api.limited, api.retry_after = 1, "60"  # longer than max_retry_after: not waited, reported
        limited = await h.request("tools/call", {"name": "designs_export", "arguments": {"design_id": "d1",
                                                                                         "format": "pdf"}})
    assert limited["isError"] is True and waits == [7.0]
    error = limited["structuredContent"]["error"]
    assert error["code"] == "E_RATE_LIMITED" and error["details"]["retryAfterMs"] == 60000, error


@pytest.mark.asyncio
async def test_a_delete_is_gated_under_read_only(api: DesignsApi, wire: Any) -> None:
    server = Server("designs", policy=Policy(gates=Gates(read_only=True, allow_open_world=True)))
    server.openapi(doc_url(api), base_url=api.url, auth=KEY)
    async with connect(server, wire) as h:
        assert sorted(await listed(h)) == ["adminStats", "getDesign", "listDesigns"]
        refused = await h.request("tools/call", {"name": "deleteDesign", "arguments": {"design_id": "d1"}})
    assert refused["isError"] is True and "read-only" in refused["content"][0]["text"].lower()
    assert not any(method == "DELETE" for method, _, _ in api.requests) and "d1" in api.designs


@pytest.mark.asyncio
async def test_selection_renaming_and_annotation_overrides(api: DesignsApi, wire: Any) -> None:
    server = Server("designs", policy=Policy(gates=Gates(allow_open_world=True)))
    server.openapi(doc_url(api), base_url=api.url, auth=KEY, include=["tag:designs", "POST /designs/*/export"],
                   exclude=["delete*"], rename={"listDesigns": "designs", "designs.export": "export_design"},
                   annotations={"designs.export": {"destructive": False, "idempotent": True}})
    async with connect(server, wire) as h:
        tools = await listed(h)
    # createDesign is destructive by default and the gates hide it; the export, declared not, is listed
    assert sorted(tools) == ["designs", "export_design", "getDesign"]
    assert tools["export_design"]["annotations"]["destructiveHint"] is False
    mistaken = Server("x")
    with pytest.raises(OpenApiError, match="adminStat, which no selected operation has"):
        mistaken.openapi(doc_url(api), base_url=api.url, rename={"adminStat": "stats"})
    assert mistaken.tools == {}  # nothing half-registered
    with pytest.raises(OpenApiError, match=r"GET /designs/\{design_id\} would be tool 'getDesign', a name already taken"):
        mistaken.openapi(doc_url(api), base_url=api.url, rename={"listDesigns": "getDesign"})
    assert mistaken.tools == {}
    with pytest.raises(OpenApiError, match="the hints are"):
        Server("x").openapi(doc_url(api), base_url=api.url, annotations={"adminStats": {"readonly": True}})


def test_a_yaml_30_document_from_a_file_with_refs_and_nullable(tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    spec = {
        "openapi": "3.0.3", "info": {"title": "Shop", "version": "1"},
        "servers": [{"url": "https://shop.example/api"}],
        "components": {
            "parameters": {"Sku": {"name": "sku", "in": "path", "required": True, "schema": {"type": "string"}}},
            "schemas": {"Item": {"type": "object", "properties": {
                "id": {"type": "string", "readOnly": True},
                "note": {"type": "string", "nullable": True, "example": "fragile"},
                "qty": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
                "extra": {"$ref": "extra.yaml#/Extra"}}, "required": ["id", "qty"]}},
        },
        "paths": {"/items/{sku}": {
            "parameters": [{"$ref": "#/components/parameters/Sku"}],
            "put": {"operationId": "put item/by sku", "parameters": [
                {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
                {"name": "Authorization", "in": "header", "schema": {"type": "string"}}],
                "requestBody": {"required": True, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/Item"}}}},
                "responses": {"200": {"description": "ok", "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/Item"}}}}}}},
            "/items/{sku}/photo": {"post": {"operationId": "uploadPhoto", "parameters": [
                {"$ref": "#/components/parameters/Sku"}], "requestBody": {"required": True, "content": {
                    "multipart/form-data": {"schema": {"type": "object"}}}},
                "responses": {"204": {"description": "stored"}}}}},
    }
    (tmp_path / "shop.yaml").write_text(yaml.safe_dump(spec))
    (tmp_path / "extra.yaml").write_text(yaml.safe_dump({"Extra": {"type": "object", "properties": {
        "gift": {"type": "boolean"}}}}))
    server = Server("shop")
    [tool] = server.openapi(tmp_path / "shop.yaml")  # the multipart upload cannot be sent: left out, said
    assert "POST /items/{sku}/photo (uploadPhoto) left out: its request body is multipart/form-data" in caplog.text
    assert tool.name == "put_item_by_sku"
    props = tool.input_schema["properties"]
    assert set(props) == {"sku", "X-Trace", "note", "qty", "extra"}  # id is readOnly; Authorization is auth's
    assert tool.input_schema["required"] == ["sku", "qty"]
    assert props["note"] == {"type": ["string", "null"], "examples": ["fragile"]}
    assert props["qty"] == {"type": "integer", "exclusiveMinimum": 0}
    assert props["extra"] == {"type": "object", "properties": {"gift": {"type": "boolean"}}}
    assert "id" in tool.output_schema["properties"]
    assert tool.annotations["destructiveHint"] is True and tool.annotations["idempotentHint"] is True


def test_a_document_that_is_not_openapi_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "api.yaml"
    bad.write_text("openapi: 3.1.0\ninfo: {title: x}\npaths: {}\n")
    with pytest.raises(OpenApiError) as info:
        Server("x").openapi(bad, base_url="https://x.example")
    assert str(info.value) == f"openapi: {bad} is not valid OpenAPI 3.1.0: \"version\" is a required property (at info)"
    bad.write_text("swagger: '2.0'\n")
    with pytest.raises(OpenApiError, match=r"not an OpenAPI 3.0 or 3.1 document \(swagger: 2.0\)"):
        Server("x").openapi(bad, base_url="https://x.example")
    dangling = {"openapi": "3.1.0", "info": {"title": "x", "version": "1"}, "paths": {"/a": {"get": {
        "operationId": "a", "parameters": [{"$ref": "#/components/parameters/Gone"}],
        "responses": {"200": {"description": "ok"}}}}}}
    with pytest.raises(OpenApiError, match=r"cannot resolve \$ref #/components/parameters/Gone$"):
        Server("x").openapi(dangling, base_url="https://x.example")
    with pytest.raises(OpenApiError, match="give base_url="):
        Server("x").openapi({"openapi": "3.1.0", "info": {"title": "x", "version": "1"}, "paths": {}})


def test_loading_a_document_imports_nothing_until_used() -> None:
    import subprocess

    out = subprocess.run([sys.executable, "-c", "import mcpkit.bridge, sys; from mcpkit import Server; "
                          "print('openapi_spec_validator' in sys.modules, 'mcpkit.bridge.openapi' in sys.modules)"],
                         capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["False", "False"]
