"""Server: the registries of tools, resources, templates and prompts, what they advertise, and
how the server runs (sessions, policy, stores, composition, transports).

The decorators and add/remove methods live in registration.py (Server inherits them).
Registration, removal and replacement work at any time; each change sends the
matching ``notifications/*/list_changed`` to every initialized session
(TL-13, RS-09, PM-07). What a revision may see of each item is filtered here,
from the revision table, and cached per revision until the next change.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from ..protocol.errors import INVALID_PARAMS, McpError
from ..protocol.meta import check_icons
from ..protocol.revisions import Revision
from ..stores.errors import StoreUnavailable
from ..switches import SwitchError
from .dispatch import METHODS
from .features import FEATURE_OF_KIND, FEATURES
from .pipeline import as_middleware, layer_of, policy_layer
from .registration import (  # noqa: F401 - HostCompatibilityWarning and ToolPolicyOptions re-exported
    Completer,
    HostCompatibilityWarning,
    Registrations,
    ToolPolicyOptions,
    _check_cache,
    _decode_cursor,
    _encode_cursor,
    _result_spec,
    _return_hint,
)
from .prompts import Prompt
from .resources import Resource, ResourceTemplate
from .skills import SkillRegistrations
from .tools import Tool

__all__ = ["HostCompatibilityWarning", "Server", "ToolPolicyOptions"]

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


class Server(Registrations, SkillRegistrations):
    """An MCP server. Register tools, resources and prompts, then :meth:`run` it.

    ``lifespan=fn``: ``fn(server)`` returns an async context manager entered before the server
    answers its first request and left after its last; what it yields is ``ctx.lifespan_context``
    (server/lifespan.py)."""

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
        host_schemas: str | None = None,
        auth: Any = None,
        lifespan: Callable[[Any], Any] | None = None,
        tool_search: Any = None,
    ) -> None:
        if page_size is not None and page_size < 1:
            raise ValueError("page_size must be a positive integer or None")
        self.name = name
        self.version = version
        #: who may call, on every transport unless one is given its own (mcpkit.auth): HTTP
        #: checks each request with it; stdio, its environment credential once (ApiKeyAuth)
        self.auth = auth
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
        self._skills: dict[str, Any] = {}  # SKILL.md URI -> Skill (server/skills.py)
        self._skill_relays: dict[int, bool] = {}  # upstreams relaying skills here (proxy/skills.py)
        #: what watches every request and notification (mcpkit.observe: traces, metrics); None: nothing
        self.observer: Any = None
        self._templates: list[ResourceTemplate] = []
        self._prompts: dict[str, Prompt] = {}
        self._completer: Completer | None = None
        self._notification_handlers: dict[str, Callable[..., Any]] = {}
        self._methods = dict(METHODS)
        self._cache: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        # bumped on every registry change: a list built while another thread changed the
        # registries (a bridge's mirror) is answered but not cached
        self._cache_gen = 0
        self._cache_bridges: dict[tuple[str, ...], tuple[int, ...]] = {}  # tools/list: the bridges' transitions it saw
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
        self._rewriters = False
        self._tool_pipes: dict[Any, Any] = {}
        self._pipes: dict[tuple[str, Any], Any] = {}
        #: counts the changes of the registry, middleware and installed steps: a manager tool's
        #: settings read other tools (an action's twin), so they are resolved again after one
        self._generation = 0
        self._batch: tuple[int, set[str]] | None = None  # (thread, kinds) of batch_changes
        self._batch_lock = threading.RLock()
        self.policy = policy
        unknown = set(advertise) - FEATURES
        if unknown:
            raise ValueError(f"advertise= takes {sorted(FEATURES)}, not {sorted(unknown)}")
        #: features declared even while nothing of them is registered (LC-06): a server that adds
        #: tools, resources or prompts at run time names them here so early sessions know of them
        self._advertise = frozenset(advertise)
        self.host_schemas = host_schemas
        #: set up before serving and torn down after (server/lifespan.py); its value is every
        #: handler's ctx.lifespan_context
        self.lifespan: Any = None
        if lifespan is not None:
            from .lifespan import Lifespan

            self.lifespan = Lifespan(lifespan)
        self._tool_search: Any = None
        self.tool_search = tool_search
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
        self._generation += 1
        # whether a step outside the policy may change a result on its way out (user middleware,
        # or an installed step that is more than a guard): then the policy checks what comes
        # back as it is, never what it built
        self._rewriters = bool(self._middleware) or any(
            getattr(step, "check", None) is None for step in self._installed.values())

    # ------------------------------------------------------------------ policy (mcpkit.policy)

    @property
    def policy(self) -> Any:
        """The :class:`mcpkit.policy.Policy` enforced on every tool call, or None."""
        return self._policy

    @policy.setter
    def policy(self, policy: Any) -> None:
        self._policy_error = None
        try:
            if policy is True or policy is False or (policy is None and os.environ.get("MCPKIT_POLICY", "").strip()):
                policy = policy_layer().resolve(policy)  # True, MCPKIT_POLICY=1: Policy.secure(); False: none
        except ValueError as exc:
            if policy is not None and policy is not True:
                raise
            # the environment the secure policy reads is wrong (MCPKIT_TOOL_TIMEOUT=soon, a root
            # that does not exist): a mistake of the environment, not of the code that built this
            # Server, said in one line when serving starts (check_environment), where server.run()
            # and mcpkit can exit with it; nothing serves without the policy meanwhile
            if not isinstance(exc, SwitchError):
                exc = SwitchError(str(exc)).with_traceback(exc.__traceback__)
            self._policy_error = exc
            policy = None
        self._policy = policy
        if policy is not None and policy.rate_limiter is not None and self.shared:
            # several processes: the buckets live in the shared store, so a limit is global
            policy.rate_limiter.store = self.stores.rates
        for tool in self._tools.values():
            self._apply_policy(tool)
        if policy is not None and self._sessions:
            # serving already: the logs are guarded (and, with redact_logs, redacted) from now
            # on, not only when the next session starts (a stdio server has just the one)
            self._logs_guarded = True
            policy.layer.started(self)
        self._rebuild()
        self._changed("tools")

    @property
    def host_schemas(self) -> str | None:
        """Which host's schemas tools/list shows (mcpkit/hostschemas.py): a host id, ``"auto"``
        (each client's own, from its clientInfo), or None: the tools as registered."""
        return self._host_schemas

    @host_schemas.setter
    def host_schemas(self, value: str | None) -> None:
        if value is not None:  # only a server that asks for it imports hostschemas (found by name: above us)
            value = _entry("mcpkit.hostschemas", "parse_setting")(value)
        self._host_schemas = value
        self._deliver_changed("tools")  # the listings of every host are made again

    @property
    def tool_search(self) -> Any:
        """The :class:`mcpkit.ToolSearch` listing a search/call pair instead of the whole
        catalog (server/toolsearch.py, docs/tool-search.md), or None: every tool is listed."""
        return self._tool_search

    @tool_search.setter
    def tool_search(self, value: Any) -> None:
        if value is None or value is False:
            if self._tool_search is None:
                return
            value = None
        from .toolsearch import install  # only a server that uses it imports the search

        install(self, value)

    @property
    def gates(self) -> Any:
        return self._policy.gates if self._policy is not None else None

    def _apply_policy(self, tool: Tool) -> None:
        """Make what a tool advertises match what the policy will enforce on it."""
        if self._policy is None and tool.options is None and tool.actions is None:
            tool.set_output_schema(tool.base_output_schema)
            return
        layer_of(self).advertise(self, tool)

    def _contract_spec(self, tool: Tool) -> None:
        """A function tool's own value schema and dump, unwrapped, for a contract envelope."""
        if tool.result_dump is None:
            tool.result_schema, tool.result_dump = _result_spec(_return_hint(tool.handler))

    def tool_visible(self, tool: Tool) -> bool:
        """Listed in tools/list: the gates permit it and every bridge it needs is up."""
        if self._policy is None and tool.options is None and tool.actions is None:
            return True
        return layer_of(self).visible(self, tool)

    def _watch_bridges(self, tool: Tool) -> None:
        """Follow each bridge ``tool`` needs, the tool's own and its actions' alike, once per
        server: however many tools and actions need a bridge, its transition is one change."""
        for bridge in tool.bridges:
            if id(bridge) not in self._bridges:
                self._bridges[id(bridge)] = bridge
                bridge.on_change(lambda up, bridge=bridge: self._bridge_changed(bridge))

    def _bridge_changed(self, bridge: Any) -> None:
        # TL-13: what needs the bridge leaves and rejoins tools/list with it, announced once.
        # The managers offering actions that need it are rebuilt first, so a client that
        # re-lists on the notification sees the new schema.
        for tool in list(self._tools.values()):
            if tool.actions is not None and any(b is bridge for a in tool.actions.values() for b in a.requires):
                tool.refresh()
        self._changed("tools")

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

            shared = self.stores if self.shared else None
            self._tasks_manager = TaskManager(ttl_ms=self.task_ttl_ms, store=None if shared is None else shared.tasks,
                                              stores=shared)
        return self._tasks_manager

    def close_tasks(self) -> None:
        """Settle the tasks this process still runs: each fails with a retryable error saying
        the process shut down, and its run is stopped. Transports call it when they shut down
        gracefully, so clients (and other processes) never wait on a task nobody runs."""
        if self._tasks_manager is not None:
            self._tasks_manager.close()

    def _listen_bus(self) -> None:
        """Deliver what other processes announce (list changes, resource updates) to this
        process's sessions and listen streams; subscribed once, when serving starts."""
        if self._bus_listening or not self.shared:
            return
        self._bus_listening = True
        bus = self.stores.bus
        bus.subscribe("changed", lambda message: self._deliver_changed(
            *map(str, message.get("kinds") or (message.get("kind"),))))
        bus.subscribe("updated", lambda message: self._deliver_updated(str(message.get("uri"))))
        watch = getattr(bus, "watch", None)
        if watch is not None:
            watch(self._bus_connection)

    def _bus_connection(self, connected: bool) -> None:
        """On the bus's thread, back after an outage: what other processes announced meanwhile
        may never have arrived (a subscriber away from Redis misses what is published then), so
        every session and listen stream is told that all it subscribed to, and every list, may
        have changed. These notifications are hints to read again (RS-10, LC-05): a spare one
        costs the client a read, a missed one leaves it stale for good."""
        if not connected:
            return
        self._deliver_changed(*_CHANGED)
        for session in list(self._sessions):
            for uri in sorted(getattr(session, "subscriptions", ())):
                try:
                    session.notify("notifications/resources/updated", {"uri": uri})
                except Exception:  # noqa: BLE001 - one broken session must not starve the others
                    log.exception("could not notify a session of an update to %s", uri)
        for listener in list(self._listeners):
            for uri in sorted(getattr(listener, "uris", ())):
                try:
                    listener.updated(uri)
                except Exception:  # noqa: BLE001
                    log.exception("could not notify a listen stream of an update to %s", uri)

    def _announce(self, channel: str, message: dict[str, Any]) -> None:
        if self._stores is not None and self.shared:
            try:
                self.stores.bus.publish(channel, message)
            except StoreUnavailable as exc:  # an outage: one line, not a traceback per change
                log.warning("could not announce %s to the other processes: %s", channel, exc)
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
        skills = self.skills_capability()
        if skills is not None:
            # SEP-2640 "Capability Declaration"; its files are resources, so "resources" is
            # declared with it, as the extension requires
            from .skills import SKILLS_EXTENSION

            caps.setdefault("extensions", {})[SKILLS_EXTENSION] = skills
        return caps

    def features(self) -> frozenset[str]:
        """The features served now: those with something registered, plus those declared with
        ``advertise=`` for a server that registers them later. Completions come with prompts or
        resource templates (their arguments are what is completed) or a completion handler."""
        return self._advertise | {f for f in ("tools", "resources", "prompts", "completions") if self.has_feature(f)}

    def has_feature(self, feature: str) -> bool:
        """``feature in self.features()``, without building the set (asked on every request of
        a session that declared none: stateless HTTP, 2026-07-28)."""
        if feature in self._advertise:
            return True
        if feature == "tools":
            return bool(self._tools)
        if feature == "resources":
            return bool(self._resources or self._templates)
        if feature == "prompts":
            return bool(self._prompts)
        if feature == "completions":
            return bool(self._prompts or self._templates or self._completer is not None)
        return False

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
            self._policy.layer.started(self)
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
                    # a requirement that is down for a reason of its own says it (a pinned
                    # tool that changed, mcpkit.proxy.pin.Hold); a bridge is waited for
                    held = [b.hidden_reason for b in bridges if not b.up and getattr(b, "hidden_reason", None)]
                    down = [getattr(b, "name", repr(b)) for b in bridges if not b.up]
                    if held:
                        reason = held[0]
                    elif down:
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
            self._policy.layer.warm_up(self)

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

    def _changed(self, *kinds: str) -> None:
        self._rebuild()  # the items' steps are chosen again, batched or not
        batch = self._batch
        if batch is not None and batch[0] == threading.get_ident():
            batch[1].update(kinds)  # one notification per list when the batch ends
            return
        self._deliver_changed(*kinds)
        # "kind" too: a process of an earlier version reads only that
        self._announce("changed", {"kind": min(kinds), "kinds": sorted(kinds)})

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
                if notify and kinds:
                    self._changed(*kinds)
                else:
                    self._cache_gen += 1
                    for key in [k for k in self._cache if k[0] in kinds]:
                        del self._cache[key]

    def mirror(self, bridge: Any, **options: Any) -> Any:
        """Keep this server's tools (and resources) equal to what ``bridge``'s backend
        publishes; see :class:`mcpkit.bridge.Mirror` for the options."""
        # its tools arrive after the handshake: sessions opened before the first sync must know
        # the server has them (LC-06), so the capabilities are declared up front
        self._advertise = self._advertise | {"tools", "resources"}
        return _entry("mcpkit.bridge.mirror", "Mirror")(self, bridge, **options)

    def openapi(self, document: Any, **options: Any) -> list[Any]:
        """A tool for each operation of an OpenAPI 3.0/3.1 document (a dict, a path or a URL),
        called through :class:`mcpkit.bridge.Upstream`; see :func:`mcpkit.bridge.openapi.tools_from`
        for the options (docs/openapi.md). Returns the Tools."""
        return _entry("mcpkit.bridge.openapi", "tools_from")(self, document, **options)

    def _deliver_changed(self, *kinds: str) -> None:
        kinds = tuple(kind for kind in kinds if kind in _CHANGED)
        if not kinds:
            return
        self._cache_gen += 1
        for key in [k for k in self._cache if k[0] in kinds]:
            del self._cache[key]
        # resources and resource templates share one notification: changed together, told once
        for method, kind in {_CHANGED[kind]: kind for kind in sorted(kinds)}.items():
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

    # ------------------------------------------------------------------ listing

    def _items(self, kind: str, rev: Revision, host: str | None = None) -> list[dict[str, Any]]:
        key = (kind, rev.version, host) if host is not None else (kind, rev.version)
        cached = self._cache.get(key)
        bridges = self._bridges if kind == "tools" else None
        if cached is not None and (not bridges or self._cache_bridges.get(key) == _transitions(bridges)):
            return cached
        gen = self._cache_gen
        # read before the tools are: a bridge that comes or goes meanwhile makes a stale entry
        # that the next list does not serve (the server hears of it a moment after up changes)
        seen = _transitions(bridges) if bridges else None
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
            if host is not None:  # host_schemas: this host's names and schemas (mcpkit/hostschemas.py)
                served_tool = _entry("mcpkit.hostschemas", "served_tool")
                items = [served_tool(d, host, self.name) for d in items]
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
            if seen is not None:
                self._cache_bridges[key] = seen
        return items

    def list_page(self, kind: str, rev: Revision, cursor: Any, client_info: dict[str, Any] | None = None,
                  full: bool = True) -> dict[str, Any]:
        """PA-01..PA-03: one page, opaque cursors, nextCursor only when more exist. ``client_info``
        picks the host whose schemas tools are listed with, under ``host_schemas="auto"``; under
        tool search, ``full=False`` lists the pinned tools and the search/call pair alone."""
        host = self.schema_host(client_info) if kind == "tools" else None
        items = self._items(kind, rev, host)
        if kind == "tools" and self._tool_search is not None:
            items = self._tool_search.listed(items, full, host)
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

    def schema_host(self, client_info: dict[str, Any] | None) -> str | None:
        """The host whose names and schemas a client is shown (host_schemas), or None: as registered."""
        if self._host_schemas is None:
            return None
        target_for = _entry("mcpkit.hostschemas", "target_for")
        return target_for(self._host_schemas, client_info)  # type: ignore[no-any-return]

    def host_call(self, client_info: dict[str, Any] | None, tool: Any, name: str, params: dict[str, Any]) -> Any:
        """A tools/call under host_schemas as a call of the registered tool (mcpkit/hostschemas.py)."""
        return _entry("mcpkit.hostschemas", "served_call")(self, client_info, tool, name, params)

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
    def proxy(cls, target: Any, *, name: str | None = None, policy: Any = None, host_schemas: str | None = None,
              **options: Any) -> Server:
        """A server that mirrors ``target`` (a command line, a URL, a Server or an unconnected
        :class:`mcpkit.Client`) and forwards everything to it: mcpkit's guard rails in front of a
        server written elsewhere. ``host_schemas`` is the Server's; the other options are
        :class:`mcpkit.proxy.Upstream`'s."""
        proxy_server = _entry("mcpkit.proxy.upstream", "proxy_server")
        server: Server = proxy_server(cls, target, name=name, policy=policy, **options)
        server.host_schemas = host_schemas
        return server

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
        catalog at ``/.well-known/mcp/catalog.json``), ``card_name`` (its reverse-DNS name) and
        ``shutdown_timeout`` (seconds requests in flight get when the server shuts down; its
        open streams end at once: transports/http_drain.py), ``forwarded_allow_ips`` (the
        proxies whose ``X-Forwarded-For`` names the client: addresses, networks or ``*``;
        default none: transports/forwarded.py), ``health`` (default on: ``/healthz`` and
        ``/readyz`` for load balancers, without auth; ``readiness``, a callable returning
        ``(ready, details)``, adds to what ``/readyz`` checks: transports/health.py). Mounted under a prefix
        (``Mount("/api", app)``) it serves ``/api/mcp`` (transports/mount.py).
        """
        app_class = _entry("mcpkit.transports.http", "McpHttpApp")
        if options.get("auth") is None and self.auth is not None:
            options["auth"] = self.auth
        cors = options.pop("cors_origins", None)
        trusted = options.pop("forwarded_allow_ips", None)
        health = options.pop("health", True)
        readiness = options.pop("readiness", None)
        options.pop("root_path", None)  # the prefix arrives in each request's scope (transports/mount.py)
        if cors:
            # a page's origin that may call the server must also pass the DNS-rebinding check (HS-02)
            options["allowed_origins"] = [*(options.get("allowed_origins") or ()), *cors]
        mcp = app = app_class(self, **options)
        if cors:
            app = _entry("mcpkit.transports.cors", "CorsMiddleware")(app, cors)
        if health:
            app = _entry("mcpkit.transports.health", "HealthRoutes")(app, mcp.guard, readiness)
        # outermost: everything inside sees the client's address, not the proxy's
        return _entry("mcpkit.transports.forwarded", "behind_proxies")(app, trusted)

    def check_environment(self) -> None:
        """Refuse to serve in an environment this server would not honour (docs/environment.md):
        a policy the environment asked for that could not be built, an ``MCPKIT_*`` value that does
        not parse, a policy switch on a server without a policy, a switch only the ``mcpkit``
        command reads. A SwitchError of one line; every transport calls this as it starts."""
        if self._policy_error is not None:
            raise self._policy_error
        from ..switches import check

        key_variable = getattr(self.auth, "env", None) if callable(getattr(self.auth, "stdio_access", None)) else None
        check(server=self.name, policy=self._policy is not None, key_variable=key_variable)

    def run(self, transport: str = "stdio", *, host: str = "127.0.0.1", port: int = 8000, **options: Any) -> None:
        """Serve until stopped: ``"stdio"`` (until EOF or SIGTERM) or ``"http"`` (uvicorn; also
        spelled ``"streamable-http"`` or ``"sse"``: it serves both transports).

        HTTP binds to 127.0.0.1 unless told otherwise (HS-03). A mistake in the environment (a bad
        ``MCPKIT_*`` value, a switch nothing here reads, an optional package not installed) is
        one line on stderr and exit code 2, as under ``mcpkit serve``.
        """
        from .._extras import MissingExtra

        startup_line = _entry("mcpkit.startup", "startup_line")
        announce = _entry("mcpkit.startup", "announce")  # stderr, in one write: stdout is the wire
        if transport in ("streamable-http", "sse"):
            # the names FastMCP and the official SDK give them: one mcpkit HTTP app serves both,
            # Streamable HTTP at /mcp and the legacy HTTP+SSE transport at /sse
            transport = "http"
        try:
            if transport == "stdio":
                self.check_environment()  # before the start-up line, which would say it serves
                announce(startup_line(self, "stdio"))
                _entry("mcpkit.transports.stdio", "run_stdio")(self, **options)
            elif transport == "http":
                path = options.get("path", "/mcp")
                options.setdefault("on_ready", lambda base: announce(startup_line(self, "http", base + path)))
                _entry("mcpkit.transports.serve", "serve_http")(self, host=host, port=port, **options)
            else:
                raise ValueError(f"unknown transport {transport!r}: use 'stdio' or 'http' (which also serves "
                                 "'streamable-http' and 'sse')")
        except (SwitchError, MissingExtra) as exc:
            import sys

            print(f"mcpkit: {exc}", file=sys.stderr, flush=True)
            raise SystemExit(2) from None


def _transitions(bridges: dict[int, Any]) -> tuple[int, ...]:
    return tuple(getattr(bridge, "transitions", 0) for bridge in bridges.values())


def _entry(module: str, name: str) -> Any:
    """A transport's entry point: transports sit above the server (they import it), so the
    conveniences ``run`` and ``http_app`` find them by name when called; so are the proxy and
    mcpkit/hostschemas.py (it reads hosts.py, which compiles schemas with the server's validator)."""
    import importlib

    return getattr(importlib.import_module(module), name)
