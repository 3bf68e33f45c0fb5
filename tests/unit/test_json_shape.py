"""The count of a JSON body's values and depth while it streams in (``adapter/entrypoints/http/shape.py``):
exact for any JSON text cut into any chunks, strings (with their escapes) never counted."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter.entrypoints.http.shape import JsonShape, ShapeExceeded

# Text that tries to look like structure: brackets, commas, quotes and backslashes inside strings.
tricky_text = st.text(alphabet=st.sampled_from(list('[]{},"\\ax\n\u00e9')), max_size=12)
values = st.recursive(
    st.none() | st.booleans() | st.integers() | tricky_text,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(tricky_text, inner, max_size=5),
    max_leaves=40,
)


def reference(value: Any) -> tuple[int, int]:
    """(values as the scanner counts them: every comma and every opening bracket, depth)."""
    if isinstance(value, list | dict):
        items = list(value.values()) if isinstance(value, dict) else value
        counted = [reference(item) for item in items]
        commas = max(len(items) - 1, 0)
        return 1 + commas + sum(c for c, _ in counted), 1 + max((d for _, d in counted), default=0)
    return 0, 0


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@settings(max_examples=300, deadline=None)
@given(values, st.booleans(), st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_counts_match_the_document_however_it_is_cut(value: Any, ascii_only: bool, cuts: list[int]) -> None:
    data = json.dumps(value, ensure_ascii=ascii_only).encode()
    shape = JsonShape(max_depth=1000, max_elements=10**9)
    for chunk in chunked(data, cuts):
        shape.feed(chunk)
    elements, depth = reference(value)
    assert shape.elements == elements
    assert shape.depth == 0
    # Both limits are exact: the document's own depth and count pass, one less refuses it.
    passing = JsonShape(max_depth=depth, max_elements=elements)
    for chunk in chunked(data, cuts):
        passing.feed(chunk)
    if depth > 0:
        tight = JsonShape(max_depth=depth - 1, max_elements=10**9)
        with pytest.raises(ShapeExceeded, match="ADAPTER_MAX_JSON_DEPTH"):
            for chunk in chunked(data, cuts):
                tight.feed(chunk)
        fewer = JsonShape(max_depth=1000, max_elements=elements - 1)
        with pytest.raises(ShapeExceeded, match="ADAPTER_MAX_JSON_ELEMENTS"):
            for chunk in chunked(data, cuts):
                fewer.feed(chunk)


def test_nested_empty_arrays_are_refused_at_the_chunk_that_passes_the_limit() -> None:
    shape = JsonShape(max_depth=64, max_elements=1000)
    body = b"[" + b"[]," * 100_000 + b"[]]"
    fed = 0
    with pytest.raises(ShapeExceeded, match="more than 1000 JSON values") as refused:
        for start in range(0, len(body), 1024):
            fed += 1024
            shape.feed(body[start : start + 1024])
    assert fed <= 4 * 1024  # refused within the first few chunks, not at the end of 300 KB
    assert refused.value.setting == "max_json_elements" and refused.value.limit == 1000


def test_an_escaped_quote_split_across_chunks_does_not_end_the_string() -> None:
    shape = JsonShape(max_depth=4, max_elements=10)
    for chunk in (b'["a\\', b'",[[[[[[', b'"]'):  # the brackets are inside the string
        shape.feed(chunk)
    assert (shape.elements, shape.depth) == (1, 0)
