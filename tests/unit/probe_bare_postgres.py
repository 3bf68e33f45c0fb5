"""A PostgreSQL parameter without its skip mark, as a newcomer might write one.

Not collected on its own (no ``test_`` prefix): ``test_fresh_clone.py`` runs it in a pytest of its
own without ``ADAPTER_TEST_POSTGRES_URL``, where it must skip, never error at set-up.
"""

from __future__ import annotations

import pytest

from adapter.store import Store


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_a_bare_postgres_parameter(store: Store) -> None:
    raise AssertionError("ran without ADAPTER_TEST_POSTGRES_URL")
