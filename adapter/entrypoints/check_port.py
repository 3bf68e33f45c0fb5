"""``python -m adapter check-port package.module:factory``: the port contract, one line per rule.

The factory is called like ``ADAPTER_LEGACY_PORT``'s (with the settings). Exit status 0 only if every
rule holds; 1 if any rule fails or could not be checked (a skipped rule is not a rule that holds);
2 for a setting or argument that is wrong (the factory cannot be imported, for example).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, cast

from adapter.config import ConfigError, Settings

__all__ = ["configure_parser"]

MARK = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP"}


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("factory", help="package.module:factory, called with the settings")
    parser.add_argument(
        "--lose-commit-reply",
        metavar="MODULE:HOOK",
        help="fault hook: hook(port) is a context manager during which a COMMIT's reply is lost",
    )
    parser.add_argument("--target", default="", help="the target to write to (default: the first declared)")
    parser.set_defaults(run=_check_port)


def _check_port(settings: Settings, args: argparse.Namespace) -> int:
    from adapter.legacy.loading import load_port, resolve_factory
    from adapter.testing.contract import ContractSubject, run_contract

    port = load_port(args.factory, settings)
    try:
        hook = None
        if args.lose_commit_reply:
            hook = resolve_factory(args.lose_commit_reply, setting="invalid --lose-commit-reply")
            if not callable(hook):
                raise ConfigError(f"invalid --lose-commit-reply: {args.lose_commit_reply} is not callable")
        try:
            subject = ContractSubject(port, args.target, lose_commit_reply=cast(Any, hook))
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
