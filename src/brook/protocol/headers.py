"""The NATS/1.0 header block: encode and parse, with the inline status line.

Format (wire reference §1.12): `NATS/1.0[ <3-digit status>[ <description>]]` CRLF, then
`Name: value` lines, then an empty line. Names keep their case and may repeat; parsing is
lenient about whitespace after the colon, as clients are.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PREFIX = b"NATS/1.0"


@dataclass(slots=True)
class HeaderBlock:
    status: int | None = None
    description: str = ""
    fields: list[tuple[str, str]] = field(default_factory=list)

    def get(self, name: str) -> str | None:
        for k, v in self.fields:
            if k == name:
                return v
        return None

    def get_all(self, name: str) -> list[str]:
        return [v for k, v in self.fields if k == name]


def encode(
    fields: list[tuple[str, str]] | None = None, status: int | None = None, description: str = ""
) -> bytes:
    """Build a header block; `status` adds the status line of server control messages."""
    first = PREFIX
    if status is not None:
        first += b" %03d" % status
        if description:
            first += b" " + description.encode()
    parts = [first]
    for name, value in fields or ():
        if not name or ":" in name or "\r" in name or "\n" in name:
            raise ValueError(f"invalid header name {name!r}")
        if "\r" in value or "\n" in value:
            raise ValueError(f"invalid header value for {name!r}")
        parts.append(f"{name}: {value}".encode())
    return b"\r\n".join(parts) + b"\r\n\r\n"


class HeaderError(ValueError):
    """The bytes are not a NATS/1.0 header block."""


def parse(block: bytes) -> HeaderBlock:
    if not block.startswith(PREFIX):
        raise HeaderError("header block does not start with NATS/1.0")
    text = block.decode("utf-8", errors="surrogateescape")
    lines = text.split("\r\n")
    result = HeaderBlock()
    status_line = lines[0][len("NATS/1.0") :].strip()
    if status_line:
        code, _, desc = status_line.partition(" ")
        if len(code) != 3 or not code.isdigit():
            raise HeaderError(f"bad status {code!r}")
        result.status = int(code)
        result.description = desc.strip()
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name:
            raise HeaderError(f"bad header line {line!r}")
        result.fields.append((name, value.strip()))
    return result


def contains(block: bytes, needle: bytes) -> bool:
    """`needle in block`, at the least cost CPython 3.11 has for it (measured, ADR 0066):
    `in` first tries the needle as an int and raises (and clears) a TypeError (ADR 0057),
    and `find` parses its arguments from a tuple; `partition` takes one argument directly
    and, when the needle is absent, copies nothing."""
    return bool(block.partition(needle)[1])


def raw_value(block: bytes, name: bytes) -> bytes | None:
    """The value of the first `name:` line as nats-server's `sliceHeader` reads it from the
    raw bytes, or None when there is none: the name matches case-sensitively, leading
    spaces of the value are skipped and nothing else is trimmed (unlike `parse`), and a
    block `parse` would refuse is read all the same."""
    if not contains(block, name):
        return None
    for line in block.split(b"\r\n")[1:]:
        key, sep, value = line.partition(b":")
        if sep and key == name:
            return value.lstrip(b" ")
    return None


_EMPTY_BLOCK_BYTES = len(PREFIX) + 4  # "NATS/1.0\r\n\r\n"


def remove_prefixed(block: bytes, prefix: bytes) -> bytes | None:
    """The block without its lines whose name starts with `prefix`, as nats-server's
    `removeHeaderIfPrefixPresent` cuts them from the raw bytes (a line counts when the
    prefix follows a newline); None when nothing but the empty block is left."""
    index = 0
    while index < len(block):
        start = block.find(prefix, index)
        if start < 0:
            return block
        index = start
        if index < 1 or block[index - 1] != 0x0A:
            index += len(prefix)
            continue
        end = block.find(b"\r\n", index + len(prefix))
        if end < 0:
            return block
        block = block[:index] + block[end + 2 :]
        if len(block) <= _EMPTY_BLOCK_BYTES:
            return None
    return block
