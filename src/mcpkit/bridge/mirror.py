"""Mirrored tools: a server whose tools (and resources) are the ones its backend publishes.

    unity = RpcBridge("Unity editor", Tcp("127.0.0.1", 6400), token=...)
    server.mirror(unity, prefix="unity_", first_sync_timeout=10)
    unity.start()

An editor plugin decides at run time which tools exist (a package installed, a window opened).
The mirror keeps the server equal to what the backend publishes:

* **When**: on every new link (after the handshake, before the bridge reports up, so tools come
  back already up to date), on the backend's ``notifications/tools/list_changed`` or
  ``notifications/resources/list_changed``, and when a probe sees a new ``schemaVersion`` (a
  backend that forgets to notify still gets re-read). Coalesced: one re-read in flight, plus
  one queued for whatever arrived during it.
* **What**: descriptors are diffed (canonical JSON) against the last sync; added and changed
  tools are (re)registered with their *raw* schemas, which are listed as given and enforced on
  every call (JS-02); removed ones are unregistered. A name or URI the server (or another
  mirror) holds is never replaced nor removed: refused with a warning. All of it in one
  :meth:`Server.batch_changes`, so clients get **one** ``list_changed`` per change (TL-13).
* **While down**: mirrored tools need the bridge (``requires=bridge``): hidden from tools/list
  and refused with a retryable E_NOT_CONNECTED, and back with one ``list_changed``.
* **Resource templates**: ``resources/templates/list`` is read with the resources (a backend
  without it has none), and a URI with ``{variables}`` listed among the resources, as older
  plugins do, is taken as the template it is: each is served as a template of the server, read
  at the backend with the concrete URI asked for, its variables completed by the backend's
  ``completion/complete`` when it has one.
* **Legacy shapes**: ``adapt(descriptor) -> descriptor | None`` turns a backend's own format
  (``parameters``, ``input_schema``, ...) into an MCP Tool; None skips it. The default also
  moves JSON Schema draft 3's ``"required": true`` inside a property to its object's
  ``required`` list, where every later draft (and MCP's 2020-12) has it.
* **Start-up**: until the first sync, ``tools/list`` waits for it up to ``first_sync_timeout``
  seconds so the first list a client sees is not empty; on timeout it answers with what it has
  and says so on stderr.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

from .. import _json
from ..protocol.errors import E_UNSUPPORTED, ToolError

__all__ = ["Mirror", "adapt_legacy"]

log = logging.getLogger("mcpkit.bridge")

_CHANGES = frozenset({"notifications/tools/list_changed", "notifications/resources/list_changed"})
_MAX_PAGES = 100


def adapt_legacy(descriptor: Mapping[str, Any]) -> dict[str, Any] | None:
    """The default hook: MCP descriptors as they are; ``input_schema``/``parameters``/``params``
    (snake case, OpenAI-style, or a bare properties map) and ``output_schema`` renamed."""
    if not isinstance(descriptor, Mapping) or not isinstance(descriptor.get("name"), str):
        return None
    out = dict(descriptor)
    for key in ("input_schema", "parameters", "params", "args"):
        if "inputSchema" not in out and key in out:
            schema = out.pop(key)
            if isinstance(schema, dict) and schema.get("type") != "object":
                schema = {"type": "object", "properties": schema}  # a bare properties map
            out["inputSchema"] = schema
    if "output_schema" in out and "outputSchema" not in out:
        out["outputSchema"] = out.pop("output_schema")
    out.setdefault("inputSchema", {"type": "object"})
    for key in ("inputSchema", "outputSchema"):
        if _has_draft3_required(out.get(key)):
            out[key] = _draft3_required(out[key])
    return out


#: keywords whose value is a schema, or a list of schemas; and those whose value maps names to schemas
_SUBSCHEMA = ("items", "additionalProperties", "additionalItems", "not", "anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")


def _has_draft3_required(schema: Any) -> bool:
    if isinstance(schema, list):
        return any(_has_draft3_required(s) for s in schema)
    if not isinstance(schema, dict):
        return False
    return isinstance(schema.get("required"), bool) or any(
        _has_draft3_required(schema[k]) for k in _SUBSCHEMA if k in schema) or any(
        _has_draft3_required(list(schema[k].values())) for k in _SCHEMA_MAPS if isinstance(schema.get(k), dict))


def _draft3_required(schema: Any) -> Any:
    """JSON Schema draft 3 marks a property required inside it (``"required": true``); draft 4
    on, and MCP's 2020-12 (JS-01), list the names in the object's ``required`` array, and reject
    a boolean there. Older editor plugins still send draft 3: each flag moves to its object."""
    if isinstance(schema, list):
        return [_draft3_required(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    if isinstance(out.get("required"), bool):
        del out["required"]  # a property's own flag: its object collects it below
    props = schema.get("properties")
    if isinstance(props, dict):
        flagged = [n for n, sub in props.items() if isinstance(sub, dict) and sub.get("required") is True]
        if flagged:
            listed = out["required"] if isinstance(out.get("required"), list) else []
            out["required"] = [*listed, *(n for n in flagged if n not in listed)]
    for key in _SUBSCHEMA:
        if key in out:
            out[key] = _draft3_required(out[key])
    for key in _SCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {n: _draft3_required(sub) for n, sub in out[key].items()}
    return out


def _is_template(uri: str) -> bool:
    """An RFC 6570 expression: braces are no URI characters (RFC 3986), so such a "resource" is
    a template listed in the wrong list."""
    return "{" in uri and "}" in uri


class Mirror:
    """See the module docstring; made by :meth:`Server.mirror`.

    ``prefix`` is put before each backend tool's name (the call goes out with the backend's
    name); ``resources=False`` mirrors tools only (no resources, no templates).
    ``list_method``/``call_method``, ``resources_method``/``read_method`` and
    ``templates_method``/``complete_method`` name the backend's methods. Further keyword
    arguments are tool policy options (``timeout``, ``rate_limit``, ``contract``...) applied to
    every mirrored tool.
    """

    def __init__(
        self,
        server: Any,
        bridge: Any,
        *,
        prefix: str = "",
        adapt: Callable[[Mapping[str, Any]], dict[str, Any] | None] = adapt_legacy,
        resources: bool = True,
        first_sync_timeout: float = 10.0,
        list_method: str = "tools/list",
        call_method: str = "tools/call",
        resources_method: str = "resources/list",
        read_method: str = "resources/read",
        templates_method: str = "resources/templates/list",
        complete_method: str = "completion/complete",
        **tool_options: Any,
    ) -> None:
        if first_sync_timeout < 0:
            raise ValueError("first_sync_timeout must be >= 0 seconds")
        self.server = server
        self.bridge = bridge
        self.prefix = prefix
        self.adapt = adapt
        self.resources = resources
        self.first_sync_timeout = float(first_sync_timeout)
        self.list_method, self.call_method = list_method, call_method
        self.resources_method, self.read_method = resources_method, read_method
        self.templates_method, self.complete_method = templates_method, complete_method
        self.tool_options = {"requires": bridge, **tool_options}
        #: set after the first successful sync
        self.synced = threading.Event()
        #: set once the bridge is up after a sync: the mirrored tools are listed
        self.ready = threading.Event()
        #: how many syncs changed something (each sent at most one list_changed per kind)
        self.changes = 0
        self._tools: dict[str, str] = {}  # local name -> canonical JSON of what was registered
        self._resources: dict[str, str] = {}
        self._templates: dict[str, str] = {}  # URI template -> canonical JSON of what was registered
        # what this mirror registered, by identity: a name or URI is this mirror's to replace or
        # remove only while the server still holds that very item, never one the server (or
        # another mirror) registered, before or since
        self._tool_items: dict[str, Any] = {}
        self._resource_items: dict[str, Any] = {}
        self._template_items: dict[str, Any] = {}
        self._lock: asyncio.Lock | None = None  # made on the bridge loop, where every sync runs
        # the re-read in flight (the loop keeps weak refs), and whether another was asked for
        # meanwhile: a burst of list_changed costs one re-read plus one, never one per notice
        self._resyncing: asyncio.Task[Any] | None = None
        self._resync_again = False
        bridge.on_connect(self._on_connect)
        bridge.on_notification(self._on_notification)
        bridge.on_schema_change(lambda version: self._resync_soon())
        bridge.on_change(lambda up: self.ready.set() if up and self.synced.is_set() else None)
        self._wrap_list()

    @property
    def tools(self) -> list[str]:
        """The names of the tools currently mirrored."""
        return sorted(self._tools)

    # ------------------------------------------------------------------ triggers

    async def _on_connect(self, call: Any) -> None:
        # The bridge is not up yet: its coming up announces the tools, so no notification here.
        await self._sync(call, notify=False)

    def _on_notification(self, method: str, params: Any) -> None:
        if method in _CHANGES:
            self._resync_soon()

    def _resync_soon(self) -> None:
        self.bridge._ensure_loop().call_soon_threadsafe(self._resync_asked)

    def _resync_asked(self) -> None:
        """On the bridge loop: start a re-read, or, while one is in flight, ask for one more
        after it (it may have read the lists before this change)."""
        if self._resyncing is not None:
            self._resync_again = True
            return
        self._resyncing = asyncio.get_running_loop().create_task(self._resync_until_settled())

    async def _resync_until_settled(self) -> None:
        try:
            while True:
                self._resync_again = False
                await self.resync()
                if not self._resync_again:
                    return
        finally:
            self._resyncing = None

    async def resync(self) -> bool:
        """Read the backend's lists again and apply the difference; False if it could not."""
        if not self.bridge.up:
            return False  # the next link syncs on connect
        try:
            await self._sync(self.bridge.request, notify=True)
        except ToolError as exc:
            log.warning("bridge %s: could not re-read the tool list: %s", self.bridge.name, exc.message)
            return False
        return True

    # ------------------------------------------------------------------ syncing

    async def _sync(self, call: Any, *, notify: bool) -> None:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            tools = await self._list(call, self.list_method, "tools")
            resources = templates = None
            if self.resources:
                resources = await self._list(call, self.resources_method, "resources")
                templates = await self._list_templates(call)
            changed = self._apply_tools(tools, notify)
            if resources is not None and templates is not None:
                changed = self._apply_resources(resources, templates) or changed
            if changed:
                self.changes += 1
            self.synced.set()

    async def _list(self, call: Any, method: str, key: str) -> list[Any]:
        items: list[Any] = []
        cursor = None
        for _ in range(_MAX_PAGES):
            result = await call(method, {"cursor": cursor} if cursor else None)
            if isinstance(result, list):  # a backend that answers with the bare list
                return result
            if not isinstance(result, dict) or not isinstance(result.get(key), list):
                raise ToolError(f"{self.bridge.name} answered {method} without a {key!r} list.",
                                details={"bridge": self.bridge.name, "method": method})
            items.extend(result[key])
            if "schemaVersion" in result:
                self.bridge.schema_version = result["schemaVersion"]
            cursor = result.get("nextCursor")
            if not cursor:
                break
        return items

    async def _list_templates(self, call: Any) -> list[Any]:
        try:
            return await self._list(call, self.templates_method, "resourceTemplates")
        except ToolError as exc:
            if exc.code == E_UNSUPPORTED:  # -32601: a backend that has no templates
                return []
            raise

    def _apply_tools(self, published: list[Any], notify: bool) -> bool:
        server = self.server
        registered = server.tools
        wanted: dict[str, tuple[str, dict[str, Any]]] = {}
        for raw in published:
            d = self.adapt(raw)
            if d is None:
                continue
            local = self.prefix + d["name"]
            if not self._may_take(registered.get(local), self._tool_items.get(local)):
                log.warning("bridge %s: tool %r is also defined locally; the local one is kept", self.bridge.name, local)
                continue
            wanted[local] = (_json.dumps_str(d), d)
        removed = [name for name in self._tools if name not in wanted]
        changed = {n: v for n, v in wanted.items() if self._tools.get(n) != v[0]}
        if not removed and not changed:
            return False
        with server.batch_changes(notify=notify):
            for name in removed:
                self._drop_tool(name)
            for name, (text, d) in changed.items():
                try:
                    item = server.add_tool(
                        name, self._caller(d["name"]), input_schema=d["inputSchema"],
                        output_schema=d.get("outputSchema"), description=d.get("description"),
                        title=d.get("title"), annotations=d.get("annotations"), icons=d.get("icons"),
                        meta=d.get("_meta"), replace=True, **self.tool_options,
                    )
                except (ValueError, TypeError) as exc:  # an unusable schema or name from the backend
                    log.warning("bridge %s: tool %r skipped: %s", self.bridge.name, name, exc)
                    self._drop_tool(name)
                    continue
                self._tools[name] = text
                self._tool_items[name] = item
        return True

    @staticmethod
    def _may_take(current: Any, mine: Any) -> bool:
        """A name or URI is free, or holds what this mirror registered there."""
        return current is None or (mine is not None and current is mine)

    def _drop_tool(self, name: str) -> None:
        self._tools.pop(name, None)
        item = self._tool_items.pop(name, None)
        if item is not None and self.server.tools.get(name) is item:
            self.server.remove_tool(name)

    def _drop_resource(self, uri: str) -> None:
        self._resources.pop(uri, None)
        item = self._resource_items.pop(uri, None)
        found = self.server.find_resource(uri)
        if item is not None and found is not None and found[0] is item:
            self.server.remove_resource(uri)

    def _apply_resources(self, published: list[Any], templates: list[Any]) -> bool:
        server = self.server
        wanted: dict[str, tuple[str, dict[str, Any]]] = {}
        templates = [t for t in templates if isinstance(t, dict)]
        mine_t = {id(item) for item in self._template_items.values()}
        for r in published:
            if not (isinstance(r, dict) and isinstance(r.get("uri"), str) and isinstance(r.get("name"), str)):
                continue
            uri = r["uri"]
            if _is_template(uri):
                templates.append({"uriTemplate": uri, **{k: v for k, v in r.items() if k != "uri"}})
                continue
            found = server.find_resource(uri)
            current = found[0] if found is not None else None
            # a resource of the server's own, or a template of its own that answers this URI
            # (a concrete resource would be read in its place, RS-05), is never shadowed; one
            # of this mirror's templates is the backend's, which lists the resource as well
            if id(current) in mine_t:
                current = None
            if not self._may_take(current, self._resource_items.get(uri)):
                log.warning("bridge %s: resource %r is also served locally; the local one is kept",
                            self.bridge.name, uri)
                continue
            wanted[uri] = (_json.dumps_str(r), r)
        removed = [uri for uri in self._resources if uri not in wanted]
        changed = {u: v for u, v in wanted.items() if self._resources.get(u) != v[0]}
        wanted_t = self._wanted_templates(templates)
        removed_t = [t for t in self._templates if t not in wanted_t]
        changed_t = {t: v for t, v in wanted_t.items() if self._templates.get(t) != v[0]}
        if not (removed or changed or removed_t or changed_t):
            return False
        with server.batch_changes():  # resources and templates: one resources/list_changed
            for uri in removed:
                self._drop_resource(uri)
            for uri_template in removed_t:
                self._drop_template(uri_template)
            for uri_template, (text, t) in changed_t.items():
                try:
                    item = server.add_resource_template(
                        uri_template, self._template_reader(uri_template), name=t["name"], replace=True,
                        title=t.get("title"), description=t.get("description"), mime_type=t.get("mimeType"),
                        completions={v: self._completer(uri_template, v) for v in _variables(uri_template)})
                except (ValueError, TypeError) as exc:  # not an RFC 6570 template
                    log.warning("bridge %s: resource template %r skipped: %s", self.bridge.name, uri_template, exc)
                    self._drop_template(uri_template)
                    continue
                self._templates[uri_template] = text
                self._template_items[uri_template] = item
            for uri, (text, r) in changed.items():
                try:
                    item = server.add_resource(uri, self._reader(uri), name=r["name"], replace=True,
                                               title=r.get("title"), description=r.get("description"),
                                               mime_type=r.get("mimeType"))
                except ValueError as exc:  # not a URI (braces: a template listed as a resource)
                    log.warning("bridge %s: resource %r skipped: %s", self.bridge.name, uri, exc)
                    continue
                self._resources[uri] = text
                self._resource_items[uri] = item
        return True

    def _wanted_templates(self, templates: list[dict[str, Any]]) -> dict[str, tuple[str, dict[str, Any]]]:
        wanted: dict[str, tuple[str, dict[str, Any]]] = {}
        for t in templates:
            uri_template = t.get("uriTemplate")
            if not isinstance(uri_template, str):
                continue
            t = {**t, "name": t["name"] if isinstance(t.get("name"), str) else uri_template}
            current = next((x for x in self.server._templates if x.uri_template == uri_template), None)
            if not self._may_take(current, self._template_items.get(uri_template)):
                log.warning("bridge %s: resource template %r is also served locally; the local one is kept",
                            self.bridge.name, uri_template)
                continue
            wanted[uri_template] = (_json.dumps_str(t), t)
        return wanted

    def _drop_template(self, uri_template: str) -> None:
        self._templates.pop(uri_template, None)
        item = self._template_items.pop(uri_template, None)
        if item is not None and any(t is item for t in self.server._templates):
            self.server.remove_resource_template(uri_template)

    # ------------------------------------------------------------------ handlers

    def _caller(self, remote: str) -> Any:
        bridge, method = self.bridge, self.call_method

        async def call_backend(arguments: dict[str, Any], ctx: Any) -> Any:
            result = await bridge.request(method, {"name": remote, "arguments": arguments})
            if isinstance(result, dict) and isinstance(result.get("content"), list):
                return result  # a CallToolResult already (isError included)
            if isinstance(result, dict) or result is None:
                return {"content": [{"type": "text", "text": _json.dumps_str(result)}],
                        **({"structuredContent": result} if isinstance(result, dict) else {})}
            return {"content": [{"type": "text", "text": result if isinstance(result, str)
                                 else _json.dumps_str(result)}]}

        return call_backend

    async def _read(self, uri: str) -> Any:
        result = await self.bridge.request(self.read_method, {"uri": uri})
        if isinstance(result, dict) and isinstance(result.get("contents"), list):
            return result["contents"]
        return result

    def _reader(self, uri: str) -> Any:
        async def read_backend() -> Any:
            return await self._read(uri)

        return read_backend

    def _template_reader(self, uri_template: str) -> Any:
        from ..server.uritemplate import UriTemplate

        template = UriTemplate(uri_template)

        async def read_backend(**variables: Any) -> Any:
            # the URI the client asked for, as the backend published it (the mirror keeps URIs)
            return await self._read(template.expand(variables))

        return read_backend

    def _completer(self, uri_template: str, variable: str) -> Any:
        bridge, method = self.bridge, self.complete_method
        ref = {"type": "ref/resource", "uri": uri_template}

        async def complete(value: str, context: dict[str, Any]) -> Any:
            params: dict[str, Any] = {"ref": ref, "argument": {"name": variable, "value": value}}
            if context:
                params["context"] = {"arguments": context}
            try:
                result = await bridge.request(method, params)
            except ToolError as exc:
                if exc.code == E_UNSUPPORTED:  # a backend that completes nothing
                    return []
                raise
            completion = result.get("completion") if isinstance(result, dict) else None
            return completion if isinstance(completion, dict) else []

        return complete

    # ------------------------------------------------------------------ the first tools/list

    def _wrap_list(self) -> None:
        methods = self.server._methods
        plain = methods["tools/list"]
        mirror = self

        def tools_list(session: Any, req: Any) -> Any:
            if mirror.ready.is_set() or mirror.first_sync_timeout == 0:
                return plain(session, req)

            async def after_first_sync() -> Any:
                deadline = asyncio.get_running_loop().time() + mirror.first_sync_timeout
                while not mirror.ready.is_set() and asyncio.get_running_loop().time() < deadline:
                    await asyncio.sleep(0.05)
                if not mirror.ready.is_set():
                    reason = mirror.bridge.last_error or "no answer yet"
                    print(f"mcpkit: tools/list answered before the first sync with {mirror.bridge.name} "
                          f"(waited {mirror.first_sync_timeout:g} s; {reason}); its tools are listed "
                          f"once it is reachable", file=sys.stderr, flush=True)
                return plain(session, req)

            return after_first_sync()

        methods["tools/list"] = tools_list


def _variables(uri_template: str) -> tuple[str, ...]:
    from ..server.uritemplate import UriTemplate

    return UriTemplate(uri_template).variables
