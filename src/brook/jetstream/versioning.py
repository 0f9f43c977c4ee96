"""JetStream asset versioning (ADR-44), as nats-server's `jetstream_versioning.go` does it.

Three metadata keys are the server's, not the user's. `_nats.req.level` is the API level
of the newest feature a stream or consumer configuration uses (`stream_config_to_json`
and `consumer_config_to_json` compute it by nats-server's table); it is in every config
Brook shows. `_nats.ver` and `_nats.level` name the server hosting the asset and are only
in the replies of create, update and info, never in lists, snapshots or the stored
configuration. A client's values for any of the three are replaced; other `_nats.*` keys
are the user's and kept, as nats-server keeps them.

nats-server stores `_nats.req.level` at create and update and reads it back at start;
Brook computes it from the stored configuration whenever it shows one, which gives the
same value and so survives restarts too.

A request may carry `Nats-Required-Api-Level`: a value above Brook's API level, or one that
is not an integer as Go's `strconv.Atoi` reads it, is refused (10185 in the JSON API,
`412 Required Api Level` where the answer is a status message); an empty value asks
nothing. Brook's API level and advertised version are one decision (`limits.py`, ADR 0003).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from brook import limits
from brook.protocol import headers as hdrs

SERVER_METADATA_KEYS = ("_nats.ver", "_nats.level", "_nats.req.level")

REQUIRED_API_LEVEL_HEADER = b"Nats-Required-Api-Level"
# The status nats-server answers with where a request gets a status message, not JSON
# (direct get, pull requests).
REQUIRED_API_LEVEL_STATUS = (412, "Required Api Level")

_GO_ATOI = re.compile(rb"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def user_metadata(metadata: Mapping[str, str]) -> dict[str, str]:
    """A request's metadata without the server's keys (nats-server replaces them)."""
    return {k: v for k, v in metadata.items() if k not in SERVER_METADATA_KEYS}


def refuses(header: bytes | None, level: int = limits.JETSTREAM_API_LEVEL) -> bool:
    """Whether a request's `Nats-Required-Api-Level` asks for more than `level`
    (nats-server's `errorOnRequiredApiLevel`): the first such header line, its value after
    leading spaces, read by `strconv.Atoi` (an error refuses too)."""
    value = hdrs.raw_value(header, REQUIRED_API_LEVEL_HEADER) if header else None
    if not value:
        return False
    if _GO_ATOI.fullmatch(value) is None:
        return True
    asked = int(value)
    return not _INT64_MIN <= asked <= _INT64_MAX or asked > level


def without_header(header: bytes) -> bytes:
    """`header` with every `Nats-Required-Api-Level` line removed, as nats-server removes
    it from the messages of a batch it accepts; b"" when no other line is left."""
    prefix = REQUIRED_API_LEVEL_HEADER + b":"
    status, *lines = header.split(b"\r\n")
    kept = [line for line in lines if not line.startswith(prefix)]
    if not any(kept):
        return b""
    return b"\r\n".join([status, *kept])
