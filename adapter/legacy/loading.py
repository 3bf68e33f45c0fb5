"""Load the legacy port named by ``ADAPTER_LEGACY_PORT`` (``package.module:factory``).

The factory receives the :class:`~adapter.config.Settings` and returns a
:class:`~adapter.ports.legacy.LegacyPort`. Anything that goes wrong while finding or calling it is
one :class:`~adapter.config.ConfigError` line, so start-up stops with a clear message instead of a
traceback. Like ``uvicorn``, the current directory is searched first, so a port module next to
where the ``legacy-adapter`` command runs is found without installing it.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING

from adapter.config import ConfigError
from adapter.ports.legacy import LegacyPort

if TYPE_CHECKING:
    from adapter.config import Settings

__all__ = ["load_port", "resolve_factory"]

_SETTING = "invalid setting ADAPTER_LEGACY_PORT"


def resolve_factory(spec: str, *, setting: str = _SETTING) -> object:
    """The object ``spec`` (``module:attribute``) names, importing its module."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"{setting}: expected package.module:factory, got {spec!r}")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        where = ""
        if exc.name and module_name.split(".")[0] == exc.name.split(".")[0]:
            where = (
                f" (looked in the working directory {cwd} and on sys.path: run the command in the folder"
                f" that holds {exc.name.split('.')[0]}, or put that folder on PYTHONPATH)"
            )
        raise ConfigError(
            f"{setting}: cannot import {module_name!r}: ModuleNotFoundError: {exc}{where}"
        ) from None
    except Exception as exc:  # any failure while importing the user's module is a setting error
        raise ConfigError(f"{setting}: cannot import {module_name!r}: {type(exc).__name__}: {exc}") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ConfigError(f"{setting}: module {module_name!r} has no attribute {attribute!r}") from None


def load_port(spec: str, settings: Settings, *, setting: str = _SETTING) -> LegacyPort:
    """Call the factory ``spec`` names with ``settings``; it must return a LegacyPort. ``setting``
    begins every message: where ``spec`` came from (``ADAPTER_LEGACY_PORT`` unless a command's
    argument)."""
    factory = resolve_factory(spec, setting=setting)
    if not callable(factory):
        raise ConfigError(f"{setting}: {spec} is not callable")
    try:
        port = factory(settings)
    except ConfigError:
        raise
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        raise ConfigError(f"{setting}: {spec}(settings) failed: {type(exc).__name__}: {first}") from None
    if not isinstance(port, LegacyPort):
        raise ConfigError(
            f"{setting}: {spec}(settings) returned {type(port).__name__}, not a LegacyPort "
            "(it needs open_session, batch_status and void_batch)"
        )
    return port
