"""Subject transforms and republish: the same steps on Brook and nats-server, compared.

A stream's `subject_transform` with each of nats-server's mapping functions (the stored
subjects and the PubAcks), the configurations nats-server refuses (error codes and
texts), `republish` (the republished messages' subjects, header bytes and payloads, read
with a raw client), configuration updates that add, change and remove both, and stream
info and republishing across a restart of each server (file storage). Volatile values
(times, server versions) are masked as in test_stream_api_conformance.py; a republished
`Nats-Time-Stamp` must be in Go's RFC 3339 form before it is masked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from tests.conformance.test_stream_api_conformance import delete_all_streams, normalise
from tests.support import sidebyside
from tests.support.raw import Msg, RawClient
from tests.support.sidebyside import Results, compare

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]

# Go's time.RFC3339Nano of a UTC time: trailing zeros of the fraction dropped.
RFC3339_NANO = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d*[1-9])?Z")
TIME_STAMP = re.compile(rb"Nats-Time-Stamp: ([^\r]*)\r\n")

EXPECT_SUBJ = "Nats-Expected-Last-Subject-Sequence"


class Session:
    """One server's connections: nats-py for requests, a raw client subscribed to the
    republish destinations (every subject under `rp.`), and the results so far."""

    def __init__(self, nc: Any, raw: RawClient) -> None:
        self.nc = nc
        self.raw = raw
        self.results: Results = []

    async def api(self, label: str, subject: str, body: Any = None) -> dict[str, Any]:
        data = b"" if body is None else json.dumps(body).encode()
        reply = json.loads((await self.nc.request(subject, data, timeout=5)).data)
        self.results.append((label, normalise(reply)))
        return reply  # type: ignore[no-any-return]

    async def create(self, label: str, config: dict[str, Any]) -> dict[str, Any]:
        return await self.api(label, f"$JS.API.STREAM.CREATE.{config['name']}", config)

    async def update(self, label: str, config: dict[str, Any]) -> dict[str, Any]:
        return await self.api(label, f"$JS.API.STREAM.UPDATE.{config['name']}", config)

    async def info(self, label: str, stream: str) -> None:
        await self.api(label, f"$JS.API.STREAM.INFO.{stream}", {"subjects_filter": ">"})

    async def publish(
        self, label: str, subject: str, payload: bytes = b"x", headers: dict[str, str] | None = None
    ) -> None:
        reply = await self.nc.request(subject, payload, timeout=5, headers=headers)
        self.results.append((label, json.loads(reply.data)))

    async def stored(self, label: str, stream: str) -> None:
        """The subjects of every stored message, in sequence order."""
        info = json.loads(
            (await self.nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=5)).data
        )
        subjects = []
        for seq in range(info["state"]["first_seq"], info["state"]["last_seq"] + 1):
            got = json.loads(
                (
                    await self.nc.request(
                        f"$JS.API.STREAM.MSG.GET.{stream}",
                        json.dumps({"seq": seq}).encode(),
                        timeout=5,
                    )
                ).data
            )
            subjects.append(got.get("message", {}).get("subject", got.get("error")))
        self.results.append((label, subjects))

    async def republished(self, label: str) -> None:
        """What arrived on `rp.>` since the last call: subject, reply, header bytes (the
        time stamp checked and masked), payload."""
        await self.raw.send(b"PING\r\n")
        ops = await self.raw.read_ops(until=lambda op: not isinstance(op, Msg), timeout=5)
        got = []
        for op in ops:
            if not isinstance(op, Msg):
                continue
            header = op.header
            if header is not None:
                for stamp in TIME_STAMP.findall(header):
                    assert RFC3339_NANO.fullmatch(stamp), stamp
                header = TIME_STAMP.sub(b"Nats-Time-Stamp: <time>\r\n", header)
            got.append((op.subject, op.reply, header, op.payload))
        self.results.append((label, got))


Scenario = Callable[[Session], Awaitable[None]]


async def run(url: str, scenario: Scenario, *, shared: bool = True) -> Results:
    """Run `scenario`; on a `shared` server (the session's nats-server) from no streams
    to no streams."""
    nc = await nats.connect(url, allow_reconnect=False)
    try:
        async with RawClient.connect_url(url) as raw:
            await raw.handshake(headers=True, no_responders=True)
            await raw.send(b"SUB rp.> 1\r\n")
            session = Session(nc, raw)
            if not shared:
                await scenario(session)
                return session.results
            await delete_all_streams(nc)
            try:
                await scenario(session)
            finally:
                await delete_all_streams(nc)
            return session.results
    finally:
        await nc.close()


async def both(nats_server_url: str, tmp_path: Path, scenario: Scenario) -> None:
    async with brook.serve(port=0, store_dir=str(tmp_path / "brook")) as server:
        ours = await run(server.url, scenario)
    compare(await run(nats_server_url, scenario), ours)


async def across_restarts(
    tmp_path: Path, phases: Sequence[Scenario], *, pause_s: float = 0.0
) -> None:
    """Each phase on a server of its own started on the same store as the phase before
    (a restart between phases), nats-server and Brook side by side; results compared."""

    async def phase(url: str, scenario: Scenario) -> Results:
        return await run(url, scenario, shared=False)

    await sidebyside.across_restarts(tmp_path, phases, phase, pause_s=pause_s)


# ---------------------------------------------------------------------------- mappings

# (source, destination, published subject suffixes); "P" becomes the stream's own prefix,
# so that every case has a stream of its own (created once, never re-used).
MAPPINGS: list[tuple[str, str, list[str]]] = [
    ("P.*", "out.{{wildcard(1)}}", ["abc", "x"]),
    ("P.*.*", "out.$2.$1", ["a.b", "c.d"]),
    ("P.>", "out.>", ["a", "a.b.c"]),
    ("P.*.>", "out.{{wildcard(1)}}.>", ["a.b", "a.b.c.d"]),
    ("", "out.>", ["a", "b.c"]),
    ("P.*.*", "out.{{partition(10,1,2)}}.$1.$2", ["a.b", "orders.42", "x.y"]),
    ("P.*", "out.{{partition(7)}}.$1", ["abc", "k1", "k2", "k3"]),
    ("P.*", "out.{{partition(0,1)}}", ["abc"]),
    ("P.*", "out.{{partition(-3,1)}}", ["abc", "xyz"]),
    ("P.a", "out.{{partition(5)}}", ["a"]),
    ("P.a", "out.{{partition(5,1)}}", ["a"]),
    ("P.*", "out.{{split(1,-)}}", ["ab-cd--ef-", "-a", "--a", "none"]),
    ("P.*", "out.{{split(1,)}}", ["abc"]),
    ("P.*", "out.{{splitFromLeft(1,2)}}", ["abcdef", "a", "ab"]),
    ("P.*", "out.{{splitFromRight(1,2)}}", ["abcdef", "a", "ab"]),
    ("P.*", "out.{{sliceFromLeft(1,3)}}", ["abcdefg", "abcdef", "ab"]),
    ("P.*", "out.{{sliceFromRight(1,3)}}", ["abcdefg", "abcdef", "ab"]),
    ("P.*", "out.{{left(1,2)}}", ["abcdef", "a"]),
    ("P.*", "out.{{right(1,2)}}", ["abcdef", "a"]),
    ("P.*", "out.{{left(1,0)}}.{{right(1,-1)}}", ["abcdef"]),
    ("P.*", "out.{{left(1,3)}}", ["h\u00e9llo"]),  # bytes: "h" and the two of "é"
    ("P.*", "out.{{ Wildcard( 1 ) }}.{{SplitFromLeft(1, 1)}}", ["abc"]),
    ("P.*", "out.{{x}}{{wildcard(1)}}", ["abc"]),
    ("P.*", "out.{{wildcard(0)}}.$0.$-1.$x.{{wildcard(+1)}}", ["abc"]),
    ("P.a.*", "out.$1", ["a.b", "b.c"]),  # a subject the source does not match: unchanged
    ("P.*", "P.$1.again", ["q"]),
    ("P.*", "", ["q"]),  # no destination: no transform, yet shown in the configuration
    ("", "", ["q"]),
]


async def mappings(s: Session) -> None:
    for i, (src, dest, suffixes) in enumerate(MAPPINGS):
        prefix = f"m{i}"
        name = f"M{i}"
        transform = {"src": src.replace("P", prefix), "dest": dest.replace("P", prefix)}
        await s.create(
            f"{name} create",
            {"name": name, "subjects": [f"{prefix}.>"], "subject_transform": transform},
        )
        for suffix in suffixes:
            await s.publish(f"{name} pub {suffix}", f"{prefix}.{suffix}")
        await s.stored(f"{name} stored", name)
    await s.republished("nothing republished")


async def test_stored_subjects_of_every_mapping_function_match_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, mappings)


async def mapped_subject_rules(s: Session) -> None:
    """What a stream does by subject applies to the mapped subject: expected last subject
    sequence, rollups, per-subject limits, and consumers' filters (and the subjects they
    deliver)."""
    await s.create(
        "create",
        {
            "name": "MS",
            "subjects": ["k.>"],
            "subject_transform": {"src": "k.*.*", "dest": "kv.$2"},
            "allow_rollup_hdrs": True,
            "max_msgs_per_subject": 2,
        },
    )
    await s.publish("a from x", "k.x.a")
    await s.publish("a from y", "k.y.a")
    await s.publish("expected last subject seq 2", "k.z.a", headers={EXPECT_SUBJ: "2"})
    await s.publish("expected last subject seq wrong", "k.z.a", headers={EXPECT_SUBJ: "1"})
    await s.publish("b", "k.x.b")
    await s.publish("rollup b", "k.y.b", headers={"Nats-Rollup": "sub"})
    await s.api(
        "consumer on a mapped subject",
        "$JS.API.CONSUMER.CREATE.MS.C",
        {"stream_name": "MS", "config": {"name": "C", "filter_subject": "kv.a"}},
    )
    await s.api("consumer info", "$JS.API.CONSUMER.INFO.MS.C")
    reply = s.nc.new_inbox()
    sub = await s.nc.subscribe(reply)
    await s.nc.publish("$JS.API.CONSUMER.MSG.NEXT.MS.C", b'{"batch":5,"expires":300000000}', reply)
    delivered = []
    while True:
        msg = await sub.next_msg(timeout=5)
        if msg.headers and msg.headers.get("Status"):
            delivered.append(msg.headers["Status"])
            break
        delivered.append(f"{msg.subject} {msg.data!r}")
        if len(delivered) == 5:
            break
    await sub.unsubscribe()
    s.results.append(("fetched", delivered))
    await s.stored("stored", "MS")
    await s.info("info", "MS")


async def test_rules_by_subject_apply_to_the_mapped_subject_as_in_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, mapped_subject_rules)


# ---------------------------------------------------------------------------- refused

BAD_TRANSFORMS: list[dict[str, Any]] = [
    {"src": "b..x", "dest": "bar"},
    {"src": "b x", "dest": "bar"},
    {"src": "b.*", "dest": "bar.{{wildcard(2)}}"},
    {"src": "b.*", "dest": "bar.$2"},
    {"src": "b.a", "dest": "bar.$1"},
    {"src": "b.a", "dest": "bar.{{left(1,1)}}"},
    {"src": "b.*", "dest": "bar.{{unknown(1)}}"},
    {"src": "b.*", "dest": "bar.{{SPLIT(1,-)}}"},
    {"src": "b.*", "dest": "bar.{{wildcard()}}"},
    {"src": "b.*", "dest": "bar.{{wildcard(1,2)}}"},
    {"src": "b.*", "dest": "bar.{{wildcard(x)}}"},
    {"src": "b.*", "dest": "bar.{{wildcard(1)}}x{{partition(2)}}"},
    {"src": "b.*", "dest": "bar.{{split(1)}}"},
    {"src": "b.*", "dest": "bar.{{split(1,-,+)}}"},
    {"src": "b.*", "dest": "bar.{{split(1,a b)}}"},
    {"src": "b.*", "dest": "bar.{{left(1)}}"},
    {"src": "b.*", "dest": "bar.{{right(1,2,3)}}"},
    {"src": "b.*", "dest": "bar.{{splitFromLeft(1,99999999999)}}"},
    {"src": "b.*", "dest": "bar.{{sliceFromRight(1_0,2)}}"},
    {"src": "b.*", "dest": "bar.{{partition(x)}}"},
    {"src": "b.*", "dest": "bar.{{partition(3,x)}}"},
    {"src": "b.*", "dest": "bar.{{partition(3,2)}}"},
    {"src": "b.*", "dest": "bar.{{partition(2147483648)}}"},
    {"src": "b.*", "dest": "bar.{{random()}}"},
    {"src": "b.*", "dest": "bar.{{random(1,2)}}"},
    {"src": "b.*", "dest": "bar.*"},
    {"src": "b.>", "dest": "bar"},
    {"src": "b.a", "dest": "bar.>"},
    {"src": "", "dest": "bar"},
    {"src": "b.a", "dest": "b ar"},
    {"src": "b.a", "dest": "bar..x"},
    {"src": "b.a", "dest": "bar.>.x"},
]
BAD_REPUBLISH: list[dict[str, Any]] = [
    {"src": ">", "dest": "b.>"},  # a loop
    {"src": ">", "dest": ">"},
    {"src": "b.*", "dest": "b.x"},
    {"src": "b.*", "dest": "r.{{wildcard(2)}}"},
    {"src": "x..y", "dest": "r.>"},
    {"src": "b.>", "dest": "r.*"},
    {"src": "b.>", "dest": "r"},
    {"src": "b.>", "dest": "r.{{bad(1)}}.>"},
]


async def refused(s: Session) -> None:
    base = {"name": "BAD", "subjects": ["b.>"]}
    for i, transform in enumerate(BAD_TRANSFORMS):
        await s.create(f"transform {i} {transform}", {**base, "subject_transform": transform})
    for i, republish in enumerate(BAD_REPUBLISH):
        await s.create(f"republish {i} {republish}", {**base, "republish": republish})
    for label, extra in (
        ("unknown key", {"subject_transform": {"src": "b.*", "dest": "t.$1", "x": 1}}),
        ("src of a wrong type", {"subject_transform": {"src": 5, "dest": "t"}}),
        ("not an object", {"subject_transform": "b.>"}),
        ("headers_only of a wrong type", {"republish": {"dest": "r.>", "headers_only": "y"}}),
        ("pedantic, no source", {"republish": {"dest": "r.>"}, "pedantic": True}),
        (
            "pedantic, implicit",
            {
                "republish": {"src": ">", "dest": ">"},
                "subject_transform": {"src": "b.>", "dest": "t.>"},
                "pedantic": True,
            },
        ),
        (
            "invalid transform with a republish",
            {
                "republish": {"src": ">", "dest": ">"},
                "subject_transform": {"src": "b.*", "dest": "t.>"},
            },
        ),
    ):
        await s.create(label, {**base, **extra})
    await s.api("nothing created", "$JS.API.STREAM.NAMES")


async def test_refused_transforms_and_republish_match_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, refused)


# ---------------------------------------------------------------------------- republish


async def republish(s: Session) -> None:
    await s.create(
        "all",
        {"name": "R1", "subjects": ["a.>"], "republish": {"src": ">", "dest": "rp.all.>"}},
    )
    await s.publish("plain", "a.x", b"one")
    await s.publish("headers", "a.x", b"two", {"X-Id": "7", "Nats-Msg-Id": "m2"})
    await s.publish("other subject", "a.y", b"three")
    await s.publish("empty payload", "a.x", b"")
    await s.publish("duplicate: not republished", "a.x", b"dup", {"Nats-Msg-Id": "m2"})
    await s.publish("refused: not republished", "a.x", b"no", {"Nats-Expected-Last-Sequence": "1"})
    await s.republished("R1")
    await s.create(
        "no source, headers only",
        {"name": "R2", "subjects": ["h.>"], "republish": {"dest": "rp.ho.>", "headers_only": True}},
    )
    await s.publish("ho plain", "h.a", b"12345")
    await s.publish("ho headers", "h.a", b"123", {"A": "b"})
    await s.republished("R2")
    await s.create(
        "mapped",
        {
            "name": "R3",
            "subjects": ["m.>"],
            "republish": {"src": "m.*.*", "dest": "rp.m.$2.{{partition(4,1)}}.{{split(1,-)}}"},
        },
    )
    await s.publish("m matched", "m.a-b.c")
    await s.publish("m not matched", "m.a")
    await s.publish("m invalid mapped subject: suppressed", "m.-.c")
    await s.republished("R3")
    await s.create(
        "implicit",
        {
            "name": "R4",
            "subjects": ["i.>"],
            "subject_transform": {"src": "i.>", "dest": "rp.i.>"},
            "republish": {"src": ">", "dest": ">"},
        },
    )
    await s.publish("implicit", "i.k")
    await s.republished("R4")
    await s.create(
        "with transform",
        {
            "name": "R5",
            "subjects": ["t.>"],
            "subject_transform": {"src": "t.*", "dest": "tt.{{splitFromLeft(1,1)}}"},
            "republish": {"src": "tt.>", "dest": "rp.t.>"},
        },
    )
    await s.publish("t", "t.abc")
    await s.publish("t again", "t.abc")
    await s.publish("t unmapped", "t.a.b")
    await s.stored("R5 stored", "R5")
    await s.republished("R5")
    await s.create(
        "counter",
        {
            "name": "RC",
            "subjects": ["cn.>"],
            "allow_msg_counter": True,
            "republish": {"src": ">", "dest": "rp.cn.>"},
        },
    )
    await s.publish("increment", "cn.a", b"", {"Nats-Incr": "+5"})
    await s.publish("increment again", "cn.a", b"", {"Nats-Incr": "-2"})
    await s.republished("RC: the totals, as stored")
    await s.create(
        "interest without consumers",
        {
            "name": "R6",
            "subjects": ["w.>"],
            "retention": "interest",
            "republish": {"src": ">", "dest": "rp.w.>"},
        },
    )
    await s.publish("no interest: not republished", "w.a")
    await s.republished("R6")
    rp_all = {"src": ">", "dest": "rp.u.>"}
    await s.create(
        "rollup",
        {"name": "R7", "subjects": ["u.>"], "allow_rollup_hdrs": True, "republish": rp_all},
    )
    await s.publish("u1", "u.a")
    await s.publish("u2", "u.b")
    await s.publish("rollup", "u.a", b"r", {"Nats-Rollup": "all"})
    await s.publish("after rollup", "u.a")
    await s.republished("R7")
    await s.create(
        "discard new",
        {"name": "R9", "subjects": ["n.>"], "max_msgs": 1, "discard": "new", "republish": rp_all},
    )
    await s.publish("n1", "n.a")
    await s.publish("full: not republished", "n.a")
    await s.republished("R9")
    await s.create(
        "empty destination",
        {"name": "R8", "subjects": ["e.>"], "republish": {}},
    )
    await s.publish("e", "e.a")
    await s.info("R8 info", "R8")
    await s.republished("R8")


async def test_republished_messages_match_nats_server(nats_server_url: str, tmp_path: Path) -> None:
    await both(nats_server_url, tmp_path, republish)


# ---------------------------------------------------------------------------- updates


async def updates(s: Session) -> None:
    base = {"name": "UP", "subjects": ["up.>"]}
    await s.create("plain", base)
    await s.publish("before", "up.a.b")
    transform = {"src": "up.*.*", "dest": "up.$2.$1"}
    await s.update("add transform", {**base, "subject_transform": transform})
    await s.publish("transformed", "up.a.b")
    await s.update(
        "change transform", {**base, "subject_transform": {"src": "up.>", "dest": "v.>"}}
    )
    await s.publish("changed", "up.a.b")
    await s.update("bad transform", {**base, "subject_transform": {"src": "up.*", "dest": "$2"}})
    await s.publish("unchanged by the refused update", "up.a.b")
    await s.update(
        "add republish",
        {**base, "subject_transform": transform, "republish": {"src": ">", "dest": "rp.up.>"}},
    )
    await s.publish("republished", "up.c.d")
    await s.update(
        "headers only",
        {**base, "republish": {"src": "up.>", "dest": "rp.h.>", "headers_only": True}},
    )
    await s.publish("headers only", "up.c.d", b"size")
    await s.update("loop", {**base, "republish": {"src": ">", "dest": "up.x.>"}})
    await s.update("remove both", base)
    await s.publish("plain again", "up.c.d")
    await s.stored("stored", "UP")
    await s.info("info", "UP")
    await s.republished("republished")


async def test_updates_match_nats_server(nats_server_url: str, tmp_path: Path) -> None:
    await both(nats_server_url, tmp_path, updates)


# ---------------------------------------------------------------------------- restart

RESTART = {
    "name": "RS",
    "subjects": ["rs.>"],
    "subject_transform": {"src": "rs.*", "dest": "rs.{{partition(3,1)}}.{{wildcard(1)}}"},
    "republish": {"src": "rs.*.*", "dest": "rp.rs.$1.$2"},
}


async def before_restart(s: Session) -> None:
    await s.create("create", RESTART)
    for key in ("a", "b", "a"):
        await s.publish(f"pub {key}", f"rs.{key}", key.encode())
    await s.republished("republished before")


async def after_restart(s: Session) -> None:
    await s.info("info after restart", "RS")
    for key in ("a", "c"):
        await s.publish(f"pub {key} after", f"rs.{key}", key.encode())
    await s.stored("stored", "RS")
    await s.republished("republished after")


async def test_transform_and_republish_survive_a_restart_as_in_nats_server(
    tmp_path: Path,
) -> None:
    """Stream info right after the restart, and the next publishes: stored under the
    mapped subject, republished with `Nats-Last-Sequence` counting the older messages."""
    await across_restarts(tmp_path, (before_restart, after_restart))
