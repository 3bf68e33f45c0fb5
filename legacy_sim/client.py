"""The simulator's own plain TCP client: what a direct user of the legacy system would use.

It knows nothing about the kit. Failures surface as two exceptions with different meanings:

* :class:`LegacySimError` (``.code``): the server answered ``ERR <CODE>``.
* :class:`ConnectionLostError`: no answer (dropped connection, timeout, refused connect).
  ``request_sent`` says whether the failing request may have reached the server; when it is False
  (connect refused, client already closed) nothing can have been applied.

After a :class:`ConnectionLostError` the client is closed: the session on the server is gone too.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Sequence
from typing import Any, BinaryIO, Protocol, runtime_checkable

from legacy_sim.protocol import (
    ADD,
    BEGIN,
    COMMIT,
    ENCODING,
    FAULTS,
    INVALID,
    MAX_LINE_BYTES,
    PING,
    ROLLBACK,
    STATUS,
    TRANSIENT,
    VOID,
    CommandError,
    Reply,
    Request,
    encode_request,
    parse_reply,
)

__all__ = [
    "ClientError",
    "ConnectFailedError",
    "ConnectionLostError",
    "LegacyClient",
    "LegacySimError",
    "SimClient",
    "check_record_texts",
    "encode_add_lines",
    "ok_reply",
    "pick_error",
]

#: How many pipelined ADD lines are in flight before their replies are read. Bounded so the server's
#: replies can never fill the socket buffers while we are still writing (a pipelining deadlock).
PIPELINE_WINDOW = 512


class ClientError(Exception):
    """Base of the client's exceptions."""


class LegacySimError(ClientError):
    """The server answered ``ERR <code> <message>``. ``index`` is the record position for add_many."""

    def __init__(self, code: str, message: str, index: int | None = None) -> None:
        super().__init__(f"{code}: {message}" if index is None else f"{code} (record {index}): {message}")
        self.code = code
        self.message = message
        self.index = index


class ConnectionLostError(ClientError):
    """No reply: the connection dropped or timed out. The server session is gone."""

    def __init__(self, message: str, *, request_sent: bool = True) -> None:
        super().__init__(message)
        self.request_sent = request_sent


class ConnectFailedError(ConnectionLostError):
    """Could not connect at all; nothing was sent."""

    def __init__(self, message: str) -> None:
        super().__init__(message, request_sent=False)


@runtime_checkable
class SimClient(Protocol):
    """The surface shared by :class:`LegacyClient` and ``legacy_sim.inprocess.InProcessClient``."""

    def begin(self, batch_ref: str) -> dict[str, Any]: ...
    def add(self, record: dict[str, Any]) -> dict[str, Any]: ...
    def add_many(self, records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]: ...
    def add_many_json(self, texts: Sequence[str]) -> int: ...
    def commit(self) -> dict[str, Any]: ...
    def rollback(self) -> dict[str, Any]: ...
    def status(self, batch_ref: str) -> dict[str, Any]: ...
    def void(self, legacy_batch_id: str) -> dict[str, Any]: ...
    def faults(self, **knobs: Any) -> dict[str, Any]: ...
    def ping(self) -> dict[str, Any]: ...
    def close(self) -> None: ...


def pick_error(errors: Sequence[LegacySimError]) -> LegacySimError:
    """The error to raise for a pipelined call: a definitive refusal beats a TRANSIENT one."""
    for error in errors:
        if error.code != TRANSIENT:
            return error
    return errors[0]


def check_record_texts(texts: Sequence[str]) -> None:
    """Refuse (INVALID, before anything is sent) a record text holding a line break: it would split
    into two request lines. Everything else about a text is the server's to judge."""
    joined = "".join(texts)
    if "\n" in joined or "\r" in joined:
        raise LegacySimError(INVALID, "a record text holds a line break")


def encode_add_lines(texts: Sequence[str]) -> bytes:
    """``ADD <text>`` lines for records already encoded as JSON object texts (checked by
    :func:`check_record_texts`), one line per text."""
    if not texts:
        return b""
    return ("ADD " + "\nADD ".join(texts) + "\n").encode(ENCODING)


def ok_reply(line: bytes) -> bool:
    """True for an ``OK {...}`` reply line (its JSON is not parsed: the caller does not need it)."""
    return line.startswith(b"OK {") and line.endswith(b"}\n")


def _encode(request: Request) -> bytes:
    try:
        return encode_request(request)
    except CommandError as exc:
        raise LegacySimError(exc.code, exc.message) from exc


class SingleCommands:
    """The one-request commands, shared by the TCP and the in-process client: each is one ``_call``."""

    def _call(self, request: Request) -> dict[str, Any]:
        raise NotImplementedError

    def begin(self, batch_ref: str) -> dict[str, Any]:
        return self._call(Request(BEGIN, arg=batch_ref))

    def add(self, record: dict[str, Any]) -> dict[str, Any]:
        return self._call(Request(ADD, payload=record))

    def commit(self) -> dict[str, Any]:
        return self._call(Request(COMMIT))

    def rollback(self) -> dict[str, Any]:
        return self._call(Request(ROLLBACK))

    def status(self, batch_ref: str) -> dict[str, Any]:
        return self._call(Request(STATUS, arg=batch_ref))

    def void(self, legacy_batch_id: str) -> dict[str, Any]:
        return self._call(Request(VOID, arg=legacy_batch_id))

    def faults(self, **knobs: Any) -> dict[str, Any]:
        """Change fault knobs (none: just read them); answers the current knobs."""
        return self._call(Request(FAULTS, payload=knobs))

    def ping(self) -> dict[str, Any]:
        return self._call(Request(PING))


class LegacyClient(SingleCommands):
    """One TCP connection = one legacy session. ``timeout`` bounds connect and each reply wait."""

    def __init__(self, host: str, port: int, timeout: float = 5.0) -> None:
        self.address = (host, port)
        try:
            self._sock: socket.socket | None = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise ConnectFailedError(f"cannot connect to legacy_sim at {host}:{port}: {exc}") from exc
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._rfile: BinaryIO | None = self._sock.makefile("rb")

    # -- commands -----------------------------------------------------------------------------

    def add_many(self, records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Pipelined ADDs: write the lines, then read every reply; raise after all replies are read.

        Lines go out in windows of :data:`PIPELINE_WINDOW`. All records are encoded before anything
        is sent, so a non-serialisable record fails (INVALID) with nothing sent.
        """
        lines = [_encode(Request(ADD, payload=record)) for record in records]
        results: list[dict[str, Any]] = []
        errors: list[LegacySimError] = []
        for start in range(0, len(lines), PIPELINE_WINDOW):
            window = lines[start : start + PIPELINE_WINDOW]
            self._send(b"".join(window))
            for offset in range(len(window)):
                reply = self._receive()
                if reply.ok:
                    results.append(reply.data or {})
                else:
                    errors.append(LegacySimError(reply.code or "", reply.message, index=start + offset))
        if errors:
            raise pick_error(errors)
        return results

    def add_many_json(self, texts: Sequence[str]) -> int:
        """Pipelined ADDs of records given as JSON object texts, sent as they are; answers how many
        were taken. Same windows and errors as :meth:`add_many`; an OK reply's JSON is not parsed."""
        check_record_texts(texts)
        errors: list[LegacySimError] = []
        for start in range(0, len(texts), PIPELINE_WINDOW):
            window = texts[start : start + PIPELINE_WINDOW]
            self._send(encode_add_lines(window))
            for offset in range(len(window)):
                line = self._receive_line()
                if ok_reply(line):
                    continue
                reply = self._parse(line)
                if not reply.ok:
                    errors.append(LegacySimError(reply.code or "", reply.message, index=start + offset))
        if errors:
            raise pick_error(errors)
        return len(texts)

    def close(self) -> None:
        """Close the connection; the server drops the session and any uncommitted batch."""
        rfile, sock = self._rfile, self._sock
        self._rfile = self._sock = None
        if rfile is not None:
            rfile.close()
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    @property
    def closed(self) -> bool:
        return self._sock is None

    def __enter__(self) -> LegacyClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- transport ----------------------------------------------------------------------------

    def _call(self, request: Request) -> dict[str, Any]:
        line = _encode(request)
        self._send(line)
        reply = self._receive()
        if not reply.ok:
            raise LegacySimError(reply.code or "", reply.message)
        return reply.data or {}

    def _lost(self, message: str, exc: BaseException | None = None) -> ConnectionLostError:
        self.close()
        text = f"connection to legacy_sim at {self.address[0]}:{self.address[1]} lost: {message}"
        if exc is not None:
            text += f" ({exc})"
        return ConnectionLostError(text)

    def _send(self, data: bytes) -> None:
        if self._sock is None:
            raise ConnectionLostError("client is closed", request_sent=False)
        try:
            self._sock.sendall(data)
        except OSError as exc:  # includes timeouts; part of the data may have been delivered
            raise self._lost("send failed", exc) from exc

    def _receive(self) -> Reply:
        return self._parse(self._receive_line())

    def _parse(self, line: bytes) -> Reply:
        try:
            return parse_reply(line)
        except ValueError as exc:
            raise self._lost("malformed reply", exc) from exc

    def _receive_line(self) -> bytes:
        if self._rfile is None:
            raise ConnectionLostError("client is closed")
        try:
            line = self._rfile.readline(MAX_LINE_BYTES + 1)
        except TimeoutError as exc:
            raise self._lost("timed out waiting for a reply", exc) from exc
        except OSError as exc:
            raise self._lost("receive failed", exc) from exc
        if not line.endswith(b"\n"):
            raise self._lost("server closed the connection without a reply")
        return line
