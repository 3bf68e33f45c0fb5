"""Handing staged records to a legacy session: as JSON texts where it takes them, decoded otherwise."""

from __future__ import annotations

import json
from collections.abc import Sequence

from adapter.ports.legacy import JsonRecordSession, LegacySession

__all__ = ["add_record_texts", "decode_record_texts"]


def decode_record_texts(texts: Sequence[str]) -> list[dict[str, object]]:
    """The records of ``texts`` (each one record's JSON object text), for ``LegacySession.add``."""
    return [json.loads(text) for text in texts]


def add_record_texts(session: LegacySession, texts: Sequence[str]) -> None:
    """Add the records whose JSON texts are ``texts`` to the session's open batch, in order.

    A session with ``add_json`` (:class:`~adapter.ports.legacy.JsonRecordSession`) gets the texts as
    they are; any other gets them decoded, through its ``add``.
    """
    if isinstance(session, JsonRecordSession):
        session.add_json(texts)
    else:
        session.add(decode_record_texts(texts))
