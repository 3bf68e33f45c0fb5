"""The seeded fault campaign (``bench/fault_campaign.py``) at 200 imports: every invariant count is zero.

Concurrent imports through one kit against the simulator (a subprocess, over TCP) with transient
errors, drops after COMMIT, latency above the port's timeout on some commits, COMMITs lost and COMMITs
held past the grace period (issue 21: a same-key retry then a late second batch), cancellations at
random points and client retries under the same idempotency keys, a maintenance thread reconciling beside
them; then a drain until nothing is unresolved, and the checks of the module docstring there.
``python bench/fault_campaign.py --imports 2000`` runs the same code at scale.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from adapter.store import Store
from legacy_sim.process import running_simulator
from tests.support.benches import load_bench

fault_campaign = load_bench("fault_campaign")


@pytest.mark.slow
def test_fault_campaign_keeps_every_invariant(db_url: str, store: Store, tmp_path: Path) -> None:
    config = fault_campaign.CampaignConfig(imports=200, seed=7, workers=6, drain_seconds=45.0)
    legacy_db = tmp_path / "legacy.db"
    with running_simulator(legacy_db, "--idle-timeout", "0") as address:
        report = fault_campaign.run_campaign(db_url, address, legacy_db, config)
    print(report.render())

    assert report.violations() == {}, report.render()
    assert report.problems == [], report.render()
    assert report.client_exceptions == {}, report.render()
    # the faults really happened, and every import ended one of the two honest ways
    assert report.answers.get("outcome_unknown", 0) > 0 and report.answers.get("cancelled", 0) > 0
    assert report.answers.get("failed", 0) > 0 and report.reconciled.get("committed", 0) > 0
    assert report.slow_windows > 0 and report.commits_lost > 0 and report.commits_held > 0
    # held COMMITs landed after their not_committed verdict, and the watch found them
    assert sum(report.late_findings.values()) > 0, report.render()
    assert report.batches_voided == report.late_findings.get("duplicate_voided", 0)
    assert report.reconciled.get("not_committed", 0) > 0  # lost COMMITs, believed only after the grace
    assert report.imports_committed + report.imports_open + report.imports_aborted == config.imports
    assert report.legacy_batches == report.imports_committed  # standing ones: duplicates were voided
