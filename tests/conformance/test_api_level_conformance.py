"""JetStream asset versioning (ADR-44) side by side: nats-server 2.15.1 and Brook, replies
compared (the counters scenarios' harness).

The metadata of stream and consumer configs in create, update, info and list replies for
a config of each API level Brook serves, before and after a restart; `$JS.API.INFO`'s
`api` object; and `Nats-Required-Api-Level` on requests: which endpoints refuse with
10185 and what they look at first, the 412 status of direct gets and pull requests, and
atomic batches, which drop the header or the batch.

The two servers advertise different versions and API levels (Brook's is one decision,
ADR 0003), so `_nats.ver` and `_nats.level` are recorded as whether they equal the
server's INFO `version` and `$JS.API.INFO` `api.level`, and a required level is written
relative to the server's own (`{level}`, `{level+1}`).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.test_counters_conformance import (
    Run,
    _compare_across_restarts,
    _compare_once,
    _mask,
)
from tests.support.raw import Msg, is_msg

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]

_LEVEL = "Nats-Required-Api-Level"


async def _own(r: Run) -> tuple[str, int]:
    """The server's advertised version and API level."""
    info = json.loads((await r.nc.request("$JS.API.INFO", b"", timeout=5)).data)
    return r.nc._server_info["version"], info["api"]["level"]


async def _masked(r: Run, value: Any) -> Any:
    """`value` with `_nats.ver` / `_nats.level` replaced by whether they are the server's."""
    version, level = await _own(r)
    own = {"_nats.ver": version, "_nats.level": str(level)}

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: f"<the server's {k}>" if own.get(k) == v else walk(v) for k, v in value.items()
            }
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk(value)


async def _api(r: Run, subject: str, body: Any = None, *, keep: tuple[str, ...] = ()) -> Any:
    data = b"" if body is None else json.dumps(body).encode()
    reply = json.loads((await r.nc.request(subject, data, timeout=5)).data)
    r.record(f"{subject} {body}", await _metadata_of(r, reply, keep))
    return reply


async def _metadata_of(r: Run, reply: dict[str, Any], keep: tuple[str, ...]) -> Any:
    """The config metadata of a reply (every config of a list), its error, the kept keys."""
    shown: dict[str, Any] = {k: reply[k] for k in keep if k in reply}
    if "error" in reply:
        shown["error"] = reply["error"]
    if "config" in reply:
        shown["metadata"] = reply["config"].get("metadata")
    for key in ("streams", "consumers"):  # lists, in an order of their own
        if isinstance(reply.get(key), list) and reply[key] and isinstance(reply[key][0], dict):
            found = [item["config"].get("metadata") for item in reply[key]]
            shown[key] = sorted(found, key=lambda m: json.dumps(m, sort_keys=True))
    return await _masked(r, shown)


async def _request(
    r: Run, subject: str, level: str | None, body: bytes = b"", *, lines: tuple[str, ...] = ()
) -> None:
    """A request or publish with the header `lines` and `Nats-Required-Api-Level: <level>`
    (none when `level` is None), sent as exact bytes; `{level}` and `{up}` in them are the
    server's own API level and the one above. Recorded: a JSON API reply's type and error,
    a status message's status line, any other reply's bytes, or that none came."""
    _, own = await _own(r)
    asked = () if level is None else (f"{_LEVEL}: {level}",)
    text = "".join(f"{line}\r\n" for line in (*lines, *asked))
    header = f"NATS/1.0\r\n{text}\r\n".format(level=own, up=own + 1).encode()
    r._inbox += 1
    inbox = b"raw.inbox.%d" % r._inbox
    await r.raw.send(b"SUB %s %d\r\n" % (inbox, r._inbox))
    frame = b"HPUB %s %s %d %d\r\n%s%s\r\n" % (
        subject.encode(), inbox, len(header), len(header) + len(body), header, body
    )  # fmt: skip
    await r.raw.send(frame)
    ops = await r.raw.read_ops(until=is_msg, timeout=1, allow_timeout=True)
    msgs = [op for op in ops if isinstance(op, Msg)]
    shown: Any
    if not msgs:
        shown = "no reply"
    elif msgs[-1].header and msgs[-1].header.split(b"\r\n")[0] != b"NATS/1.0":
        shown = msgs[-1].header.split(b"\r\n")[0]  # a status
    elif subject.startswith("$JS.API.") and msgs[-1].payload.startswith(b"{"):
        reply = json.loads(msgs[-1].payload)
        shown = _mask({k: v for k, v in reply.items() if k in ("type", "error")})
        shown = shown if "error" in reply else {**shown, "answered": True}
    else:
        shown = msgs[-1].payload
    r.record(f"{subject} {lines} {_LEVEL}: {level} {body!r}", shown)


# ---------------------------------------------------------------------------- metadata

_USER = {"owner": "team", "_nats.foo": "kept", "_nats.req.level": "9", "_nats.ver": "x"}

# A config of each API level Brook serves: 0, TTLs (1), counters, atomic batches,
# schedules and async persistence (2), fast batches (4), and their mixes.
STREAM_FEATURES: tuple[dict[str, Any], ...] = (
    {},
    {"allow_msg_ttl": True},
    {"allow_msg_ttl": True, "subject_delete_marker_ttl": 2_000_000_000},
    {"allow_msg_counter": True},
    {"allow_atomic": True},
    {"allow_msg_schedules": True},
    {"allow_batched": True},  # 4
    {"persist_mode": "async"},
    {"persist_mode": "default"},
    {"allow_msg_ttl": True, "allow_atomic": True, "allow_msg_counter": True},
)

CONSUMER_FEATURES: tuple[dict[str, Any], ...] = (
    {},
    {"pause_until": "2000-01-01T00:00:00Z"},  # in the past: level 1 all the same
    {"pause_until": "2999-01-01T00:00:00Z"},
    {"priority_groups": ["g"], "priority_policy": "overflow"},
    {"priority_groups": ["g"], "priority_policy": "pinned_client", "priority_timeout": 10**9},
    {"priority_groups": ["g"], "priority_policy": "prioritized"},
)


async def metadata(r: Run) -> None:
    info = json.loads((await r.nc.request("$JS.API.INFO", b"", timeout=5)).data)
    api = info["api"]
    r.record("api object", {k: type(v).__name__ for k, v in api.items()})
    for n, features in enumerate(STREAM_FEATURES):
        name = f"S{n}"
        body = {"name": name, "subjects": [f"s{n}.>"], "metadata": _USER, **features}
        await _api(r, f"$JS.API.STREAM.CREATE.{name}", body)
        await _api(r, f"$JS.API.STREAM.INFO.{name}")
    # An idempotent create: the client's server keys do not make it a different config.
    body = {"name": "S1", "subjects": ["s1.>"], "allow_msg_ttl": True, "metadata": {"a": "b"}}
    await _api(r, "$JS.API.STREAM.CREATE.S1", {**body, "metadata": _USER})
    await _api(r, "$JS.API.STREAM.CREATE.S1", body)  # other user metadata: a different config
    # Updates move the required level both ways.
    plain = {"name": "U", "subjects": ["u.>"]}
    await _api(r, "$JS.API.STREAM.CREATE.U", plain)
    await _api(r, "$JS.API.STREAM.UPDATE.U", {**plain, "allow_atomic": True})
    await _api(r, "$JS.API.STREAM.UPDATE.U", {**plain, "allow_msg_ttl": True})
    await _api(r, "$JS.API.STREAM.UPDATE.U", {**plain, "allow_msg_ttl": True, "metadata": _USER})
    await _api(r, "$JS.API.STREAM.INFO.U")
    await _api(r, "$JS.API.STREAM.LIST")
    for n, features in enumerate(CONSUMER_FEATURES):
        name = f"C{n}"
        config = {"durable_name": name, "ack_policy": "explicit", "metadata": _USER, **features}
        await _api(r, f"$JS.API.CONSUMER.CREATE.S0.{name}", {"stream_name": "S0", "config": config})
        await _api(r, f"$JS.API.CONSUMER.INFO.S0.{name}")
    await _api(r, "$JS.API.CONSUMER.PAUSE.S0.C0", {"pause_until": "2999-01-01T00:00:00Z"})
    await _api(r, "$JS.API.CONSUMER.INFO.S0.C0")
    await _api(r, "$JS.API.CONSUMER.PAUSE.S0.C2", {})
    await _api(r, "$JS.API.CONSUMER.INFO.S0.C2")
    ephemeral = {"stream_name": "S0", "config": {"ack_policy": "none", "metadata": _USER}}
    created = await _api(r, "$JS.API.CONSUMER.CREATE.S0", ephemeral)
    await _api(r, "$JS.API.CONSUMER.DELETE.S0.C1")
    await _api(r, "$JS.API.CONSUMER.LIST.S0")
    # Brook keeps no ephemeral consumer across a restart (nats-server does).
    await r.nc.request(f"$JS.API.CONSUMER.DELETE.S0.{created['name']}", b"", timeout=5)


async def metadata_after_restart(r: Run) -> None:
    for n in range(len(STREAM_FEATURES)):
        await _api(r, f"$JS.API.STREAM.INFO.S{n}")
    await _api(r, "$JS.API.STREAM.INFO.U")
    await _api(r, "$JS.API.STREAM.LIST")
    for name in ("C0", "C2", "C3", "C4", "C5"):
        await _api(r, f"$JS.API.CONSUMER.INFO.S0.{name}")
    await _api(r, "$JS.API.CONSUMER.LIST.S0")


async def test_metadata_matches_across_a_restart(tmp_path: Path) -> None:
    await _compare_across_restarts(tmp_path, [metadata, metadata_after_restart])


# ---------------------------------------------------------------------------- required level


async def _api_counts(r: Run) -> tuple[int, int]:
    info = json.loads((await r.nc.request("$JS.API.INFO", b"", timeout=5)).data)
    return info["api"]["total"], info["api"]["errors"]


async def required_levels(r: Run) -> None:
    total, errors = await _api_counts(r)
    await r.create("S", allow_direct=True)
    consumer = {"stream_name": "S", "config": {"durable_name": "C", "ack_policy": "explicit"}}
    await r.api("$JS.API.CONSUMER.CREATE.S.C", consumer)
    push = {"durable_name": "P", "deliver_subject": "push.p", "ack_policy": "explicit"}
    await r.api("$JS.API.CONSUMER.CREATE.S.P", {"stream_name": "S", "config": push})
    await r.pub("s.a", b"one")
    # How a value is read: as Go's strconv.Atoi after leading spaces; empty asks nothing.
    for value in ("{level}", "{up}", "0", "-1", "+1", "", " {level}", "  {up}", "{level} ",
                  "1.0", "abc", "99999999999999999999", "-99999999999999999999"):  # fmt: skip
        await _request(r, "$JS.API.INFO", value)
    # Every endpoint refuses a level above the server's, nothing changed; some look at
    # something else first.
    for subject, body in (
        ("$JS.API.STREAM.CREATE.X", b'{"name":"X","subjects":["x"]}'),
        ("$JS.API.STREAM.CREATE.X", b"{bad"),
        ("$JS.API.STREAM.UPDATE.S", b'{"name":"S","subjects":["s.>"],"max_msgs":1}'),
        ("$JS.API.STREAM.INFO.S", b""),
        ("$JS.API.STREAM.INFO.NOPE", b""),
        ("$JS.API.STREAM.NAMES", b""),
        ("$JS.API.STREAM.LIST", b""),
        ("$JS.API.STREAM.MSG.GET.S", b'{"seq":1}'),
        ("$JS.API.STREAM.MSG.DELETE.S", b'{"seq":1}'),
        ("$JS.API.STREAM.PURGE.S", b""),
        ("$JS.API.STREAM.DELETE.S", b""),
        ("$JS.API.STREAM.SNAPSHOT.S", b'{"deliver_subject":"snap.x"}'),
        ("$JS.API.STREAM.LEADER.STEPDOWN.S", b""),
        ("$JS.API.CONSUMER.CREATE.S.X", b'{"stream_name":"S","config":{"name":"X"}}'),
        ("$JS.API.CONSUMER.CREATE.S.X", b""),
        ("$JS.API.CONSUMER.CREATE.S.X", b"{bad"),
        ("$JS.API.CONSUMER.DURABLE.CREATE.S.X", b'{"stream_name":"S","config":{}}'),
        ("$JS.API.CONSUMER.INFO.S.C", b""),
        ("$JS.API.CONSUMER.INFO.S.C", b'{"x":1}'),
        ("$JS.API.CONSUMER.INFO.S.NOPE", b""),
        ("$JS.API.CONSUMER.NAMES.S", b""),
        ("$JS.API.CONSUMER.LIST.S", b""),
        ("$JS.API.CONSUMER.PAUSE.S.C", b'{"pause_until":"2999-01-01T00:00:00Z"}'),
        ("$JS.API.CONSUMER.PAUSE.S.C", b"{bad"),
        ("$JS.API.CONSUMER.PAUSE.S.NOPE", b""),
        ("$JS.API.CONSUMER.UNPIN.S.C", b'{"group":"g"}'),
        ("$JS.API.CONSUMER.RESET.S.C", b""),
        ("$JS.API.CONSUMER.RESET.S.NOPE", b""),
        ("$JS.API.CONSUMER.LEADER.STEPDOWN.S.C", b""),
        ("$JS.API.CONSUMER.DELETE.S.C", b""),
        ("$JS.API.DIRECT.GET.S", b'{"seq":1}'),
        ("$JS.API.DIRECT.GET.S.s.a", b""),
        ("$JS.API.CONSUMER.MSG.NEXT.S.C", b'{"batch":1,"no_wait":true}'),
        ("$JS.API.CONSUMER.MSG.NEXT.S.P", b'{"batch":1,"no_wait":true}'),
    ):
        await _request(r, subject, "{up}", body)
    await _api(r, "$JS.API.STREAM.NAMES", keep=("streams",))
    await r.info("S")
    await _api(r, "$JS.API.CONSUMER.INFO.S.C", keep=("name", "paused", "num_pending"))
    # At the server's own level, they are answered.
    for subject, body in (
        ("$JS.API.STREAM.INFO.S", b""),
        ("$JS.API.STREAM.MSG.GET.S", b'{"seq":1}'),
        ("$JS.API.CONSUMER.INFO.S.C", b""),
        ("$JS.API.DIRECT.GET.S", b'{"seq":1}'),
        ("$JS.API.CONSUMER.MSG.NEXT.S.C", b'{"batch":1,"no_wait":true}'),
    ):
        await _request(r, subject, "{level}", body)
    # Refusals count as API errors; direct gets, pull requests and resets are not API
    # calls, nor is a message got (only a refused one is).
    now_total, now_errors = await _api_counts(r)
    r.record("api counts", (now_total - total, now_errors - errors))
    # A plain publish keeps the header, whatever it asks.
    await r.hpub("s.b", f"NATS/1.0\r\n{_LEVEL}: 99\r\n\r\n".encode(), b"two")
    await r.stored("S", "s.b")


async def test_required_api_level_matches(tmp_path: Path) -> None:
    await _compare_once(tmp_path, required_levels)


def _h(*lines: str) -> bytes:
    return ("NATS/1.0\r\n" + "".join(f"{line}\r\n" for line in lines) + "\r\n").encode()


async def _fast(r: Run, level: str | None, batch: str, seq: int, op: int) -> None:
    """A fast batch message (its batch in the reply subject) with only the level header;
    recorded: what came back to the reply subject."""
    sub = await r.nc.subscribe("fq.>")
    await r.nc.flush()
    _, own = await _own(r)
    headers = None if level is None else {_LEVEL: level.format(level=own, up=own + 1)}
    reply = f"fq.{batch}.0.fail.{seq}.{op}.$FI"
    await r.nc.publish("f.a", b"%d" % seq, reply=reply, headers=headers)
    got: list[bytes] = []
    with contextlib.suppress(TimeoutError):
        while True:
            got.append((await sub.next_msg(timeout=0.3)).data)
    await sub.unsubscribe()
    r.record(f"fast {batch} {seq} {op} {_LEVEL}: {level}", got)


async def batches(r: Run) -> None:
    abandoned = await r.nc.subscribe("$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.>")
    await r.create("B", allow_atomic=True, allow_direct=True)
    # Asked at the server's level (or with an empty value): stored without (with) it.
    for n, level in enumerate(("{level}", "")):
        batch = f"Nats-Batch-Id: ok{n}"
        await _request(r, "b.a", level, b"1", lines=(batch, "Nats-Batch-Sequence: 1"))
        commit = (batch, "Nats-Batch-Sequence: 2", "Nats-Batch-Commit: 1")
        await _request(r, "b.a", level, b"2", lines=commit)
        await r.stored("B", "b.a")
    # Above it, in the first message or the commit: the batch is dropped.
    for n, first in enumerate((True, False)):
        batch = f"Nats-Batch-Id: up{n}"
        await _request(r, "b.c", "{up}" if first else None, lines=(batch, "Nats-Batch-Sequence: 1"))
        commit = (batch, "Nats-Batch-Sequence: 2", "Nats-Batch-Commit: 1")
        await _request(r, "b.c", None if first else "{up}", lines=commit)
        await _request(r, "b.c", None, lines=(batch, "Nats-Batch-Sequence: 3"))
    await _request(r, "b.c", "x", lines=("Nats-Batch-Id: bad", "Nats-Batch-Sequence: 1"))
    await r.info("B")
    # Fast batches likewise: stored without the header (no header block left), or ended.
    await r.create("F", allow_batched=True, allow_direct=True)
    await _fast(r, "{level}", "fa", 1, 0)
    await _fast(r, "{level}", "fa", 2, 2)
    await r.stored("F", "f.a")
    await _fast(r, "{up}", "fb", 1, 0)
    await _fast(r, None, "fb", 2, 2)
    await _fast(r, None, "fc", 1, 0)
    await _fast(r, "{up}", "fc", 2, 1)
    await _fast(r, None, "fc", 3, 2)
    await r.info("F")
    # An atomic batch refused for its level is announced as abandoned, "unsupported".
    reasons: list[tuple[str, str]] = []
    with contextlib.suppress(TimeoutError):
        while True:
            advisory = json.loads((await abandoned.next_msg(timeout=0.3)).data)
            reasons.append((advisory["batch"], advisory["reason"]))
    r.record("abandoned", sorted(reasons))


async def test_required_api_level_in_batches_matches(tmp_path: Path) -> None:
    await _compare_once(tmp_path, batches)
