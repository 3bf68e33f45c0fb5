"""Staged records kept a chunk per add (``store/staged.py``), on SQLite and PostgreSQL: the texts come
back exactly as stored, any window of positions reads what it covers and says what lies past it, a
replacement rewrites only the chunks it touches, migration 0011 keeps every staged record, and on
PostgreSQL migration 0013 keeps them compressed with LZ4."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import create_engine, event, insert, text

from adapter.domain.records import Limits, encode_batch
from adapter.services import ImportService
from adapter.store import Store
from adapter.store.migrate import downgrade, upgrade
from adapter.store.staged import join_records, split_records
from adapter.store.tables import StagedChunkRow
from legacy_sim.engine import LegacyEngine
from tests.support.constants import ALICE

IMPORT = "i" * 32
SIZES = [3, 1, 5, 2, 4]  # chunks at 1-3, 4, 5-9, 10-11, 12-15
TEXTS = [json.dumps({"n": n}, separators=(",", ":")) for n in range(1, sum(SIZES) + 1)]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(st.lists(st.dictionaries(st.text(), json_values, max_size=4), min_size=1, max_size=8))
def test_a_chunk_gives_back_exactly_the_texts_it_was_made_of(records: list[dict[str, Any]]) -> None:
    """Compact JSON holds no raw newline, whatever the strings hold (newlines, U+2028, NUL)."""
    texts = encode_batch(records, Limits()).texts

    assert split_records(join_records(texts)) == texts


def _store_chunks(store: Store, sizes: list[int]) -> None:
    rows, first = [], 1
    for size in sizes:
        last = first + size - 1
        data = join_records(TEXTS[first - 1 : last])
        rows.append({"import_id": IMPORT, "first_seq": first, "last_seq": last, "data": data})
        first = last + 1
    with store.unit_of_work() as uow:
        uow.session.execute(insert(StagedChunkRow), rows)
        uow.commit()


@pytest.fixture
def chunked(store: Store) -> Store:
    _store_chunks(store, SIZES)
    return store


def test_every_window_reads_the_records_it_covers_and_says_what_lies_past_it(chunked: Store) -> None:
    total = len(TEXTS)
    for after in range(total + 1):
        for upto in range(after, total + 3):
            window = chunked.staged_window(IMPORT, after, upto)
            assert window.texts == TEXTS[after:upto], (after, upto)
            assert window.beyond == (upto < total), (after, upto)


@pytest.mark.parametrize(
    ("change", "readable"),
    [
        ("DELETE FROM staged_chunks WHERE last_seq = 9", 4),  # a gap: 5-9 is gone
        ("UPDATE staged_chunks SET first_seq = 4 WHERE last_seq = 9", 4),  # 4 claimed twice
        ("UPDATE staged_chunks SET first_seq = 6 WHERE last_seq = 9", 4),  # fewer texts than positions
    ],
)
def test_a_window_stops_where_the_chunks_stop_following_each_other(
    chunked: Store, change: str, readable: int
) -> None:
    with chunked.unit_of_work() as uow:
        uow.session.execute(text(change))
        uow.commit()

    window = chunked.staged_window(IMPORT, 0, len(TEXTS))

    assert window.texts == TEXTS[:readable]
    assert window.beyond


def test_the_record_repository_reads_counts_and_replaces_across_chunks(chunked: Store) -> None:
    updates: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("UPDATE STAGED_CHUNKS"):
            updates.append(statement)

    with chunked.unit_of_work() as uow:
        assert uow.records.count(IMPORT) == len(TEXTS)
        assert uow.records.chunk(IMPORT, 2, 5) == [(seq, TEXTS[seq - 1]) for seq in range(3, 8)]
        assert uow.records.sizes(IMPORT, [3, 4, 15, 99]) == {3: 7, 4: 7, 15: 8}
        event.listen(chunked.engine, "before_cursor_execute", seen)
        try:
            uow.records.replace(IMPORT, {3: '{"n":"three"}', 4: '{"n":"four"}', 2: '{"n":"two"}'})
        finally:
            event.remove(chunked.engine, "before_cursor_execute", seen)
        uow.commit()

    expected = [TEXTS[0], '{"n":"two"}', '{"n":"three"}', '{"n":"four"}', *TEXTS[4:]]
    assert chunked.staged_window(IMPORT, 0, len(TEXTS)).texts == expected
    assert len(updates) == 2  # the chunks 1-3 and 4, each written once; the others untouched


def test_migration_0011_keeps_every_staged_record_both_ways(db_url: str) -> None:
    upgrade(db_url, "0010")
    engine = create_engine(db_url)
    try:
        with engine.begin() as connection:
            for seq, data in enumerate(TEXTS[:4], start=1):
                connection.execute(
                    text("INSERT INTO staged_records (import_id, seq, data) VALUES (:i, :s, :d)"),
                    {"i": IMPORT, "s": seq, "d": data},
                )
        upgrade(db_url)
        store = Store.from_url(db_url)
        try:
            assert store.staged_window(IMPORT, 0, 10).texts == TEXTS[:4]
            _more = {"import_id": IMPORT, "first_seq": 5, "last_seq": 7, "data": join_records(TEXTS[4:7])}
            with store.unit_of_work() as uow:
                uow.session.execute(insert(StagedChunkRow), [_more])
                uow.commit()
        finally:
            store.engine.dispose()

        downgrade(db_url, "0010")

        with engine.connect() as connection:
            rows = connection.execute(text("SELECT seq, data FROM staged_records ORDER BY seq")).all()
        assert [(seq, data) for seq, data in rows] == list(enumerate(TEXTS[:7], start=1))
    finally:
        engine.dispose()


def _compression(db_url: str) -> list[str | None]:
    """How PostgreSQL stored each chunk's records, in order: ``lz4``, ``pglz`` or None (as is)."""
    engine = create_engine(db_url)
    try:
        with engine.connect() as connection:
            query = "SELECT pg_column_compression(data) FROM staged_chunks ORDER BY last_seq"
            return list(connection.execute(text(query)).scalars())
    finally:
        engine.dispose()


def test_on_postgresql_an_add_past_2_kb_is_kept_with_lz4_and_committed_whole(
    service: ImportService, store: Store, db_url: str, legacy_engine: LegacyEngine
) -> None:
    """Migration 0013: PostgreSQL compresses a chunk past about 2 KB as it writes it, and LZ4 cost
    its backend 0.4x to 0.16x of ``pglz``'s CPU (the migration's docstring)."""
    if store.engine.dialect.name != "postgresql":
        pytest.skip("SQLite keeps text as it is")
    records = [{"n": n, "note": f"customer {n} " * 30} for n in range(100)]  # 18 KB an add
    handle = service.begin(ALICE, "customers").handle
    service.add(ALICE, handle, records[:50])

    downgrade(db_url, "0012")  # what a store staged before the upgrade: pglz
    service.add(ALICE, handle, records[50:])
    upgrade(db_url)

    assert _compression(db_url) == ["lz4", "pglz"]
    assert service.commit(ALICE, handle).status.value == "committed"
    assert legacy_engine.committed_batches()[0]["records"] == records
