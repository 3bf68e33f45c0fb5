"""The store boundary and the error tree, checked on the source and the classes themselves."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from adapter.domain import errors
from adapter.domain.errors import AdapterError, CompensationFailed, LegacyUnavailable, error_for_code

SERVICES = Path(__file__).resolve().parents[2] / "adapter" / "services"


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_service_module_imports_sqlalchemy() -> None:
    modules = sorted(SERVICES.rglob("*.py"))
    assert len(modules) > 10  # the walk found the services
    offenders = {
        str(path.relative_to(SERVICES)): sorted(
            n for n in _imported_modules(path) if n.startswith("sqlalchemy")
        )
        for path in modules
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def test_every_error_class_has_its_own_code() -> None:
    classes = [getattr(errors, name) for name in errors.__all__]
    tree = [c for c in classes if isinstance(c, type) and issubclass(c, AdapterError)]
    codes = [c.code for c in tree]
    assert len(tree) >= 15 and len(codes) == len(set(codes)), codes


def test_a_stored_error_code_names_its_class() -> None:
    assert error_for_code("legacy_unavailable") is LegacyUnavailable
    assert error_for_code("compensation_failed") is CompensationFailed
    assert error_for_code("no_such_code") is AdapterError and error_for_code(None) is AdapterError


def test_the_ops_cli_reads_the_response_schemas_without_the_routes() -> None:
    probe = (
        "import sys; import adapter.entrypoints.ops_cli, adapter.bootstrap;"
        "from adapter.entrypoints.admin import schemas, errors;"
        "print(sorted(m for m in ('fastapi', 'adapter.entrypoints.admin.api') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
