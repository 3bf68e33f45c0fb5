"""TCP front end of the simulator: one connection = one engine session.

The idle timeout is a socket timeout: a connection that sends nothing for ``engine.idle_timeout``
seconds is closed and its session (with any uncommitted batch) is dropped. A drop-after-commit fault
shuts the socket down without a reply, which is what a client sees when a reply is lost.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from typing import Any

from legacy_sim.engine import EngineSession, LegacyEngine, SessionDropped
from legacy_sim.protocol import (
    INVALID,
    MAX_LINE_BYTES,
    CommandError,
    encode_err,
    encode_ok,
    parse_request,
)

__all__ = ["SimulatorServer", "start_server"]


class _TCPServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False
    # socketserver's default listen backlog is 5: with more clients connecting at once, the rest
    # wait for a SYN retransmit (1 s), which no real system's listener does.
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], engine: LegacyEngine) -> None:
        self.engine = engine
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        super().__init__(address, _Handler)

    closing = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not self.closing:  # errors while shutting down are just connections being cut
            super().handle_error(request, client_address)

    def track(self, conn: socket.socket, active: bool) -> None:
        with self._conns_lock:
            if active:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    def open_connections(self) -> int:
        with self._conns_lock:
            return len(self._conns)

    def drop_all(self) -> None:
        """Cut every open connection so handler threads end promptly on close."""
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            _hard_close(conn)


def _hard_close(conn: socket.socket) -> None:
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        conn.close()


class _Handler(socketserver.StreamRequestHandler):
    server: _TCPServer

    def setup(self) -> None:
        # The socket's timeout is the idle timeout (None: wait for ever, as StreamRequestHandler would).
        self.request.settimeout(self.server.engine.idle_timeout)
        super().setup()
        self.server.track(self.connection, True)

    def handle(self) -> None:
        session = self.server.engine.open_session()
        try:
            self._serve(session)
        finally:
            session.close()
            self.server.track(self.connection, False)

    def _serve(self, session: EngineSession) -> None:
        while True:
            try:
                line = self.rfile.readline(MAX_LINE_BYTES + 1)
            except (TimeoutError, OSError, ValueError):
                return  # idle timeout or connection gone: the session dies with it
            if not line:
                return
            if not line.endswith(b"\n"):
                if len(line) > MAX_LINE_BYTES:
                    self._reply(encode_err(INVALID, f"line longer than {MAX_LINE_BYTES} bytes"))
                return  # incomplete last line (peer closed) or desynchronised stream
            try:
                reply = encode_ok(session.execute(parse_request(line)))
            except CommandError as exc:
                reply = encode_err(exc.code, exc.message)
            except SessionDropped:
                _hard_close(self.connection)
                return
            except Exception:
                # An engine failure we did not foresee: we cannot say whether anything was applied,
                # so behave like a lost reply (the client must reconcile) rather than guess a code.
                _hard_close(self.connection)
                raise
            if not self._reply(reply):
                return

    def _reply(self, data: bytes) -> bool:
        try:
            self.wfile.write(data)
            return True
        except OSError:
            return False

    def finish(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            super().finish()


class SimulatorServer:
    """A running TCP simulator. Use :func:`start_server`; ``close()`` stops it and cuts connections."""

    def __init__(self, engine: LegacyEngine, host: str = "127.0.0.1", port: int = 0) -> None:
        self.engine = engine
        self._server = _TCPServer((host, port), engine)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="legacy-sim", daemon=True
        )
        self._closed = False

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def open_connections(self) -> int:
        """Connections being served now; one an idle timeout dropped no longer counts."""
        return self._server.open_connections()

    def start(self) -> SimulatorServer:
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop accepting, cut open connections (their sessions drop uncommitted work). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._server.closing = True
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
        self._server.drop_all()
        self._thread.join(timeout=5)

    def __enter__(self) -> SimulatorServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def start_server(engine: LegacyEngine, host: str = "127.0.0.1", port: int = 0) -> SimulatorServer:
    """Start a server in a daemon thread; ``port=0`` picks a free port (see ``.address``)."""
    return SimulatorServer(engine, host, port).start()
