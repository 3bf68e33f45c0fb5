"""What a port declares about its targets, with the default for ports that declare nothing."""

from __future__ import annotations

import inspect

from adapter.ports.legacy import WILDCARD_TARGET, LegacySession, Target, TargetCatalog

__all__ = ["ANY_TARGET", "begin_batch", "port_targets"]

ANY_TARGET = Target(
    WILDCARD_TARGET,
    "Any target name is accepted; a record is any JSON object (this port declares no targets).",
)


def port_targets(port: object) -> tuple[Target, ...]:
    """The port's own ``targets()``, or the one permissive wildcard when it has none.

    Names must be unique: two declarations of one name would make validation ambiguous.
    """
    if not isinstance(port, TargetCatalog):
        return (ANY_TARGET,)
    targets = tuple(port.targets())
    names = [t.name for t in targets]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"the port declares target(s) more than once: {', '.join(duplicates)}")
    if not targets:
        raise ValueError("the port declares no targets; declare one, or '*' to accept any")
    return targets


def begin_batch(session: LegacySession, batch_ref: str, target: str) -> None:
    """``session.begin(batch_ref, target)``; a session written for the first version of the protocol,
    whose ``begin`` takes only the reference, gets ``begin(batch_ref)`` (it has one destination)."""
    try:
        parameters = list(inspect.signature(session.begin).parameters.values())
    except (TypeError, ValueError):  # no signature to read: assume the current protocol
        parameters = []
    if len(parameters) == 1 and parameters[0].kind is not inspect.Parameter.VAR_POSITIONAL:
        session.begin(batch_ref)  # type: ignore[call-arg]
    else:
        session.begin(batch_ref, target)
