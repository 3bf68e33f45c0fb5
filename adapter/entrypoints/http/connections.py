"""How the HTTP server treats connections: timeouts for headers and bodies, how many at once, and
which peers may say who the client is (uvicorn's settings, from ``ADAPTER_*``).

uvicorn closes a keep-alive connection that stays idle after a response (``timeout_keep_alive``),
but a connection that sends half a request's headers, or nothing at all, or a body a byte at a
time, is held for ever: a few hundred such sockets cost a client nothing. So the HTTP protocol is
uvicorn's own h11 implementation with two deadlines (:func:`timed_protocol`, passed as uvicorn's
``http`` class):

* **headers** (``ADAPTER_HTTP_HEADER_TIMEOUT_SECONDS``): from the moment a connection opens, or the
  first byte of a following request arrives, until its headers are complete;
* **body** (``ADAPTER_HTTP_BODY_TIMEOUT_SECONDS``): from the end of the headers until the whole body
  is in (a total, so a trickle does not keep renewing it).

Past either the connection is closed; the request, if one had started, sees the client go away.
Streams the server sends (SSE) are not affected: their requests were complete long before.

``limit_concurrency`` (``ADAPTER_HTTP_MAX_CONNECTIONS``) answers 503 to a request once that many
connections or requests are open. ``X-Forwarded-For`` and ``X-Forwarded-Proto`` are believed only
from ``ADAPTER_TRUSTED_PROXIES`` (uvicorn trusts loopback by default, so a local client could pick
its address, and the dashboard's login throttle counts failures per address).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from adapter.config import Settings

__all__ = ["timed_protocol", "uvicorn_options"]


class _TimedH11(H11Protocol):
    """uvicorn's h11 protocol with a deadline for a request's headers and one for its body."""

    header_timeout = 10.0
    body_timeout = 30.0
    _deadline: asyncio.TimerHandle | None = None
    _waiting_for: object = None  # h11.IDLE (headers) or h11.SEND_BODY while a deadline runs

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(h11.IDLE, self.header_timeout)  # a socket that says nothing is closed too

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        state = self.conn.their_state
        if state is h11.IDLE:  # (the rest of) a request's headers still to come
            self._arm(h11.IDLE, self.header_timeout)
        elif state is h11.SEND_BODY:
            self._arm(h11.SEND_BODY, self.body_timeout)
        else:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._disarm()  # uvicorn's keep-alive timeout takes over until the next byte

    def _arm(self, phase: object, seconds: float) -> None:
        if self._waiting_for is phase:
            return  # a running deadline is not renewed by more bytes of the same phase
        self._disarm()
        self._waiting_for = phase
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline, self._waiting_for = None, None

    def _expired(self) -> None:
        self._deadline, self._waiting_for = None, None
        if not self.transport.is_closing():
            self.transport.close()


def timed_protocol(header_timeout: float, body_timeout: float) -> type[H11Protocol]:
    """The protocol class for uvicorn's ``http`` setting, with these deadlines."""
    return type(
        "TimedH11Protocol", (_TimedH11,), {"header_timeout": header_timeout, "body_timeout": body_timeout}
    )


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """uvicorn's settings for this server (``serve``, each worker of ``serve --workers``, the tests)."""
    trusted = settings.trusted_proxies
    return {
        "http": timed_protocol(settings.http_header_timeout_seconds, settings.http_body_timeout_seconds),
        "timeout_keep_alive": settings.http_keep_alive_seconds,
        "limit_concurrency": settings.http_max_connections,
        "proxy_headers": bool(trusted),
        "forwarded_allow_ips": list(trusted) if trusted else [],
    }
