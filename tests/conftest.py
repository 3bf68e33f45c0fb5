"""Shared fixtures: a real database (SQLite, and PostgreSQL when configured) and the simulator over TCP.

What more than fixtures need (constants, the kit factory, servers, waits) is in ``tests/support``.

PostgreSQL tests run when ADAPTER_TEST_POSTGRES_URL is set (``.ci/run`` sets it); each test gets its
own schema, so runs do not interfere and nothing is left behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import adapter.entrypoints.http.app  # noqa: F401  (see below)
from adapter.bootstrap import Kit
from adapter.domain.cursors import CursorCodec
from adapter.domain.identity import HandleCodec, Principal
from adapter.domain.quotas import Quotas
from adapter.legacy.simulator import SimulatorPort
from adapter.services import ImportService, ServiceContext
from adapter.store import Store
from adapter.store.migrate import upgrade
from legacy_sim.engine import LegacyEngine
from legacy_sim.server import start_server
from tests.support.constants import ALICE, BOB, FAST_RETRIES, POSTGRES, SECRET_BYTES, UNMETERED
from tests.support.kit import kit_settings, running_kit
from tests.support.postgres import postgres_schema, schema_url

# freeze_time walks every loaded module's dir(), which loads ``adapter``'s lazy public names; a
# module first imported under a frozen clock captures freezegun's FakeDatetime in its pydantic
# models. Loading the app here first keeps each test's result independent of which ran before it.


@pytest.fixture
def anyio_backend() -> str:
    """The kit runs on asyncio (uvicorn, the MCP SDK): async tests run there, not on trio too."""
    return "asyncio"


@pytest.fixture(params=["sqlite", POSTGRES])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database URL, on each supported database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'adapter.db'}"
        return
    with postgres_schema("t") as (_, schema):  # skips where PostgreSQL is not configured
        yield schema_url(schema)


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
        quotas=Quotas(**UNMETERED),
    )


@pytest.fixture
def service(ctx: ServiceContext) -> ImportService:
    return ImportService(ctx)


@pytest.fixture
def kit_defaults() -> dict[str, Any]:
    """Settings a folder's tests share (a conftest overrides this fixture)."""
    return {}


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    """Settings one test needs: ``@pytest.mark.parametrize("settings_overrides", [{...}])``."""
    return {}


@pytest.fixture
def fast_retries() -> bool:
    """Whether the kit's commit flow retries after milliseconds instead of its own waits."""
    return True


@pytest.fixture
def kit(
    store: Store,
    db_url: str,
    legacy_address: tuple[str, int],
    kit_defaults: dict[str, Any],
    settings_overrides: dict[str, Any],
    fast_retries: bool,
    tmp_path: Path,
) -> Iterator[Kit]:
    """The kit as ``build`` wires it (``tests.support.kit``) on the migrated ``store`` and the TCP
    simulator; settings from ``kit_defaults``, then ``settings_overrides``."""
    settings = kit_settings(db_url, legacy_address, tmp_path, **{**kit_defaults, **settings_overrides})
    with running_kit(settings, store, fast_retries=fast_retries) as kit:
        yield kit


@pytest.fixture
def alice() -> Principal:
    return ALICE


@pytest.fixture
def bob() -> Principal:
    return BOB
