"""The operator dashboard under ``/admin/ui``: server-rendered HTML over :class:`AdminService`.

Pages (all ``GET`` unless noted)::

    /admin/ui/login                          the login form; POST checks the token and sets the cookie
    /admin/ui/logout                  POST   clears the cookie
    /admin/ui                                counts by status, reconciliation lag, filterable operations
    /admin/ui/operations/{id}                one operation: fields, import, timeline, lease, audit
    /admin/ui/operations/{id}/{action}  POST reconcile | compensate | resolve (operators only)
    /admin/ui/static/{name}                  the stylesheet

Authentication is the admin API's (``deps.py``): the operator token (ADAPTER_ADMIN_TOKEN) or the
read-only token (ADAPTER_ADMIN_READONLY_TOKEN), sent as ``Authorization: Bearer`` or as the
``adapter_admin`` cookie that the login form sets (HttpOnly, SameSite=Strict, Path=/admin, Secure
when served over HTTPS). Without a valid token a page redirects to the login form; with no admin
token configured every path here is 404, as in the API. Viewers see no action buttons, and an action
POSTed by a viewer is 403. Actions are audited with ``identity.actor`` (the role, never the token).

CSRF: every POST (login, logout, actions) is refused with 403 unless the request proves it comes
from a page of this very site:

1. the cookie is ``SameSite=Strict``, so a browser does not send it on a request started by
   another site (a cross-site form POST arrives without credentials);
2. the ``Origin`` header (or, when a browser sends none, the ``Referer``) must name the host the
   request was sent to (its ``Host`` header), or be listed exactly in ADAPTER_ALLOWED_ORIGINS (for
   a reverse proxy that rewrites ``Host``). A POST that carries neither header is refused too.
   Pages are sent with ``Referrer-Policy: same-origin`` so our own forms always carry a Referer.

Pages also carry a Content-Security-Policy without inline scripts, and ``frame-ancestors 'none'``
against clickjacking. The templates autoescape everything, and no view renders record contents:
operations, imports (by import id, never by handle), events and audit entries only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, urlencode, urlsplit

import jinja2
from fastapi import APIRouter, Depends, Form, HTTPException, Query, Request, Response, status
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates

from adapter.config import Settings
from adapter.domain.errors import InvalidCursor, InvalidRequest, OperationNotFound
from adapter.domain.states import OPERATION_UNRESOLVED, OperationKind, OperationState
from adapter.domain.vocabulary import OperatorAction
from adapter.entrypoints.admin.deps import (
    COOKIE,
    Identity,
    admin_of,
    identify,
    require_enabled,
    token_of,
)
from adapter.entrypoints.admin.errors import MAPPED, as_adapter_error, error_status
from adapter.services.admin import OperationFilter

__all__ = ["router"]

PREFIX = "/admin/ui"
COOKIE_PATH = "/admin"
COOKIE_MAX_AGE = 8 * 3600  # a working day; the cookie is the token, so it should not live for ever
PAGE_SIZE = 25
ACTIONS = tuple(OperatorAction)
FILTER_FIELDS = ("status", "kind", "principal", "tenant", "import_id", "idempotency_key")
# The order of the cards: what needs a human first, then work in flight, then settled outcomes.
STATUS_ORDER = (
    OperationState.NEEDS_OPERATOR,
    OperationState.OUTCOME_UNKNOWN,
    OperationState.IN_PROGRESS,
    OperationState.COMPENSATING,
    OperationState.SUCCEEDED,
    OperationState.COMPENSATED,
    OperationState.RESOLVED,
    OperationState.FAILED,
    OperationState.CANCELLED,
)
ATTENTION = frozenset({OperationState.NEEDS_OPERATOR.value, OperationState.OUTCOME_UNKNOWN.value})
UNRESOLVED = OPERATION_UNRESOLVED
_HERE = Path(__file__).parent
STATIC_DIR = _HERE / "static"
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


# --- rendering -------------------------------------------------------------------------------------


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _utc(value: datetime | None) -> str:
    if value is None:
        return "—"
    return _aware(value).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(seconds: float) -> str:
    """A short human duration: ``45 s``, ``12 min``, ``3 h 5 min``, ``2 d 4 h``."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{math.floor(seconds)} s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


@jinja2.pass_context
def _age(context: Any, value: datetime | None) -> str:
    """``3 min ago`` or ``in 5 min``, against the ``now`` the page was rendered at."""
    if value is None:
        return ""
    delta = (context["now"] - _aware(value)).total_seconds()
    if abs(delta) < 5:
        return "just now"
    return f"{_duration(delta)} ago" if delta > 0 else f"in {_duration(-delta)}"


def _scalar(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(_scalar(v) for v in value) or "—"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_scalar(v)}" for k, v in value.items()) or "—"
    return str(value)


def _tone(state: str | None) -> str:
    """The colour family of a status badge."""
    if state in ATTENTION:
        return "alert" if state == OperationState.NEEDS_OPERATOR.value else "warn"
    if state in {"succeeded", "committed", "compensated", "resolved"}:
        return "ok"
    if state in {"in_progress", "committing", "compensating", "open"}:
        return "busy"
    if state == "failed":
        return "bad"
    return "quiet"


def _event_family(kind: str) -> tuple[str, str]:
    """A timeline event's family (CSS class) and label."""
    if kind == "operation.recovery_point":
        return "point", "recovery point"
    if kind in ("operation.attempt_failed", "compensation.attempt", "operation.in_progress"):
        return "attempt", "attempt"
    if kind == "operation.reconciled":
        return "reconcile", "reconciliation"
    if "compensat" in kind:
        return "compensate", "compensation"
    if kind == "operation.resolved":
        return "operator", "operator"
    if kind.startswith("import."):
        return "import", "import"
    return "outcome", "outcome"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_HERE / "templates"),
        autoescape=True,  # every template, whatever its name
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(utc=_utc, age=_age, duration=_duration, scalar=_scalar, tone=_tone)
    env.globals.update(event_family=_event_family, prefix=PREFIX)
    return env


templates = Jinja2Templates(env=_environment())


def _render(
    request: Request, name: str, context: dict[str, Any], *, status_code: int = 200, who: Identity | None
) -> Response:
    kit = getattr(request.app.state, "kit", None)
    now = _aware(kit.admin.ctx.clock()) if kit is not None else datetime.now(UTC)
    context = {"now": now, "who": who, "flash": None, "flash_tone": "ok", **context}
    response = templates.TemplateResponse(request, name, context, status_code=status_code)
    response.headers.update(SECURITY_HEADERS)
    return response


# --- errors as pages -------------------------------------------------------------------------------


class _Page(Exception):
    """Raised anywhere in a dashboard request to answer with an error page or a redirect instead."""

    def __init__(self, status_code: int, title: str = "", message: str = "", *, location: str = "") -> None:
        super().__init__(title)
        self.status_code, self.title, self.message, self.location = status_code, title, message, location


def _refusal(exc: BaseException) -> tuple[int, str]:
    """The status and the one-line message of an error, by the admin API's table (``errors.py``)."""
    error = as_adapter_error(exc)
    code = error_status(exc) or 500
    message = f"{error.message} ({error.code})" if error is not None else "internal error"
    return code, message + (". It is safe to try again later." if code >= 500 else "")


class _DashboardRoute(APIRoute):
    """Turns :class:`_Page` (raised by a handler or a dependency) and service errors into pages."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except MAPPED as exc:  # e.g. the database is down: the API's status, as a page
                code, message = _refusal(exc)
                page = _Page(code, "Cannot show this page", message)
            except _Page as raised:
                page = raised
            if page.location:
                return RedirectResponse(page.location, status.HTTP_303_SEE_OTHER, headers=SECURITY_HEADERS)
            who = getattr(request.state, "dashboard_identity", None)
            context = {"title": page.title, "message": page.message}
            return _render(request, "error.html", context, status_code=page.status_code, who=who)

        return route


router = APIRouter(prefix=PREFIX, tags=["dashboard"], include_in_schema=False, route_class=_DashboardRoute)


# --- who is asking ---------------------------------------------------------------------------------


def _safe_next(value: str | None) -> str:
    """Where to go after logging in: a dashboard path of this site, never another site."""
    if value and value.startswith(PREFIX) and not value.startswith("//") and "\\" not in value:
        parts = urlsplit(value)
        if not parts.scheme and not parts.netloc:
            return value
    return PREFIX


def _viewer(request: Request, settings: Annotated[Settings, Depends(require_enabled)]) -> Identity:
    identity = identify(settings, token_of(request))
    if identity is None:
        wanted = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        target = PREFIX + "/login"
        if request.method == "GET" and wanted != PREFIX:
            target += "?" + urlencode({"next": _safe_next(wanted)})
        raise _Page(status.HTTP_303_SEE_OTHER, location=target)
    request.state.dashboard_identity = identity
    return identity


def _same_site(request: Request, settings: Annotated[Settings, Depends(require_enabled)]) -> None:
    """The Origin/Referer half of the CSRF defence (see the module docstring)."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        referer = request.headers.get("referer")
        if referer:
            parts = urlsplit(referer)
            origin = f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else None
        else:
            origin = None
    host = request.headers.get("host", "")
    if origin and (
        (host and urlsplit(origin).netloc.lower() == host.lower()) or origin in settings.allowed_origins
    ):
        return
    raise _Page(
        status.HTTP_403_FORBIDDEN,
        "Request refused",
        "This form was not sent from a page of this dashboard (cross-site request check). "
        "Go back to the dashboard and try again.",
    )


Viewer = Annotated[Identity, Depends(_viewer)]
SameSite = Depends(_same_site)


# --- login -----------------------------------------------------------------------------------------


@router.get("/static/{name}")
def static_file(name: str, settings: Annotated[Settings, Depends(require_enabled)]) -> FileResponse:
    files = {p.name: p for p in STATIC_DIR.iterdir() if p.is_file()}
    if name not in files:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "Not Found")
    return FileResponse(
        files[name], headers={"Cache-Control": "max-age=300", "X-Content-Type-Options": "nosniff"}
    )


@router.get("/login")
def login_form(
    request: Request,
    settings: Annotated[Settings, Depends(require_enabled)],
    next: Annotated[str | None, Query(max_length=2000)] = None,
    logged_out: bool = False,
) -> Response:
    who = identify(settings, token_of(request))
    if who is not None:
        return RedirectResponse(_safe_next(next), status.HTTP_303_SEE_OTHER)
    context = {"next": _safe_next(next), "error": None, "logged_out": logged_out}
    return _render(request, "login.html", context, who=None)


@router.post("/login", dependencies=[SameSite])
def login(
    request: Request,
    settings: Annotated[Settings, Depends(require_enabled)],
    token: Annotated[str, Form(max_length=1000)] = "",
    next: Annotated[str, Form(max_length=2000)] = "",
) -> Response:
    who = identify(settings, token.strip())
    if who is None:
        context = {
            "next": _safe_next(next),
            "error": "That token is not valid for this dashboard.",
            "logged_out": False,
        }
        return _render(request, "login.html", context, status_code=status.HTTP_401_UNAUTHORIZED, who=None)
    response = RedirectResponse(_safe_next(next), status.HTTP_303_SEE_OTHER)
    response.set_cookie(
        COOKIE,
        token.strip(),
        max_age=COOKIE_MAX_AGE,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@router.post("/logout", dependencies=[SameSite])
def logout(request: Request, settings: Annotated[Settings, Depends(require_enabled)]) -> Response:
    response = RedirectResponse(PREFIX + "/login?logged_out=1", status.HTTP_303_SEE_OTHER)
    response.delete_cookie(COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")
    return response


# --- the overview ----------------------------------------------------------------------------------


def _clean(value: str | None) -> str | None:
    value = (value or "").strip()
    return value or None


@router.get("")
def overview(
    request: Request,
    who: Viewer,
    status_: Annotated[str | None, Query(alias="status", max_length=40)] = None,
    kind: Annotated[str | None, Query(max_length=40)] = None,
    principal: Annotated[str | None, Query(max_length=200)] = None,
    tenant: Annotated[str | None, Query(max_length=200)] = None,
    import_id: Annotated[str | None, Query(max_length=100)] = None,
    idempotency_key: Annotated[str | None, Query(max_length=300)] = None,
    cursor: Annotated[str | None, Query(max_length=2000)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = PAGE_SIZE,
) -> Response:
    admin = admin_of(request)
    values = {
        "status": _clean(status_),
        "kind": _clean(kind),
        "principal": _clean(principal),
        "tenant": _clean(tenant),
        "import_id": _clean(import_id),
        "idempotency_key": _clean(idempotency_key),
    }
    filters = OperationFilter(
        status=values["status"],
        kind=values["kind"],
        principal=values["principal"],
        tenant=values["tenant"],
        import_id=values["import_id"],
        idempotency_key=values["idempotency_key"],
    )
    page_error = None
    try:
        page = admin.list_operations(filters, limit=limit, cursor=_clean(cursor))
        items, next_cursor = page.items, page.next_cursor
    except (InvalidCursor, InvalidRequest) as exc:  # a stale cursor, or one from other filters
        items, next_cursor = [], None
        page_error = f"This page link is no longer valid ({exc.code}). Start again from the first page."
    counts = admin.status_counts()
    known = [s.value for s in STATUS_ORDER]
    cards = [(s, counts.get(s, 0)) for s in known] + [
        (s, n) for s, n in sorted(counts.items()) if s not in known
    ]
    active = {k: v for k, v in values.items() if v is not None}
    query = {**active, **({"limit": limit} if limit != PAGE_SIZE else {})}
    context = {
        "cards": cards,
        "total": sum(counts.values()),
        "unresolved": sum(n for s, n in counts.items() if s in UNRESOLVED),
        "attention": ATTENTION,
        "lag": admin.unresolved_age_seconds(),
        "filters": values,
        "filtered": bool(active),
        "statuses": known,
        "kinds": [k.value for k in OperationKind],
        "items": items,
        "page_error": page_error,
        "paged": cursor is not None,
        "first_url": PREFIX + ("?" + urlencode(query) if query else ""),
        "next_url": PREFIX + "?" + urlencode({**query, "cursor": next_cursor}) if next_cursor else None,
    }
    return _render(request, "overview.html", context, who=who)


# --- one operation ---------------------------------------------------------------------------------

_DONE = {"reconcile": "Reconcile", "compensate": "Compensate", "resolve": "Resolve"}


def _detail(
    request: Request, who: Identity, operation_id: str, *, status_code: int = 200, **extra: Any
) -> Response:
    try:
        detail = admin_of(request).get_operation(operation_id)
    except OperationNotFound:
        raise _Page(status.HTTP_404_NOT_FOUND, "No such operation", "No operation has this id.") from None
    done = extra.pop("done", None)
    if done in ACTIONS:
        # The message comes from the audit trail, not from the URL: a link cannot put words here.
        entries = [a for a in detail.audit if a.action == done]
        if entries:
            extra.update(flash=f"{_DONE[done]}: {entries[-1].outcome}", flash_tone="ok")
    context: dict[str, Any] = {
        "d": detail,
        "op": detail.operation,
        "can_act": who.role == "operator",
        "unresolved": detail.operation.status in UNRESOLVED,
        "reason": "",
        "failed_action": None,
        **extra,
    }
    return _render(request, "detail.html", context, status_code=status_code, who=who)


@router.get("/operations/{operation_id}")
def operation_page(
    request: Request,
    who: Viewer,
    operation_id: str,
    done: Annotated[str | None, Query(max_length=20)] = None,
) -> Response:
    return _detail(request, who, operation_id, done=done)


@router.post("/operations/{operation_id}/{action}", dependencies=[SameSite])
def operation_action(
    request: Request,
    who: Viewer,
    operation_id: str,
    action: str,
    reason: Annotated[str, Form(max_length=1000)] = "",
    confirm: Annotated[str, Form(max_length=10)] = "",
) -> Response:
    if who.role != "operator":
        raise _Page(status.HTTP_403_FORBIDDEN, "Not allowed", "Viewers may look but not act.")
    if action not in ACTIONS:
        raise _Page(
            status.HTTP_404_NOT_FOUND, "No such action", "The actions are reconcile, compensate, resolve."
        )
    reason_text = reason.strip() or None
    failure: tuple[int, str] | None = None
    if action == "compensate" and confirm != "yes":
        failure = (
            status.HTTP_400_BAD_REQUEST,
            "Tick the box to confirm: compensating voids the legacy batch.",
        )
    else:
        try:
            admin_of(request).act(operation_id, action, actor=who.actor, reason=reason_text)
        except OperationNotFound:
            raise _Page(status.HTTP_404_NOT_FOUND, "No such operation", "No operation has this id.") from None
        except MAPPED as exc:  # refused or failed: the API's status, the message once, the form kept
            failure = _refusal(exc)
    if failure is not None:
        code, message = failure
        return _detail(
            request,
            who,
            operation_id,
            status_code=code,
            flash=f"{_DONE[action]} refused: {message}",
            flash_tone="alert",
            reason=reason,
            failed_action=action,
        )
    return RedirectResponse(
        f"{PREFIX}/operations/{quote(operation_id, safe='')}?" + urlencode({"done": action}),
        status.HTTP_303_SEE_OTHER,
    )
