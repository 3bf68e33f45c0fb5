"""A LegacyPort for the (imaginary) Acme ERP batch API over HTTP.

It fills in what ``legacy-adapter new-port acme_erp`` wrote, under the same names: serve it with
``ADAPTER_LEGACY_PORT=acme_erp.port:make_port``, ``ACME_ERP_URL`` and ``ACME_ERP_TOKEN``; check it with
``legacy-adapter check-port acme_erp.port:make_port --lose-commit-reply acme_erp.port:lose_commit_reply
--system-down acme_erp.port:system_down`` (the hooks need the fake ERP in ``acme_erp/fake_server.py``,
whose ``/_faults`` switches a real ERP does not have).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field

from adapter.ports.legacy import (
    BatchStatus,
    CommittedBatch,
    CommittedBatchInfo,
    LegacyError,
    LegacyFailed,
    LegacyOutcomeUnknown,
    LegacyTransient,
    Record,
    Target,
    VoidResult,
)

Step = Literal["begin", "add", "commit", "rollback", "status", "void"]

# Transport errors raised before any byte of the request can have reached the ERP.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)

MAX_LINES_PER_REQUEST = 1000  # the ERP's documented limit per POST /lines


def _call(client: httpx.Client, step: Step, method: str, url: str, **kwargs: Any) -> dict[str, Any]:
    """Send one request and return its JSON body. The one place ERP failures become port errors."""
    try:
        response = client.request(method, url, **kwargs)
    except _NOT_SENT as exc:
        raise LegacyTransient(f"erp {step}: not sent: {exc!r}") from exc
    except httpx.TransportError as exc:
        # Sent, but no (complete) answer: read/write timeouts, resets, a server that hung up.
        if step == "commit":
            raise LegacyOutcomeUnknown(f"erp commit: reply lost, may be committed: {exc!r}") from exc
        raise LegacyTransient(f"erp {step}: reply lost, nothing was committed: {exc!r}") from exc

    status = response.status_code
    if status in (408, 429, 503):
        # The ERP documents these as "rejected before processing": nothing was applied.
        raise LegacyTransient(f"erp {step}: HTTP {status}")
    if status >= 500:
        # 500/502/504 may come from a gateway after the ERP applied the request.
        if step == "commit":
            raise LegacyOutcomeUnknown(f"erp commit: HTTP {status}, the batch may be committed")
        raise LegacyTransient(f"erp {step}: HTTP {status}")
    if status == 409 and step == "void":
        return {"already_voided": True}
    if status >= 400:
        raise LegacyFailed(f"erp {step} refused: HTTP {status} {_error_code(response)}")
    try:
        body = response.json()
    except ValueError as exc:
        if step == "commit":
            raise LegacyOutcomeUnknown("erp commit: unreadable reply, the batch may be committed") from exc
        raise LegacyTransient(f"erp {step}: unreadable reply") from exc
    if not isinstance(body, dict):
        if step == "commit":
            raise LegacyOutcomeUnknown("erp commit: unexpected reply, the batch may be committed")
        raise LegacyTransient(f"erp {step}: unexpected reply")
    return body


def _error_code(response: httpx.Response) -> str:
    """The ERP's machine-readable error code, never the body (it may echo record contents)."""
    try:
        body = response.json()
    except ValueError:
        return ""
    return str(body.get("error", "")) if isinstance(body, dict) else ""


class Customer(BaseModel):
    """One customer: the ERP refuses unknown fields."""

    model_config = ConfigDict(extra="forbid")
    number: str = Field(pattern=r"^C[0-9]{1,9}$", description="Customer number.", examples=["C1042"])
    name: str = Field(min_length=1, max_length=100)
    email: str | None = Field(default=None, max_length=200)
    country: str = Field(default="DE", pattern=r"^[A-Z]{2}$", description="ISO 3166 alpha-2.")


class Invoice(BaseModel):
    """One open invoice."""

    model_config = ConfigDict(extra="forbid")
    customer: str = Field(pattern=r"^C[0-9]{1,9}$", examples=["C1042"])
    amount_cents: int = Field(ge=1)
    due: str = Field(
        pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$", description="Due date, YYYY-MM-DD.", examples=["2027-01-31"]
    )


class ErpSession:
    """One ERP batch. Not thread-safe; the kit uses a session from one thread."""

    def __init__(self, client: httpx.Client) -> None:
        self._client = client
        self._batch_id: str | None = None
        self._finished = False

    def begin(self, batch_ref: str, target: str) -> None:
        with self._finishing_on_error():
            body = _call(self._client, "begin", "POST", "/batches", json={"ref": batch_ref, "kind": target})
            self._batch_id = str(body["id"])

    def add(self, records: Sequence[Record]) -> None:
        batch_id = self._open_batch()
        with self._finishing_on_error():
            for start in range(0, len(records), MAX_LINES_PER_REQUEST):
                lines = [dict(r) for r in records[start : start + MAX_LINES_PER_REQUEST]]
                _call(self._client, "add", "POST", f"/batches/{batch_id}/lines", json={"lines": lines})

    def commit(self) -> CommittedBatch:
        batch_id = self._open_batch()
        with self._finishing_on_error():
            try:
                body = _call(self._client, "commit", "POST", f"/batches/{batch_id}/commit")
                result = CommittedBatch(str(body["id"]), int(body["line_count"]))
            except (KeyError, TypeError, ValueError) as exc:
                self._finished = True
                raise LegacyOutcomeUnknown("erp commit: reply without id/line_count") from exc
            except LegacyOutcomeUnknown:
                # The batch may be committed: never touch it again; only batch_status may decide.
                self._finished = True
                raise
        self._finished = True  # committed: nothing left to discard
        return result

    def rollback(self) -> None:
        self._discard()

    def close(self) -> None:
        # The ERP keeps an open batch after a lost connection, so close discards it (best effort).
        # The shared httpx.Client belongs to the port and stays open.
        self._discard()

    def _open_batch(self) -> str:
        if self._batch_id is None or self._finished:
            raise LegacyFailed("no open batch in this session")
        return self._batch_id

    def _discard(self) -> None:
        if self._batch_id is None or self._finished:
            return
        self._finished = True
        with suppress(LegacyError):  # best effort: the ERP drops batches idle for 15 minutes anyway
            _call(self._client, "rollback", "DELETE", f"/batches/{self._batch_id}")

    @contextmanager
    def _finishing_on_error(self) -> Iterator[None]:
        """After any error the session is finished (the port contract): discard, then re-raise."""
        try:
            yield
        except BaseException:
            self._discard()
            raise


class ErpPort:
    """The LegacyPort for Acme ERP. One shared, thread-safe httpx.Client for all sessions."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._client = httpx.Client(
            base_url=base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(timeout),
            transport=transport,
        )

    def targets(self) -> Sequence[Target]:
        """What the ERP imports, and the shape of one line: the server publishes these to the model."""
        return [
            Target.from_model("customers", Customer, "Customer master data.", max_records=100_000),
            Target.from_model("invoices", Invoice, "Open invoices of existing customers."),
        ]

    def open_session(self) -> ErpSession:
        return ErpSession(self._client)

    def batch_status(self, batch_ref: str) -> BatchStatus:
        body = _call(self._client, "status", "GET", "/batches", params={"ref": batch_ref})
        # The ERP lists every batch under the ref (open and discarded ones too), oldest first.
        committed = [b for b in body.get("batches", []) if b.get("state") in ("committed", "voided")]
        return BatchStatus(
            batch_ref=batch_ref,
            batches=tuple(
                CommittedBatchInfo(str(b["id"]), int(b["line_count"]), b["state"] == "voided")
                for b in committed
            ),
        )

    def void_batch(self, legacy_batch_id: str) -> VoidResult:
        body = _call(self._client, "void", "POST", f"/batches/{legacy_batch_id}/void")
        return VoidResult(legacy_batch_id, bool(body.get("already_voided", False)))

    def close(self) -> None:
        """Called by ``Kit.close()``."""
        self._client.close()


def make_port(settings: Any) -> ErpPort:
    """The ``ADAPTER_LEGACY_PORT`` factory: the ERP's address and token come from the environment."""
    try:
        url, token = os.environ["ACME_ERP_URL"], os.environ["ACME_ERP_TOKEN"]
    except KeyError as missing:
        raise ValueError(f"set {missing.args[0]} (the Acme ERP's base URL and API token)") from None
    return ErpPort(url, token, timeout=settings.legacy_timeout_seconds)


@contextmanager
def lose_commit_reply(port: ErpPort) -> Iterator[None]:
    """Contract fault hook, for the fake ERP only: its gateway answers 504 after applying a commit."""
    _call(port._client, "status", "POST", "/_faults", json={"lose_commit_reply": True})
    try:
        yield
    finally:
        _call(port._client, "status", "POST", "/_faults", json={"lose_commit_reply": False})


@contextmanager
def system_down(port: ErpPort) -> Iterator[None]:
    """Contract fault hook, for the fake ERP only: it answers every request 503 (maintenance)."""
    _call(port._client, "status", "POST", "/_faults", json={"down": True})
    try:
        yield
    finally:
        _call(port._client, "status", "POST", "/_faults", json={"down": False})
