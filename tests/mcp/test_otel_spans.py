"""``ADAPTER_OTEL_SPANS``: the SDK's span middleware runs only when spans can go somewhere."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.server._otel import OpenTelemetryMiddleware
from opentelemetry import trace

from adapter.entrypoints.mcp.server import McpGateway


def _spans_run(kit: Any) -> bool:
    gateway = McpGateway(kit.service, kit.settings)
    return any(isinstance(middleware, OpenTelemetryMiddleware) for middleware in gateway.server.middleware)


def test_without_a_tracer_provider_the_span_middleware_is_dropped(kit: Any) -> None:
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)  # nothing configured
    assert not _spans_run(kit)


def test_a_configured_tracer_provider_keeps_the_spans(kit: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", trace.NoOpTracerProvider)
    assert _spans_run(kit)


@pytest.mark.parametrize("settings_overrides", [{"otel_spans": True}])
def test_the_setting_switches_them_on_without_a_provider(kit: Any) -> None:
    assert _spans_run(kit)


@pytest.mark.parametrize("settings_overrides", [{"otel_spans": False}])
def test_the_setting_switches_them_off_with_a_provider(kit: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", trace.NoOpTracerProvider)
    assert not _spans_run(kit)


@pytest.mark.anyio
async def test_calls_work_without_the_span_middleware(server: Any) -> None:
    async with server.client() as client:
        begun = server.structured(await client.call_tool("begin_import", {"target": "customers"}))
    assert begun["handle"]
