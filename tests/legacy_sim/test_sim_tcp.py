"""TCP specifics: raw protocol lines, and sessions ending with their connections."""

from __future__ import annotations

import socket

import pytest

from legacy_sim.client import ConnectFailedError, LegacyClient


def _exchange(sock_file, line: bytes) -> bytes:
    sock_file.write(line)
    sock_file.flush()
    return sock_file.readline()


def test_raw_lines_get_ok_or_err_replies(sim_server) -> None:
    with socket.create_connection(sim_server.address, timeout=5.0) as sock, sock.makefile("rwb") as f:
        assert _exchange(f, b"PING\n") == b'OK {"pong":true}\n'
        assert _exchange(f, b"NOPE\n").startswith(b"ERR INVALID ")
        assert _exchange(f, b"ADD [1]\n").startswith(b"ERR INVALID ")
        assert _exchange(f, b"COMMIT\n").startswith(b"ERR STATE ")
        assert _exchange(f, b"VOID B00000042\n").startswith(b"ERR NOT_FOUND ")
        assert _exchange(f, b"BEGIN r1\n") == b'OK {"batch_ref":"r1"}\n'
        assert _exchange(f, b'ADD {"a":1}\n') == b'OK {"count":1}\n'
        assert _exchange(f, b"COMMIT\n") == b'OK {"legacy_batch_id":"B00000001","record_count":1}\n'


def test_connecting_to_a_closed_server_fails_with_nothing_sent(server_factory) -> None:
    server = server_factory()
    address = server.address
    server.close()
    with pytest.raises(ConnectFailedError) as info:
        LegacyClient(*address, timeout=1.0)
    assert info.value.request_sent is False


def test_closing_the_server_cuts_open_sessions(server_factory) -> None:
    from legacy_sim.client import ConnectionLostError

    server = server_factory()
    client = LegacyClient(*server.address, timeout=2.0)
    client.begin("r1")
    server.close()
    with pytest.raises(ConnectionLostError):
        client.commit()
    assert server.engine.committed_batches() == []
