"""What a protocol parser holds between reads, shared by the client and leaf parsers.

The unparsed end of a read (`_buf`) is prepended to the next read. A message whose line
was read and whose body is still arriving keeps its body's reads in `_chunks` instead,
joined once when `_need` bytes (the body and its CRLF) are there: a large payload split
over many reads is copied once, and its line is parsed once.
"""

from __future__ import annotations

from mypy_extensions import mypyc_attr


# Compiled (ADR 0045) and subclassed by the interpreted leafnode.codec.LeafParser.
@mypyc_attr(allow_interpreted_subclasses=True)
class ReadBuffer:
    """The between-reads state of a parser class that inherits it."""

    __slots__ = ("_buf", "_chunks", "_have", "_need")

    def __init__(self) -> None:
        self._buf = b""
        self._chunks: list[bytes] = []
        self._have = 0
        self._need = 0

    @property
    def buffered_bytes(self) -> int:
        return len(self._buf) + self._have

    def _input(self, data: bytes) -> bytes | None:
        """The bytes to parse now that `data` arrived: the kept ones and `data`, or None
        while a split body is still short."""
        if self._chunks:
            self._chunks.append(data)
            self._have += len(data)
            if self._have < self._need:
                return None
            buf = b"".join(self._chunks)
            self._chunks = []
            self._have = 0
            return buf
        if self._buf:
            buf = self._buf + data
            self._buf = b""
            return buf
        return data

    def _wait_for_body(self, buf: bytes, pos: int, size: int) -> None:
        """Keep `buf[pos:]`, the start of a body of `size` bytes, until it is complete."""
        self._chunks = [buf[pos:]]
        self._have = len(buf) - pos
        self._need = size + 2

    def _clear_reads(self) -> None:
        self._buf = b""
        self._chunks = []
        self._have = 0
