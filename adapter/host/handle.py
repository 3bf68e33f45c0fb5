"""A handle on a running call: its state now, a stop the server hears, and the settled call.

``host.start(...)`` prepares the call at once (an unknown or forbidden tool raises there, audited)
and runs it in the background. ``cancel()`` stops what the call waits on: consent or a question (the
call ends ``cancelled``, nothing is sent), or the request itself, and then the cancel reaches the
server (on 2026 HTTP the request's POST is closed, which the server takes as cancellation; on the
handshake era and stdio the SDK sends ``notifications/cancelled``). A read cancelled after sending
ends ``cancelled``; an effect cancelled after sending may still have happened, so it ends
``outcome_unknown`` with its status action. Either way one audit event records it.

Following work the server is still doing (a result with status ``in_progress`` and an operation id,
or a task) plugs in at :meth:`CallHandle.follow`; today it asks the server's status tool once.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from adapter.host.lifecycle import Call, CallState

if TYPE_CHECKING:
    from adapter.host.calls import CallRunner, Prepared, ProgressCallback

__all__ = ["CallHandle"]


class CallHandle:
    def __init__(self, runner: CallRunner, prepared: Prepared, task: asyncio.Task[Call]) -> None:
        self._runner = runner
        self._prepared = prepared
        self._task = task

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
        self._prepared.cancel.cancel(reason)

    async def wait(self) -> Call:
        """The settled call (exceptions of the call flow, such as a changed contract, are raised here)."""
        return await self._task

    async def follow(self) -> Call:
        """Settle work the server reported as still running or unknown, by its status action.

        This is the seam for following a long operation to its outcome: today one status
        resolution; long-polling ``get_operation_status`` or ``tasks/get`` replaces it here.
        """
        call = await self.wait()
        if call.status_action is not None and call.state in (CallState.RUNNING, CallState.OUTCOME_UNKNOWN):
            principal = self._prepared.principal
            return await self._runner.resolve(principal, call)
        return call
