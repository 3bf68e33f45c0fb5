"""Prometheus metrics of one HTTP app, in a registry of its own (never the global default one).

Metric families:

* ``adapter_operations{status}`` (gauge): operations in the store by status, counted at scrape time
  (every known status is shown, 0 when there is none);
* ``adapter_reconciliation_lag_seconds`` (gauge): how long the oldest unresolved operation
  (outcome unknown, in progress, compensating, needs operator) has waited; 0 when there is none;
* ``adapter_late_commits_found{finding}`` (gauge): COMMITs found to have landed after their
  ``not_committed`` verdict (adapter/services/late_commits.py), by finding, counted in the store;
* ``adapter_store_up`` (gauge): 1 when the scrape could read the store, else 0 (and the two above
  are left out of that scrape);
* ``adapter_legacy_call_duration_seconds{command,outcome}`` (histogram): every call to the legacy
  system, timed by :class:`~adapter.legacy.instrumented.InstrumentedPort`;
* ``adapter_tool_calls_total{tool,outcome}`` (counter): MCP ``tools/call`` requests, fed by the
  request middleware (``RequestLog(on_request=...)``). Label values are bounded: a tool name the
  server does not know is ``unknown``, an outcome is ``ok``, ``input_required``, ``cancelled``,
  ``internal_error``, ``error:<code>`` or ``jsonrpc_error:<number>``.

Who may read ``/metrics``: with an admin token configured, a viewer or operator token (as for
``GET /admin/*``); without one, only loopback clients (the kit's local mode).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator

from fastapi import APIRouter, HTTPException, Request, Response, status
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from adapter.domain.states import OperationState
from adapter.entrypoints.admin.deps import admin_enabled, require_viewer
from adapter.services.admin import AdminService
from adapter.services.late_commits import late_commit_counts

__all__ = ["LEGACY_BUCKETS", "AdapterMetrics", "metrics_router"]

log = logging.getLogger("adapter.metrics")

LEGACY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
_CODE = re.compile(r"^(error|jsonrpc_error):[A-Za-z0-9_.-]{1,40}$")
_PLAIN_OUTCOMES = frozenset({"ok", "input_required", "cancelled", "internal_error"})


class _StoreCollector(Collector):
    """Reads the store at scrape time: operations by status and the reconciliation lag."""

    def __init__(self, admin: AdminService) -> None:
        self.admin = admin

    def describe(self) -> Iterable[Metric]:
        return []  # nothing at registration: collecting queries the database

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("adapter_store_up", "1 when this scrape could read the store, else 0.")
        try:
            counts = self.admin.status_counts()
            lag = self.admin.unresolved_age_seconds()
            found = late_commit_counts(self.admin.ctx)
        except Exception as exc:
            log.warning("metrics: the store could not be read: %s", type(exc).__name__)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        operations = GaugeMetricFamily(
            "adapter_operations", "Operations in the store by status.", labels=["status"]
        )
        for name in sorted({s.value for s in OperationState} | set(counts)):
            operations.add_metric([name], counts.get(name, 0))
        yield operations
        yield GaugeMetricFamily(
            "adapter_reconciliation_lag_seconds",
            "Seconds the oldest unresolved operation has waited (0 when none).",
            value=lag,
        )
        late = GaugeMetricFamily(
            "adapter_late_commits_found",
            "COMMITs found to have landed after a not_committed verdict, by finding (events in the store).",
            labels=["finding"],
        )
        for finding in sorted(
            {"late_commit_recorded", "second_batch", "committed_after_import_moved_on"} | set(found)
        ):
            late.add_metric([finding], found.get(finding, 0))
        yield late


class AdapterMetrics:
    """The metrics of one app; ``observe_legacy`` and ``observe_request`` are the feeding hooks."""

    def __init__(self, admin: AdminService, known_tools: Iterable[str] = ()) -> None:
        self.registry = CollectorRegistry()
        self.known_tools = frozenset(known_tools)
        self.registry.register(_StoreCollector(admin))
        self.legacy_calls = Histogram(
            "adapter_legacy_call_duration_seconds",
            "Duration of calls to the legacy system, by command and outcome.",
            ["command", "outcome"],
            buckets=LEGACY_BUCKETS,
            registry=self.registry,
        )
        self.tool_calls = Counter(
            "adapter_tool_calls",
            "MCP tool calls, by tool and outcome.",
            ["tool", "outcome"],
            registry=self.registry,
        )

    def observe_legacy(self, command: str, seconds: float, outcome: str) -> None:
        self.legacy_calls.labels(command=command, outcome=outcome).observe(seconds)

    def observe_request(self, method: str, tool: str | None, outcome: str, seconds: float) -> None:
        if method != "tools/call":
            return
        name = tool if tool in self.known_tools else "unknown"
        if outcome not in _PLAIN_OUTCOMES and not _CODE.match(outcome):
            outcome = "error:other"
        self.tool_calls.labels(tool=name, outcome=outcome).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _may_read_metrics(request: Request) -> None:
    settings = request.app.state.kit.settings
    if admin_enabled(settings):
        require_viewer(request)  # 401 without a valid viewer or operator token
        return
    host = request.client.host if request.client else None
    if host not in LOOPBACK:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "metrics are served to loopback clients only")


def metrics_router(metrics: AdapterMetrics) -> APIRouter:
    router = APIRouter(tags=["health"])

    @router.get(
        "/metrics",
        summary="Prometheus metrics",
        response_class=Response,
        responses={
            200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text format."},
            401: {"description": "An admin token is configured and none (or a wrong one) was sent."},
            403: {"description": "No admin token is configured and the client is not on loopback."},
        },
    )
    def read_metrics(request: Request) -> Response:
        """Prometheus text exposition of this app's metrics.

        Access: when an admin token is configured, send a viewer (or operator) token as
        ``Authorization: Bearer``; without one, only loopback clients may read it.
        """
        _may_read_metrics(request)
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    return router
