"""The idle timeout drops the session and loses its uncommitted work (TCP: socket timeout; in-process:
engine clock)."""

from __future__ import annotations

import socket
import time

import pytest

from legacy_sim.client import ConnectionLostError, LegacyClient, LegacySimError
from legacy_sim.inprocess import InProcessClient
from tests.support.wait import wait_until

IDLE = 0.3


def test_tcp_idle_timeout_drops_the_session_and_its_uncommitted_work(server_factory) -> None:
    server = server_factory(idle_timeout=IDLE)
    client = LegacyClient(*server.address, timeout=2.0)
    client.begin("r1")
    client.add({"n": 1})
    wait_until(lambda: server.open_connections == 0, what="the idle connection to be dropped")
    with pytest.raises(ConnectionLostError):
        client.commit()
    assert client.closed
    with LegacyClient(*server.address, timeout=2.0) as other:
        assert other.status("r1")["committed"] is False


def test_tcp_server_closes_an_idle_connection_by_itself(server_factory) -> None:
    server = server_factory(idle_timeout=IDLE)
    with socket.create_connection(server.address, timeout=3.0) as sock:
        started = time.monotonic()
        assert sock.recv(100) == b""  # EOF: the server hung up
        assert IDLE * 0.8 <= time.monotonic() - started < 2.0


def test_tcp_activity_keeps_a_session_alive(server_factory) -> None:
    server = server_factory(idle_timeout=IDLE)
    with LegacyClient(*server.address, timeout=2.0) as client:
        client.begin("r1")
        for n in range(4):
            time.sleep(IDLE / 4)  # not waiting for anything: activity spread over more than IDLE
            client.add({"n": n})
        assert client.commit()["record_count"] == 4


def test_in_process_idle_timeout_kills_the_session_for_good(engine_factory, fake_clock) -> None:
    engine = engine_factory(clock=fake_clock, idle_timeout=10.0)
    client = InProcessClient(engine)
    client.begin("r1")
    client.add({"n": 1})
    fake_clock.advance(10.5)
    with pytest.raises(ConnectionLostError):
        client.commit()
    with pytest.raises(ConnectionLostError):
        client.ping()
    other = InProcessClient(engine)
    assert other.status("r1")["committed"] is False
    with pytest.raises(LegacySimError) as info:
        other.commit()
    assert info.value.code == "STATE"


def test_in_process_session_within_the_idle_timeout_survives(engine_factory, fake_clock) -> None:
    engine = engine_factory(clock=fake_clock, idle_timeout=10.0)
    client = InProcessClient(engine)
    client.begin("r1")
    for _ in range(3):
        fake_clock.advance(9.0)
        client.add({"n": 1})
    assert client.commit()["record_count"] == 3
