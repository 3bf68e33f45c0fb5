"""The line protocol: both directions encode and parse symmetrically; bad input is INVALID."""

from __future__ import annotations

import pytest

from legacy_sim.protocol import (
    INVALID,
    CommandError,
    Request,
    encode_err,
    encode_ok,
    encode_request,
    is_valid_batch_ref,
    parse_reply,
    parse_request,
)


@pytest.mark.parametrize(
    "request_",
    [
        Request("BEGIN", arg="job-1:part.2_x"),
        Request("ADD", payload={"name": "Zoë", "n": [1, 2]}),
        Request("COMMIT"),
        Request("ROLLBACK"),
        Request("STATUS", arg="ref"),
        Request("VOID", arg="B00000001"),
        Request("FAULTS", payload={"error_rate": 0.5}),
        Request("PING"),
    ],
)
def test_every_request_round_trips_through_one_utf8_line(request_: Request) -> None:
    line = encode_request(request_)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert parse_request(line) == request_


@pytest.mark.parametrize(
    "line",
    [
        b"HELLO\n",
        b"BEGIN\n",
        b"BEGIN has space\n",
        b"BEGIN " + b"x" * 129 + b"\n",
        b"BEGIN bad/char\n",
        b"ADD [1,2]\n",
        b"ADD {not json}\n",
        b'ADD {"x": NaN}\n',
        b"COMMIT now\n",
        b"VOID\n",
        b"\xff\xfe\n",
    ],
)
def test_malformed_requests_are_refused_as_invalid(line: bytes) -> None:
    with pytest.raises(CommandError) as info:
        parse_request(line)
    assert info.value.code == INVALID


def test_encoding_refuses_what_the_server_would_refuse() -> None:
    with pytest.raises(CommandError):
        encode_request(Request("BEGIN", arg="no spaces allowed"))
    with pytest.raises(CommandError):
        encode_request(Request("ADD", payload={"x": object()}))


def test_batch_ref_is_1_to_128_safe_characters() -> None:
    assert is_valid_batch_ref("a") and is_valid_batch_ref("A-z_0.9:" * 16)
    assert not is_valid_batch_ref("") and not is_valid_batch_ref("x" * 129) and not is_valid_batch_ref("a b")


def test_replies_round_trip_and_error_messages_stay_on_one_line() -> None:
    ok = parse_reply(encode_ok({"legacy_batch_id": "B00000001", "record_count": 2}))
    assert ok.ok and ok.data == {"legacy_batch_id": "B00000001", "record_count": 2}
    line = encode_err("STATE", "no open\nbatch")
    assert line == b"ERR STATE no open batch\n"
    err = parse_reply(line)
    assert not err.ok and err.code == "STATE" and err.message == "no open batch"
    with pytest.raises(ValueError):
        parse_reply(b"WHAT\n")
