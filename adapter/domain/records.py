"""Validation of staged records: shape and size, before anything is stored."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from adapter.domain.errors import InvalidRequest, LimitExceeded

__all__ = ["Limits", "encode_records"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds that protect the store and the legacy session; all configurable."""

    max_records_per_call: int = 1000
    max_record_bytes: int = 64 * 1024
    max_records_per_import: int = 1_000_000
    max_target_length: int = 200
    min_ttl_seconds: int = 10
    max_ttl_seconds: int = 7 * 24 * 3600


def encode_records(records: Sequence[Any], limits: Limits) -> list[str]:
    """Validate ``records`` and return each as compact JSON text, in order.

    Raises InvalidRequest for a record that is not a JSON object and LimitExceeded for too many
    records or a record too large. The message names the position, never the content.
    """
    if not isinstance(records, Sequence) or isinstance(records, str | bytes):
        raise InvalidRequest("records must be a list of JSON objects")
    if not records:
        raise InvalidRequest("at least one record is required")
    if len(records) > limits.max_records_per_call:
        raise LimitExceeded(f"at most {limits.max_records_per_call} records per call, got {len(records)}")
    encoded: list[str] = []
    for position, record in enumerate(records):
        if not isinstance(record, dict):
            raise InvalidRequest(f"record {position} is not a JSON object")
        try:
            text = json.dumps(record, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidRequest(f"record {position} is not valid JSON") from exc
        try:
            size = len(text.encode())
        except UnicodeEncodeError:  # a lone surrogate: no store can keep it as UTF-8
            raise InvalidRequest(f"record {position} contains a lone surrogate") from None
        if size > limits.max_record_bytes:
            raise LimitExceeded(f"record {position} is larger than {limits.max_record_bytes} bytes")
        encoded.append(text)
    return encoded
