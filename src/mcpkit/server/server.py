"""Server: the registries of tools, resources, templates and prompts, and their decorators.

Registration, removal and replacement work at any time; each change sends the
matching ``notifications/*/list_changed`` to every initialized session
(TL-13, RS-09, PM-07). What a revision may see of each item is filtered here,
from the revision table, and cached per revision until the next change.
"""

from __future__ import annotations

import base64
import contextlib
import inspect
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypedDict, TypeVar, Unpack

from ..protocol.errors import INVALID_PARAMS, McpError
from ..protocol.meta import check_icons
from ..protocol.revisions import Revision
from .context import Context
from .dispatch import METHODS
from .features import FEATURE_OF_KIND, FEATURES
from .pipeline import as_middleware, policy_layer
from .prompts import Prompt
from .resources import Resource, ResourceTemplate
from .schema import _identity as _identity_bind
from .schema import function_description, input_spec, output_spec
from .tools import Tool, annotations_from_hints

__all__ = ["Server"]

log = logging.getLogger("mcpkit")

F = TypeVar("F", bound=Callable[..., Any])

_LIST_KEYS = {"tools": "tools", "resources": "resources", "resourceTemplates": "resourceTemplates", "prompts": "prompts"}
_CHANGED = {
    "tools": "notifications/tools/list_changed",
    "resources": "notifications/resources/list_changed",
    "resourceTemplates": "notifications/resources/list_changed",
    "prompts": "notifications/prompts/list_changed",
}


def _pick(item: dict[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k in keys}


def _pick_annotated(item: dict[str, Any], keys: frozenset[str], rev: Revision) -> dict[str, Any]:
    """Like _pick, and RS-11: annotation keys the revision does not define are left out."""
    out = _pick(item, keys)
    ann = out.get("annotations")
    if isinstance(ann, dict) and not rev.annotation_keys.issuperset(ann):
        out["annotations"] = {k: v for k, v in ann.items() if k in rev.annotation_keys}
    return out


class Server:
    """An MCP server. Register tools, resources and prompts, then :meth:`run` it."""

    def __init__(
        self,
        name: str,
        version: str = "0.1.0",
        *,
        title: str | None = None,
        description: str | None = None,
        instructions: str | None = None,
        website_url: str | None = None,
        icons: list[dict[str, Any]] | None = None,
        page_size: int | None = None,
        log_level: str = "info",
        max_workers: int | None = None,
        max_workers_per_client: int | None = None,
        client_request_timeout: float = 300.0,
        cache_ttl_ms: int = 0,
        cache_scope: str = "public",
        state_key: bytes | str | None = None,
        task_ttl_ms: int = 300_000,
        policy: Any = None,
        stores: Any = None,
        advertise: Sequence[str] = (),
        middleware: Sequence[Any] = (),
    ) -> None:
        if page_size is not None and page_size < 1:
            raise ValueError("page_size must be a positive integer or None")
        self.name = name
        self.version = version
        self.title = title
        self.description = description
        self.instructions = instructions
        self.website_url = website_url
        self.icons = check_icons(icons, "server")
        self.page_size = page_size
        #: the level below which notifications/message are not sent before logging/setLevel (LG-02)
        self.log_level = log_level
        self.client_request_timeout = client_request_timeout
        _check_cache(cache_ttl_ms, cache_scope)
        #: CA-01: how long 2026-07-28 clients may reuse list, read and discover results
        self.cache_ttl_ms = cache_ttl_ms
        self.cache_scope = cache_scope
        self._state_key = state_key
        self._sealer: Any = None
        if not isinstance(task_ttl_ms, int) or isinstance(task_ttl_ms, bool) or task_ttl_ms < 1:
            raise ValueError("task_ttl_ms must be a positive integer")
        #: how long a task stays readable after its last change, in ms (TX-04)
        self.task_ttl_ms = task_ttl_ms
        self._tasks_manager: Any = None
        self._max_workers = max_workers
        self._max_workers_per_client = max_workers_per_client
        self._executor: Any = None
        self._tools: dict[str, Tool] = {}
        self._resources: dict[str, Resource] = {}
        self._apps: set[str] = set()  # URIs of the MCP App views (server/apps.py)
        #: what watches every request and notification (mcpkit.observe: traces, metrics); None: nothing
        self.observer: Any = None
        self._templates: list[ResourceTemplate] = []
        self._prompts: dict[str, Prompt] = {}
        self._completer: Callable[..., Any] | None = None
        self._notification_handlers: dict[str, Callable[..., Any]] = {}
        self._methods = dict(METHODS)
        self._cache: dict[tuple[str, str], list[dict[str, Any]]] = {}
        # bumped on every registry change: a list built while another thread changed the
        # registries (a bridge's mirror) is answered but not cached
        self._cache_gen = 0
        self._sessions: set[Any] = set()
        self._listeners: set[Any] = set()  # open subscriptions/listen streams (2026-07-28)
        self._warmed = False
        self._policy: Any = None
        #: the state stores (mcpkit.stores): given, or from MCPKIT_STORE on first use
        self._stores: Any = stores
        self._bus_listening = False
        self._bridges: dict[int, Any] = {}
        self._tool_limiter: Any = None
        self._logs_guarded = False
        #: the request pipeline (server/pipeline.py): user middleware, steps a transport
        #: installed, and each item's chained steps, built on first use
        self._middleware: list[Any] = []
        self._installed: dict[str, Any] = {}
        self._tool_pipes: dict[Any, Any] = {}
        self._pipes: dict[tuple[str, Any], Any] = {}
        self._batch: tuple[int, set[str]] | None = None  # (thread, kinds) of batch_changes
        self._batch_lock = threading.RLock()
        self.policy = policy
        unknown = set(advertise) - FEATURES
        if unknown:
            raise ValueError(f"advertise= takes {sorted(FEATURES)}, not {sorted(unknown)}")
        #: features declared even while nothing of them is registered (LC-06): a server that adds
        #: tools, resources or prompts at run time names them here so early sessions know of them
        self._advertise = frozenset(advertise)
        for mw in middleware:
            self.add_middleware(mw)

    # ------------------------------------------------------------------ the pipeline

    def add_middleware(self, middleware: Any, *, hook: str | None = None) -> Any:
        """Run ``middleware`` around every handler call it has a hook for (server/pipeline.py,
        docs/middleware.md): an object with ``on_call_tool``, ``on_read_resource``... hooks, or
        a function ``(ctx, call_next)`` for ``hook`` ("on_request" when not given). Middleware
        added first runs further out. Returns what was added."""
        mw = as_middleware(middleware, hook)
        self._middleware.append(mw)
        self._rebuild()
        return middleware

    def remove_middleware(self, middleware: Any) -> None:
        kept = [m for m in self._middleware if m is not middleware and getattr(m, "_fn", None) is not middleware]
        if len(kept) == len(self._middleware):
            raise KeyError(f"{middleware!r} is not middleware of this server")
        self._middleware = kept
        self._rebuild()

    def _install_step(self, key: str, step: Any) -> None:
        """A step a layer above installs (the scope check of an authenticated transport)."""
        self._installed[key] = step
        self._rebuild()

    def _rebuild(self) -> None:
        """Each item's steps are chosen again on its next use."""
        self._tool_pipes = {}
        self._pipes = {}

    # ------------------------------------------------------------------ policy (mcpkit.policy)

    @property
    def policy(self) -> Any:
        """The :class:`mcpkit.policy.Policy` enforced on every tool call, or None."""
        return self._policy

    @policy.setter
    def policy(self, policy: Any) -> None:
        if policy is None and os.environ.get("MCPKIT_POLICY", "").strip():
            policy = policy_layer().resolve(None)  # MCPKIT_POLICY=1: Policy.secure()
        elif policy is not None:
            policy = policy_layer().resolve(policy)  # True: Policy.secure(); False: none
        self._policy = policy
        if policy is not None and policy.rate_limiter is not None and self.shared:
            # several processes: the buckets live in the shared store, so a limit is global
            policy.rate_limiter.store = self.stores.rates
        for tool in self._tools.values():
            self._apply_policy(tool)
        self._rebuild()
        self._changed("tools")

    @property
    def gates(self) -> Any:
        return self._policy.gates if self._policy is not None else None

    def _apply_policy(self, tool: Tool) -> None:
        """Make what a tool advertises match what the policy will enforce on it."""
        if self._policy is None and tool.options is None and tool.actions is None:
            tool.set_output_schema(tool.base_output_schema)
            return
        policy_layer().advertise(self, tool)

    def _contract_spec(self, tool: Tool) -> None:
        """A function tool's own value schema and dump, unwrapped, for a contract envelope."""
        if tool.result_dump is None:
            tool.result_schema, tool.result_dump = _result_spec(_return_hint(tool.handler))

    def tool_visible(self, tool: Tool) -> bool:
        """Listed in tools/list: the gates permit it and every bridge it needs is up."""
        if self._policy is None and tool.options is None and tool.actions is None:
            return True
        return policy_layer().visible(self, tool)

    def _watch_bridges(self, tool: Tool) -> None:
        if tool.options is None:
            return
        for bridge in tool.options.requires:
            if id(bridge) not in self._bridges:
                self._bridges[id(bridge)] = bridge
                # TL-13: tools that need the bridge leave and rejoin tools/list with it
                bridge.on_change(lambda up: self._changed("tools"))

    # ------------------------------------------------------------------ runtime plumbing

    @property
    def stores(self) -> Any:
        """Where shared state lives: in this process, or in Redis for several (MCPKIT_STORE)."""
        if self._stores is None:
            from ..stores import from_env

            self._stores = from_env()
        return self._stores

    @property
    def shared(self) -> bool:
        """Whether other processes share this server's state (a bus reaches them)."""
        if self._stores is None and os.environ.get("MCPKIT_STORE", "").strip() in ("", "memory"):
            return False  # the common case: nothing to build or import to know it
        from ..stores.redis import MemoryBus

        return not isinstance(self.stores.bus, MemoryBus)  # a bus other processes hear

    @property
    def tasks(self) -> Any:
        """The tasks of the ``io.modelcontextprotocol/tasks`` extension (server/tasks.py)."""
        if self._tasks_manager is None:
            from .tasks import TaskManager

            self._tasks_manager = TaskManager(ttl_ms=self.task_ttl_ms,
                                              store=self.stores.tasks if self.shared else None)
        return self._tasks_manager

    def _listen_bus(self) -> None:
        """Deliver what other processes announce (list changes, resource updates) to this
        process's sessions and listen streams; subscribed once, when serving starts."""
        if self._bus_listening or not self.shared:
            return
        self._bus_listening = True
        bus = self.stores.bus
        bus.subscribe("changed", lambda message: self._deliver_changed(str(message.get("kind"))))
        bus.subscribe("updated", lambda message: self._deliver_updated(str(message.get("uri"))))

    def _announce(self, channel: str, message: dict[str, Any]) -> None:
        if self._stores is not None and self.shared:
            try:
                self.stores.bus.publish(channel, message)
            except Exception:  # noqa: BLE001 - the local clients were told; the others will re-list
                log.exception("could not announce %s to the other processes", channel)

    @property
    def sealer(self) -> Any:
        """Seals the requestState of 2026-07-28 multi-round-trip results (MR-06). Processes that
        share ``state_key`` (or the MCPKIT_STATE_KEY environment variable) resume each other's."""
        if self._sealer is None:
            from ..protocol.sealed import Sealer

            self._sealer = Sealer(self._state_key) if self._state_key is not None else Sealer.from_env()
        return self._sealer

    @property
    def workers(self) -> Any:
        """Worker threads for sync handlers on asyncio transports, so they never block the loop."""
        if self._executor is None:
            from .workers import WorkerPool

            # started on demand, so a generous cap costs nothing until slow sync tools pile up
            # one client (principal or session) holds at most a quarter of them unless told
            # otherwise, so it cannot starve the others (fair turns, workers.py)
            self._executor = WorkerPool(self._max_workers or 32, max_per_key=self._max_workers_per_client)
        return self._executor

    def capabilities(self, rev: Revision) -> dict[str, Any]:
        """LC-06 / VN-04: every feature served is declared, and each declared one is backed by
        methods. In 2026-07-28 change notifications travel on subscriptions/listen streams (SB-07)."""
        # both eras deliver changes: to the session (handshake) or to listen streams (2026-07-28)
        # Only what this server serves (LC-06 both ways): a tools-only server declares no
        # resources, prompts or completions. features() says which.
        features = self.features()
        caps: dict[str, Any] = {}
        if "tools" in features:
            caps["tools"] = {"listChanged": True}
        if "resources" in features:
            caps["resources"] = {"subscribe": True, "listChanged": True}
        if "prompts" in features:
            caps["prompts"] = {"listChanged": True}
        caps["logging"] = {}
        if rev.completions_capability and "completions" in features:
            caps["completions"] = {}
        if rev.era == "modern":
            from .tasks import EXTENSION

            caps["extensions"] = {EXTENSION: {}}  # TX-01; there is no v1 "tasks" capability
        if self._apps:
            from .apps import UI_EXTENSION

            # ext-apps "Capability Negotiation": the extension travels in capabilities.extensions,
            # which every revision's ServerCapabilities leaves open to
            caps.setdefault("extensions", {})[UI_EXTENSION] = {}
        return caps

    def features(self) -> frozenset[str]:
        """The features served now: those with something registered, plus those declared with
        ``advertise=`` for a server that registers them later. Completions come with prompts or
        resource templates (their arguments are what is completed) or a completion handler."""
        found = set(self._advertise)
        if self._tools:
            found.add("tools")
        if self._resources or self._templates:
            found.add("resources")
        if self._prompts:
            found.add("prompts")
        if self._prompts or self._templates or self._completer is not None:
            found.add("completions")
        return frozenset(found)

    def result_meta(self) -> dict[str, Any]:
        """MT-06: the _meta every 2026-07-28 result carries: who answered."""
        from ..protocol.revisions import MODERN_VERSIONS, SERVER_INFO_KEY, get

        return {SERVER_INFO_KEY: self.server_info(get(MODERN_VERSIONS[-1]))}

    def cache_hints(self, rev: Revision, item: Any) -> dict[str, Any]:
        """CA-01/CA-02: ttlMs and cacheScope, the item's own when it sets them, for revisions that have them."""
        if not rev.cache_hints:
            return {}
        ttl = getattr(item, "ttl_ms", None)
        scope = getattr(item, "cache_scope", None)
        return {
            "ttlMs": self.cache_ttl_ms if ttl is None else ttl,
            "cacheScope": self.cache_scope if scope is None else scope,
        }

    def server_info(self, rev: Revision) -> dict[str, Any]:
        info: dict[str, Any] = {"name": self.name, "version": self.version}
        for key, value in (
            ("title", self.title),
            ("description", self.description),
            ("websiteUrl", self.website_url),
            ("icons", self.icons),
        ):
            if value is not None:
                info[key] = value
        return _pick(info, rev.implementation_keys)

    def describe(self, rev: Revision, params: dict[str, Any]) -> dict[str, Any]:
        """The InitializeResult for ``rev`` (LC-01)."""
        result: dict[str, Any] = {
            "protocolVersion": rev.version,
            "capabilities": self.capabilities(rev),
            "serverInfo": self.server_info(rev),
        }
        if self.instructions:
            result["instructions"] = self.instructions
        return result

    def _session_started(self, session: Any) -> None:
        self._sessions.add(session)
        if self._policy is not None and not self._logs_guarded:
            self._logs_guarded = True
            policy_layer().started(self)
        if not self._warmed:
            if self._policy is not None:
                self._explain_policy()
            # Compile the remaining validators off the critical path, right after the
            # handshake answer went out, so the first calls do not pay for it.
            self._warmed = True
            import threading

            # Not a daemon: a process that exits while the thread is inside jsonschema-rs's native
            # code aborts at interpreter shutdown; a short compile delays exit instead.
            threading.Thread(target=self.warm_up, name="mcpkit-warm-up", daemon=False).start()

    def hidden_tools(self) -> list[tuple[str, str]]:
        """(tool or ``tool.action``, why it is hidden and the fix) for every tool and manager
        action the policy leaves out of tools/list."""
        gates = self.gates
        out: list[tuple[str, str]] = []
        for tool in self._tools.values():
            parts = ([(f"{tool.name}.{a.name}", a.annotations, a.requires) for a in tool.actions.values()]
                     if tool.actions is not None
                     else [(tool.name, tool.annotations, tool.options.requires if tool.options is not None else ())])
            for label, annotations, bridges in parts:
                reason = gates.explain(annotations) if gates is not None else None
                if reason is None:
                    down = [getattr(b, "name", repr(b)) for b in bridges if not b.up]
                    if down:
                        reason = f"hidden while {', '.join(down)} is not connected; it comes back by itself"
                if reason is not None:
                    out.append((label, reason))
        return out

    def _explain_policy(self) -> None:
        """Start-up (stderr): a policied server says what it hides and how to show it, so a
        server never serves fewer tools than its author expects without saying why."""
        plog = logging.getLogger("mcpkit.policy")
        hidden = self.hidden_tools()
        for label, reason in hidden:
            plog.warning("%s: %s", label, reason)
        shown = [t for t in self._tools.values() if self.tool_visible(t)]
        if self._tools and not shown:
            plog.warning("the policy hides all %d tool(s) of %r: this server lists none until one of the fixes "
                         "above is applied", len(self._tools), self.name)

    def warm_up(self) -> None:
        """Compile every tool's validators now (idempotent), and under a policy the secret
        redactor, whose patterns take tens of milliseconds to compile: the first calls should
        not pay for either."""
        for tool in list(self._tools.values()):
            try:
                tool.compile()
            except ValueError:
                log.exception("tool %r has an unusable schema", tool.name)
        if self._policy is not None:
            policy_layer().warm_up(self)

    def _session_closed(self, session: Any) -> None:
        self._sessions.discard(session)

    def _on_client_notification(self, session: Any, method: str, params: dict[str, Any] | None) -> None:
        handler = self._notification_handlers.get(method)
        if handler is None:
            return  # BP-09: unknown notifications are ignored, never answered
        try:
            outcome = handler(params or {})
            if inspect.iscoroutine(outcome):
                import asyncio

                asyncio.run_coroutine_threadsafe(outcome, session.loop)
        except Exception:  # noqa: BLE001
            log.exception("notification handler for %s failed", method)

    def on_notification(self, method: str) -> Callable[[F], F]:
        """Register a handler for a client notification, e.g. ``notifications/roots/list_changed``."""

        def deco(fn: F) -> F:
            self._notification_handlers[method] = fn
            return fn

        return deco

    def _changed(self, kind: str) -> None:
        self._rebuild()  # the items' steps are chosen again, batched or not
        batch = self._batch
        if batch is not None and batch[0] == threading.get_ident():
            batch[1].add(kind)  # one notification per kind when the batch ends
            return
        self._deliver_changed(kind)
        self._announce("changed", {"kind": kind})

    @contextlib.contextmanager
    def batch_changes(self, *, notify: bool = True) -> Iterator[None]:
        """Make many registry changes, then send one ``list_changed`` per kind changed (TL-13):
        what a mirror of a backend's tool list needs, so a client re-lists once, not per tool.
        ``notify=False`` only drops the cached lists (for changes clients cannot see yet, e.g.
        tools of a bridge that is down: its coming up announces them). Changes made by other
        threads meanwhile are announced as usual."""
        batch = self._batch
        if batch is not None and batch[0] == threading.get_ident():
            yield  # nested: the outer batch announces
            return
        with self._batch_lock:
            self._batch = (threading.get_ident(), set())
            try:
                yield
            finally:
                kinds = self._batch[1]
                self._batch = None
                for kind in sorted(kinds):
                    if notify:
                        self._changed(kind)
                    else:
                        self._cache_gen += 1
                        for key in [k for k in self._cache if k[0] == kind]:
                            del self._cache[key]

    def mirror(self, bridge: Any, **options: Any) -> Any:
        """Keep this server's tools (and resources) equal to what ``bridge``'s backend
        publishes; see :class:`mcpkit.bridge.Mirror` for the options."""
        # its tools arrive after the handshake: sessions opened before the first sync must know
        # the server has them (LC-06), so the capabilities are declared up front
        self._advertise = self._advertise | {"tools", "resources"}
        return _entry("mcpkit.bridge.mirror", "Mirror")(self, bridge, **options)

    def _deliver_changed(self, kind: str) -> None:
        if kind not in _CHANGED:
            return
        self._cache_gen += 1
        for key in [k for k in self._cache if k[0] == kind]:
            del self._cache[key]
        method = _CHANGED[kind]
        feature = FEATURE_OF_KIND[kind]
        for target in [*self._sessions, *self._listeners]:
            try:
                if target in self._listeners:
                    target.changed(method)  # SB-01, SB-07: only listen streams that asked
                elif getattr(target, "features", None) is None or feature in target.features:
                    # LC-05: a session that was not told of the feature is not sent its changes
                    target.notify(method)
            except Exception:  # noqa: BLE001 - one broken session must not starve the others
                log.exception("could not notify a session of %s", method)

    # ------------------------------------------------------------------ tools

    def tool(
        self,
        fn: F | None = None,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: dict[str, Any] | None = None,
        read_only: bool | None = None,
        destructive: bool | None = None,
        idempotent: bool | None = None,
        open_world: bool | None = None,
        structured: bool | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        coerce: bool = False,
        replace: bool = False,
        task: str | None = None,
        task_after_input: bool = False,
        scopes: Sequence[str] = (),
        ui: str | None = None,
        ui_visibility: Sequence[str] | None = None,
        **policy: Unpack[ToolPolicyOptions],
    ) -> Any:
        """Register a function as a tool: ``@server.tool`` or ``@server.tool(name=...)``.

        ``ui="ui://..."`` links the tool to an MCP App registered with :meth:`app`: hosts that
        render apps show its results in that view (``_meta.ui.resourceUri``);
        ``ui_visibility=["app"]`` keeps a tool for the view alone, hidden from the model.

        The inputSchema comes from the signature, the description from the
        docstring, the outputSchema from the return annotation (``structured=False``
        turns that off). ``coerce=True`` accepts "5" for an integer parameter.
        ``task="optional"|"required"`` lets 2026-07-28 clients that declare the
        ``io.modelcontextprotocol/tasks`` extension get the call as a task (server/tasks.py).

        Policy (mcpkit.policy; each overrides the server's Policy for this tool): ``read_only``,
        ``destructive`` and ``open_world`` feed the gates; ``contract=True`` wraps results in the
        tool contract envelope; ``rate_limit="10/min"``; ``timeout`` (seconds);
        ``max_argument_bytes``, ``max_result_bytes``, ``sanitize``; ``requires=bridge`` hides
        the tool while that Bridge is down; ``isolation="process"`` runs each call in a worker
        process that is killed at the deadline (mcpkit.policy.isolation: CPU-bound handlers,
        untrusted input, C extensions that hold the GIL).
        """
        options = _tool_options(policy)

        if ui is not None:
            from .apps import tool_ui_meta

            meta = {**(meta or {}), "ui": tool_ui_meta(ui, ui_visibility, name or "tool")}

        def deco(func: F) -> F:
            spec = input_spec(func, context_type=Context)
            out_schema = None
            dump = None
            if structured is not False:
                hints = _return_hint(func)
                out = output_spec(hints)
                out_schema, dump = out.schema, out.dump
                if structured is True and out_schema is None:
                    raise ValueError(f"tool {func.__name__!r}: structured=True needs a structured return annotation")
            _warn_secret_parameters(name or func.__name__, spec.schema)
            if options is not None and options.isolation is not None:
                policy_layer().check_isolated(func, name or func.__name__, spec.context_param)
            tool = Tool(
                name or func.__name__,
                func,
                input_schema=spec.schema,
                output_schema=out_schema,
                description=description if description is not None else function_description(func),
                title=title,
                annotations=annotations_from_hints(
                    annotations, read_only=read_only, destructive=destructive, idempotent=idempotent,
                    open_world=open_world,
                ),
                icons=icons,
                meta=meta,
                bind=spec.bind,
                dump=dump,
                context_param=spec.context_param,
                coerce=coerce,
                trusted_schemas=True,
                task=task,
                task_after_input=task_after_input,
                options=options,
            )
            tool.result_dump = None  # resolved from the return annotation if a contract needs it
            tool.scopes = _scopes(scopes)
            self._register_tool(tool, replace)
            return func

        if fn is not None:
            return deco(fn)
        return deco

    def add_tool(
        self,
        name: str,
        handler: Callable[..., Any],
        *,
        input_schema: dict[str, Any],
        output_schema: dict[str, Any] | None = None,
        description: str | None = None,
        title: str | None = None,
        annotations: dict[str, Any] | None = None,
        read_only: bool | None = None,
        destructive: bool | None = None,
        idempotent: bool | None = None,
        open_world: bool | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        replace: bool = False,
        task: str | None = None,
        scopes: Sequence[str] = (),
        flatten: bool = False,
        **policy: Unpack[ToolPolicyOptions],
    ) -> Tool:
        """Register a tool from a raw JSON Schema; ``handler(arguments)`` or ``handler(arguments, ctx)``.

        The schema is listed exactly as given and is what calls are validated against. A schema
        with ``oneOf``/``anyOf``/``allOf`` at its root is refused by the Anthropic API, OpenAI and
        Gemini (mcpkit/hosts.py): registering one warns (HostCompatibilityWarning) naming them;
        ``flatten=True`` lists a flat copy (mcpkit.hosts.flatten) and still validates calls against
        the schema as given. ``read_only``, ``destructive``, ``idempotent``, ``open_world``,
        ``scopes`` and the policy options (``requires=``, ``timeout=``, ...) are those of :meth:`tool`.
        """
        options = _tool_options(policy)
        _warn_secret_parameters(name, input_schema)
        advertised = input_schema
        if flatten:
            from ..hosts import flatten as flat_copy

            advertised = flat_copy(input_schema)
        else:
            _warn_root_combinators(name, input_schema)
        takes_ctx = _positional_count(handler) >= 2
        if options is not None and options.isolation is not None:
            policy_layer().check_isolated(handler, name, "ctx" if takes_ctx else None)
        tool = Tool(
            name,
            handler,
            input_schema=advertised,
            output_schema=output_schema,
            description=description,
            title=title,
            annotations=annotations_from_hints(
                annotations, read_only=read_only, destructive=destructive, idempotent=idempotent,
                open_world=open_world,
            ),
            icons=icons,
            meta=meta,
            context_param="ctx" if takes_ctx else None,
            task=task,
            options=options,
            enforced_schema=input_schema if flatten else None,
        )
        tool.scopes = _scopes(scopes)
        self._register_tool(tool, replace)
        return tool

    def manager(
        self,
        name: str,
        *,
        description: str | None = None,
        title: str | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        replace: bool = False,
        scopes: Sequence[str] = (),
        schema: str = "flat",
        **policy: Unpack[ToolPolicyOptions],
    ) -> Any:
        """A manager tool: one tool with several actions (``@tool.action(...)``), each with its
        own parameters, read-only/destructive/open-world declaration, bridges, timeout and rate
        limit (policy/manager.py). ``schema="flat"`` (default) advertises one object every host
        accepts; ``schema="oneOf"`` the closed per-action branches. Calls are validated against
        their action's closed branch either way."""
        tool = policy_layer().manager_tool(self, name, description=description, title=title, icons=icons, meta=meta,
                                           schema=schema)
        tool.options = _tool_options(policy)
        tool.scopes = _scopes(scopes)
        self._register_tool(tool, replace)
        return tool

    def _register_tool(self, tool: Tool, replace: bool) -> None:
        if tool.name in self._tools and not replace:
            raise ValueError(f"a tool named {tool.name!r} is already registered (pass replace=True to replace it)")
        if self._policy is not None or tool.options is not None or tool.actions is not None:
            self._apply_policy(tool)
        self._watch_bridges(tool)
        self._tools[tool.name] = tool
        self._changed("tools")

    def remove_tool(self, name: str) -> None:
        if self._tools.pop(name, None) is None:
            raise KeyError(f"no tool named {name!r}")
        self._changed("tools")

    @property
    def tools(self) -> dict[str, Tool]:
        return dict(self._tools)

    # ------------------------------------------------------------------ resources

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        annotations: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        replace: bool = False,
        ttl_ms: int | None = None,
        cache_scope: str | None = None,
        scopes: Sequence[str] = (),
    ) -> Callable[[F], F]:
        """Register a function returning the content of the resource at ``uri`` (str, bytes, dicts).

        ``ttl_ms`` and ``cache_scope`` override the server's cache hints for reads of it (CA-01);
        use ``cache_scope="private"`` for content that depends on who asks (CA-05).
        """

        def deco(func: F) -> F:
            item = self.add_resource(
                uri, func, name=name or func.__name__, title=title,
                description=description if description is not None else function_description(func),
                mime_type=mime_type, size=size, annotations=annotations, icons=icons, meta=meta, replace=replace,
            )
            _check_cache(ttl_ms, cache_scope)
            item.ttl_ms, item.cache_scope = ttl_ms, cache_scope
            item.scopes = _scopes(scopes)
            return func

        return deco

    def add_resource(self, uri: str, handler: Callable[..., Any], *, name: str, replace: bool = False, **kw: Any) -> Resource:
        if uri in self._resources and not replace:
            raise ValueError(f"a resource {uri!r} is already registered (pass replace=True to replace it)")
        item = Resource(uri, handler, name=name, context_param=_context_param(handler), **kw)
        self._resources[uri] = item
        self._changed("resources")
        return item

    def remove_resource(self, uri: str) -> None:
        if self._resources.pop(uri, None) is None:
            raise KeyError(f"no resource {uri!r}")
        self._apps.discard(uri)
        self.subscriptions_forget(uri)
        self._changed("resources")

    def app(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        html: str | None = None,
        connect_domains: Sequence[str] | None = None,
        resource_domains: Sequence[str] | None = None,
        frame_domains: Sequence[str] | None = None,
        base_uri_domains: Sequence[str] | None = None,
        permissions: Sequence[str] = (),
        domain: str | None = None,
        prefers_border: bool | None = None,
        scopes: Sequence[str] = (),
    ) -> Any:
        """Register an MCP App view (SEP-1865): ``@server.app("ui://board/view")`` on a function
        returning the HTML document, or ``server.app(uri, html=...)`` for a fixed one.

        The view is a ``ui://`` resource of type ``text/html;profile=mcp-app``; the CSP origins
        (``connect_domains`` and the rest), ``permissions`` (camera, microphone, geolocation,
        clipboard_write), ``domain`` and ``prefers_border`` go to its ``_meta.ui``. Link tools to
        it with ``@server.tool(ui=uri)``; the server then declares the
        ``io.modelcontextprotocol/ui`` extension.
        """
        from .apps import APP_MIME_TYPE, app_reader, check_ui_uri, ui_resource_meta

        check_ui_uri(uri, "server.app")
        ui_meta = ui_resource_meta(
            connect_domains=connect_domains, resource_domains=resource_domains, frame_domains=frame_domains,
            base_uri_domains=base_uri_domains, permissions=permissions, domain=domain,
            prefers_border=prefers_border,
        )

        def register(source: Any, default_name: str, doc: str | None) -> None:
            item = self.add_resource(
                uri, app_reader(source, ui_meta), name=name or default_name, title=title,
                description=description if description is not None else doc,
                mime_type=APP_MIME_TYPE, meta={"ui": ui_meta} if ui_meta else None,
            )
            item.context_param = None if isinstance(source, str) else _context_param(source)
            item.scopes = _scopes(scopes)
            self._apps.add(uri)

        if html is not None:
            register(html, uri.removeprefix("ui://"), None)
            return None

        def deco(func: F) -> F:
            register(func, func.__name__, function_description(func))
            return func

        return deco

    def resource_template(
        self,
        uri_template: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        annotations: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        completions: dict[str, Callable[..., Any]] | None = None,
        replace: bool = False,
        scopes: Sequence[str] = (),
    ) -> Callable[[F], F]:
        """Register a handler for every URI matching an RFC 6570 template; variables become arguments."""

        def deco(func: F) -> F:
            item = ResourceTemplate(
                uri_template, func, name=name or func.__name__, title=title,
                description=description if description is not None else function_description(func),
                mime_type=mime_type, annotations=annotations, icons=icons, meta=meta,
                context_param=_context_param(func), completions=completions,
            )
            item.scopes = _scopes(scopes)
            existing = [t for t in self._templates if t.uri_template == uri_template]
            if existing and not replace:
                raise ValueError(f"a resource template {uri_template!r} is already registered")
            self._templates = [t for t in self._templates if t.uri_template != uri_template] + [item]
            self._changed("resourceTemplates")
            return func

        return deco

    def add_resource_template(
        self,
        uri_template: str,
        handler: Callable[..., Any],
        *,
        name: str,
        completions: dict[str, Callable[..., Any]] | None = None,
        replace: bool = False,
        scopes: Sequence[str] = (),
        **kw: Any,
    ) -> ResourceTemplate:
        """:meth:`resource_template` without the decorator: ``handler(**variables)`` reads a URI
        the template matches (a parameter annotated ``Context`` gets the context)."""
        item = ResourceTemplate(uri_template, handler, name=name, context_param=_context_param(handler),
                                completions=completions, **kw)
        item.scopes = _scopes(scopes)
        if any(t.uri_template == uri_template for t in self._templates) and not replace:
            raise ValueError(f"a resource template {uri_template!r} is already registered")
        self._templates = [t for t in self._templates if t.uri_template != uri_template] + [item]
        self._changed("resourceTemplates")
        return item

    def remove_resource_template(self, uri_template: str) -> None:
        kept = [t for t in self._templates if t.uri_template != uri_template]
        if len(kept) == len(self._templates):
            raise KeyError(f"no resource template {uri_template!r}")
        self._templates = kept
        self._changed("resourceTemplates")

    def find_resource(self, uri: str) -> tuple[Resource | ResourceTemplate, dict[str, Any]] | None:
        """A static resource first, then the most specific matching template (RS-05)."""
        item = self._resources.get(uri)
        if item is not None:
            return item, {}
        for template in sorted(self._templates, key=lambda t: t.template.specificity):
            found = template.match(uri)
            if found is not None:
                return template, found
        return None

    def not_found(self, uri: str, rev: Revision) -> McpError:
        """RS-08: the revision's resource-not-found code, with the URI in data."""
        return McpError(rev.resource_not_found, f"Resource not found: {uri}", {"uri": uri})

    def notify_resource_updated(self, uri: str) -> None:
        """notifications/resources/updated to the sessions subscribed to ``uri`` or a parent of it
        (RS-10), in this process and, with shared stores, in every other one."""
        self._deliver_updated(uri)
        self._announce("updated", {"uri": uri})

    def _deliver_updated(self, uri: str) -> None:
        for session in list(self._sessions):
            refresh = getattr(session, "refresh_state", None)
            if refresh is not None:  # a shared session: its subscriptions may have changed elsewhere
                try:
                    refresh()
                except Exception:  # noqa: BLE001 - the store is down: match what is known here
                    log.warning("could not refresh a shared session's subscriptions", exc_info=True)
            if any(uri == s or uri.startswith(s.rstrip("/") + "/") for s in session.subscriptions):
                try:
                    session.notify("notifications/resources/updated", {"uri": uri})
                except Exception:  # noqa: BLE001
                    log.exception("could not notify a session of an update to %s", uri)
        for listener in list(self._listeners):
            try:
                listener.updated(uri)
            except Exception:  # noqa: BLE001
                log.exception("could not notify a listen stream of an update to %s", uri)

    def subscriptions_forget(self, uri: str) -> None:
        for session in list(self._sessions):
            session.subscriptions.discard(uri)

    # ------------------------------------------------------------------ prompts

    def prompt(
        self,
        fn: F | None = None,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        completions: dict[str, Callable[..., Any]] | None = None,
        replace: bool = False,
        scopes: Sequence[str] = (),
    ) -> Any:
        """Register a function as a prompt; its parameters are the prompt's (string) arguments.
        ``scopes``: the OAuth scopes a token needs to get it over authenticated HTTP."""

        def deco(func: F) -> F:
            spec = input_spec(func, context_type=Context)
            props = spec.schema.get("properties", {})
            required = set(spec.schema.get("required", []))
            arguments = []
            for arg_name, prop in props.items():
                arg: dict[str, Any] = {"name": arg_name}
                if "description" in prop:
                    arg["description"] = prop["description"]
                arg["required"] = arg_name in required
                arguments.append(arg)
            typed = any(prop.get("type") != "string" or set(prop) - {"type", "description"}
                        for prop in props.values())
            prompt = Prompt(
                name or func.__name__, func, arguments=arguments, title=title,
                description=description if description is not None else function_description(func),
                icons=icons, meta=meta, context_param=spec.context_param, completions=completions,
                # plain str parameters take the wire's strings as they are; anything else is converted
                schema=spec.schema if typed else None, bind=spec.bind if typed else None,
            )
            prompt.scopes = _scopes(scopes)
            if not typed and spec.bind is not _identity_bind:
                prompt.bind = spec.bind  # a checking type (SandboxPath) of a str parameter, as for tools
            if prompt.name in self._prompts and not replace:
                raise ValueError(f"a prompt named {prompt.name!r} is already registered (pass replace=True)")
            self._prompts[prompt.name] = prompt
            self._changed("prompts")
            return func

        if fn is not None:
            return deco(fn)
        return deco

    def add_prompt(
        self,
        name: str,
        handler: Callable[..., Any],
        *,
        arguments: Sequence[dict[str, Any]] = (),
        title: str | None = None,
        description: str | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        completions: dict[str, Callable[..., Any]] | None = None,
        replace: bool = False,
        scopes: Sequence[str] = (),
    ) -> Prompt:
        """Register a prompt from raw PromptArgument dicts (``{"name", "description", "required"}``);
        ``handler(**arguments)`` gets the string arguments, and the context in a parameter
        annotated ``Context``. What it returns is shaped as for :meth:`prompt`."""
        prompt = Prompt(
            name, handler, arguments=[dict(a) for a in arguments], title=title, description=description,
            icons=icons, meta=meta, context_param=_context_param(handler), completions=completions,
        )
        prompt.scopes = _scopes(scopes)
        if name in self._prompts and not replace:
            raise ValueError(f"a prompt named {name!r} is already registered (pass replace=True)")
        self._prompts[name] = prompt
        self._changed("prompts")
        return prompt

    def remove_prompt(self, name: str) -> None:
        if self._prompts.pop(name, None) is None:
            raise KeyError(f"no prompt named {name!r}")
        self._changed("prompts")

    # ------------------------------------------------------------------ completion

    def completion(self, fn: F) -> F:
        """Register the fallback completer: ``fn(ref, argument, value, context) -> list[str] | dict``."""
        self._completer = fn
        return fn

    def completion_target(self, ref: dict[str, Any]) -> Prompt | Resource | ResourceTemplate:
        """The prompt, template or resource a completion/complete ``ref`` names (CP-03: -32602
        for an unknown one); its rules (scopes) apply to the completion too (CP-05)."""
        kind = ref.get("type")
        if kind == "ref/prompt":
            prompt = self._prompts.get(ref.get("name"))  # type: ignore[arg-type]
            if prompt is None:
                raise McpError(INVALID_PARAMS, f"Unknown prompt: {ref.get('name')}")  # CP-03
            return prompt
        if kind == "ref/resource":
            uri = ref.get("uri")
            template = next((t for t in self._templates if t.uri_template == uri), None)
            if template is not None:
                return template
            resource = self._resources.get(uri)  # type: ignore[arg-type]
            if resource is None:
                raise McpError(INVALID_PARAMS, f"Unknown resource or template: {uri}")
            return resource
        raise McpError(INVALID_PARAMS, f"Unknown completion reference type: {kind!r}")

    def completer_for(self, ref: dict[str, Any], argument: str) -> Callable[..., Any] | None:
        target = self.completion_target(ref)
        specific: Callable[..., Any] | None = (getattr(target, "completions", None) or {}).get(argument)
        if specific is not None:
            return _adapt_completer(specific)
        if self._completer is not None:
            general = self._completer

            def call(value: str, context: dict[str, Any]) -> Any:
                return general(ref, argument, value, context)

            if inspect.iscoroutinefunction(general):

                async def acall(value: str, context: dict[str, Any]) -> Any:
                    return await general(ref, argument, value, context)

                return acall
            return call
        return None

    # ------------------------------------------------------------------ listing

    def _items(self, kind: str, rev: Revision) -> list[dict[str, Any]]:
        key = (kind, rev.version)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        gen = self._cache_gen
        if kind == "tools":
            items = []
            for tool in list(self._tools.values()):  # a copy: another thread may register tools
                if not self.tool_visible(tool):
                    continue  # gated, or its bridge is down: hidden here and refused when called
                d = _pick(tool.describe(), rev.tool_keys)
                if tool.title and "title" not in rev.tool_keys and "annotations" in rev.tool_keys:
                    # 2025-03-26 has no Tool.title; the annotations carry the display name (TL-14)
                    d["annotations"] = {"title": tool.title, **(d.get("annotations") or {})}
                items.append(d)
        elif kind == "resources":
            items = [_pick_annotated(r.describe(), rev.resource_keys, rev) for r in list(self._resources.values())]
        elif kind == "resourceTemplates":
            items = [_pick_annotated(t.describe(), rev.template_keys, rev) for t in self._templates]
        else:
            items = []
            for p in list(self._prompts.values()):
                d = _pick(p.describe(), rev.prompt_keys)
                if "arguments" in d:
                    d["arguments"] = [_pick(a, rev.prompt_argument_keys) for a in d["arguments"]]
                items.append(d)
        if gen == self._cache_gen:
            self._cache[key] = items
        return items

    def list_page(self, kind: str, rev: Revision, cursor: Any) -> dict[str, Any]:
        """PA-01..PA-03: one page, opaque cursors, nextCursor only when more exist."""
        items = self._items(kind, rev)
        start = 0 if cursor is None else _decode_cursor(kind, cursor)
        if start > len(items):
            raise McpError(INVALID_PARAMS, "Invalid or expired cursor.", {"cursor": cursor})
        size = self.page_size
        if size is None:
            if start:
                raise McpError(INVALID_PARAMS, "Invalid or expired cursor.", {"cursor": cursor})
            out: dict[str, Any] = {_LIST_KEYS[kind]: items}
        else:
            out = {_LIST_KEYS[kind]: items[start : start + size]}
            if start + size < len(items):
                out["nextCursor"] = _encode_cursor(kind, start + size)
        if rev.cache_hints:
            out.update(self.cache_hints(rev, None))  # PA-04: the same cacheScope on every page
        return out

    # ------------------------------------------------------------------ composition

    def mount(self, child: Any, prefix: str | None = None, **options: Any) -> Any:
        """Serve ``child``'s tools, resources, templates and prompts as this server's, live:
        what the child adds, changes or removes shows here (with ``list_changed``), and every
        call runs through the child's own pipeline and policies. ``child`` is a Server (driven
        in memory), a command line or a URL (a proxied upstream, reconnected when it drops), or
        an unconnected :class:`mcpkit.Client`. Names become ``prefix_name`` (docs/composition.md);
        the options are :class:`mcpkit.proxy.Upstream`'s. Returns the Upstream."""
        # mcpkit.proxy sits above the server (it drives one): found by name, as transports are
        return _entry("mcpkit.proxy.upstream", "Upstream")(self, child, prefix=prefix, **options).start()

    def include(self, child: Server, prefix: str | None = None, *, separator: str = "_",
                prefix_uris: bool = True) -> None:
        """Copy ``child``'s tools, resources, templates and prompts into this server now, under
        prefixed names; later changes to the child do not show (use :meth:`mount` for that)."""
        from .compose import include

        include(self, child, prefix, separator=separator, prefix_uris=prefix_uris)

    @classmethod
    def proxy(cls, target: Any, *, name: str | None = None, policy: Any = None, **options: Any) -> Server:
        """A server that mirrors ``target`` (a command line, a URL, a Server or an unconnected
        :class:`mcpkit.Client`) and forwards everything to it: mcpkit's guard rails in front of a
        server written elsewhere. The options are :class:`mcpkit.proxy.Upstream`'s."""
        proxy_server = _entry("mcpkit.proxy.upstream", "proxy_server")
        return proxy_server(cls, target, name=name, policy=policy, **options)  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ running

    def observe(self, *observers: Any) -> None:
        """Watch every request and notification: ``server.observe(OpenTelemetry())`` for spans
        and metrics per the MCP semantic conventions, ``PrometheusMetrics()`` for a /metrics
        page (mcpkit.observe). Each call replaces the previous observers; none: stop watching."""
        if not observers:
            self.observer = None
        elif len(observers) == 1:
            self.observer = observers[0]
        else:
            from .observer import Observers

            self.observer = Observers(observers)

    def http_app(self, **options: Any) -> Any:
        """This server as an ASGI app: Streamable HTTP at ``/mcp`` plus legacy SSE at ``/sse``.

        Options (see :class:`mcpkit.transports.http.McpHttpApp`): ``path``, ``json_response``,
        ``stateless``, ``allowed_hosts``, ``allowed_origins``, ``max_body_bytes``, ``body_timeout``,
        ``off_loop_bytes``, ``max_sessions``, ``max_sessions_per_client``, ``session_idle_timeout``,
        ``event_store``, ``legacy_sse``, ``cors_origins`` (browser pages that may call it:
        transports/cors.py), ``server_card`` (default on: the SEP-2127 Server Card at ``<path>/server-card`` and the
        catalog at ``/.well-known/mcp/catalog.json``) and ``card_name`` (its reverse-DNS name).
        Mounted under a prefix (``Mount("/api", app)``) it serves ``/api/mcp`` (transports/mount.py).
        """
        app_class = _entry("mcpkit.transports.http", "McpHttpApp")
        cors = options.pop("cors_origins", None)
        options.pop("root_path", None)  # the prefix arrives in each request's scope (transports/mount.py)
        if not cors:
            return app_class(self, **options)
        # a page's origin that may call the server must also pass the DNS-rebinding check (HS-02)
        options["allowed_origins"] = [*(options.get("allowed_origins") or ()), *cors]
        return _entry("mcpkit.transports.cors", "CorsMiddleware")(app_class(self, **options), cors)

    def run(self, transport: str = "stdio", *, host: str = "127.0.0.1", port: int = 8000, **options: Any) -> None:
        """Serve until stopped: ``"stdio"`` (until EOF or SIGTERM) or ``"http"`` (uvicorn).

        HTTP binds to 127.0.0.1 unless told otherwise (HS-03).
        """
        import sys

        startup_line = _entry("mcpkit.startup", "startup_line")
        if transport == "stdio":
            print(startup_line(self, "stdio"), file=sys.stderr, flush=True)  # stderr: stdout is the wire
            _entry("mcpkit.transports.stdio", "run_stdio")(self, **options)
        elif transport == "http":
            path = options.get("path", "/mcp")
            options.setdefault("on_ready", lambda base: print(startup_line(self, "http", base + path), file=sys.stderr,
                                                                flush=True))
            _entry("mcpkit.transports.serve", "serve_http")(self, host=host, port=port, **options)
        else:
            raise ValueError(f"unknown transport {transport!r}: use 'stdio' or 'http'")


def _entry(module: str, name: str) -> Any:
    """A transport's entry point: transports sit above the server (they import it), so the
    conveniences ``run`` and ``http_app`` find them by name when called."""
    import importlib

    return getattr(importlib.import_module(module), name)


class ToolPolicyOptions(TypedDict, total=False):
    """What one tool may set for itself over the server's Policy (mcpkit.policy): ``contract``
    (the tool contract envelope), ``rate_limit`` ("10/min"; None: not limited), ``timeout``
    (seconds; None: none), ``max_argument_bytes``, ``max_result_bytes``, ``sanitize``, and
    ``requires`` (a Bridge, or several, that must be up for the tool to be listed and run)."""

    contract: bool
    rate_limit: Any
    timeout: float | None
    max_argument_bytes: int | None
    max_result_bytes: int | None
    sanitize: bool
    requires: Any
    isolation: str | None


def _scopes(scopes: Sequence[str] | str) -> tuple[str, ...]:
    if isinstance(scopes, str):
        scopes = scopes.split()
    for scope in scopes:
        if not isinstance(scope, str) or not scope or any(c in scope for c in ' "\\'):
            raise ValueError(f"invalid OAuth scope {scope!r}: a scope is a non-empty token without spaces or quotes")
    return tuple(scopes)


def _tool_options(policy: dict[str, Any]) -> Any:
    unknown = sorted(set(policy) - ToolPolicyOptions.__annotations__.keys())
    if unknown:
        raise TypeError(f"unexpected keyword argument(s) {', '.join(unknown)}; a tool's policy options are "
                        f"{', '.join(ToolPolicyOptions.__annotations__)}")
    if not policy:
        return None  # the common case imports nothing of the policy package
    return policy_layer().tool_options(policy)  # what is not given is INHERIT: the server's policy decides


def _result_spec(annotation: Any) -> tuple[dict[str, Any] | None, Callable[[Any], Any]]:
    """The schema and dump of a tool's own value inside a contract envelope (no result wrapper)."""
    out = output_spec(annotation)
    if out.schema is None:
        from .schema import _to_json

        return None, _to_json
    if not out.wrapped:
        return out.schema, out.dump
    inner = dict(out.schema["properties"]["result"])
    if "$defs" in out.schema:
        inner["$defs"] = out.schema["$defs"]
    dump = out.dump
    probe = object()
    try:
        passes_through = dump(probe)["result"] is probe  # plain JSON values: no conversion
    except Exception:  # noqa: BLE001 - a converting dump cannot take a bare object
        passes_through = False
    if passes_through:
        return inner, _identity
    return inner, lambda value: dump(value)["result"]


def _identity(value: Any) -> Any:
    return value


def _warn_secret_parameters(tool: str, schema: dict[str, Any]) -> None:
    props = schema.get("properties") if isinstance(schema, dict) else None
    if props:
        policy_layer().warn_secret_parameters(tool, props)


class HostCompatibilityWarning(UserWarning):
    """A tool's schema is one that some hosts refuse (mcpkit/hosts.py)."""


def _warn_root_combinators(tool: str, schema: Any) -> None:
    if not isinstance(schema, dict) or not any(k in schema for k in ("oneOf", "anyOf", "allOf", "not", "if")):
        return
    from ..hosts import hosts_rejecting_root, root_combinators

    rejecting = hosts_rejecting_root(schema)
    if not rejecting:
        return
    import warnings

    from ..hosts import HOSTS

    message = (f"tool {tool!r}: inputSchema has {', '.join(root_combinators(schema))} at its root, which "
               f"{'; '.join(HOSTS[h].name for h in rejecting)} refuse (the whole session fails, not only this "
               f"tool). Fix: pass flatten=True to list a flat copy (calls are still validated against this "
               f"schema), or express the alternatives inside properties.")
    log.warning("%s", message)
    warnings.warn(message, HostCompatibilityWarning, stacklevel=3)


def _check_cache(ttl_ms: Any, scope: Any) -> None:
    if ttl_ms is not None and (not isinstance(ttl_ms, int) or isinstance(ttl_ms, bool) or ttl_ms < 0):
        raise ValueError("cache ttl_ms must be an integer >= 0 (CA-02)")
    if scope is not None and scope not in ("public", "private"):
        raise ValueError("cache_scope must be 'public' or 'private' (CA-01)")


def _encode_cursor(kind: str, offset: int) -> str:
    return base64.urlsafe_b64encode(f"{kind}:{offset}".encode()).decode().rstrip("=")


def _decode_cursor(kind: str, cursor: Any) -> int:
    """PA-02: anything that is not a cursor we minted for this list is -32602."""
    try:
        if not isinstance(cursor, str):
            raise ValueError
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        prefix, _, number = raw.partition(":")
        if prefix != kind or not number.isdigit():
            raise ValueError
        return int(number)
    except ValueError:
        raise McpError(INVALID_PARAMS, "Invalid or expired cursor.", {"cursor": cursor}) from None


def _return_hint(func: Callable[..., Any]) -> Any:
    import typing

    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable annotations: no structured output
        return inspect.Signature.empty
    hint = hints.get("return", inspect.Signature.empty)
    if getattr(typing.get_origin(hint) or hint, "__mcp_outcome__", False):
        # Outcome[T] (mcpkit.policy.envelope): the value inside is a T; a bare Outcome is untyped
        args = typing.get_args(hint)
        return args[0] if args else inspect.Signature.empty
    return hint


def _context_param(fn: Callable[..., Any]) -> str | None:
    import typing

    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001
        return None
    for name, hint in hints.items():
        if hint is Context and name != "return":
            return name
    return None


def _positional_count(fn: Callable[..., Any]) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def _adapt_completer(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Per-argument completers take ``(value)`` or ``(value, context)``."""
    if _positional_count(fn) >= 2:
        return fn
    if inspect.iscoroutinefunction(fn):

        async def acall(value: str, context: dict[str, Any]) -> Any:
            return await fn(value)

        return acall
    return lambda value, context: fn(value)

