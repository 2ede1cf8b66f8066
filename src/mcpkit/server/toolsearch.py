"""Tool search: a small search/call pair listed instead of a large catalog.

A server (or ``mcpkit proxy``) with hundreds of tools spends much of a model's context on
``tools/list``. With ``Server(tool_search=ToolSearch(...))`` a client's ``tools/list`` shows only
the pinned tools and two more: ``search_tools`` (a query in words, the best-matching tool
definitions back, ranked by BM25) and ``call_tool`` (a tool found that way, by name, with its
arguments). docs/tool-search.md says how hosts use it and how a host gets the full list.

No side path (TL-11):

- ``search_tools`` searches what ``tools/list`` would show the caller in full: it runs the
  caller's own tools/list pipeline (gates, bridges, user middleware that filters lists,
  ``host_schemas``), then leaves out the tools whose scopes the caller's token lacks. A tool
  hidden from the caller is never found.
- ``call_tool`` is never a tool of its own: a ``tools/call`` of it is read as a ``tools/call``
  of the tool it names before anything else (the server's tools/call handler while tool search
  is on, and the HTTP transport's scope check), so the call is validated, gated, rate-limited,
  audited and answered exactly as the named tool called directly, including the error for a
  name that is unknown or hidden.

The ranking is the ``bm25s`` package's BM25 (``mcpkit[search]``), imported when tool search is
first turned on. The index is built from the caller's visible list and kept while that list is
the same, so it follows every catalog change (``list_changed``) without being told.
"""

from __future__ import annotations

import fnmatch
import inspect
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._extras import needs, require
from ..protocol.errors import INVALID_PARAMS, McpError
from ..protocol.meta import FULL_TOOL_LIST
from .pipeline import CallContext
from .tools import validate_tool_name

if TYPE_CHECKING:
    from ..protocol.engine import RequestReceived

__all__ = ["FULL_LIST_META", "ToolSearch", "install"]

#: ``tools/list`` with ``params._meta`` carrying this key set to true gets the whole catalog
FULL_LIST_META = FULL_TOOL_LIST
#: CallContext.state key a list made for the search carries, so the terminal lists in full
_FOR_SEARCH = "toolSearch"

_WORD = re.compile(r"[^\W_]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_MAX_LIMIT = 50
#: what the search tool returns: the tools found, as tools/list shows them
_OUTPUT = {"type": "object", "properties": {"tools": {"type": "array", "items": {"type": "object"}}},
           "required": ["tools"]}


class ToolSearch:
    """What ``Server(tool_search=...)`` takes: list ``pinned`` tools and a search/call pair.

    ``pinned``: tool names or fnmatch globs listed as they are beside the pair (and left out of
    the search, since the host has them). ``limit``: how many tools a search returns unless the
    model asks for fewer or more (at most 50). ``full_list_clients``: globs of ``clientInfo.name``
    (e.g. ``"claude-code"``, a host with a tool search of its own) that are listed the whole
    catalog. ``search_name`` and ``call_name`` name the pair.
    """

    def __init__(self, *, pinned: Sequence[str] = (), limit: int = 5, full_list_clients: Sequence[str] = (),
                 search_name: str = "search_tools", call_name: str = "call_tool") -> None:
        if isinstance(pinned, str) or isinstance(full_list_clients, str):
            raise TypeError("pinned and full_list_clients are lists of names or globs, not one string")
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= _MAX_LIMIT:
            raise ValueError(f"limit must be an integer from 1 to {_MAX_LIMIT}, got {limit!r}")
        validate_tool_name(search_name)
        validate_tool_name(call_name)
        if search_name == call_name:
            raise ValueError("search_name and call_name must differ")
        self.pinned = tuple(pinned)
        self.limit = limit
        self.full_list_clients = tuple(full_list_clients)
        self.search_name = search_name
        self.call_name = call_name
        self._indexes: OrderedDict[tuple[str, ...], Any] = OrderedDict()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ToolSearch(pinned={list(self.pinned)!r}, limit={self.limit})"

    # ------------------------------------------------------------------ listing

    def is_pinned(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, glob) for glob in self.pinned)

    def wants_full(self, cc: CallContext) -> bool:
        """Whether this tools/list shows the whole catalog: a list made for the search, one whose
        ``_meta`` asks for it (FULL_LIST_META), or one of a client ``full_list_clients`` names."""
        if cc._state is not None and cc._state.get(_FOR_SEARCH):
            return True
        meta = (cc.arguments or {}).get("_meta") if isinstance(cc.arguments, dict) else None
        if isinstance(meta, dict) and meta.get(FULL_LIST_META) is True:
            return True
        if self.full_list_clients:
            client = (cc.request.client_info or {}).get("name")
            if isinstance(client, str) and any(fnmatch.fnmatchcase(client, g) for g in self.full_list_clients):
                return True
        return False

    def listed(self, items: list[dict[str, Any]], full: bool, host: str | None = None) -> list[dict[str, Any]]:
        """What tools/list shows of ``items`` (the visible tools): all but the search tool in full,
        else the pinned tools, then the search tool and the call tool. A tool only an MCP App's
        view calls (``_meta.ui.visibility`` without "model") is listed too: hosts keep it from
        the model, and the view can call only what its host was listed."""
        if full:
            return [d for d in items if d.get("name") != self.search_name]
        out = [d for d in items if d.get("name") != self.search_name and (self.is_pinned(d.get("name", ""))
                                                                          or _app_only(d))]
        out.extend(d for d in items if d.get("name") == self.search_name)  # hidden when the gates hide it
        out.append(self.call_descriptor(as_text=host == "openai-strict"))
        return out

    def call_descriptor(self, as_text: bool = False) -> dict[str, Any]:
        """The call tool as listed. ``as_text``: its ``arguments`` a JSON text, for OpenAI's strict
        mode, which cannot take an object of keys it does not know (mcpkit/hosts.py)."""
        if as_text:
            arguments = {"type": "string", "description": "The tool's arguments, per its inputSchema, as the "
                                                          "text of a JSON object, e.g. {\"path\": \"a.txt\"}."}
            required = ["name", "arguments"]
        else:
            arguments = {"type": "object", "description": "The tool's arguments, per its inputSchema."}
            required = ["name"]
        return {
            "name": self.call_name,
            "description": (f"Call a tool found with {self.search_name} by its name, with its arguments. "
                            "The call is checked and answered as a direct call of that tool."),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": f"The tool's name, as {self.search_name} gave it."},
                    "arguments": arguments,
                },
                "required": required,
                "additionalProperties": False,
            },
        }

    # ------------------------------------------------------------------ calling

    def unwrap(self, req: RequestReceived, params: dict[str, Any]) -> tuple[dict[str, Any] | None, Any]:
        """``(params, None)``: the params of a tools/call of the call tool, as those of a direct
        call of the tool it names (the request's ``_meta`` and ``task`` kept). ``(None, result)``
        when its own arguments are of the wrong shape: the isError result of invalid arguments
        (TL-10, 2025-11-25 on), or -32602 raised before."""
        arguments = params.get("arguments")
        if isinstance(arguments, dict) and isinstance(arguments.get("arguments"), str):
            # the JSON text OpenAI's strict mode sends (call_descriptor)
            arguments = {**arguments, "arguments": _object_of(arguments["arguments"])}
        problem = None
        if not isinstance(arguments, dict):
            problem = "arguments must be an object with 'name' and 'arguments'"
        elif not isinstance(arguments.get("name"), str):
            problem = "/name: a string is required"
        elif arguments.get("arguments") is not None and not isinstance(arguments.get("arguments"), dict):
            problem = "/arguments: must be an object (or, from a strict host, the text of one)"
        elif set(arguments) - {"name", "arguments"}:
            extra = ", ".join(sorted(set(arguments) - {"name", "arguments"}))
            problem = f"unexpected {extra}: give 'name' and 'arguments'"
        if problem is not None:
            message = f"Invalid arguments for tool {self.call_name!r}: {problem}"
            if req.revision.invalid_arguments_as_tool_error:
                return None, {"content": [{"type": "text", "text": message}], "isError": True}
            raise McpError(INVALID_PARAMS, message)
        inner = {k: v for k, v in params.items() if k not in ("name", "arguments")}
        inner["name"] = arguments["name"]
        inner["arguments"] = arguments.get("arguments") or {}
        return inner, None

    def named(self, arguments: Any) -> dict[str, Any] | None:
        """The params of a direct call of the tool a call tool's ``arguments`` name (their JSON
        text read), or None when they name none: for the routes that only need to know which tool
        is called (the HTTP scope check, a nested call)."""
        if not isinstance(arguments, dict) or not isinstance(arguments.get("name"), str):
            return None
        inner = arguments.get("arguments")
        if isinstance(inner, str):
            inner = _object_of(inner)
        return {"name": arguments["name"], "arguments": {} if inner is None else inner}

    # ------------------------------------------------------------------ searching

    def input_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What you want to do, in a few words."},
                "limit": {"type": "integer", "minimum": 1, "maximum": _MAX_LIMIT, "default": self.limit,
                          "description": "How many tools to return at most."},
            },
            "required": ["query"],
            "additionalProperties": False,
        }

    def description(self) -> str:
        return (f"Search this server's tools: give what you want to do in words, get the best-matching tools' "
                f"names, descriptions and input schemas. Call one with {self.call_name}.")

    async def handler(self, arguments: dict[str, Any], ctx: Any) -> dict[str, Any]:
        """The search tool: the caller's visible tools, ranked for the query."""
        tools = await visible_tools(ctx)
        tools = [t for t in tools if t.get("name") != self.search_name and not self.is_pinned(t.get("name", ""))
                 and not _app_only(t)]  # the model is never offered what its host keeps from it
        limit = arguments.get("limit", self.limit)
        found = self.rank(tools, arguments["query"], limit)
        return {"tools": [_brief(t) for t in found]}

    def rank(self, tools: list[dict[str, Any]], query: str, limit: int) -> list[dict[str, Any]]:
        """The at most ``limit`` tools of ``tools`` that match ``query`` best, best first; none
        when no word of the query is in any tool."""
        if not tools:
            return []
        texts = tuple(document(t) for t in tools)
        index = self._index(texts)
        words = tokens(query)
        if not words:
            return []
        results, scores = index.retrieve([words], k=min(limit, len(tools)), show_progress=False,
                                         n_threads=1)
        return [tools[int(i)] for i, s in zip(results[0], scores[0]) if s > 0]

    def _index(self, texts: tuple[str, ...]) -> Any:
        """The BM25 index of these documents: kept (a few, most recent) while the catalog stays
        the same, built again from the new documents once it changes."""
        with self._lock:
            index = self._indexes.get(texts)
            if index is not None:
                self._indexes.move_to_end(texts)
                return index
        with needs("search", "tool search"):
            import bm25s
        quiet = logging.getLogger("bm25s")
        if quiet.level == logging.NOTSET:  # its DEBUG line per index would reach a server's stderr log
            quiet.setLevel(logging.WARNING)
        index = bm25s.BM25()
        index.index([tokens(text) for text in texts], show_progress=False)
        with self._lock:
            self._indexes[texts] = index
            while len(self._indexes) > 4:  # a few views (profiles, scopes) of one catalog
                self._indexes.popitem(last=False)
        return index


def install(server: Any, value: Any) -> None:
    """``server.tool_search = value``: a ToolSearch, True (``ToolSearch()``) or None (off). The
    search tool is registered as a tool of the server (its pipeline, its audit); the call tool is
    never one (:class:`_CallThroughPair` reads a call of it as one of the tool it names)."""
    if value is True:
        value = ToolSearch()
    elif value is not None and not isinstance(value, ToolSearch):
        raise TypeError(f"tool_search= takes a ToolSearch, True or None, not {value!r}")
    old = server._tool_search
    if value is not None:
        ours = old.search_name if old is not None else None
        for name, option in ((value.call_name, "call_name"), (value.search_name, "search_name")):
            if name in server._tools and name != ours:
                raise ValueError(f"tool_search: a tool is named {name!r} already; give ToolSearch another {option} "
                                 "(mcpkit proxy: give the upstream a prefix)")
        require(("tool search", "search"))  # the ranking's package, named now rather than at a search
    methods = server._methods
    if value is not None and not isinstance(methods["tools/call"], _CallThroughPair):
        methods["tools/call"] = _CallThroughPair(methods["tools/call"])
    elif value is None and isinstance(methods["tools/call"], _CallThroughPair):
        methods["tools/call"] = methods["tools/call"].plain
    with server.batch_changes():
        if old is not None and old.search_name in server._tools:
            server.remove_tool(old.search_name)
        server._tool_search = value
        if value is not None:
            server.add_tool(value.search_name, value.handler, input_schema=value.input_schema(),
                            description=value.description(), read_only=True, destructive=False, idempotent=True,
                            open_world=False, output_schema=_OUTPUT)
        server._changed("tools")


class _CallThroughPair:
    """The tools/call handler of a server with tool search: a call of the call tool is read as a
    direct call of the tool it names before the plain handler (dispatch.call_tool) sees it, so the
    call takes that tool's one pipeline and gets its answers (TL-11). It is in the server's method
    table only while tool search is on: a server without it pays nothing per call."""

    def __init__(self, plain: Any) -> None:
        self.plain = plain

    def __call__(self, session: Any, req: Any) -> Any:
        search = session.server._tool_search
        params = req.params
        if search is not None and type(params) is dict and params.get("name") == search.call_name:
            inner, refused = search.unwrap(req, params)
            if inner is None:
                return refused
            req.params = inner
        return self.plain(session, req)


def document(tool: dict[str, Any]) -> str:
    """The text a tool is found by: its name, title, description, and its parameters' names and
    descriptions (what a model reads to choose a tool)."""
    parts = [str(tool.get("name", "")), str(tool.get("title") or ""), str(tool.get("description") or "")]
    schema = tool.get("inputSchema")
    props = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(props, dict):
        for key, prop in props.items():
            parts.append(str(key))
            if isinstance(prop, dict) and isinstance(prop.get("description"), str):
                parts.append(prop["description"])
    return " ".join(parts)


def tokens(text: str) -> list[str]:
    """Lower-case words, identifiers split (``get_file_contents``, ``listIssues``), English
    stop words left out (bm25s's own list)."""
    with needs("search", "tool search"):
        from bm25s.stopwords import STOPWORDS_EN as STOPWORDS

    out = []
    for word in _WORD.findall(_CAMEL.sub(" ", text)):
        word = word.lower()
        if len(word) > 1 and word not in STOPWORDS:
            out.append(word)
    return out


def _object_of(text: str) -> Any:
    """The object a JSON text of arguments holds, or the text itself (refused as no object)."""
    import json

    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        return text
    return value if isinstance(value, dict) else text


def _app_only(tool: dict[str, Any]) -> bool:
    """A tool hosts keep from the model: for an MCP App's view alone (server/apps.py)."""
    ui = (tool.get("_meta") or {}).get("ui") if isinstance(tool.get("_meta"), dict) else None
    visibility = ui.get("visibility") if isinstance(ui, dict) else None
    return isinstance(visibility, list) and "model" not in visibility


def _brief(tool: dict[str, Any]) -> dict[str, Any]:
    """What a search returns of a tool: what a model needs to call it."""
    return {k: tool[k] for k in ("name", "title", "description", "inputSchema", "annotations") if k in tool}


async def visible_tools(ctx: Any) -> list[dict[str, Any]]:
    """Every tool the caller of ``ctx`` would be listed in full, by the caller's own tools/list
    pipeline (gates, bridges, middleware, host schemas), less those its token lacks scopes for."""
    from .pipes import pipe_of

    session, req = ctx._session, ctx._request
    server = session.server
    tools: list[dict[str, Any]] = []
    cursor = None
    for _ in range(10_000):  # a page at a time, as a client would; a middleware loop cannot hang it
        cc = CallContext(session, req, "list_tools", None, None, {} if cursor is None else {"cursor": cursor})
        cc.state[_FOR_SEARCH] = True
        page = pipe_of(server, "list_tools", None).run(cc)
        if inspect.isawaitable(page):
            page = await page
        tools.extend(t for t in page.get("tools", ()) if isinstance(t, dict))
        cursor = page.get("nextCursor")
        if not cursor:
            break
    return _within_scopes(server, ctx, tools)


def _within_scopes(server: Any, ctx: Any, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Leave out what the caller's token lacks scopes for: the search never offers a tool the
    caller would be refused (the call itself is still checked in its pipeline)."""
    step = server._installed.get("scopes")
    token = ctx.access_token if step is not None else None
    if token is None:
        return tools
    from .pipeline import scopes_for

    out = []
    for listed in tools:
        tool = server._tools.get(listed.get("name"))
        needed = scopes_for(tool, None) if tool is not None else ()
        if needed and step.auth.missing(token, needed):
            continue
        out.append(listed)
    return out
