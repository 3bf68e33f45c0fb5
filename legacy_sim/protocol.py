"""The line protocol of the simulated legacy system, shared by server and client.

This is the only module both sides import, so the wire format is defined exactly once. Every message
is one UTF-8 line ending in ``"\\n"``.

Requests::

    BEGIN <batch_ref>        open a batch in this session
    ADD <json object>        append one record to the open batch
    COMMIT                   apply the open batch atomically
    ROLLBACK                 drop the open batch
    STATUS <batch_ref>       what was committed under a reference (any session state)
    VOID <legacy_batch_id>   mark a committed batch voided (any session state)
    FAULTS <json object>     change fault knobs at run time; answers the current knobs
    PING                     liveness check

Replies are ``OK <json object>`` or ``ERR <CODE> <message>``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ADD",
    "BEGIN",
    "COMMANDS",
    "COMMIT",
    "ENCODING",
    "ERROR_CODES",
    "FAULTS",
    "INVALID",
    "MAX_LINE_BYTES",
    "NOT_FOUND",
    "PING",
    "ROLLBACK",
    "STATE",
    "STATUS",
    "TRANSIENT",
    "VOID",
    "CommandError",
    "Reply",
    "Request",
    "encode_err",
    "encode_json",
    "encode_ok",
    "encode_request",
    "is_valid_batch_ref",
    "parse_reply",
    "parse_request",
]

ENCODING = "utf-8"
#: Longest accepted line (bytes, including the newline). Longer lines are refused as INVALID.
MAX_LINE_BYTES = 1 << 20

# Error codes.
TRANSIENT = "TRANSIENT"  # nothing applied; the same command may succeed if retried
STATE = "STATE"  # the command does not fit the session state (e.g. COMMIT with no open batch)
INVALID = "INVALID"  # bad syntax, bad JSON, a record that is not an object, bad knob values
NOT_FOUND = "NOT_FOUND"  # VOID of an unknown batch id
ERROR_CODES = frozenset({TRANSIENT, STATE, INVALID, NOT_FOUND})

# Commands.
BEGIN = "BEGIN"
ADD = "ADD"
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"
STATUS = "STATUS"
VOID = "VOID"
FAULTS = "FAULTS"
PING = "PING"
COMMANDS = frozenset({BEGIN, ADD, COMMIT, ROLLBACK, STATUS, VOID, FAULTS, PING})

_NO_ARG = frozenset({COMMIT, ROLLBACK, PING})
_REF_ARG = frozenset({BEGIN, STATUS})
_JSON_ARG = frozenset({ADD, FAULTS})

_BATCH_REF = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_TOKEN = re.compile(r"\S{1,128}")


class CommandError(Exception):
    """A command refused with an error code: raised by parsing and by the engine, sent as ``ERR``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Request:
    """One parsed request. ``arg`` is the batch_ref or legacy_batch_id; ``payload`` the JSON object."""

    command: str
    arg: str | None = None
    payload: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """One parsed reply: ``ok`` with ``data``, or an error ``code`` with a ``message``."""

    ok: bool
    data: dict[str, Any] | None = None
    code: str | None = None
    message: str = ""


def is_valid_batch_ref(batch_ref: object) -> bool:
    """A batch_ref is 1..128 characters of ``[A-Za-z0-9._:-]`` (safe in a space-separated line)."""
    return isinstance(batch_ref, str) and _BATCH_REF.fullmatch(batch_ref) is not None


def encode_json(obj: Any) -> str:
    """Compact, single-line JSON; NaN/Infinity are refused because they are not JSON."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _decode_object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        raise CommandError(INVALID, f"{what} is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise CommandError(INVALID, f"{what} must be a JSON object, got {type(value).__name__}")
    return value


def _check_arg(command: str, arg: str | None, payload: Any) -> None:
    """Validation shared by encoding and parsing, so both sides refuse exactly the same requests."""
    if command not in COMMANDS:
        raise CommandError(INVALID, f"unknown command {command!r}")
    if command in _NO_ARG and (arg is not None or payload is not None):
        raise CommandError(INVALID, f"{command} takes no argument")
    if command in _REF_ARG and not is_valid_batch_ref(arg):
        raise CommandError(INVALID, f"{command} needs a batch_ref of 1..128 chars [A-Za-z0-9._:-]")
    if command == VOID and (not isinstance(arg, str) or _TOKEN.fullmatch(arg) is None):
        raise CommandError(INVALID, "VOID needs a legacy_batch_id")
    if command in _JSON_ARG and not isinstance(payload, dict):
        raise CommandError(INVALID, f"{command} needs a JSON object")


def encode_request(request: Request) -> bytes:
    """Encode a request line; raises :class:`CommandError` (INVALID) for a request the server would refuse."""
    _check_arg(request.command, request.arg, request.payload)
    if request.command in _JSON_ARG:
        try:
            text = f"{request.command} {encode_json(request.payload)}"
        except (TypeError, ValueError) as exc:
            raise CommandError(INVALID, f"{request.command} payload is not JSON-serialisable: {exc}") from exc
    elif request.arg is not None:
        text = f"{request.command} {request.arg}"
    else:
        text = request.command
    return (text + "\n").encode(ENCODING)


def parse_request(line: bytes | str) -> Request:
    """Parse one request line (trailing newline optional); raises :class:`CommandError` (INVALID)."""
    if isinstance(line, bytes):
        try:
            text = line.decode(ENCODING)
        except UnicodeDecodeError as exc:
            raise CommandError(INVALID, "request is not valid UTF-8") from exc
    else:
        text = line
    text = text.rstrip("\r\n")
    command, sep, rest = text.partition(" ")
    if command not in COMMANDS:
        raise CommandError(INVALID, f"unknown command {command[:40]!r}")
    if command in _NO_ARG:
        _check_arg(command, rest if sep else None, None)
        return Request(command)
    if command in _JSON_ARG:
        payload = _decode_object(rest, f"{command} argument")
        return Request(command, payload=payload)
    _check_arg(command, rest if sep else None, None)
    return Request(command, arg=rest)


def _one_line(message: str) -> str:
    return " ".join(message.split()) or "error"


def encode_ok(data: Mapping[str, Any]) -> bytes:
    """Encode an ``OK <json>`` reply."""
    return f"OK {encode_json(dict(data))}\n".encode(ENCODING)


def encode_err(code: str, message: str) -> bytes:
    """Encode an ``ERR <CODE> <message>`` reply; the message is flattened to one line."""
    if code not in ERROR_CODES:
        raise ValueError(f"unknown error code {code!r}")
    return f"ERR {code} {_one_line(message)}\n".encode(ENCODING)


def parse_reply(line: bytes | str) -> Reply:
    """Parse one reply line; raises ``ValueError`` if the line is not a well-formed reply."""
    text = line.decode(ENCODING) if isinstance(line, bytes) else line
    text = text.rstrip("\r\n")
    kind, _, rest = text.partition(" ")
    if kind == "OK":
        try:
            data = json.loads(rest)
        except ValueError as exc:
            raise ValueError(f"malformed OK reply: {text[:80]!r}") from exc
        if not isinstance(data, dict):
            raise ValueError(f"OK reply is not a JSON object: {text[:80]!r}")
        return Reply(ok=True, data=data)
    if kind == "ERR":
        code, _, message = rest.partition(" ")
        if code not in ERROR_CODES:
            raise ValueError(f"unknown error code in reply: {text[:80]!r}")
        return Reply(ok=False, code=code, message=message)
    raise ValueError(f"malformed reply: {text[:80]!r}")
