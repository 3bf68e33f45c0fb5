"""Shared fixtures: a real database (SQLite, and PostgreSQL when configured) and the simulator over TCP.

What more than fixtures need (constants, the kit factory, servers, waits) is in ``tests/support``.

PostgreSQL tests run when ADAPTER_TEST_POSTGRES_URL is set (``.ci/run`` sets it); each test gets its
own schema, so runs do not interfere and nothing is left behind.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from adapter.domain.cursors import CursorCodec
from adapter.domain.identity import HandleCodec, Principal
from adapter.legacy.simulator import SimulatorPort
from adapter.services import ImportService, ServiceContext
from adapter.store import Store
from adapter.store.migrate import upgrade
from legacy_sim.engine import LegacyEngine
from legacy_sim.server import start_server
from tests.support.constants import ALICE, BOB, FAST_RETRIES, POSTGRES, POSTGRES_URL, SECRET_BYTES


def _postgres_schema_url(base: str, schema: str) -> str:
    separator = "&" if "?" in base else "?"
    return f"{base}{separator}options=-csearch_path%3D{schema}"


@pytest.fixture(params=["sqlite", POSTGRES])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database URL, on each supported database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'adapter.db'}"
        return
    assert POSTGRES_URL
    schema = f"t_{secrets.token_hex(6)}"
    admin = create_engine(POSTGRES_URL)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield _postgres_schema_url(POSTGRES_URL, schema)
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    upgrade(db_url)
    store = Store.from_url(db_url)
    yield store
    store.dispose()


@pytest.fixture
def legacy_engine(tmp_path: Path) -> Iterator[LegacyEngine]:
    engine = LegacyEngine(tmp_path / "legacy.db", idle_timeout=None)
    yield engine
    engine.close()


@pytest.fixture
def legacy_address(legacy_engine: LegacyEngine) -> Iterator[tuple[str, int]]:
    """The simulator served over real TCP on a free loopback port."""
    server = start_server(legacy_engine, "127.0.0.1", 0)
    yield server.address
    server.close()


@pytest.fixture
def legacy_port(legacy_address: tuple[str, int]) -> SimulatorPort:
    host, port = legacy_address
    return SimulatorPort.tcp(host, port, timeout=5.0)


@pytest.fixture
def ctx(store: Store, legacy_port: SimulatorPort) -> ServiceContext:
    return ServiceContext(
        store=store,
        legacy=legacy_port,
        codec=HandleCodec(SECRET_BYTES),
        cursors=CursorCodec(SECRET_BYTES),
        commit_policy=FAST_RETRIES,
    )


@pytest.fixture
def service(ctx: ServiceContext) -> ImportService:
    return ImportService(ctx)


@pytest.fixture
def alice() -> Principal:
    return ALICE


@pytest.fixture
def bob() -> Principal:
    return BOB
