"""Waiting without hammering: a status read that answers as soon as what it shows has changed.

A client following a long commit asks ``get_operation_status`` (or ``get_import_status``) with
``wait_seconds``; instead of answering at once and being asked again a moment later, the read
waits, at most the commit wait budget (``CommitPolicy.wait_seconds``, so no client times out
waiting), and answers when the status changed. It looks again every quarter second, or at once
when the commit it waits for runs in this process and ends; a state that cannot change by itself
any more answers at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Hashable
from typing import TypeVar

import anyio

from adapter.services.commit.runner import local_run
from adapter.services.context import ServiceContext

__all__ = ["wait_budget", "wait_for_change"]

T = TypeVar("T")

POLL_SECONDS = 0.25


def wait_budget(ctx: ServiceContext, wait_seconds: float | None) -> float:
    """What a caller's ``wait_seconds`` may be: 0 up to the commit wait budget."""
    if not wait_seconds or wait_seconds <= 0:
        return 0.0
    return min(float(wait_seconds), ctx.commit_policy.wait_seconds)


async def wait_for_change(
    read: Callable[[], Awaitable[T]],
    shown: Callable[[T], Hashable],
    seconds: float,
    *,
    settled: Callable[[T], bool],
    running: Callable[[T], str | None] = lambda _: None,
) -> T:
    """``read()`` now, then again until ``shown()`` of it differs, for at most ``seconds``.

    ``settled(value)``: nothing can change by itself, answer at once. ``running(value)``: the id of
    a commit operation whose end is worth waking for (its run may be in this process).
    """
    current = await read()
    if seconds <= 0 or settled(current):
        return current
    first = shown(current)
    deadline = anyio.current_time() + seconds
    while (remaining := deadline - anyio.current_time()) > 0:
        await _nap(running(current), min(POLL_SECONDS, remaining))
        current = await read()
        if shown(current) != first or settled(current):
            return current
    return current


async def _nap(operation_id: str | None, seconds: float) -> None:
    """Sleep ``seconds``, or less if the run of ``operation_id`` in this process ends first."""
    run = local_run(operation_id) if operation_id is not None else None
    if run is None:
        await anyio.sleep(seconds)
        return
    ended = asyncio.Event()
    loop = asyncio.get_running_loop()

    def wake(_: object) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            loop.call_soon_threadsafe(ended.set)

    run.done.add_done_callback(wake)
    with anyio.move_on_after(seconds):
        await ended.wait()
