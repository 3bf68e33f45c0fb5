"""``python -m adapter check-port package.module:factory``: the port contract, one line per rule.

The factory is called like ``ADAPTER_LEGACY_PORT``'s (with the settings). Exit status 0 only if every
rule holds; 1 if any rule fails or could not be checked (a skipped rule is not a rule that holds);
2 for a setting or argument that is wrong (the factory cannot be imported, a records file that is not
a JSON list of objects, for example).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, cast

from adapter.config import ConfigError, Settings

__all__ = ["configure_parser"]

MARK = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP"}
HOOKS = {
    "lose_commit_reply": "hook(port) is a context manager during which a COMMIT's reply is lost",
    "system_down": "hook(port) is a context manager during which the system cannot be reached",
}


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("factory", help="package.module:factory, called with the settings")
    for name, what in HOOKS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", metavar="MODULE:HOOK", help=f"fault hook: {what}")
    parser.add_argument("--target", default="", help="the target to write to (default: the first declared)")
    parser.add_argument(
        "--records",
        metavar="FILE.json",
        help="sample records: a JSON list of records or parts of records; record n is generated from "
        "the schema and takes the fields of sample n (cycling), so give what cannot be generated "
        "(foreign keys, patterns) and leave keys out",
    )
    parser.set_defaults(run=_check_port)


def _hook(spec: str | None, option: str) -> Any:
    from adapter.legacy.loading import resolve_factory

    if not spec:
        return None
    hook = resolve_factory(spec, setting=f"invalid --{option}")
    if not callable(hook):
        raise ConfigError(f"invalid --{option}: {spec} is not callable")
    return hook


def _samples(path: str | None) -> list[dict[str, Any]] | None:
    if path is None:
        return None
    try:
        samples = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"invalid --records: cannot read {path}: {type(exc).__name__}: {exc}") from None
    if not isinstance(samples, list) or not samples or not all(isinstance(s, dict) for s in samples):
        raise ConfigError(f"invalid --records: {path} must hold a non-empty JSON list of objects")
    return cast(list[dict[str, Any]], samples)


def _check_port(settings: Settings, args: argparse.Namespace) -> int:
    from adapter.legacy.loading import load_port
    from adapter.testing.contract import ContractSubject, run_contract

    samples = _samples(args.records)
    port = load_port(args.factory, settings, setting="invalid check-port factory")
    try:
        hooks = {name: _hook(getattr(args, name), name.replace("_", "-")) for name in HOOKS}
        try:
            subject = ContractSubject(port, args.target, samples=samples, **hooks)
        except Exception as exc:
            raise ConfigError(f"cannot check {args.factory}: {type(exc).__name__}: {exc}") from None
        print(f"port contract: {args.factory} (target {subject.target!r})")
        results = run_contract(subject)
    finally:
        close = getattr(port, "close", None)
        if callable(close):
            close()
    for result in results:
        line = f"{MARK[result.status]}  {result.rule:<30} {result.description}"
        print(line + (f"\n      {result.detail}" if result.detail else ""))
    passed = sum(r.status == "pass" for r in results)
    print(f"{passed} of {len(results)} rules hold")
    sys.stdout.flush()
    return 0 if passed == len(results) else 1
