"""``bench/load.py``'s figures over several rounds (issue 25): each target ratio is the median of the
ratios within the rounds, and a configuration's latencies are those of all its rounds.

On this project's machines the host's speed moves by more than the targets' margins between two
configurations run a minute apart, so a ratio of averages over all rounds mixes speeds; the two sides
of a pair within a round ran next to each other.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import pytest

from tests.support.benches import load_bench

load = load_bench("load")
harness = load_bench("harness")

ARGS = argparse.Namespace(adds=10, batch=100)


def _round(
    server_ms: float, clients_ms: float, import_seconds: list[float], imports: int = 10
) -> dict[str, Any]:
    """One configuration's figures for one round, as ``run_config`` returns them."""
    tally = load.Tally(imports=imports)
    tally.cpu = dict.fromkeys(load.ROLES, 0.0) | {
        "server": server_ms * imports / 1000,
        "clients": clients_ms * imports / 1000,
    }
    tally.latencies["import"] = list(import_seconds)
    return load.figures(tally, 10.0, ARGS) | {"busy_cores_before": 0.0, "python_loop_ms_before": 80.0}


def test_a_round_at_another_host_speed_does_not_move_the_ratio() -> None:
    # Rounds 1 and 3: the kit's one worker 1.2x the naive wrapper's. Round 2: the host slowed down
    # between the two, and the kit ran at half the speed the naive wrapper had.
    by_round = [
        {"naive": _round(30, 20, [1.0]), "kit_x1": _round(36, 20, [1.2])},
        {"naive": _round(30, 20, [1.0]), "kit_x1": _round(72, 40, [2.4])},
        {"naive": _round(30, 20, [1.0]), "kit_x1": _round(36, 20, [1.2])},
    ]

    ratios = load.median_ratios([load.targets(r) for r in by_round])

    assert ratios["server_cpu_kit_x1_vs_naive"] == 1.2
    assert ratios["import_p50_kit_x1_vs_naive"] == 1.2
    assert ratios[load.CONTENTION] == 1.0  # the clients did the same work in the rounds that count
    merged = {name: load.merge([r[name] for r in by_round]) for name in ("naive", "kit_x1")}
    assert load.targets(merged)["server_cpu_kit_x1_vs_naive"] == 1.6  # averaged: the slow round counts


def test_a_configuration_s_latencies_are_those_of_all_its_rounds() -> None:
    rounds = [_round(30, 20, [1.0, 1.0, 1.0]), _round(30, 20, [3.0, 3.0, 3.0, 3.0])]

    merged = load.merge(rounds)

    assert merged["latency_ms"]["import"] == {"p50": 3000.0, "p99": 3000.0, "calls": 7}
    assert load.LATENCIES not in merged  # the samples stay out of the JSON line


def test_the_clients_gauge_shows_contention_and_targets_nothing() -> None:
    by_round = [{"naive": _round(30, 20, [1.0]), "kit_x1": _round(39, 26, [1.3])}]

    ratios = load.median_ratios([load.targets(r) for r in by_round])

    assert ratios[load.CONTENTION] == 1.3
    assert load.CONTENTION not in load.TARGETS


def test_postgresql_s_share_is_reported_against_the_naive_server_and_targets_nothing() -> None:
    kit = _round(36, 20, [1.2])
    kit["cpu_ms_per_import"]["postgres"] = 7.5
    by_round = [{"naive": _round(30, 20, [1.0]), "kit_x1": kit}]

    ratios = load.median_ratios([load.targets(r) for r in by_round])

    assert ratios[load.POSTGRES_SHARE] == 0.25  # 7.5 ms against the naive server's 30
    assert load.POSTGRES_SHARE not in load.TARGETS


def test_the_clients_gauge_of_two_workers_shows_what_sharing_cores_added_and_targets_nothing() -> None:
    by_round = [{"kit_x1": _round(40, 20, [1.0]), "kit_x2": _round(44, 21, [1.0])}]

    ratios = load.median_ratios([load.targets(r) for r in by_round])

    assert ratios["server_cpu_kit_x2_vs_kit_x1"] == 1.1
    assert ratios[load.CONTENTION_X2] == 1.05
    assert load.CONTENTION_X2 not in load.TARGETS


def test_four_workers_are_reported_against_one_and_target_nothing() -> None:
    by_round = [{"kit_x1": _round(40, 20, [1.0]), "kit_x4": _round(46, 20, [1.0])}]

    ratios = load.median_ratios([load.targets(r) for r in by_round])

    assert ratios[load.SCALE_OUT] == 1.15
    assert load.SCALE_OUT not in load.TARGETS
    assert ratios["server_cpu_kit_x2_vs_kit_x1"] is None  # kit_x2 did not run


def test_with_clients_per_worker_each_worker_gets_the_clients_and_the_rest_keep_them() -> None:
    per_worker = argparse.Namespace(clients=4, clients_per_worker=True)
    fixed = argparse.Namespace(clients=4, clients_per_worker=False)

    assert [load.clients_of(name, per_worker) for name in load.CONFIGURATIONS] == [4, 4, 8, 16]
    assert [load.clients_of(name, fixed) for name in load.CONFIGURATIONS] == [4, 4, 4, 4]


def test_cpu_lists_are_read_as_taskset_writes_them() -> None:
    first = min(os.sched_getaffinity(0))

    assert harness.cpu_list(f"{first}") == {first}
    assert harness.cpu_list(f"{first}-{first},{first}") == {first}
    for text in ("", "a", "1-", "3-1", "0,,1"):
        with pytest.raises(ValueError, match="not a CPU list"):
            harness.cpu_list(text)
    with pytest.raises(ValueError, match="not this machine's"):
        harness.cpu_list(str(max(os.sched_getaffinity(0)) + 1))


def test_only_the_bench_s_own_server_is_pinned(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        load.main(["--postgres-cpus", str(min(os.sched_getaffinity(0)))])

    assert stopped.value.code == 2
    assert "add --embedded-postgres" in capsys.readouterr().err
