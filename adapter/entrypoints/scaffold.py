"""``python -m adapter new-port NAME``: a package with a port skeleton, its targets and contract tests.

The skeleton satisfies the protocols but every method raises ``NotImplementedError``, so the
contract tests it writes fail until the methods are filled in: the user starts from a red suite.
"""

from __future__ import annotations

import argparse
import keyword
from pathlib import Path

from adapter.config import ConfigError, Settings

__all__ = ["configure_parser", "write_package"]

PORT = '''"""The legacy port of {name}: how the kit talks to the system it wraps.

Fill in every method; translate each failure of the system into LegacyFailed (refused, nothing
applied), LegacyTransient (not applied, may work again) or LegacyOutcomeUnknown (a COMMIT whose reply
was lost). Serve it with ADAPTER_LEGACY_PORT={name}.port:make_port; check it with
{check}
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pydantic import BaseModel, ConfigDict

from adapter.ports.legacy import BatchStatus, CommittedBatch, Target, VoidResult


class Customer(BaseModel):
    """One customer record (an example target: replace it with yours)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    email: str | None = None


class {cls}Session:
    """One batch on one connection to the system."""

    def begin(self, batch_ref: str, target: str) -> None:
        raise NotImplementedError("open a batch into target under batch_ref")

    def add(self, records: Sequence[dict[str, Any]]) -> None:
        raise NotImplementedError("append the records to the open batch")

    def commit(self) -> CommittedBatch:
        raise NotImplementedError("commit; a lost reply must raise LegacyOutcomeUnknown")

    def rollback(self) -> None:
        raise NotImplementedError("drop the open batch")

    def close(self) -> None:
        """Release the connection."""


class {cls}Port:
    """Shared by every thread of the server: must be thread-safe."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings

    def targets(self) -> Sequence[Target]:
        return [Target.from_model("customers", Customer, "Customers of {name}.")]

    def open_session(self) -> {cls}Session:
        return {cls}Session()

    def batch_status(self, batch_ref: str) -> BatchStatus:
        raise NotImplementedError("list every batch committed under batch_ref, voided ones flagged")

    def void_batch(self, legacy_batch_id: str) -> VoidResult:
        raise NotImplementedError("reverse a committed batch; a repeat answers already_voided=True")

    def close(self) -> None:
        """Called once when the server stops."""


def make_port(settings: Any) -> {cls}Port:
    """The factory ADAPTER_LEGACY_PORT names: it receives the kit's settings."""
    return {cls}Port(settings)


@contextmanager
def lose_commit_reply(port: {cls}Port) -> Iterator[None]:
    """Fault hook for the contract: while open, a COMMIT is applied but its reply is lost."""
    raise NotImplementedError("make the next COMMIT's reply go missing (a test instance's fault switch)")
    yield


@contextmanager
def system_down(port: {cls}Port) -> Iterator[None]:
    """Fault hook for the contract: while open, the system cannot be reached at all."""
    raise NotImplementedError("make the system unreachable (stop the test instance, or block its port)")
    yield
'''

# Only the factory and the hook are imported: the port's classes may be renamed or replaced freely.
TESTS = '''"""The kit's port contract against {name}'s port: python -m pytest {name}"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from adapter.config import load_settings
from adapter.testing import FaultHook, PortContract
from {name}.port import lose_commit_reply, make_port, system_down


class TestPortContract(PortContract):
    @pytest.fixture
    def port(self) -> Iterator[Any]:
        port = make_port(load_settings())
        yield port
        port.close()

    @pytest.fixture
    def lose_commit_reply(self) -> FaultHook:
        return lose_commit_reply

    @pytest.fixture
    def system_down(self) -> FaultHook:
        return system_down
'''


def write_package(name: str, directory: Path) -> Path:
    """Write ``directory/name`` (``__init__.py``, ``port.py``, ``test_port.py``); refuse to overwrite."""
    if not name.isidentifier() or keyword.iskeyword(name) or not name.islower():
        raise ConfigError(f"invalid port name {name!r}: use a lower-case Python identifier such as acme_erp")
    package = directory / name
    if package.exists():
        raise ConfigError(f"{package} exists already; choose another name or directory")
    cls = "".join(part.capitalize() for part in name.split("_"))
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f'"""The legacy port of {name}."""\n')
    (package / "port.py").write_text(PORT.format(name=name, cls=cls, check=check_command(name)))
    (package / "test_port.py").write_text(TESTS.format(name=name, cls=cls))
    return package


def check_command(name: str) -> str:
    """The ``check-port`` command line for the package ``name``, with both of its fault hooks."""
    port = f"{name}.port"
    return (
        f"python -m adapter check-port {port}:make_port --lose-commit-reply {port}:lose_commit_reply"
        f" --system-down {port}:system_down"
    )


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="the package to write, a lower-case Python identifier")
    parser.add_argument("--dir", default=".", help="where to write it (default: the current directory)")
    parser.set_defaults(run=_new_port)


def _new_port(settings: Settings, args: argparse.Namespace) -> int:
    package = write_package(args.name, Path(args.dir))
    print(f"wrote {package}/: port.py (the skeleton), test_port.py (the contract, failing until filled in)")
    print(f"next: fill in {package / 'port.py'}; then this passes (run it here):")
    print(f"  python -m pytest {package} && {check_command(args.name)}")
    return 0
