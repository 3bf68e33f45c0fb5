"""legacy-mcp-adapter: wrap a stateful legacy system as a stateless, safe MCP server.

The public surface is what ``__all__`` lists (the keys of ``_HOME``, where each name is written once);
everything else may change between versions. It is pinned by ``tests/unit/test_public_surface.py``, so
a change here is always deliberate.

* settings: :class:`Settings`, :func:`load_settings`, :class:`ConfigError`;
* wiring: :func:`build` returns a :class:`Kit` (settings, store, legacy port, services);
* the legacy port, to wrap your own system (``docs/wrap-your-own-system.md``): the protocols
  :class:`LegacyPort` and :class:`LegacySession`, their errors :class:`LegacyError` (base),
  :class:`LegacyFailed` (and its subclass :class:`LegacyRefused`, whose :class:`Refusal` says which
  record, which field and why, safe to show), :class:`LegacyTransient`, :class:`LegacyOutcomeUnknown`,
  and their result types :class:`CommittedBatch`, :class:`BatchStatus`, :class:`CommittedBatchInfo`,
  :class:`VoidResult`, and the declaration of what it accepts, :class:`Target` (with
  :class:`TargetCatalog`, the optional ``targets()`` method); the contract kit for ports is
  :mod:`adapter.testing`;
* the app factory :func:`create_app` (FastAPI: MCP endpoint, admin API, dashboard, metrics).

``import adapter`` stays light: each name is imported on first use (PEP 562 ``__getattr__``), so a
CLI start or a port module that only needs the errors does not pay for FastAPI, SQLAlchemy or the SDK.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_PORT = "adapter.ports.legacy"
_HOME = {
    "Settings": "adapter.config",
    "load_settings": "adapter.config",
    "ConfigError": "adapter.config",
    "build": "adapter.bootstrap",
    "Kit": "adapter.bootstrap",
    "LegacyPort": _PORT,
    "LegacySession": _PORT,
    "LegacyError": _PORT,
    "LegacyFailed": _PORT,
    "LegacyTransient": _PORT,
    "LegacyOutcomeUnknown": _PORT,
    "LegacyRefused": _PORT,
    "Refusal": _PORT,
    "CommittedBatch": _PORT,
    "BatchStatus": _PORT,
    "CommittedBatchInfo": _PORT,
    "VoidResult": _PORT,
    "Target": _PORT,
    "TargetCatalog": _PORT,
    "create_app": "adapter.entrypoints.http.app",
}

# The names listed once, in ``_HOME``; ``__all__`` follows it.
__all__ = ["__version__", *_HOME]

if TYPE_CHECKING:  # for type checkers and IDEs (``X as X`` exports it); at run time the names load lazily
    from adapter.bootstrap import Kit as Kit
    from adapter.bootstrap import build as build
    from adapter.config import ConfigError as ConfigError
    from adapter.config import Settings as Settings
    from adapter.config import load_settings as load_settings
    from adapter.entrypoints.http.app import create_app as create_app
    from adapter.ports.legacy import BatchStatus as BatchStatus
    from adapter.ports.legacy import CommittedBatch as CommittedBatch
    from adapter.ports.legacy import CommittedBatchInfo as CommittedBatchInfo
    from adapter.ports.legacy import LegacyError as LegacyError
    from adapter.ports.legacy import LegacyFailed as LegacyFailed
    from adapter.ports.legacy import LegacyOutcomeUnknown as LegacyOutcomeUnknown
    from adapter.ports.legacy import LegacyPort as LegacyPort
    from adapter.ports.legacy import LegacyRefused as LegacyRefused
    from adapter.ports.legacy import LegacySession as LegacySession
    from adapter.ports.legacy import LegacyTransient as LegacyTransient
    from adapter.ports.legacy import Refusal as Refusal
    from adapter.ports.legacy import Target as Target
    from adapter.ports.legacy import TargetCatalog as TargetCatalog
    from adapter.ports.legacy import VoidResult as VoidResult


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'adapter' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
