"""The admin JSON API under /admin: find out what happened to a call, and act on it.

Reads (``GET``) need a viewer or operator token; actions (``POST``) need the operator token (see
``deps.py``: no or a wrong token is 401, a viewer acting is 403, and with no admin token configured
/admin does not exist: 404). Every route calls :class:`~adapter.services.admin.AdminService`, the
same service layer as the ops CLI and the dashboard; every action is idempotent and audited there.

Errors become HTTP statuses in one place, :class:`AdminRoute`, with the table the dashboard uses too
(``errors.py``): not found 404, invalid cursor or request 400, invalid state or a lost race 409, legacy
system or database unreachable 503. The response models are in ``schemas.py`` (shared with the ops
CLI). Handles are never shown: operations and imports are named by their ids.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Query, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer
from starlette.exceptions import HTTPException  # FastAPI's own body errors raise Starlette's

from adapter.domain.errors import InvalidBody, InvalidRequest
from adapter.domain.states import ImportState, OperationKind, OperationState
from adapter.entrypoints.admin.deps import Admin, Operator, Viewer
from adapter.entrypoints.admin.errors import MAPPED, error_body, error_status
from adapter.entrypoints.admin.schemas import (
    NO_NUL,
    ActionIn,
    ActionOut,
    AuthErrorOut,
    ErrorOut,
    ImportDetailOut,
    ImportOut,
    ImportPageOut,
    OperationDetailOut,
    OperationOut,
    OperationPageOut,
    ResolveIn,
    operation_detail_out,
)
from adapter.services import admin as svc

__all__ = ["AdminRoute", "router"]

log = logging.getLogger("adapter.admin")

# --- errors: the one place that maps them --------------------------------------------------------


class AdminRoute(APIRoute):
    """Routes of this router turn the service layer's errors into JSON error responses."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def mapped(request: Request) -> Response:
            try:
                return await handler(request)
            except MAPPED as exc:
                status = error_status(exc) or 500  # every error caught here has a status; 500 if not
                if status >= 500:
                    log.warning("admin %s %s: %s", request.method, request.url.path, type(exc).__name__)
                return JSONResponse(error_body(exc), status_code=status)
            except HTTPException as exc:
                if exc.status_code != 400:  # 401/403/404 of the auth dependencies keep their form
                    raise
                # FastAPI's own 400 (a body that is not JSON): the documented error shape too
                return JSONResponse(error_body(InvalidBody(str(exc.detail))), status_code=400)

        return mapped


def _responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    described = {
        400: (
            ErrorOut,
            "Invalid cursor (`invalid_cursor`: start the list again), invalid request "
            "(`validation_error`) or a body that is not JSON (`invalid_body`).",
        ),
        401: (AuthErrorOut, "No admin token, or a wrong one."),
        403: (AuthErrorOut, "A viewer token may read but not act."),
        404: (ErrorOut, "No such operation or import, or the admin API is disabled (no admin token)."),
        409: (ErrorOut, "The action does not apply in the operation's current state (audited)."),
        503: (ErrorOut, "The legacy system or the database is unreachable; try again later."),
    }
    return {code: {"model": described[code][0], "description": described[code][1]} for code in codes}


# Documents the scheme in OpenAPI only; deps.py checks the token (header or the dashboard's cookie).
_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="AdminToken",
    description="ADAPTER_ADMIN_TOKEN (operator: read, act) or ADAPTER_ADMIN_READONLY_TOKEN (viewer: read).",
)
router = APIRouter(prefix="/admin", tags=["admin"], route_class=AdminRoute, dependencies=[Depends(_bearer)])

# --- parameters -----------------------------------------------------------------------------------

Text = Annotated[str | None, Query(max_length=200, pattern=NO_NUL)]
When = Annotated[
    datetime | None, Query(description="ISO 8601; without an offset it is UTC. Bounds `created_at`.")
]
Limit = Annotated[int, Query(ge=1, le=svc.MAX_PAGE, description="Page size.")]
Cursor = Annotated[
    str | None,
    Query(max_length=4000, description="`next_cursor` of the previous page, with the same filters."),
]
OperationId = Annotated[str, Path(max_length=100, pattern=NO_NUL)]
Reason = Annotated[ActionIn | None, Body()]
ImportStatus = Annotated[ImportState | None, Query()]


def _utc(value: datetime | None, name: str) -> datetime | None:
    if value is None:
        return None
    try:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except (OverflowError, ValueError):
        raise InvalidRequest(f"{name} is out of range") from None


class Listing:
    """The query parameters both operator lists take: whose, created when, and which page.

    The times become UTC only in :meth:`filters`, which the route calls, so an out-of-range bound
    is the route's 400 after FastAPI has checked every parameter.
    """

    def __init__(
        self,
        principal: Text = None,
        tenant: Text = None,
        since: When = None,
        until: When = None,
        limit: Limit = 50,
        cursor: Cursor = None,
    ) -> None:
        self.principal, self.tenant, self.since, self.until = principal, tenant, since, until
        self.limit, self.cursor = limit, cursor

    def filters(self) -> dict[str, Any]:
        """The filter fields both lists share."""
        since, until = _utc(self.since, "since"), _utc(self.until, "until")
        return {"principal": self.principal, "tenant": self.tenant, "since": since, "until": until}


Listed = Annotated[Listing, Depends()]

# --- reading ------------------------------------------------------------------------------------

_READ = _responses(400, 401, 404, 503)
_DETAIL = _responses(401, 404, 503)


@router.get("/operations", summary="List operations", responses=_READ)
def list_operations(
    identity: Viewer,
    admin: Admin,
    listing: Listed,
    status: Annotated[OperationState | None, Query()] = None,
    kind: Annotated[OperationKind | None, Query()] = None,
    idempotency_key: Text = None,
    import_id: Text = None,
) -> OperationPageOut:
    """Every principal's operations, newest first, filtered; keyset-paginated.

    The list is frozen at the first page: operations created while you page do not shift it (no
    duplicates, no gaps). A cursor is valid only with the filters it was issued for (else 400).
    """
    filters = svc.OperationFilter(
        status=status.value if status else None,
        kind=kind.value if kind else None,
        idempotency_key=idempotency_key,
        import_id=import_id,
        **listing.filters(),
    )
    page = admin.list_operations(filters, limit=listing.limit, cursor=listing.cursor)
    return OperationPageOut.model_validate(page)


@router.get("/operations/{operation_id}", summary="One operation in detail", responses=_DETAIL)
def get_operation(identity: Viewer, admin: Admin, operation_id: OperationId) -> OperationDetailOut:
    """The operation, its steps, lease, compensation, audit trail and its import (by import id)."""
    return operation_detail_out(admin.get_operation(operation_id))


@router.get("/imports", summary="List imports", responses=_READ)
def list_imports(
    identity: Viewer, admin: Admin, listing: Listed, status: ImportStatus = None, target: Text = None
) -> ImportPageOut:
    """Every principal's imports, newest first, filtered; keyset-paginated like the operations."""
    filters = svc.ImportFilter(status=status.value if status else None, target=target, **listing.filters())
    page = admin.list_imports(filters, limit=listing.limit, cursor=listing.cursor)
    return ImportPageOut.model_validate(page)


@router.get("/imports/{import_id}", summary="One import and its operations", responses=_DETAIL)
def get_import(identity: Viewer, admin: Admin, import_id: OperationId) -> ImportDetailOut:
    """The import (never its handle) and every operation on it, oldest first."""
    record, operations = admin.get_import(import_id)
    return ImportDetailOut(
        import_record=ImportOut.model_validate(record),
        operations=[OperationOut.model_validate(o) for o in operations],
    )


# --- acting ---------------------------------------------------------------------------------------

_ACT = _responses(400, 401, 403, 404, 409, 503)


def _act(
    admin: svc.AdminService, operation_id: str, action: str, actor: str, reason: str | None
) -> ActionOut:
    return ActionOut.model_validate(admin.act(operation_id, action, actor=actor, reason=reason))


@router.post(
    "/operations/{operation_id}/reconcile",
    summary="Reconcile an operation now",
    responses=_ACT,
)
def reconcile(identity: Operator, admin: Admin, operation_id: OperationId, body: Reason = None) -> ActionOut:
    """Ask the legacy system what became of a commit whose outcome is unknown, and record it.

    Idempotent: a resolved operation answers "nothing to reconcile". Audited, even when refused.
    """
    return _act(admin, operation_id, "reconcile", identity.actor, body.reason if body else None)


@router.post(
    "/operations/{operation_id}/compensate",
    summary="Compensate (VOID) the operation's import",
    responses=_ACT,
)
def compensate(identity: Operator, admin: Admin, operation_id: OperationId, body: Reason = None) -> ActionOut:
    """VOID the legacy batch of the operation's committed import.

    Idempotent: one compensation per import, a second call reports the import's state (409 when the
    import has nothing committed). Audited, even when refused.
    """
    return _act(admin, operation_id, "compensate", identity.actor, body.reason if body else None)


@router.post(
    "/operations/{operation_id}/resolve",
    summary="Close an operation that needs an operator",
    responses=_ACT,
)
def resolve(identity: Operator, admin: Admin, operation_id: OperationId, body: ResolveIn) -> ActionOut:
    """Mark a `needs_operator` operation resolved, with a required reason (409 in any other state).

    Idempotent: a resolved operation answers "already resolved". Audited, even when refused.
    """
    return _act(admin, operation_id, "resolve", identity.actor, body.reason)
