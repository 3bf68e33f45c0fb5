"""``python -m adapter ops``: the operator's view from a shell, on the configured database.

    python -m adapter ops list [--status S] [--kind K] [--principal P] [--tenant T] [--import-id I]
                               [--since ISO] [--until ISO] [--limit N] [--cursor C] [--json]
    python -m adapter ops show ID [--json]
    python -m adapter ops reconcile ID [--reason TEXT] [--json]
    python -m adapter ops compensate ID [--reason TEXT] [--json]
    python -m adapter ops resolve ID --reason TEXT [--json]

It goes through ``adapter.bootstrap.build(settings).admin``, the same service layer as the admin API
(``ADAPTER_DATABASE_URL``, ``ADAPTER_LEGACY_URL``... as for ``serve``), so every action is audited,
with ``cli:<OS user>`` as the actor. Tables are printed with ``rich``; ``--json`` prints the admin
API's JSON shapes instead, for scripts. An error is one line on stderr and exit status 1 (refused:
not found, invalid state or request), 3 (the database or the legacy system is unreachable) or 2 (a
bad setting or argument).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from adapter.config import Settings
from adapter.domain.states import OperationKind, OperationState

if TYPE_CHECKING:
    from rich.console import Console

    from adapter.services.admin import AdminService

__all__ = ["actor", "configure_parser"]

EXIT_REFUSED = 1
EXIT_UNAVAILABLE = 3


def actor() -> str:
    """``cli:<OS user>``: who the audit trail says acted."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name (e.g. a container without a passwd entry)
        user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    return f"cli:{user}"


def _when(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 date-time: {text!r}") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _limit(text: str) -> int:
    from adapter.services.admin import MAX_PAGE

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 1 <= value <= MAX_PAGE:
        raise argparse.ArgumentTypeError(f"must be from 1 to {MAX_PAGE}")
    return value


def configure_parser(ops: argparse.ArgumentParser) -> None:
    """Add the ``ops`` subcommands to ``ops`` (the parser of ``python -m adapter ops``)."""
    ops.description = "Inspect operations and act on them (audited as cli:<OS user>)."
    commands = ops.add_subparsers(dest="ops_command", required=True, metavar="COMMAND")
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print JSON (the admin API's shapes)")

    listing = commands.add_parser("list", parents=[as_json], help="list operations, newest first")
    listing.add_argument("--status", choices=[s.value for s in OperationState])
    listing.add_argument("--kind", choices=[k.value for k in OperationKind])
    listing.add_argument("--principal")
    listing.add_argument("--tenant")
    listing.add_argument("--import-id", dest="import_id")
    listing.add_argument("--idempotency-key", dest="idempotency_key")
    listing.add_argument("--since", type=_when, help="created at or after (ISO 8601; UTC if no offset)")
    listing.add_argument("--until", type=_when, help="created before (ISO 8601; UTC if no offset)")
    listing.add_argument("--limit", type=_limit, default=50, help="page size, 1..200 (default 50)")
    listing.add_argument("--cursor", help="next page: the cursor the previous page printed")
    listing.set_defaults(run=_ops, ops=_list)

    show = commands.add_parser("show", parents=[as_json], help="one operation: steps, audit, import")
    show.add_argument("operation_id", metavar="ID")
    show.set_defaults(run=_ops, ops=_show)

    for action, helptext in (
        ("reconcile", "ask the legacy system what became of an operation and record it"),
        ("compensate", "VOID the legacy batch of the operation's committed import"),
        ("resolve", "close an operation that needs an operator (a reason is required)"),
    ):
        command = commands.add_parser(action, parents=[as_json], help=helptext)
        command.add_argument("operation_id", metavar="ID")
        command.add_argument("--reason", required=action == "resolve", help="why (kept in the audit trail)")
        command.set_defaults(run=_ops, ops=_act, action=action)


# --- running ----------------------------------------------------------------------------------------


def _ops(settings: Settings, args: argparse.Namespace) -> int:
    """Build the kit, run one ops command, map errors to one stderr line and an exit status."""
    from adapter.bootstrap import build
    from adapter.domain.errors import StoreError
    from adapter.entrypoints.admin.errors import MAPPED, as_adapter_error, error_status

    try:
        kit = build(settings)
    except (OSError, ValueError) as exc:  # a bad URL or secret file: nothing has touched the database yet
        return _fail(f"cannot open the kit: {type(exc).__name__}: {_first_line(exc)}", EXIT_UNAVAILABLE)
    try:
        return int(args.ops(kit.admin, args))
    except MAPPED as exc:  # the admin API's table decides: 5xx is "unavailable", the rest "refused"
        status = error_status(exc) or 500
        # The driver's error behind a store error: the operator's own shell may see what it says.
        cause = exc.__cause__ if isinstance(exc, StoreError) else None
        message = str(as_adapter_error(exc)) + (
            f" ({type(cause).__name__}: {_first_line(cause)})" if cause else ""
        )
        return _fail(message, EXIT_UNAVAILABLE if status >= 500 else EXIT_REFUSED)
    finally:
        kit.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


def _fail(message: str, code: int) -> int:
    print(f"adapter ops: {message}", file=sys.stderr)
    return code


def _dump(model: Any) -> None:
    print(json.dumps(model.model_dump(mode="json"), indent=2, sort_keys=False))


def _console() -> Console:
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:  # piped: do not squeeze the tables into 80 columns
        console = Console(highlight=False, width=200)
    return console


def _t(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def _list(admin: AdminService, args: argparse.Namespace) -> int:
    from rich.table import Table

    from adapter.entrypoints.admin.schemas import OperationPageOut
    from adapter.services.admin import OperationFilter

    filters = OperationFilter(
        status=args.status,
        kind=args.kind,
        principal=args.principal,
        tenant=args.tenant,
        idempotency_key=args.idempotency_key,
        import_id=args.import_id,
        since=args.since,
        until=args.until,
    )
    page = admin.list_operations(filters, limit=args.limit, cursor=args.cursor)
    if args.json:
        _dump(OperationPageOut.model_validate(page))
        return 0
    table = Table(title=f"operations ({len(page.items)})", title_justify="left")
    columns = ("operation", "kind", "status", "principal", "tenant", "import", "attempts", "created (UTC)")
    for column in columns:
        table.add_column(column, no_wrap=column in ("operation", "import"))
    for op in page.items:
        table.add_row(
            op.operation_id,
            op.kind,
            op.status,
            op.principal,
            op.tenant,
            op.import_id or "-",
            str(op.attempts),
            _t(op.created_at),
        )
    console = _console()
    console.print(table)
    if page.next_cursor:
        console.print(f"more: --cursor {page.next_cursor}", soft_wrap=True)
    return 0


def _show(admin: AdminService, args: argparse.Namespace) -> int:
    from rich.table import Table

    from adapter.entrypoints.admin.schemas import operation_detail_out

    detail = operation_detail_out(admin.get_operation(args.operation_id))
    if args.json:
        _dump(detail)
        return 0
    console = _console()
    op = detail.operation
    summary = Table.grid(padding=(0, 2))
    summary.add_column(style="bold")
    summary.add_column()
    rows: list[tuple[str, str]] = [
        ("operation", op.operation_id),
        ("kind / status", f"{op.kind} / {op.status}"),
        ("principal", f"{op.principal} (tenant {op.tenant})"),
        ("idempotency key", op.idempotency_key or "-"),
        ("recovery point", op.recovery_point or "-"),
        ("attempts", str(op.attempts)),
        ("created / updated", f"{_t(op.created_at)} / {_t(op.updated_at)}"),
        ("batch ref", detail.batch_ref or "-"),
        ("lease", f"{detail.lease.owner} until {_t(detail.lease.expires_at)}" if detail.lease else "-"),
        ("result", json.dumps(detail.result) if detail.result else "-"),
        ("error", json.dumps(detail.error) if detail.error else "-"),
    ]
    if detail.import_record:
        imp = detail.import_record
        rows.append(
            (
                "import",
                f"{imp.import_id} {imp.status}, target {imp.target}, {imp.record_count} records, "
                f"legacy batch {imp.legacy_batch_id or '-'}",
            )
        )
    if detail.compensation:
        comp = detail.compensation
        rows.append(
            (
                "compensation",
                f"{comp.status}, batch {comp.legacy_batch_id}, {comp.attempts} attempts"
                + (f", last error {comp.last_error}" if comp.last_error else ""),
            )
        )
    for name, value in rows:
        summary.add_row(name, value)
    console.print(summary)

    steps = Table(title="steps", title_justify="left")
    for column in ("at (UTC)", "event", "state", "detail"):
        steps.add_column(column)
    for step in detail.steps:
        steps.add_row(
            _t(step.at), step.event, step.state or "-", json.dumps(step.detail) if step.detail else ""
        )
    console.print(steps)

    audit = Table(title="audit", title_justify="left")
    for column in ("at (UTC)", "actor", "action", "reason", "outcome"):
        audit.add_column(column)
    for entry in detail.audit:
        audit.add_row(_t(entry.at), entry.actor, entry.action, entry.reason or "-", entry.outcome)
    if not detail.audit:
        audit.add_row("-", "-", "-", "-", "no operator action yet")
    console.print(audit)
    return 0


def _act(admin: AdminService, args: argparse.Namespace) -> int:
    result = admin.act(args.operation_id, args.action, actor=actor(), reason=args.reason)
    if args.json:
        from adapter.entrypoints.admin.schemas import ActionOut

        _dump(ActionOut.model_validate(result))
        return 0
    print(f"{result.action} {result.operation_id}: {result.outcome} (status now {result.status})")
    return 0
