"""Every `$JS.API` subject nats-server serves, sent to Brook and to nats-server; answers compared.

The subjects are those of nats-server's `server/jetstream_api.go`: the `JSApi*` constants, the
handler table of `setJetStreamExportSubs` (the `pairs` and `infopairs`), the requests that
streams and consumers serve themselves (`DIRECT.GET`, `CONSUMER.MSG.NEXT`) and the
system-level ones that `jetstream_cluster.go` and `jetstream.go` subscribe to. Each is sent
once with a plausible request and once with an empty one, after the same setup, to both
servers; the answers (JSON with volatile values replaced, or the status of a plain message,
or "no reply") must be equal.

What this guards: a subject nats-server answers must never leave a Brook client waiting for
its timeout. nats-server 2.15 answers a client of the global account on every subject below
except the system-level ones in `SYSTEM_ONLY` (it serves those to the system account only)
and subjects it does not know; for those both servers must stay silent.

`CONSUMER.RESET.*.*` is compared in depth by tests/conformance/test_consumer_reset_conformance.py.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import nats
import pytest
from nats.errors import TimeoutError as NatsTimeoutError

import brook
from tests.conformance.test_stream_api_conformance import delete_all_streams, normalise

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(90)]

REPLY_TIMEOUT_S = 2.0  # a subject nats-server answers is answered well within this
SILENCE_S = 1.0  # how long a subject nobody answers is listened to

STREAM = {"name": "AUDIT", "subjects": ["audit.>"]}
CONSUMER = {"stream_name": "AUDIT", "config": {"durable_name": "C", "ack_policy": "explicit"}}

# (subject after `$JS.API.`, plausible request body), in the order they are sent. Bodies are
# JSON values, or bytes sent as they are.
ENDPOINTS: list[tuple[str, Any]] = [
    ("INFO", b""),
    ("STREAM.CREATE.AUDIT2", {"name": "AUDIT2", "subjects": ["audit2.>"]}),
    ("STREAM.UPDATE.AUDIT", {**STREAM, "max_msgs": 100}),
    ("STREAM.NAMES", {"subject": "audit.>"}),
    ("STREAM.LIST", {"offset": 0}),
    ("STREAM.INFO.AUDIT", {"subjects_filter": ">"}),
    ("STREAM.MSG.GET.AUDIT", {"seq": 1}),
    ("STREAM.MSG.DELETE.AUDIT", {"seq": 2}),
    ("STREAM.SNAPSHOT.AUDIT", {"deliver_subject": "snapshot.nobody"}),
    ("STREAM.RESTORE.AUDIT", {"config": STREAM}),  # exists: 10130
    ("STREAM.RESTORE.AUDIT_R", {"config": {"name": "AUDIT_R", "subjects": ["audit_r.>"]}}),
    ("DIRECT.GET.AUDIT", {"seq": 1}),  # no allow_direct: no responders on both
    ("CONSUMER.CREATE.AUDIT", {"stream_name": "AUDIT", "config": {"ack_policy": "none"}}),
    ("CONSUMER.CREATE.AUDIT.C2", {"stream_name": "AUDIT", "config": {"name": "C2"}}),
    ("CONSUMER.CREATE.AUDIT.C3.audit.x", {"stream_name": "AUDIT", "config": {"name": "C3"}}),
    ("CONSUMER.DURABLE.CREATE.AUDIT.D", {"stream_name": "AUDIT", "config": {"durable_name": "D"}}),
    ("CONSUMER.NAMES.AUDIT", {"offset": 0}),
    ("CONSUMER.LIST.AUDIT", {"offset": 0}),
    ("CONSUMER.INFO.AUDIT.C", b""),
    ("CONSUMER.MSG.NEXT.AUDIT.C", {"batch": 1, "no_wait": True}),
    ("CONSUMER.PAUSE.AUDIT.C2", {"pause_until": "2099-01-01T00:00:00Z"}),
    ("CONSUMER.RESET.AUDIT.C", {"seq": 1}),
    ("CONSUMER.UNPIN.AUDIT.C", {"group": "G"}),
    ("CONSUMER.UNPIN.AUDIT.C", {"group": "not a group name"}),
    ("CONSUMER.UNPIN.NOPE.C", {"group": "G"}),
    ("CONSUMER.DELETE.AUDIT.C2", b""),
    # After the consumers: an empty body purges everything, and nats-server then moves each
    # consumer's delivered and ack floor sequences up to the purge, Brook does not (yet).
    ("STREAM.PURGE.AUDIT", {"filter": "audit.none"}),
    ("STREAM.PEER.REMOVE.AUDIT", {"peer": "somebody"}),
    ("STREAM.PEER.EVACUATE.AUDIT", {"peer": "somebody"}),
    ("STREAM.CANCEL_MOVE.AUDIT", b""),
    ("STREAM.LEADER.STEPDOWN.AUDIT", b""),
    ("CONSUMER.LEADER.STEPDOWN.AUDIT.C", b""),
    ("STREAM.DELETE.AUDIT2", b""),
]

# Served by nats-server to the system account only (jetstream_cluster.go, jetstream.go):
# a client of the global account gets no reply from either server.
SYSTEM_ONLY: list[tuple[str, Any]] = [
    ("META.LEADER.STEPDOWN", b""),
    ("SERVER.REMOVE", {"peer": "somebody"}),
    ("SERVER.EVACUATE", {"peer": "somebody"}),
    ("META.RESCUE", b""),
    ("ACCOUNT.PURGE.$G", b""),
    ("ACCOUNT.STREAM.MOVE.$G.AUDIT", b""),
    ("ACCOUNT.STREAM.CANCEL_MOVE.$G.AUDIT", b""),
    ("NO.SUCH.ENDPOINT", b""),
    ("STREAM.NO_SUCH_VERB.AUDIT", b""),
]

RESTORE_INBOX = re.compile(r"^(\$JS\.SNAPSHOT\.RESTORE\.[^.]+\.)[A-Za-z0-9]+$")


def _body(value: Any) -> bytes:
    return value if isinstance(value, bytes) else json.dumps(value).encode()


def _answer(msg: Any, generated: set[str]) -> Any:
    """What a reply says, without the values that differ from run to run. Consumer names
    the server made up are collected in `generated` and shown as `<generated>`."""
    try:
        value = json.loads(msg.data)
    except ValueError:
        value = None
    config = value.get("config") if isinstance(value, dict) else None
    if isinstance(config, dict) and "name" in value and not {"name", "durable_name"} & set(config):
        generated.add(value["name"])
    if generated:
        text = msg.data.decode(errors="replace")
        for name in generated:
            text = text.replace(f'"{name}"', '"<generated>"')
        value = json.loads(text) if value is not None else None
    if not isinstance(value, dict):  # a message, not an API response (CONSUMER.MSG.NEXT)
        status = (msg.headers or {}).get("Status")
        return {"status": status, "data": msg.data.decode(errors="replace")}
    out = normalise(value)
    if isinstance(out.get("consumers"), list):  # where made-up names sort is up to chance
        out["consumers"].sort(key=lambda c: json.dumps(c, sort_keys=True))
    if isinstance(out.get("deliver_subject"), str):  # the restore's inbox: random token
        out["deliver_subject"] = RESTORE_INBOX.sub(r"\1", out["deliver_subject"])
    out.pop("pause_remaining", None)  # nanoseconds until 2099, as of the moment of asking
    return out


async def _ask(nc: Any, subject: str, body: Any, timeout: float, generated: set[str]) -> Any:
    """One request on an inbox of its own: a pull request's delivery shows the stored
    message's subject, which nats-py's shared request inbox would not recognise."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox, max_msgs=1)
    await nc.publish("$JS.API." + subject, _body(body), reply=inbox)
    try:
        reply = await sub.next_msg(timeout=timeout)
    except NatsTimeoutError:
        return "no reply"
    finally:
        await sub.unsubscribe()
    if (reply.headers or {}).get("Status") == "503" and not reply.data:
        return "no responders"
    return _answer(reply, generated)


async def audit(url: str) -> dict[str, Any]:
    """(subject, "plausible" | "empty") -> the answer, for every subject above."""
    nc = await nats.connect(url, allow_reconnect=False)
    answers: dict[str, Any] = {}
    generated: set[str] = set()
    try:
        await delete_all_streams(nc)
        await nc.request("$JS.API.STREAM.CREATE.AUDIT", _body(STREAM), timeout=5)
        for i in range(3):
            await nc.request(f"audit.{i}", str(i).encode(), timeout=5)
        await nc.request("$JS.API.CONSUMER.CREATE.AUDIT.C", _body(CONSUMER), timeout=5)
        for subject, body in ENDPOINTS:
            for kind, data in ((f"plausible {body!r}", body), ("empty", b"")):
                answers[f"{subject} {kind}"] = await _ask(
                    nc, subject, data, REPLY_TIMEOUT_S, generated
                )
        # Silent subjects are asked all at once, so waiting for silence costs one timeout.
        keys = [f"{s} {kind}" for s, _ in SYSTEM_ONLY for kind in ("plausible", "empty")]
        bodies = [b for _, body in SYSTEM_ONLY for b in (body, b"")]
        subjects = [s for s, _ in SYSTEM_ONLY for _ in range(2)]
        silent = await asyncio.gather(
            *(_ask(nc, s, b, SILENCE_S, generated) for s, b in zip(subjects, bodies, strict=True))
        )
        answers.update(zip(keys, silent, strict=True))
    finally:
        await delete_all_streams(nc)
        await nc.close()
    return answers


async def test_every_api_subject_is_answered_as_nats_server_answers(
    tmp_path: Any, nats_server_url: str
) -> None:
    expected = await audit(nats_server_url)
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        actual = await audit(server.url)
    unanswered = [k for k, v in actual.items() if v == "no reply" and expected[k] != "no reply"]
    assert not unanswered, f"nats-server answers these, Brook does not: {unanswered}"
    for key, want in expected.items():
        assert actual[key] == want, key
    # The premise of SYSTEM_ONLY, checked on nats-server itself.
    assert all(expected[f"{s} empty"] == "no reply" for s, _ in SYSTEM_ONLY)
    assert all(v != "no reply" for k, v in expected.items() if k.split()[0] in dict(ENDPOINTS))
