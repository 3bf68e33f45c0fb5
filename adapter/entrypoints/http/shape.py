"""How deep and how large a JSON request body is, counted while it streams in, before it is parsed.

A body of nested empty arrays (``[[],[],...]``, three bytes a value) is cheap to send and dear to
parse: 3.9 MB of it is 1.3 million values, about a second of CPU and 85 MB in the SDK's parser and
ours, on the event loop every other caller shares, before anything could refuse it. So each chunk of
an MCP body is counted as it arrives (:class:`JsonShape`): the values outside strings (a comma or an
opening bracket each) and the nesting depth. Past ``ADAPTER_MAX_JSON_ELEMENTS`` or
``ADAPTER_MAX_JSON_DEPTH`` the body is refused at that chunk; nothing builds the document.

The count is exact for valid JSON and works on bytes with C-speed operations only: escapes are
removed first (``\\\\`` then ``\\"``, left to right as JSON reads them), then everything but quotes
and ``[]{},``; two quotes next to each other go too (an empty string, or the end of one string and
the start of the next: every other mark keeps an even number of quotes fewer before it, so it stays
on its side), which in a usual body leaves no quote at all. Where quotes remain (a string holding a
bracket or a comma), the marks are split at them and the parts outside strings kept. Whether the
scan is inside a string, and a backslash at a chunk's end, carry over to the next chunk. Invalid
JSON is counted somehow and then refused by the parser, as before; the count only ever refuses
early.
"""

from __future__ import annotations

from itertools import accumulate

__all__ = ["JsonShape", "ShapeExceeded"]

_STRUCTURE = bytes.maketrans(b"{}", b"[]")
_NOT_MARKS = bytes(c for c in range(256) if c not in b'"[]{},')
_STEP = {ord("["): 1, ord("]"): -1}


class ShapeExceeded(Exception):
    """The body is deeper or larger than allowed; ``setting`` names the ADAPTER_* variable."""

    def __init__(self, what: str, setting: str, limit: int) -> None:
        super().__init__(f"{what} (ADAPTER_{setting.upper()}={limit})")
        self.setting = setting
        self.limit = limit


class JsonShape:
    """Counts the values and the depth of one JSON text fed chunk by chunk (:meth:`feed`)."""

    def __init__(self, max_depth: int, max_elements: int) -> None:
        self.max_depth, self.max_elements = max_depth, max_elements
        self.elements = 0
        self.depth = 0
        self._in_string = False
        self._escaped = False  # the previous chunk ended in an unpaired backslash

    def feed(self, chunk: bytes) -> None:
        """Count ``chunk``; raises :class:`ShapeExceeded` as soon as a limit is passed."""
        if self._escaped and chunk:
            chunk, self._escaped = chunk[1:], False
        if b"\\" in chunk:
            chunk = chunk.replace(b"\\\\", b"").replace(b'\\"', b"")
            if chunk.endswith(b"\\"):
                chunk, self._escaped = chunk[:-1], True
        structure = self._outside(chunk.translate(_STRUCTURE, _NOT_MARKS).replace(b'""', b""))
        if not structure:
            return
        opens, commas = structure.count(b"["), structure.count(b",")
        self.elements += opens + commas
        if self.elements > self.max_elements:
            raise ShapeExceeded(
                f"the request has more than {self.max_elements} JSON values",
                "max_json_elements",
                self.max_elements,
            )
        if self.depth + opens > self.max_depth:  # only then can this chunk reach past the limit
            brackets = structure.replace(b",", b"")
            deepest = self.depth + max(accumulate(map(_STEP.__getitem__, brackets)))
            if deepest > self.max_depth:
                raise ShapeExceeded(
                    f"the request nests JSON deeper than {self.max_depth}", "max_json_depth", self.max_depth
                )
        self.depth += opens - (len(structure) - opens - commas)  # opened less closed

    def _outside(self, marks: bytes) -> bytes:
        """The structure marks of ``marks`` (quotes and ``[],``) that lie outside strings."""
        if b'"' not in marks:
            return b"" if self._in_string else marks
        parts = marks.split(b'"')
        outside = b"".join(parts[1::2] if self._in_string else parts[0::2])
        if len(parts) % 2 == 0:  # an odd number of quotes: the chunk ends on the other side
            self._in_string = not self._in_string
        return outside
