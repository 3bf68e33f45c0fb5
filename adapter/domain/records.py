"""Validation of staged records: shape and size, before anything is stored.

Every record is turned into compact JSON once (:func:`encode_batch`); that one text is what the
store keeps, what the size quotas count and what the idempotency fingerprint digests, so a record is
never serialized twice. The common record (string keys; strings, numbers, booleans, null, lists and
objects of them) is written by pydantic-core's serializer, about 5x faster than ``json.dumps``; any
record it cannot write byte for byte as ``json.dumps`` would (a non-finite or very small float, a
lone surrogate, a type that is not JSON) takes the ``json.dumps`` path, which also names the fault.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_core import PydanticSerializationError, to_json

from adapter.domain.errors import InvalidRequest, LimitExceeded

__all__ = ["EncodedBatch", "Limits", "encode_batch", "encode_records"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds that protect the store and the legacy session; all configurable."""

    max_records_per_call: int = 1000
    max_record_bytes: int = 64 * 1024
    max_records_per_import: int = 1_000_000
    max_target_length: int = 200
    min_ttl_seconds: int = 10
    max_ttl_seconds: int = 7 * 24 * 3600


@dataclass(frozen=True, slots=True)
class EncodedBatch:
    """The records of one call as stored: compact JSON texts in order, their UTF-8 size in all, and
    the SHA-256 (hex) of the texts joined by newlines (what the add's fingerprint names)."""

    texts: list[str]
    size: int
    content_digest: str


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
# pydantic-core writes NaN/Infinity as such (json.dumps refuses them) and floats below 1e-4 as
# "1e-7" or "0.00001" (json.dumps: "1e-07", "1e-05"), so a record holding one takes json.dumps.
_SMALLEST_SAME = 1e-4
_INFINITY = float("inf")


def _plain(value: dict[Any, Any]) -> bool:
    """True when pydantic-core writes ``value`` as json.dumps does: string keys, exact JSON types,
    floats 0 or of magnitude 1e-4 and more (finite), at any depth."""
    return all(type(key) is str and _plain_value(item) for key, item in value.items())


def _plain_value(item: Any) -> bool:
    kind = type(item)
    if kind is str or kind is int or kind is bool or item is None:
        return True
    if kind is float:
        return bool(item == 0.0 or _SMALLEST_SAME <= abs(item) < _INFINITY)
    if kind is dict:
        return _plain(item)
    if kind is list:
        return all(_plain_value(element) for element in item)
    return False


def _fast(record: dict[Any, Any]) -> bytes | None:
    """The record's compact JSON as ``json.dumps`` would write it, or None when only it can tell."""
    if not _plain(record):
        return None
    try:
        return to_json(record)
    except PydanticSerializationError:  # a lone surrogate: json.dumps writes it, .encode() refuses
        return None


def _slow(position: int, record: Any) -> bytes:
    try:
        text = _ENCODER.encode(record)
    except (TypeError, ValueError) as exc:
        raise InvalidRequest(f"record {position} is not valid JSON") from exc
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate: no store can keep it as UTF-8
        raise InvalidRequest(f"record {position} contains a lone surrogate") from None


def encode_batch(
    records: Sequence[Any], limits: Limits, positions: Sequence[int] | None = None
) -> EncodedBatch:
    """Validate ``records`` and encode each once, in order.

    Raises InvalidRequest for a record that is not a JSON object and LimitExceeded for too many
    records or a record too large. The message names the position (``positions[i]`` for the i-th
    record when given: where it stands in its import), never the content.
    """
    if not isinstance(records, Sequence) or isinstance(records, str | bytes):
        raise InvalidRequest("records must be a list of JSON objects")
    if not records:
        raise InvalidRequest("at least one record is required")
    if len(records) > limits.max_records_per_call:
        raise LimitExceeded(f"at most {limits.max_records_per_call} records per call, got {len(records)}")
    blobs: list[bytes] = []
    largest = limits.max_record_bytes
    for index, record in enumerate(records):
        position = positions[index] if positions is not None else index
        if type(record) is not dict:
            if not isinstance(record, dict):
                raise InvalidRequest(f"record {position} is not a JSON object")
            data = _slow(position, record)
        else:
            data = _fast(record) or _slow(position, record)
        if len(data) > largest:
            raise LimitExceeded(f"record {position} is larger than {limits.max_record_bytes} bytes")
        blobs.append(data)
    joined = b"\n".join(blobs)
    return EncodedBatch(
        texts=[blob.decode() for blob in blobs],
        size=len(joined) - len(blobs) + 1,
        content_digest=hashlib.sha256(joined).hexdigest(),
    )


def encode_records(records: Sequence[Any], limits: Limits) -> list[str]:
    """Validate ``records`` and return each as compact JSON text, in order (see :func:`encode_batch`)."""
    return encode_batch(records, limits).texts
