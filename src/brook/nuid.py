"""Random ids as nats-server makes them: base-62 (ASCII letters and digits), of a given length.

nats-server names what it creates on the fly with random base-62 strings: 22 characters
as its NUIDs (a pinned client's id, a snapshot's or restore's subject token), 8 as
`createConsumerName` and `syncSubject` make them (an ephemeral consumer's name, a link's
deliver subject). Brook draws them from `secrets`, one alphabet for all.

A leaf module: it imports nothing of Brook (an import-linter contract holds it so).
"""

from __future__ import annotations

import secrets
import string

__all__ = ["NUID_LENGTH", "random_id", "random_name"]

NUID_LENGTH = 22
_ALPHABET = string.ascii_letters + string.digits


def random_id(length: int = NUID_LENGTH) -> str:
    """`length` random base-62 characters (a NUID's 22 unless told)."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


def random_name() -> str:
    """8 random base-62 characters, as `createConsumerName` and `syncSubject` make them."""
    return random_id(8)
