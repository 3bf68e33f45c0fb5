"""Property-based fuzzing of the admin API and /readyz with schemathesis, over real HTTP.

The app's own OpenAPI document drives it: for each operation, bounded positive and negative cases
are sent with the operator token (path ids are random or real ones, so actions really run), and
each response must not be a server error and must match what the document says (status code,
content type, body schema). The legacy system stays up, so /readyz has no excuse for a 503.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from adapter.domain.identity import Principal
from legacy_sim.engine import LegacyEngine

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
EXAMPLES = {GenerationMode.POSITIVE: 25, GenerationMode.NEGATIVE: 15}


@pytest.mark.slow
def test_the_admin_api_survives_schemathesis(
    server: Any, legacy_engine: LegacyEngine, alice: Principal, bob: Principal
) -> None:
    server.staged(alice)
    server.committed(bob)
    unknown = server.outcome_unknown(alice, legacy_engine)
    _, stuck = server.needs_operator(bob, legacy_engine)
    real_ids = [o["operation_id"] for o in server.all_operations()] + [unknown.operation_id, stuck]
    import_ids = [i["import_id"] for i in server.ok(server.get("/admin/imports"))["items"]]

    spec = server.ok(server.get("/openapi.json", token=None))
    schema = schemathesis.openapi.from_dict(spec).include(path_regex=r"^/(admin/|readyz$)")
    headers = server.auth(server.operator_token)
    tested: list[str] = []
    statuses: set[int] = set()

    for result in schema.get_all_operations():
        operation = result.ok()
        tested.append(f"{operation.method.upper()} {operation.path}")
        for mode, examples in EXAMPLES.items():
            path_only = operation.method.upper() == "GET" and (
                "{" in operation.path or operation.path == "/readyz"
            )
            if mode is GenerationMode.NEGATIVE and path_only:
                continue  # nothing schemathesis can negate and still send
            strategies = [operation.as_strategy(generation_mode=mode)]
            if mode is GenerationMode.NEGATIVE:
                pass  # a fixed, valid id leaves nothing to negate on a path-only operation
            elif "{operation_id}" in operation.path:
                strategies += [
                    operation.as_strategy(generation_mode=mode, path_parameters={"operation_id": i})
                    for i in real_ids
                ]
            if "{import_id}" in operation.path:
                strategies += [
                    operation.as_strategy(generation_mode=mode, path_parameters={"import_id": i})
                    for i in import_ids
                ]

            @given(case=st.one_of(strategies))
            @settings(
                max_examples=examples,
                deadline=None,
                database=None,
                derandomize=True,
                suppress_health_check=list(HealthCheck),
            )
            def run(case: Any) -> None:
                response = case.call(base_url=server.url, headers=headers, timeout=10)
                statuses.add(response.status_code)
                assert response.status_code < 500, (case.method, case.formatted_path, response.text)
                case.validate_response(response, checks=CHECKS)

            run()

    assert sorted(tested) == sorted(
        [
            "GET /admin/operations",
            "GET /admin/operations/{operation_id}",
            "GET /admin/imports",
            "GET /admin/imports/{import_id}",
            "POST /admin/operations/{operation_id}/reconcile",
            "POST /admin/operations/{operation_id}/compensate",
            "POST /admin/operations/{operation_id}/resolve",
            "GET /readyz",
        ]
    )
    assert {200, 404, 422} <= statuses, statuses
