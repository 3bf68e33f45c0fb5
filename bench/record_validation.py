"""Benchmark: the cost of checking one record against its target's schema, per validator.

Chooses the validator of ``adapter/services/targets.py``: the kit must keep validation cheap (a later
target is 60,000 records/s with validation on). Validates the same 20,000 small records with each
candidate, one run, and prints microseconds per record; ``TargetRules`` is the kit's own path
(``jsonschema_rs`` plus the permissive shortcut). Candidates that are not installed are skipped.

    .venv/bin/python bench/record_validation.py
"""

from __future__ import annotations

import importlib.util
import json
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter

from adapter.ports.legacy import Target
from adapter.services.targets import TargetRules

N = 20_000


class Customer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int
    name: str
    email: str | None = None
    balance: float = 0


def candidates(schema: dict[str, Any]) -> dict[str, Callable[[Any], Any]]:
    found: dict[str, Callable[[Any], Any]] = {"pydantic TypeAdapter": TypeAdapter(Customer).validate_python}
    if importlib.util.find_spec("jsonschema_rs"):
        import jsonschema_rs

        found["jsonschema_rs is_valid"] = jsonschema_rs.validator_for(schema).is_valid
    if importlib.util.find_spec("fastjsonschema"):
        import fastjsonschema

        found["fastjsonschema (compiled)"] = fastjsonschema.compile(schema)
    if importlib.util.find_spec("jsonschema"):
        import jsonschema

        found["jsonschema (pure Python)"] = jsonschema.Draft202012Validator(schema).is_valid
    rules = TargetRules([Target.from_model("customers", Customer)])
    compiled = rules.require("customers")
    found["kit: TargetRules.check, per record in calls of 500"] = lambda r: r  # timed below
    found["__kit__"] = compiled.check
    return found


def main() -> None:
    schema = Customer.model_json_schema()
    records = [{"id": i, "name": f"n{i}", "email": "a@example.com", "balance": 1.5} for i in range(N)]
    results: dict[str, float] = {}
    found = candidates(schema)
    kit_check = found.pop("__kit__")
    for name, validate in found.items():
        started = time.perf_counter()
        if name.startswith("kit:"):
            for start in range(0, N, 500):
                kit_check(records[start : start + 500])
        else:
            for record in records:
                validate(record)
        results[name] = (time.perf_counter() - started) / N * 1e6
    for name, micros in sorted(results.items(), key=lambda item: item[1]):
        print(f"{name:<52} {micros:6.2f} us/record  ({1e6 / micros:12,.0f} records/s)")
    print(json.dumps({k: round(v, 3) for k, v in results.items()}))


if __name__ == "__main__":
    main()
