"""The public surface of ``adapter`` is pinned: a change to it must be a decision, not an accident.

If a test here fails because you changed the surface on purpose, update the pin below together with
``adapter/__init__.py``'s docstring and ``docs/architecture.md``, and say so in the change log.
"""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
from typing import Any

import pytest

import adapter

SURFACE = {
    "__version__": "",
    "Settings": "adapter.config",
    "load_settings": "adapter.config",
    "ConfigError": "adapter.config",
    "build": "adapter.bootstrap",
    "Kit": "adapter.bootstrap",
    "LegacyPort": "adapter.ports.legacy",
    "LegacySession": "adapter.ports.legacy",
    "LegacyError": "adapter.ports.legacy",
    "LegacyFailed": "adapter.ports.legacy",
    "LegacyTransient": "adapter.ports.legacy",
    "LegacyOutcomeUnknown": "adapter.ports.legacy",
    "LegacyRefused": "adapter.ports.legacy",
    "Refusal": "adapter.ports.legacy",
    "CommittedBatch": "adapter.ports.legacy",
    "BatchStatus": "adapter.ports.legacy",
    "CommittedBatchInfo": "adapter.ports.legacy",
    "VoidResult": "adapter.ports.legacy",
    "Target": "adapter.ports.legacy",
    "TargetCatalog": "adapter.ports.legacy",
    "create_app": "adapter.entrypoints.http.app",
}

SIGNATURES = {
    "build": ["settings", "*legacy=None", "*store=None"],
    "create_app": ["kit", "*public_url='http://127.0.0.1:3000'", "*run_maintenance=True"],
    "load_settings": ["**overrides"],
}
"""Parameters callers may rely on, in order: ``*name`` is keyword-only, ``**name`` takes keywords."""

PROTOCOL_METHODS = {
    "LegacyPort": {
        "open_session": "(self) -> 'LegacySession'",
        "batch_status": "(self, batch_ref: 'str') -> 'BatchStatus'",
        "void_batch": "(self, legacy_batch_id: 'str') -> 'VoidResult'",
    },
    "LegacySession": {
        "begin": "(self, batch_ref: 'str', target: 'str') -> 'None'",
        "add": "(self, records: 'Sequence[Record]') -> 'None'",
        "commit": "(self) -> 'CommittedBatch'",
        "rollback": "(self) -> 'None'",
        "close": "(self) -> 'None'",
    },
}

RESULT_FIELDS = {
    "CommittedBatch": ["legacy_batch_id", "record_count"],
    "BatchStatus": ["batch_ref", "batches"],
    "CommittedBatchInfo": ["legacy_batch_id", "record_count", "voided"],
    "VoidResult": ["legacy_batch_id", "already_voided"],
    "Refusal": ["code", "message", "position", "field"],
    "Target": ["name", "description", "schema", "max_records"],
    "Kit": ["settings", "store", "legacy", "service", "admin"],
}


def test_all_lists_exactly_the_pinned_names() -> None:
    assert sorted(adapter.__all__) == sorted(SURFACE)
    assert set(adapter.__all__) <= set(dir(adapter))


@pytest.mark.parametrize("name", sorted(set(SURFACE) - {"__version__"}))
def test_each_public_name_is_the_object_of_its_home_module(name: str) -> None:
    home = sys.modules.get(SURFACE[name]) or __import__(SURFACE[name], fromlist=[name])
    assert getattr(adapter, name) is getattr(home, name)


def _described(parameter: inspect.Parameter) -> str:
    kinds = {inspect.Parameter.KEYWORD_ONLY: "*", inspect.Parameter.VAR_KEYWORD: "**"}
    prefix = kinds.get(parameter.kind, "")
    default = "" if parameter.default is inspect.Parameter.empty else f"={parameter.default!r}"
    return f"{prefix}{parameter.name}{default}"


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_the_public_functions_keep_the_parameters_callers_use(name: str) -> None:
    """Removing, renaming, reordering or changing a default breaks callers and fails here; a new
    keyword-only parameter with a default breaks nobody and is allowed."""
    parameters = list(inspect.signature(getattr(adapter, name)).parameters.values())
    pinned = SIGNATURES[name]
    assert [_described(p) for p in parameters[: len(pinned)]] == pinned
    for extra in parameters[len(pinned) :]:
        assert extra.kind is inspect.Parameter.KEYWORD_ONLY and extra.default is not inspect.Parameter.empty


@pytest.mark.parametrize("protocol", sorted(PROTOCOL_METHODS))
def test_the_port_protocols_have_exactly_the_pinned_methods(protocol: str) -> None:
    cls: Any = getattr(adapter, protocol)
    methods = {
        name: str(inspect.signature(member))
        for name, member in vars(cls).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }
    assert methods == PROTOCOL_METHODS[protocol]


@pytest.mark.parametrize("name", sorted(RESULT_FIELDS))
def test_the_result_types_have_the_pinned_fields(name: str) -> None:
    assert [f.name for f in dataclasses.fields(getattr(adapter, name))] == RESULT_FIELDS[name]


def test_the_three_legacy_outcomes_share_one_base() -> None:
    for name in ("LegacyFailed", "LegacyTransient", "LegacyOutcomeUnknown"):
        assert getattr(adapter, name).__mro__[1] is adapter.LegacyError


def test_a_refusal_is_a_failure_whose_reason_is_frozen() -> None:
    refusal = adapter.Refusal("foreign_key_violation", "no such customer", position=2, field="customer_id")
    error = adapter.LegacyRefused(refusal)

    assert isinstance(error, adapter.LegacyFailed) and error.refusal is refusal
    assert str(error) == "record 2, field 'customer_id': foreign_key_violation: no such customer"
    with pytest.raises(dataclasses.FrozenInstanceError):
        refusal.code = "other"  # type: ignore[misc]
    for bad in ({"code": "Not Snake"}, {"message": "two\nlines"}, {"position": -1}):
        with pytest.raises(ValueError):
            adapter.Refusal(**{"code": "x", "message": "m", **bad})  # type: ignore[arg-type]


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'ImportService'"):
        _ = adapter.ImportService


def test_importing_adapter_loads_no_framework() -> None:
    probe = (
        "import sys, adapter; "
        "heavy = {'fastapi', 'sqlalchemy', 'mcp', 'pydantic'}; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy)); "
        "print(sorted(m for m in sys.modules if m.startswith('adapter.')))"
    )
    assert _printed_by(probe) == ["[]", "[]"]


def test_wiring_the_kit_does_not_load_the_simulator() -> None:
    # A deployment that wraps its own system never imports legacy_sim: bootstrap imports the
    # simulator's port only inside build_legacy_port(), when no port is passed (docs/architecture.md).
    probe = (
        "import sys, adapter.bootstrap; print(sorted(m for m in sys.modules if m.startswith('legacy_sim')))"
    )
    assert _printed_by(probe) == ["[]"]


def _printed_by(probe: str) -> list[str]:
    """The lines ``probe`` prints in a fresh interpreter (this one has imported everything already)."""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return done.stdout.splitlines()
