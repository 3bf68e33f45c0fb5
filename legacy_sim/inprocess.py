"""In-process mode: the simulator without sockets, for fast tests.

:class:`InProcessClient` has the same surface and the same exceptions as
:class:`legacy_sim.client.LegacyClient`, and it drives an :class:`~legacy_sim.engine.EngineSession`
through the same request encoding/parsing as the wire, so the semantics match the TCP mode:

* each client is one session (a "connection");
* the idle timeout is checked on every call against the engine clock; a session idle too long raises
  :class:`ConnectionLostError` and stays dead;
* drop-after-commit applies the commit, then raises :class:`ConnectionLostError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from legacy_sim.client import (
    ConnectionLostError,
    LegacySimError,
    SingleCommands,
    check_record_texts,
    pick_error,
)
from legacy_sim.engine import LegacyEngine, SessionDropped
from legacy_sim.protocol import (
    ADD,
    CommandError,
    Request,
    encode_request,
    parse_request,
)

__all__ = ["InProcessClient"]


class InProcessClient(SingleCommands):
    """One engine session behind the :class:`legacy_sim.client.SimClient` surface."""

    def __init__(self, engine: LegacyEngine) -> None:
        self.engine = engine
        self._session = engine.open_session()
        self._closed = False

    def add_many(self, records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Like the TCP client: every record is tried, then the most definitive error is raised."""
        lines = [self._encode(Request(ADD, payload=record)) for record in records]
        results: list[dict[str, Any]] = []
        errors: list[LegacySimError] = []
        for index, line in enumerate(lines):
            try:
                results.append(self._execute(line))
            except LegacySimError as exc:
                errors.append(LegacySimError(exc.code, exc.message, index=index))
        if errors:
            raise pick_error(errors)
        return results

    def add_many_json(self, texts: Sequence[str]) -> int:
        """Like the TCP client's: records given as JSON object texts, parsed as the server would."""
        check_record_texts(texts)
        errors: list[LegacySimError] = []
        for index, text in enumerate(texts):
            try:
                self._execute(f"ADD {text}\n".encode())
            except LegacySimError as exc:
                errors.append(LegacySimError(exc.code, exc.message, index=index))
        if errors:
            raise pick_error(errors)
        return len(texts)

    def close(self) -> None:
        """End the session; uncommitted work is lost."""
        self._closed = True
        self._session.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> InProcessClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------------

    @staticmethod
    def _encode(request: Request) -> bytes:
        try:
            return encode_request(request)
        except CommandError as exc:
            raise LegacySimError(exc.code, exc.message) from exc

    def _call(self, request: Request) -> dict[str, Any]:
        return self._execute(self._encode(request))

    def _execute(self, line: bytes) -> dict[str, Any]:
        if self._closed:
            raise ConnectionLostError("client is closed", request_sent=False)
        try:
            # Parse the encoded line, as the server would, so validation and JSON copying match TCP.
            return self._session.execute(parse_request(line))
        except CommandError as exc:
            raise LegacySimError(exc.code, exc.message) from exc
        except SessionDropped as exc:
            self.close()
            raise ConnectionLostError(f"in-process legacy_sim session lost: {exc}") from exc
