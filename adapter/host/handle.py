"""A handle on a running call: its state now, a stop the server hears, and the settled call.

``host.start(...)`` prepares the call at once (an unknown or forbidden tool raises there, audited)
and runs it in the background. ``cancel()`` stops what the call waits on: consent or a question (the
call ends ``cancelled``, nothing is sent), or the request itself, and then the cancel reaches the
server (on 2026 HTTP the request's POST is closed, which the server takes as cancellation; on the
handshake era and stdio the SDK sends ``notifications/cancelled``). A read cancelled after sending
ends ``cancelled``; an effect cancelled after sending may still have happened, so it ends
``outcome_unknown`` with its status action. Either way one audit event records it.

Work the server still does after it answered (a result with status ``in_progress`` and an
operation id, or a task) leaves the call ``running``; :meth:`CallHandle.follow` follows it to its
outcome (:mod:`adapter.host.follow`: a long-poll of the status tool, or ``tasks/get``). A
``cancel()`` after such an answer sends ``tasks/cancel`` for a task; for an operation it stops the
following and leaves the server's own stop to the application (``call.stop_action``). Audited.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from adapter.host.calls import Canceller
from adapter.host.lifecycle import Call, CallState

if TYPE_CHECKING:
    from adapter.host.calls import CallRunner, Prepared, ProgressCallback

__all__ = ["CallHandle"]


class CallHandle:
    def __init__(self, runner: CallRunner, prepared: Prepared, task: asyncio.Task[Call]) -> None:
        self._runner = runner
        self._prepared = prepared
        self._task = task
        self._following: Canceller | None = None
        self._stopping: asyncio.Task[None] | None = None

    @classmethod
    def start(
        cls,
        runner: CallRunner,
        prepared: Prepared,
        on_progress: ProgressCallback | None,
        deadline_seconds: float | None,
    ) -> CallHandle:
        task = asyncio.create_task(runner.execute(prepared, on_progress, deadline_seconds))
        return cls(runner, prepared, task)

    @property
    def call(self) -> Call:
        """The call as it stands now (its ``call_id`` and ``trace_id`` are there from the start)."""
        return self._prepared.call

    @property
    def state(self) -> CallState:
        return self._prepared.call.state

    @property
    def done(self) -> bool:
        return self._task.done()

    def cancel(self, reason: str = "cancelled by the user") -> None:
        """Stop the call; the settled state says what that meant (see the module docstring)."""
        call = self._prepared.call
        if not self._task.done():
            self._prepared.cancel.cancel(reason)
            return
        if call.finished or (self._stopping is not None and not self._stopping.done()):
            return
        follow_up = call.follow_up
        if follow_up is not None and follow_up.kind == "task" and call.state is CallState.RUNNING:
            follower = self._runner.follower
            self._stopping = asyncio.create_task(follower.cancel_task(self._prepared.principal, call, reason))
            return
        if self._following is not None:
            self._following.cancel(reason)
        self._runner.follower.stop_following(call, reason)

    async def wait(self) -> Call:
        """The settled call (exceptions of the call flow, such as a changed contract, are raised here)."""
        return await self._task

    async def follow(self, *, deadline_seconds: float | None = None) -> Call:
        """Follow work the server is still doing (or an unknown outcome) to its outcome.

        Returns when the call settled, when ``deadline_seconds`` passed (the call is still
        ``running`` or ``outcome_unknown`` then, and can be followed again), or when ``cancel()``
        stopped following an operation. A call with nothing to follow is returned as it is.
        """
        call = await self.wait()
        if self._stopping is not None:
            await self._stopping
        self._following = Canceller()
        try:
            return await self._runner.follower.follow(
                self._prepared.principal, call, self._following, deadline_seconds
            )
        finally:
            self._following = None
