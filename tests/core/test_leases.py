"""Leases: a live worker keeps its lease even while its own operation row is being written."""

from __future__ import annotations

import dataclasses
import logging
import time

import pytest

from adapter.domain.identity import Principal, fingerprint
from adapter.services import ImportService, ServiceContext
from adapter.services.commit import bookkeeping
from adapter.services.commit import claim as claiming
from adapter.services.leases import Heartbeat


def test_the_heartbeat_keeps_the_lease_through_concurrent_writes_to_the_operation(
    service: ImportService, ctx: ServiceContext, alice: Principal, caplog: pytest.LogCaptureFixture
) -> None:
    """On PostgreSQL a renewal can lose a version race to the worker's own recovery-point write; that
    is a conflict to retry, not a lost lease (a lost lease lets a reconciler take over a live commit)."""
    ctx.commit_policy = dataclasses.replace(ctx.commit_policy, lease_seconds=0.3)
    handle = service.begin(alice, "customers").handle
    service.add(alice, handle, [{"n": 1}])
    digest = ctx.codec.digest(handle)
    claim = claiming.claim_import(ctx, alice, handle, None, fingerprint("commit", {"handle": digest}))
    assert isinstance(claim, bookkeeping.Claim)
    with ctx.store.unit_of_work() as uow:
        claimed = uow.operations.get(claim.operation_id)
        assert claimed is not None and claimed.lease_expires_at is not None
        first_expiry = claimed.lease_expires_at

    with (
        caplog.at_level(logging.WARNING, logger="adapter.leases"),
        Heartbeat(ctx, claim.operation_id, claim.lease_owner),
    ):
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:  # the worker writing its recovery points, over and over
            bookkeeping.set_recovery_point(ctx, claim, "replaying")

    assert "was lost" not in caplog.text
    with ctx.store.unit_of_work() as uow:
        operation = uow.operations.get(claim.operation_id)
        assert operation is not None
        assert operation.lease_owner == claim.lease_owner
        # Renewed while the writes went on (not a wall-clock check: a loaded machine may pause the
        # heartbeat thread after the loop, which is not what this test is about).
        assert operation.lease_expires_at is not None and operation.lease_expires_at > first_expiry
