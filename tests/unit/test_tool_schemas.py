"""Published tool schemas carry no ``$ref``: a client validates every result against them."""

from __future__ import annotations

import json

import pytest
from jsonschema.validators import validator_for
from pydantic import BaseModel

from adapter.entrypoints.mcp.tools import build_tools, inline_refs, json_schema

STATUS = {
    "handle": "h",
    "import_id": "i",
    "status": "open",
    "target": "customers",
    "record_count": 3,
    "expires_at": "2026-12-01T00:00:00Z",
    "operations": [{"operation_id": "o", "kind": "commit", "status": "succeeded", "created_at": "x"}],
}


def _errors(schema: dict[str, object], document: object) -> list[str]:
    return sorted(error.message for error in validator_for(schema)(schema).iter_errors(document))


def test_no_published_schema_has_a_reference() -> None:
    for tool in build_tools(3600):
        for model in (tool.input_model, tool.output_model):
            published = json.dumps(json_schema(model))
            assert "$ref" not in published and "$defs" not in published, (tool.name, model.__name__)


@pytest.mark.parametrize(
    "document",
    [
        STATUS,
        {**STATUS, "operations": [{"operation_id": "o"}]},  # a nested field missing
        {**STATUS, "record_count": "three"},
        {**STATUS, "operations": "none"},
    ],
)
def test_inlining_accepts_and_refuses_what_the_original_does(document: dict[str, object]) -> None:
    status_model = next(t.output_model for t in build_tools(3600) if t.name == "get_import_status")
    original = status_model.model_json_schema()
    assert "$defs" in original  # the case inlining exists for
    assert _errors(inline_refs(original), document) == _errors(original, document)


def test_a_recursive_schema_is_refused_not_expanded_forever() -> None:
    class Node(BaseModel):
        children: list[Node]

    with pytest.raises(ValueError, match="recursive"):
        inline_refs(Node.model_json_schema())
