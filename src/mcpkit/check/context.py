"""What a rule is handed: the connection (or the whole run, for server rules), and helpers."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

from ..protocol import revisions
from .model import Finding, Rule
from .wire import PROGRESS_PREFIX, Wire

__all__ = ["CheckContext", "Options", "Probe", "Skip", "RULE_TIMEOUT", "describe", "read_only"]

#: paginated list method -> (result key, the capability it needs)
LISTS = {
    "tools/list": ("tools", "tools"),
    "resources/list": ("resources", "resources"),
    "resources/templates/list": ("resourceTemplates", "resources"),
    "prompts/list": ("prompts", "prompts"),
}
#: the longest a single request of a rule may take
RULE_TIMEOUT = 10.0


class Skip(Exception):
    """Raised by a rule that does not apply; the reason is reported."""


@dataclass
class Options:
    target: Any
    transport: str
    headers: dict[str, str] = field(default_factory=dict)
    #: --call-tools: the rules may call the tools annotated readOnlyHint: true
    call_read_only: bool = False
    #: --safe-tool: name patterns (fnmatch) of further tools the user marks safe to call with
    #: made-up arguments (a tool that changes a list, one that requires a task)
    safe_tools: tuple[str, ...] = ()
    conformance: bool = False
    timeout: float = RULE_TIMEOUT
    #: the transport argument the Client gets ("auto", "stdio", "http", "sse", "memory")
    client_transport: str = "auto"
    #: a command's environment beyond the allow-list (mcpkit.client.environment): True or names
    inherit_env: bool | list[str] | None = None
    #: variables set for a command's server (run_checks(env=...))
    env: dict[str, str] = field(default_factory=dict)
    #: the hosts whose hosts.* rules run (mcpkit/hosts.py; --hosts)
    hosts: tuple[str, ...] = ("claude", "openai", "gemini")
    #: --pin: the lockfile security.pin-drift compares the server with, and the server's key in it
    pin: str | None = None
    pin_key: str = "default"
    #: how long a modern probe may wait for an answer: STARTUP_TIMEOUT until a handshake has
    #: answered, then in proportion to its start-up; how long a process gets to exit at EOF (the same)
    handshake_floor: float = 0.0
    eof_grace: float = 5.0
    #: start-ups running at once per core after the first (they share the CPU: each takes longer)
    contention: float = 1.0
    #: handshakes still waiting for their answer, and when the last one got its outcome (monotonic
    #: seconds): a modern probe waits while start-ups beside it are under way
    starting: int = 0
    last_answer: float = 0.0
    #: set once the first connection has answered: the revision the server answered it with (the
    #: one offered, or its own newest), "" for no answer; rules that read what every revision
    #: lists alike (the poisoning scan) run on that connection only
    first_answer: str | None = None
    #: the revision of the first connection, and an event set once its handshake has an outcome
    #: (the connections run side by side: a rule that needs first_answer waits for it)
    first_offered: str | None = None
    first_settled: Any = None
    #: the tools the rules called: {"tool", "revision", "why"} (the report lists them)
    tools_called: list[dict[str, Any]] = field(default_factory=list)

    @property
    def calls_tools(self) -> bool:
        """Some tool may be called: --call-tools, or a --safe-tool pattern."""
        return self.call_read_only or bool(self.safe_tools)

    async def settled_first_answer(self) -> str | None:
        """first_answer, once the first connection's handshake has an outcome."""
        if self.first_answer is None and self.first_settled is not None:
            await self.first_settled.wait()
        return self.first_answer


@dataclass
class Probe:
    """One connection attempt offering ``offered``: what the server answered."""

    offered: str
    #: the revision the server answered (initialize's protocolVersion; the offered one for a
    #: successful server/discover), or None
    answered: str | None = None
    #: the initialize (or server/discover) result
    result: Any = None
    #: why the connection failed, and the exception
    error: str | None = None
    exception: BaseException | None = None
    #: the JSON-RPC error code when the server refused with an error response
    code: Any = None
    #: stdout lines that were not JSON-RPC messages, when the handshake failed (stdio)
    noise: list[bytes] = field(default_factory=list)
    #: the handshake got no answer because the checker could not reach the server at all
    #: (not started, connection refused, exited before answering): not a compliance finding
    unreachable: bool = False
    #: stdio: seconds the server took to exit once its stdin was closed; None when it had not
    #: exited after the grace period (and was terminated); unset (-1) when not measured
    eof_exit: float | None = -1.0
    #: the grace period eof_exit was measured against
    eof_grace: float = 0.0
    #: seconds from the start of the connection to the handshake's answer
    handshake_time: float | None = None
    #: every message the server sent on the connection, judged as it arrived (check/wire.py)
    wire: Wire = field(default_factory=Wire)

    @property
    def accepted(self) -> bool:
        return self.answered == self.offered and self.error is None


class CheckContext:
    """One rule's view. ``client`` and ``revision`` are set for connection rules; server rules
    get ``probes``: offered revision -> :class:`Probe` (plus "unknown" for a made-up revision)."""

    def __init__(
        self, options: Options, *, client: Any = None, revision: str | None = None,
        probes: dict[str, Probe] | None = None, wire: Wire | None = None,
    ) -> None:
        self.options = options
        #: this connection's wire (connection rules): what the server sent, as it arrived
        self.wire = wire if wire is not None else Wire()
        self.client = client
        self.revision = revision
        self.probes = probes or {}
        self.rule: Rule | None = None
        #: shared by the rules of one connection (the runner makes one context per connection)
        self.cache: dict[str, Any] = {}

    # ------------------------------------------------------------------ facts

    @property
    def transport(self) -> str:
        return self.options.transport

    @property
    def timeout(self) -> float:
        return self.options.timeout

    @property
    def rev(self) -> revisions.Revision:
        """The revision row of this connection."""
        assert self.revision is not None
        return revisions.get(self.revision)

    @property
    def modern(self) -> bool:
        return self.rev.era == "modern"

    def since(self, version: str) -> bool:
        """True when this connection's revision is ``version`` or later."""
        order = revisions.SUPPORTED_VERSIONS
        return order.index(self.revision or order[-1]) >= order.index(version)

    def capability(self, *path: str) -> Any:
        """The declared capability at ``path`` (e.g. ("resources", "subscribe")), or None."""
        node: Any = self.client.server_capabilities if self.client is not None else None
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return node

    def has(self, *path: str) -> bool:
        value = self.capability(*path)
        return value is not None and value is not False

    # ------------------------------------------------------------------ findings

    def _finding(self, status: str, message: str, revision: str | None, detail: dict[str, Any]) -> Finding:
        assert self.rule is not None
        where = revision or self.revision
        return Finding(self.rule.id, self.rule.severity_at(where), status, message, where, detail)

    def fail(self, message: str, *, revision: str | None = None, **detail: Any) -> Finding:
        return self._finding("fail", message, revision, detail)

    def ok(self, message: str, *, revision: str | None = None, **detail: Any) -> Finding:
        return self._finding("pass", message, revision, detail)

    @property
    def supported(self) -> list[str]:
        """The revisions the server accepted when offered (server rules)."""
        return [v for v, p in self.probes.items() if p.accepted]

    def skip(self, reason: str) -> Skip:
        """``raise ctx.skip("why")``."""
        return Skip(reason)

    # ------------------------------------------------------------------ requests

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return await self.client.request(method, params, timeout=self.timeout)

    async def listing(self, method: str, key: str) -> list[dict[str, Any]]:
        """Every item of a paginated list (cached per connection). A failing list is not this
        rule's business: the rule is skipped (capabilities.backed and pagination.cursor report it)."""
        if method in self.cache:
            items = self.cache[method]
        else:
            try:
                items = await self.read_list(method, key)
            except Exception as exc:  # noqa: BLE001 - any failure is reported by the list's own rules
                items = exc
            self.cache[method] = items
        if isinstance(items, Exception):
            raise Skip(f"{method} failed ({_describe(items)}); see capabilities.backed and pagination.cursor")
        return items

    async def read_list(self, method: str, key: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor: Any = None
        for _ in range(1000):
            result = await self.request(method, {"cursor": cursor} if cursor is not None else None)
            page = result.get(key) if isinstance(result, dict) else None
            if not isinstance(page, list):
                raise ValueError(f"the result has no {key!r} array")
            items.extend(i for i in page if isinstance(i, dict))
            cursor = result.get("nextCursor")
            if cursor is None:
                return items
        raise ValueError("more than 1000 pages")

    async def first_pages(self) -> dict[str, Any]:
        """The first page of every declared paginated list: method -> result, or the exception it
        raised (cached per connection)."""
        pages = self.cache.get("first-pages")
        if pages is None:
            pages = {}
            for method, (_, capability) in LISTS.items():
                if self.has(capability):
                    try:
                        pages[method] = await self.request(method)
                    except Exception as exc:  # noqa: BLE001
                        pages[method] = exc
            self.cache["first-pages"] = pages
        return pages

    async def all_pages(self, method: str) -> list[Any]:
        """Every page of a declared list as the server answered it, from the first page of
        :meth:`first_pages` on, following nextCursor (at most 100 pages; cached per connection). A
        page that failed ends the walk (pagination.cursor reports it)."""
        walked = self.cache.setdefault("all-pages", {})
        if method not in walked:
            pages: list[Any] = []
            page = (await self.first_pages()).get(method)
            seen: set[str] = set()
            while isinstance(page, dict) and len(pages) < 100:
                pages.append(page)
                cursor = page.get("nextCursor")
                if not isinstance(cursor, str) or cursor in seen:
                    break
                seen.add(cursor)
                try:
                    page = await self.request(method, {"cursor": cursor})
                except Exception:  # noqa: BLE001 - pagination.cursor's finding
                    break
            walked[method] = pages
        return walked[method]  # type: ignore[no-any-return]

    async def call_tool(self, tool: dict[str, Any], arguments: dict[str, Any], why: str) -> Any:
        """tools/call of ``tool``: only for a tool annotated readOnlyHint: true under
        --call-tools, or one a --safe-tool pattern names (the checker runs nothing else). Raises
        Skip otherwise; returns the result, or raises what the request raised."""
        name = tool.get("name")
        if not self.may_call(tool):
            if not self.options.calls_tools:
                raise Skip("calling tools is off (pass --call-tools to call the tools annotated readOnlyHint, "
                           "--safe-tool NAME for others)")
            raise Skip(f"tool {name!r} is not annotated readOnlyHint: true nor named by --safe-tool; the checker "
                       "does not call it")
        self.options.tools_called.append({"tool": name, "revision": self.revision, "why": why})
        # a progress token of the checker's own: the progress rules judge what comes back for it (PR-02, PR-03)
        token = f"{PROGRESS_PREFIX}{len(self.options.tools_called)}"
        self.wire.sent_token(token)
        return await self.client.request(
            "tools/call", {"name": name, "arguments": arguments, "_meta": {"progressToken": token}},
            timeout=self.timeout, fulfil_inputs=False,
        )

    def may_call(self, tool: dict[str, Any]) -> bool:
        """``tool`` may be called: annotated readOnlyHint with --call-tools, or named by a
        --safe-tool pattern (the user vouches that running it changes nothing that matters)."""
        name = tool.get("name")
        if self.options.call_read_only and read_only(tool):
            return True
        return isinstance(name, str) and any(fnmatch.fnmatchcase(name, p) for p in self.options.safe_tools)

    async def tools(self) -> list[dict[str, Any]]:
        if not self.has("tools"):
            raise Skip("the server declares no tools capability")
        return await self.listing("tools/list", "tools")


def read_only(tool: dict[str, Any]) -> bool:
    """The tool says it changes nothing (annotations.readOnlyHint is true)."""
    annotations = tool.get("annotations")
    return isinstance(annotations, dict) and annotations.get("readOnlyHint") is True


def _describe(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    if code is not None and hasattr(exc, "message"):
        return f"error {code}: {getattr(exc, 'message', '')}"
    return f"{type(exc).__name__}: {exc}"


def describe(exc: BaseException) -> str:
    """A short text for an exception a request raised."""
    return _describe(exc)
