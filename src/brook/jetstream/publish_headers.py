"""The JetStream headers a publish is checked by, read by both paths that check them: one
message (`Stream.ingest`, stream.py) and an atomic batch as a whole before it is stored
(`check_commit`, batch.py). Header names as nats-server spells them (`JSExpected*`,
`JSMsgRollup`), with the bound on a header block and the syntax of their integers."""

from __future__ import annotations

EXPECTED_STREAM = "Nats-Expected-Stream"
EXPECTED_LAST_SEQ = "Nats-Expected-Last-Sequence"
EXPECTED_LAST_SUBJ_SEQ = "Nats-Expected-Last-Subject-Sequence"
EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"
ROLLUP = "Nats-Rollup"
MAX_HEADER_BYTES = 65535  # a larger header block is refused (10097)


def uint(value: str) -> int | None:
    """ASCII digits only: `str.isdigit` also takes digits such as "²" that `int()` refuses."""
    return int(value) if value.isascii() and value.isdigit() else None
