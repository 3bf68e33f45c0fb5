"""An import's review: what a person looks at before a commit (or a void) lands.

The MCP Apps view (``entrypoints/mcp/apps.py``) shows it; the rules are here, so every transport
shows the same thing:

* **Only the owner's.** The import is found by its handle and the caller's identity
  (``import_status``), so another principal's handle is ``HandleNotFound``, as everywhere.
* **A page, never all.** Staged records come a page at a time (1 to :data:`MAX_PAGE`, keyset by
  position), read from the store as they were staged.
* **Counts, not contents, of the rest.** How many records lack each field (absent or null) is
  counted in the database over every record the review describes; only the numbers come back. The
  fields are the target schema's top-level ``properties``; a target without them (the simulator's
  permissive one) is counted on the fields the page's records have. At most :data:`MAX_FIELDS`.
* **The question it would ask, and what that binds.** ``asked`` is what a confirmation would name
  now (the facade reads it as the commit conversation does): its record count bounds every part of
  the review, and the content digest names those records: SHA-256 over the fingerprints of the adds
  that staged them, in order, then of every replacement (``replace_records``) since, in order (each
  fingerprint names the SHA-256 of its records' stored JSON, a replacement's also the positions).
  A replacement keeps the count but moves the import's ``revision``, which the commit binds; the
  digest moves with it. It is None when those adds are no longer all on record.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

from adapter.domain.confirmation import Subject, VoidSubject, question_text
from adapter.domain.errors import InvalidRequest
from adapter.domain.identity import Principal
from adapter.domain.states import OperationKind, OperationState
from adapter.domain.views import ImportView
from adapter.ports.legacy import Target
from adapter.services.context import ServiceContext
from adapter.services.imports import import_status
from adapter.store.review import countable_field

__all__ = [
    "MAX_FIELDS",
    "MAX_PAGE",
    "FieldCount",
    "ImportReview",
    "Question",
    "RecordPage",
    "StagedRecord",
    "review_import",
]

MAX_PAGE = 100
MAX_FIELDS = 50


@dataclass(frozen=True, slots=True)
class StagedRecord:
    seq: int
    record: Any


@dataclass(frozen=True, slots=True)
class RecordPage:
    """Records after position ``after``; ``next_after`` is where the next page starts (None: last)."""

    after: int
    size: int
    records: tuple[StagedRecord, ...]
    next_after: int | None


@dataclass(frozen=True, slots=True)
class FieldCount:
    """How many of the reviewed records lack ``field``; None for a name the store cannot count."""

    field: str
    missing: int | None


@dataclass(frozen=True, slots=True)
class Question:
    """The confirmation a commit (or a void) would ask now, and what an accept binds."""

    purpose: Literal["commit", "void"]
    text: str
    record_count: int
    content_digest: str | None
    legacy_batch_id: str | None


@dataclass(frozen=True, slots=True)
class ImportReview:
    view: ImportView
    target: Target | None
    page: RecordPage
    fields_from: Literal["schema", "records"]
    missing: tuple[FieldCount, ...]
    question: Question | None
    reviewed_count: int
    """How many records the page, the counts and the digest describe (the question's, when asked)."""
    content_digest: str | None


def review_import(
    ctx: ServiceContext,
    principal: Principal,
    handle: str,
    *,
    asked: Subject | None,
    after: int = 0,
    size: int = 20,
) -> ImportReview:
    """The review of the caller's import; HandleNotFound for anyone else's, InvalidRequest for a
    page out of bounds."""
    _check_page(after, size)
    view = import_status(ctx, principal, handle)
    bound = asked.record_count if asked is not None else view.record_count
    target = ctx.targets.get(view.target)
    with ctx.store.review_reads() as reads:
        rows = reads.page(view.import_id, after=after, upto=bound, size=size + 1)
        records = tuple(StagedRecord(seq, json.loads(data)) for seq, data in rows[:size])
        fields_from, fields = _fields(target, records)
        counted = [name for name in fields if countable_field(name)]
        counts = reads.missing(view.import_id, counted, upto=bound)
        done = OperationState.SUCCEEDED.value
        adds = reads.finished(view.import_id, kind=OperationKind.ADD.value, status=done)
        replaced = reads.finished(view.import_id, kind=OperationKind.REPLACE.value, status=done)
    digest = content_digest(adds, bound, [fingerprint for fingerprint, _ in replaced])
    page = RecordPage(after, size, records, records[-1].seq if len(rows) > size else None)
    missing = tuple(FieldCount(name, counts.get(name)) for name in fields)
    return ImportReview(view, target, page, fields_from, missing, _question(asked, digest), bound, digest)


def _check_page(after: object, size: object) -> None:
    if type(after) is not int or after < 0:
        raise InvalidRequest("after must be a record position, 0 or more")
    if type(size) is not int or not 1 <= size <= MAX_PAGE:
        raise InvalidRequest(f"a page holds 1 to {MAX_PAGE} records")


def _fields(
    target: Target | None, records: tuple[StagedRecord, ...]
) -> tuple[Literal["schema", "records"], list[str]]:
    properties = target.schema.get("properties") if target is not None else None
    if isinstance(properties, dict) and properties:
        return "schema", [str(name) for name in properties][:MAX_FIELDS]
    seen: dict[str, None] = {}
    for staged in records:
        if isinstance(staged.record, dict):
            seen.update(dict.fromkeys(str(name) for name in staged.record))
    return "records", list(seen)[:MAX_FIELDS]


def content_digest(
    adds: list[tuple[str, dict[str, Any] | None]], count: int, replaced: list[str] | None = None
) -> str | None:
    """SHA-256 (hex) over the fingerprints of the adds that staged records 1..``count``, in order of
    position, then of the replacements since (``replaced``, in the order they were made); None
    unless the adds are all on record and tile exactly that range."""
    if count == 0:
        return None
    placed: list[tuple[int, int, str]] = []
    for fingerprint, result in adds:
        first, accepted = (result or {}).get("first_seq"), (result or {}).get("accepted")
        if type(first) is int and type(accepted) is int and first + accepted - 1 <= count:
            placed.append((first, accepted, fingerprint))
    placed.sort()
    expected = 1
    for first, accepted, _ in placed:
        if first != expected:
            return None
        expected = first + accepted
    if expected != count + 1:
        return None
    parts = [fp for _, _, fp in placed] + [f"replaced {fp}" for fp in replaced or ()]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _question(asked: Subject | None, digest: str | None) -> Question | None:
    if asked is None:
        return None
    if isinstance(asked, VoidSubject):
        return Question("void", question_text(asked), asked.record_count, digest, asked.legacy_batch_id)
    return Question("commit", question_text(asked), asked.record_count, digest, None)
