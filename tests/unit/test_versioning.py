"""`Nats-Required-Api-Level` read as nats-server's `errorOnRequiredApiLevel` reads it, the
header's removal from batch messages. The same values against both servers:
tests/conformance/test_api_level_conformance.py."""

from __future__ import annotations

import pytest

from brook.jetstream import versioning


def _h(*lines: str) -> bytes:
    return ("NATS/1.0\r\n" + "".join(f"{line}\r\n" for line in lines) + "\r\n").encode()


@pytest.mark.parametrize(
    ("header", "refused"),
    [
        (None, False),
        (b"", False),
        (_h("Other: 9"), False),
        (_h("Nats-Required-Api-Level: 2"), False),
        (_h("Nats-Required-Api-Level: 3"), True),
        (_h("Nats-Required-Api-Level:"), False),  # empty: nothing asked
        (_h("Nats-Required-Api-Level:    +2"), False),  # leading spaces skipped, sign read
        (_h("Nats-Required-Api-Level: -9223372036854775808"), False),  # int64's least
        (_h("Nats-Required-Api-Level: -9223372036854775809"), True),  # Atoi's range error
        (_h("Nats-Required-Api-Level: 9223372036854775808"), True),
        (_h("Nats-Required-Api-Level: 2 "), True),  # trailing space: not a number to Atoi
        (_h("Nats-Required-Api-Level: \t2"), True),  # only spaces are skipped
        (_h("Nats-Required-Api-Level: 1_0"), True),  # Python's int() would take it
        (_h("Nats-Required-Api-Level: ٢"), True),  # so would it this (Arabic-Indic 2)
        (_h("nats-required-api-level: 9"), False),  # the name is matched exactly
        (_h("Nats-Required-Api-Level: 1", "Nats-Required-Api-Level: 9"), False),  # the first
    ],
)
def test_required_level_is_read_as_nats_server_reads_it(
    header: bytes | None, refused: bool
) -> None:
    assert versioning.refuses(header, 2) is refused


def test_the_header_leaves_a_batch_message_and_nothing_else_does() -> None:
    header = _h("Nats-Batch-Id: b", "Nats-Required-Api-Level: 1", "X: Nats-Required-Api-Level:")
    assert versioning.without_header(header) == _h(
        "Nats-Batch-Id: b", "X: Nats-Required-Api-Level:"
    )
    twice = _h("Nats-Required-Api-Level: 1", "Nats-Batch-Id: b", "Nats-Required-Api-Level: 2")
    assert versioning.without_header(twice) == _h("Nats-Batch-Id: b")
    assert versioning.without_header(_h("Nats-Required-Api-Level: 1")) == b""  # no block left
