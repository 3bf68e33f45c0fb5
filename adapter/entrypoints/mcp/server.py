"""The MCP server: a low-level SDK ``Server`` whose handlers translate to the service layer.

The low-level server is used (not ``MCPServer``) because the kit needs what ``MCPServer`` does not
offer: paginated ``resources/list`` with signed cursors, per-result cache hints, business errors as
``isError`` results whose text starts with a stable code, and access control on subscriptions.
Everything here is per request; nothing is remembered between requests except in the store.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

from mcp.server import CacheHint, Server, ServerRequestContext
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.context import CallNext, HandlerResult
from mcp.server.extension import Extension, compose_tool_call_handler
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import RequestStateBoundary, RequestStateSecurity
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    EmptyResult,
    GetPromptRequestParams,
    GetPromptResult,
    InputRequiredResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    Result,
    ServerCapabilities,
    SubscribeRequestParams,
    SubscriptionFilter,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
    TextContent,
    TextResourceContents,
    UnsubscribeRequestParams,
)
from pydantic import BaseModel, ValidationError

from adapter import __version__
from adapter.config import Settings
from adapter.domain.cursors import InvalidCursor
from adapter.domain.errors import AdapterError, HandleNotFound, InvalidRequest, OperationNotFound
from adapter.domain.identity import HandleCodec, Principal
from adapter.domain.quotas import QuotaExceeded
from adapter.domain.views import CommitResult
from adapter.entrypoints.mcp.apps import ImportReviewApp
from adapter.entrypoints.mcp.bus import OwnerScopedBus, listening_as
from adapter.entrypoints.mcp.catalog import DEFAULT_INSTRUCTIONS as INSTRUCTIONS  # noqa: F401 (kept name)
from adapter.entrypoints.mcp.catalog import TARGETS_URI, instructions, present_tools, read_targets
from adapter.entrypoints.mcp.eras import EraGate, era_of
from adapter.entrypoints.mcp.identity import Unauthenticated, current_principal
from adapter.entrypoints.mcp.legacy import LegacySubscriptions, connection_of
from adapter.entrypoints.mcp.listen import ListenStreams, TaskUpdated
from adapter.entrypoints.mcp.observability import OnRequest, RequestLog, spans_wanted
from adapter.entrypoints.mcp.tasks import (
    TASKS,
    TaskNotification,
    TaskNotificationParams,
    TasksExtension,
    declares_tasks,
)
from adapter.entrypoints.mcp.tools import (
    Call,
    StartTask,
    Tool,
    build_tools,
    commit_out,
    json_schema,
    run_in_thread,
    start_commit,
)
from adapter.services import CommitState, ImportService
from adapter.services.commit.confirmation import Proceed
from adapter.services.listing import ImportChange
from adapter.services.quotas import Slots

__all__ = ["SERVER_NAME", "McpGateway", "import_uri"]

SERVER_NAME = "legacy-import-adapter"
URI_PREFIX = "import://"
INVALID_PARAMS = -32602
QUOTA_EXCEEDED = -32029  # implementation-defined server error (the -32000..-32099 range), as HTTP 429
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
METHOD_NOT_FOUND = -32601


def import_uri(handle: str) -> str:
    return URI_PREFIX + handle


def _task_ids(extra: dict[str, Any] | None) -> list[str] | None:
    """The ``taskIds`` a listen request asked for (an extension key of its filter), or None."""
    value = (extra or {}).get("taskIds")
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(item, str) and 0 < len(item) <= 64 for item in value
    ):
        raise MCPError(INVALID_PARAMS, "taskIds must be a list of task ids")
    return list(dict.fromkeys(value))


def _handle_of(uri: str) -> str | None:
    if not uri.startswith(URI_PREFIX):
        return None
    handle = uri[len(URI_PREFIX) :]
    return handle if HandleCodec.looks_like_handle(handle) else None


def tool_error(code: str, message: str, details: dict[str, Any] | None = None) -> CallToolResult:
    """A business error as the model sees it: ``isError`` with a stable code before the colon, and
    the error's safe details (an operation id, a refusal) as structured content when it has any."""
    structured = {"code": code, **details} if details else None
    return CallToolResult(
        content=[TextContent(type="text", text=f"{code}: {message}")],
        is_error=True,
        structured_content=structured,
    )


def _tool_result(out: BaseModel) -> CallToolResult:
    """A tool's output model as its result: the structured content, and the same JSON as text."""
    structured = out.model_dump(mode="json")
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(structured))], structured_content=structured
    )


def _apply(server: Server[Any], extension: Extension, call_tool: Any) -> None:
    """Apply an SDK extension to the low-level server, as ``MCPServer(extensions=...)`` would: its
    methods (gated to their protocol versions), its ``tools/call`` interceptor, its advertisement."""
    for binding in extension.methods():
        handler = binding.handler
        if binding.protocol_versions is not None:
            handler = _version_gated(binding.handler, binding.protocol_versions, binding.method)
        server.add_request_handler(binding.method, binding.params_type, handler)
    server.add_request_handler(
        "tools/call", CallToolRequestParams, compose_tool_call_handler([extension], call_tool)
    )
    server.extensions[extension.identifier] = extension.settings()


def _version_gated(handler: Any, versions: frozenset[str], method: str) -> Any:
    async def gated(ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        if ctx.protocol_version not in versions:
            raise MCPError(METHOD_NOT_FOUND, "Method not found", data=method)
        result: HandlerResult = await handler(ctx, params)
        return result

    return gated


def _validation_message(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "arguments"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}"


class _AdapterServer(Server[Any]):
    """The SDK server, advertising exactly the change notifications this server sends, in both eras.

    At 2026-07-28 the SDK derives ``listChanged`` for tools, prompts and resources from serving
    ``subscriptions/listen``. Only the resource list ever changes here (imports begin, expire and
    are purged); the tools and the (empty) prompt list are fixed for the life of a process, so
    their ``listChanged`` is not advertised and a listen stream does not acknowledge them.

    The handshake era takes its capabilities from ``create_initialization_options()``, whose default
    announces no list changes; this server sends ``notifications/resources/list_changed`` to its
    legacy sessions (see :class:`~adapter.entrypoints.mcp.legacy.LegacySubscriptions`).
    """

    def get_capabilities(self, *args: Any, **kwargs: Any) -> ServerCapabilities:
        capabilities = super().get_capabilities(*args, **kwargs)
        update: dict[str, Any] = {}
        if era_of(kwargs.get("protocol_version")) != "modern" and capabilities.extensions:
            # The Tasks extension is declared per request, a 2026-07-28 notion: not offered to a session.
            rest = {k: v for k, v in capabilities.extensions.items() if k != TASKS}
            update["extensions"] = rest or None
        if capabilities.tools is not None:
            update["tools"] = capabilities.tools.model_copy(update={"list_changed": None})
        if capabilities.prompts is not None:
            update["prompts"] = capabilities.prompts.model_copy(update={"list_changed": None})
        return capabilities.model_copy(update=update)

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(resources_changed=True),
            experimental_capabilities,
            extensions,
        )


class McpGateway:
    """Builds the MCP server for one process and owns its subscription bus."""

    def __init__(
        self, service: ImportService, settings: Settings, *, on_request: OnRequest | None = None
    ) -> None:
        self.service = service
        self.settings = settings
        self._on_request = on_request  # told each request's outcome (the app's metrics)
        self.bus = OwnerScopedBus()
        self.legacy = LegacySubscriptions()  # resources/subscribe of 2025-era sessions
        self._listen = ListenStreams(self.bus)
        # Listen streams per principal (the SDK bounds only the total), see adapter/services/quotas.py.
        self.listen_slots = Slots(service.ctx.quotas.max_listens_per_principal, "max_listens_per_principal")
        # 2025-era HTTP sessions per principal, the same way (counted by http/answers.py).
        self.legacy_session_slots = Slots(
            service.ctx.quotas.max_legacy_sessions_per_principal, "max_legacy_sessions_per_principal"
        )
        # The TTL in force (shorter in local mode) is decided once, by the wiring; the description says it.
        # Targets described, names prefixed (ADAPTER_TOOL_PREFIX): see catalog.py.
        self._wait = service.ctx.commit_policy.wait_seconds
        self.tools: dict[str, Tool] = {
            tool.name: tool
            for tool in present_tools(
                build_tools(service.ctx.default_ttl_seconds, self._wait),
                service.ctx.targets,
                settings.tool_prefix,
            )
        }
        # The tools that may ask the client something mid-call: a 2025-era call of one answers
        # over SSE (adapter/entrypoints/http/answers.py).
        self.streamed_tools = frozenset(name for name, tool in self.tools.items() if tool.may_ask_user)
        # Tasks (SEP-2663): a commit of a request that declared the extension becomes a task.
        commit_tools = frozenset(name for name, tool in self.tools.items() if tool.may_become_task)
        self.tasks = TasksExtension(
            service, self._principal, commit_tools, self.call_tool_as_task, self._commit_tool_result
        )
        # MCP Apps: the review view, for hosts that declare the extension (apps.py).
        self.apps = (
            ImportReviewApp(self.tools, prefix=settings.tool_prefix, server_name=settings.server_name)
            if settings.apps_view
            else None
        )
        self.server = self._build()

    def _build(self) -> Server[Any]:
        server: Server[Any] = _AdapterServer(
            self.settings.server_name,
            version=__version__,
            title=self.settings.server_title,
            instructions=instructions(self.settings),
            cache_hints={
                "server/discover": CacheHint(ttl_ms=3_600_000, scope="public"),
                "tools/list": CacheHint(ttl_ms=300_000, scope="public"),
                "prompts/list": CacheHint(ttl_ms=300_000, scope="public"),
                "resources/templates/list": CacheHint(ttl_ms=300_000, scope="public"),
            },
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_prompts=self.list_prompts,
            on_get_prompt=self.get_prompt,
            on_list_resources=self.list_resources,
            on_list_resource_templates=self.list_resource_templates,
            on_read_resource=self.read_resource,
            on_subscriptions_listen=self.listen,
            on_subscribe_resource=self.subscribe,
            on_unsubscribe_resource=self.unsubscribe,
            # Mcp-Param header validation looks the schema up here instead of dispatching an
            # internal tools/list through the middleware (which logged a second line per call).
            get_tool_input_schema=self._tool_input_schema,
        )
        _apply(server, self.tasks, self.call_tool)
        if self.apps is not None:
            self.apps.apply(server)
        keys = [self.service.ctx.codec.derive_key(b"adapter/request-state/v1")]
        if not spans_wanted(self.settings.otel_spans):
            # The SDK's documented opt-out: drop its span middleware from the list.
            server.middleware[:] = [
                m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)
            ]
        server.middleware.append(RequestLog(on_request=self._on_request))
        server.middleware.append(EraGate(self.settings.protocol_eras))
        server.middleware.append(self._track_legacy)
        server.middleware.append(
            RequestStateBoundary(
                # One lifetime for a confirmation: the sealed state expires with ADAPTER_CONFIRM_MAX_SECONDS.
                RequestStateSecurity(
                    keys=keys, audience=SERVER_NAME, ttl=float(self.settings.confirm_max_seconds)
                ),
                default_audience=SERVER_NAME,
            )
        )
        return server

    def _principal(self) -> Principal:
        return current_principal(auth_required=not self.settings.local_mode)

    # --- tools ---------------------------------------------------------------------------------

    def _tool_input_schema(self, name: str) -> dict[str, Any] | None:
        # Called on every tools/call (Mcp-Param header check): building the JSON schema anew cost
        # 0.2-0.6 ms of event-loop CPU per call, so it is built once per input model.
        tool = self.tools.get(name)
        return json_schema(tool.input_model) if tool is not None else None

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        definitions = [tool.definition() for tool in self.tools.values()]
        if self.apps is not None:
            definitions = self.apps.present(ctx, definitions)
        return ListToolsResult(tools=definitions)

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        return await self._call_tool(ctx, params, None)  # type: ignore[return-value]

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams, start_task: StartTask | None
    ) -> CallToolResult | Result:
        tool = self.tools.get(params.name)
        if tool is None:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name}")
        try:
            args = tool.input_model.model_validate(params.arguments or {})
        except ValidationError as exc:
            return tool_error(InvalidRequest.code, _validation_message(exc))
        call = Call(self._principal(), self.service, ctx, params, self._wait, start_task)
        try:
            out = await tool.run(call, args)
        except AdapterError as exc:
            return tool_error(exc.code, exc.message, exc.details)
        if isinstance(out, Result):  # input_required, or a task
            return out
        return _tool_result(out)

    async def call_tool_as_task(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult | Result:
        """``commit_import`` for a request that declared the Tasks extension (``tasks.py``)."""
        return await self._call_tool(ctx, params, self._start_task)

    async def _start_task(self, call: Call, handle: str, step: Proceed) -> BaseModel:
        """The confirmed commit, answered as a task once claimed; a replay of a finished commit is
        answered with its result as usual."""
        started = await start_commit(call, handle, step)
        if isinstance(started, CommitResult) and (
            started.status != "in_progress" or started.operation_id is None
        ):
            return commit_out(started, self._wait)
        operation_id = started.operation_id
        assert operation_id is not None
        state = await run_in_thread(self.service.commit_state, call.principal, operation_id)
        return self.tasks.created(state)

    def _commit_tool_result(self, state: CommitState) -> dict[str, Any]:
        """What ``commit_import`` would answer for this commit, as the task's inlined result."""
        try:
            result = _tool_result(commit_out(state.answer, self._wait))
        except AdapterError as exc:
            result = tool_error(exc.code, exc.message, exc.details)
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)

    # --- prompts -------------------------------------------------------------------------------

    async def list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListPromptsResult:
        """No prompts, but an (empty, cacheable) list rather than -32601 for generic clients."""
        return ListPromptsResult(prompts=[])

    async def get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: GetPromptRequestParams
    ) -> GetPromptResult:
        raise MCPError(INVALID_PARAMS, f"Unknown prompt: {params.name}")

    # --- resources -----------------------------------------------------------------------------

    async def list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        cursor = params.cursor if params is not None else None
        try:
            page = await run_in_thread(
                self.service.list_imports, self._principal(), cursor=cursor, limit=self.settings.page_size
            )
        except InvalidCursor:
            raise MCPError(INVALID_PARAMS, "Invalid cursor") from None
        resources = [
            Resource(
                uri=import_uri(item.handle),
                name=f"import {item.import_id[:8]} into {item.target}",
                description=f"{item.status}, {item.record_count} records",
                mime_type="application/json",
            )
            for item in page.items
        ]
        return ListResourcesResult(
            resources=resources, next_cursor=page.next_cursor, ttl_ms=5_000, cache_scope="private"
        )

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        template = ResourceTemplate(
            uri_template="import://{handle}",
            name="import",
            title="An import and its operations",
            description="The JSON state of the import with this handle.",
            mime_type="application/json",
        )
        targets = ResourceTemplate(
            uri_template=TARGETS_URI + "{name}",
            name="target",
            title="A target and the JSON Schema of one record",
            description="targets:// lists every target; targets://{name} is one (name, description, schema).",
            mime_type="application/json",
        )
        return ListResourceTemplatesResult(resource_templates=[template, targets])

    async def read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        uri = str(params.uri)
        if self.apps is not None and self.apps.serves(uri):
            return await self.apps.read(ctx, uri, self._principal, self.service)
        if uri.startswith(TARGETS_URI):
            text = read_targets(self.service.ctx.targets, uri)
            if text is None:
                raise MCPError(INVALID_PARAMS, "Resource not found", data={"uri": uri})
            contents = TextResourceContents(uri=uri, mime_type="application/json", text=text)
            return ReadResourceResult(contents=[contents], ttl_ms=300_000, cache_scope="public")
        handle = _handle_of(uri)
        try:
            if handle is None:
                raise HandleNotFound()
            view = await run_in_thread(self.service.status, self._principal(), handle)
        except HandleNotFound:
            raise MCPError(INVALID_PARAMS, "Resource not found", data={"uri": uri}) from None
        body = {
            "handle": view.handle,
            "import_id": view.import_id,
            "status": view.status,
            "target": view.target,
            "record_count": view.record_count,
            "legacy_batch_id": view.legacy_batch_id,
            "expires_at": view.expires_at.isoformat(),
            "updated_at": view.updated_at.isoformat(),
            "operations": [
                {"operation_id": o.operation_id, "kind": o.kind, "status": o.status} for o in view.operations
            ],
            "earlier_operations": view.earlier_operations,
        }
        contents = TextResourceContents(uri=uri, mime_type="application/json", text=json.dumps(body))
        return ReadResourceResult(contents=[contents], ttl_ms=0, cache_scope="private")

    # --- subscriptions -------------------------------------------------------------------------

    async def listen(
        self, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        """Honor resource subscriptions only for the caller's own imports, and ``taskIds`` (the Tasks
        extension, declared on this request) only for the caller's own commits; drop the rest silently.

        ``resourcesListChanged`` is honored for the caller's own import list; tool and prompt list
        changes are never sent, so they are not acknowledged.
        """
        principal = self._principal()
        requested = params.notifications.resource_subscriptions or []
        task_ids = _task_ids(params.notifications.model_extra)
        if task_ids is not None and not declares_tasks(ctx):
            raise MCPError(
                MISSING_REQUIRED_CLIENT_CAPABILITY,
                "Missing required client capability",
                data={"requiredCapabilities": {"extensions": {TASKS: {}}}},
            )
        quotas = self.service.ctx.quotas
        try:
            if len(requested) + len(task_ids or ()) > quotas.max_uris_per_listen:
                raise QuotaExceeded(
                    f"at most {quotas.max_uris_per_listen} resource URIs and task ids per listen request",
                    "max_uris_per_listen",
                    quotas.max_uris_per_listen,
                )
            with self.listen_slots.hold(f"{principal.tenant}/{principal.subject}", "listen streams"):
                owned = [uri for uri in requested if await self._owns(principal, uri)]
                tasks = [task for task in task_ids or () if await self._owns_task(principal, task)]
                notifications = SubscriptionFilter(
                    resources_list_changed=params.notifications.resources_list_changed,
                    resource_subscriptions=owned or None,
                )
                with listening_as(principal):
                    return await self._listen(
                        ctx,
                        params.model_copy(update={"notifications": notifications}),
                        task_ids=tasks if task_ids is not None else None,
                        task_frame=lambda task_id, meta: self._task_frame(principal, task_id, meta),
                    )
        except QuotaExceeded as exc:
            raise MCPError(QUOTA_EXCEEDED, str(exc), data={"code": exc.code, "limit": exc.limit}) from None

    async def _owns_task(self, principal: Principal, task_id: str) -> bool:
        try:
            await run_in_thread(self.service.commit_state, principal, task_id)
        except OperationNotFound:
            return False
        return True

    async def _task_frame(self, principal: Principal, task_id: str, meta: dict[str, Any]) -> Any:
        fields = await self.tasks.detailed(principal, task_id)
        if fields is None:
            return None
        return TaskNotification(params=TaskNotificationParams.model_validate({**fields, "_meta": meta}))

    async def _owns(self, principal: Any, uri: str) -> bool:
        handle = _handle_of(uri)
        if handle is None:
            return False
        try:
            await run_in_thread(self.service.status, principal, handle)
        except HandleNotFound:
            return False
        return True

    async def subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams
    ) -> EmptyResult:
        """A 2025-era subscription: honored for the caller's own imports only, refused otherwise."""
        uri = str(params.uri)
        if not await self._owns(self._principal(), uri):
            raise MCPError(INVALID_PARAMS, "Resource not found", data={"uri": uri})
        if not self.legacy.subscribe(connection_of(ctx), self._principal(), uri):
            raise MCPError(INVALID_PARAMS, "Too many subscriptions on this session")
        return EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams
    ) -> EmptyResult:
        self.legacy.unsubscribe(connection_of(ctx), str(params.uri))
        return EmptyResult()

    async def _track_legacy(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Middleware: remember each legacy-era connection, so it hears resource list changes."""
        if era_of(ctx.protocol_version) == "legacy":
            with contextlib.suppress(Unauthenticated):  # the handler refuses it
                self.legacy.track(connection_of(ctx), self._principal())
        return await call_next(ctx)

    def has_audience(self) -> bool:
        """Whether a change could reach anyone here: a listen stream, or a 2025-era connection."""
        return self.bus.has_listeners() or self.legacy.has_connections()

    def watch_audience(self, arrived: Callable[[], None]) -> None:
        """Have ``arrived`` called whenever a first listener comes to a process that had none: the
        feed then takes the audience lock at once, so other workers announce to it (``feed_pg.py``)."""
        self.bus.first_arrived = arrived
        self.legacy.first_arrived = arrived

    async def publish_changes(self, changes: list[ImportChange]) -> None:
        """One read's changed imports, to both eras: listen streams (the bus) and legacy sessions.

        Updates reach the streams that subscribed to an import (ownership was checked when they
        subscribed); a list change reaches only the owner whose import list changed.
        """
        for change in changes:
            uri = import_uri(change.handle)
            await self.bus.publish(ResourceUpdated(uri=uri))
            await self.legacy.resource_updated(uri)
            for operation_id in change.operations:  # a task's change, for streams that listen for it
                await self.bus.publish(TaskUpdated(operation_id))  # type: ignore[arg-type]
        for owner in dict.fromkeys(c.list_owner for c in changes if c.list_owner is not None):
            await self.bus.publish(ResourcesListChanged(), owner=owner)
            await self.legacy.list_changed(owner)

    def close(self) -> None:
        self._listen.close()
