"""Waiting on a condition instead of sleeping: fast when it holds early, a clear failure when not."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

POLL = 0.01


def wait_until(predicate: Callable[[], object], timeout: float = 10.0, *, what: str = "condition") -> None:
    """Return as soon as ``predicate()`` is true; raise TimeoutError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not hold within {timeout} s")
        time.sleep(POLL)


async def wait_until_async(
    predicate: Callable[[], object], timeout: float = 10.0, *, what: str = "condition"
) -> None:
    """:func:`wait_until` for the event loop (the loop keeps running while it waits)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not hold within {timeout} s")
        await asyncio.sleep(POLL)


async def poll_until(
    fetch: Callable[[], Awaitable[T]],
    done: Callable[[T], bool],
    timeout: float = 20.0,
    *,
    what: str = "condition",
) -> T:
    """Ask ``fetch()`` (a call to the server, say) until ``done`` holds for its answer; return that answer."""
    deadline = time.monotonic() + timeout
    while True:
        answer = await fetch()
        if done(answer):
            return answer
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not hold within {timeout} s (last: {answer!r})")
        await asyncio.sleep(POLL * 5)
