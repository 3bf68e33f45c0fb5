"""``bench/sizing.py`` (issue 25, ``docs/deployment.md`` section 5): a worker's and PostgreSQL's CPU
per import, per add and per record, fitted from ``bench/load.py``'s runs at import shapes that tell
the three apart, and the cores that 100 imports a second of a given shape need."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.benches import load_bench

sizing = load_bench("sizing")

shapes = st.builds(sizing.Shape, adds=st.integers(1, 100), batch=st.integers(1, 1000))
terms = st.floats(0.0, 100.0), st.floats(0.0, 10.0), st.floats(0.0, 0.1)


@st.composite
def designs(draw: st.DrawFn) -> list[Any]:
    """Shapes that tell the terms apart, as the bench asks for them: two of one number of adds with
    different batches, one with another number of adds; then any others."""
    adds = draw(st.lists(st.integers(1, 100), min_size=2, max_size=2, unique=True))
    batches = draw(st.lists(st.integers(1, 1000), min_size=2, max_size=2, unique=True))
    told = [
        sizing.Shape(adds[0], batches[0]),
        sizing.Shape(adds[0], batches[1]),
        sizing.Shape(adds[1], batches[0]),
    ]
    return draw(st.permutations(told + draw(st.lists(shapes, max_size=3))))


def _load_line(server: float, postgres: float, naive: float) -> dict[str, Any]:
    """The part of ``bench/load.py``'s JSON line that sizing reads."""
    return {
        "clients": 8,
        "postgres": {"version": "18.1", "cpus": [1]},
        "results": {
            "naive": {"cpu_ms_per_import": {"server": naive, "postgres": 0.0}},
            "kit_x1": {"cpu_ms_per_import": {"server": server, "postgres": postgres, "clients": 9.0}},
        },
    }


@given(designs(), *terms)
def test_the_fit_finds_the_terms_the_points_were_made_of(
    found: list[Any], per_import: float, per_add: float, per_record: float
) -> None:
    made = sizing.Cost(per_import, per_add, per_record)

    cost = sizing.fit([(shape, made.ms(shape)) for shape in found])

    assert cost.per_import == pytest.approx(per_import, abs=1e-6)
    assert cost.per_add == pytest.approx(per_add, abs=1e-6)
    assert cost.per_record == pytest.approx(per_record, abs=1e-8)


@given(designs(), st.lists(st.floats(0.0, 500.0), min_size=6, max_size=6))
def test_noisy_points_leave_residuals_that_no_change_of_a_term_reduces(
    found: list[Any], ms: list[float]
) -> None:
    # Least squares: the residuals are orthogonal to each column (an import, its adds, its records).
    points = list(zip(found, ms, strict=False))  # any CPU figure at each shape: nothing fits exactly

    cost = sizing.fit(points)

    residuals = [(shape.terms, ms - cost.ms(shape)) for shape, ms in points]
    for i in range(3):
        scale = sum(abs(terms[i] * ms) for (terms, _), (_, ms) in zip(residuals, points, strict=True)) + 1
        assert abs(sum(terms[i] * e for terms, e in residuals)) <= 1e-6 * scale


def test_shapes_that_cannot_tell_the_terms_apart_are_refused() -> None:
    one_batch = [sizing.Shape(2, 100), sizing.Shape(6, 100), sizing.Shape(9, 100)]  # records = 100 x adds
    with pytest.raises(ValueError, match="cannot tell"):
        sizing.fit([(shape, 10.0) for shape in one_batch])


def test_the_cores_for_a_hundred_imports_a_second_come_from_the_fitted_terms() -> None:
    # A worker: 16 ms an import, 2 ms an add, 0.01 ms a record; PostgreSQL: 4, 0.5 and 0.001.
    runs = {
        sizing.Shape(10, 100): _load_line(server=16 + 20 + 10, postgres=4 + 5 + 1, naive=40.0),
        sizing.Shape(4, 250): _load_line(server=16 + 8 + 10, postgres=4 + 2 + 1, naive=34.0),
        sizing.Shape(10, 1000): _load_line(server=16 + 20 + 100, postgres=4 + 5 + 10, naive=180.0),
    }

    summary = sizing.sizing(runs, sizing.Shape(20, 500))

    assert summary["per_import"] == {"server": pytest.approx(16), "postgres": pytest.approx(4)}
    assert summary["per_add"] == {"server": pytest.approx(2), "postgres": pytest.approx(0.5)}
    assert summary["per_record"] == {"server": pytest.approx(0.01), "postgres": pytest.approx(0.001)}
    # 100 imports a second of 20 adds of 500 records: 16 + 40 + 100 ms and 4 + 10 + 10 ms each.
    assert summary["cores_per_100_imports_per_s"] == {"server": 15.6, "postgres": 2.4}
    assert [s["server_fitted"] for s in summary["shapes"]] == [46.0, 34.0, 136.0]
    assert summary["naive_ms_per_import"] == 40.0  # the first shape's: how fast this machine is


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--shape", "10x100", "--shape", "10x1000"], "cannot tell"),
        (["--shape", "2x100", "--shape", "6x100", "--shape", "9x100"], "cannot tell"),
        (["--only", "kit_x2"], "this bench's own"),
        (["--shape", "10by100"], "ADDSxBATCH"),
        (["--shape", "0x100"], "at least one add"),
        (["--for", "10"], "ADDSxBATCH"),
    ],
)
def test_what_cannot_be_sized_is_refused_before_anything_runs(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        sizing.main(argv)

    assert stopped.value.code == 2
    assert says in capsys.readouterr().err
