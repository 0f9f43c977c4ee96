"""The same JetStream stream-API requests against Brook and nats-server; JSON compared.

Each scenario is a list of steps run in order on a fresh connection to each server:
`("api", subject, body)` sends a raw API request, `("pub", subject, headers, payload)` a
JetStream publish (request with a reply). Responses are normalised (timestamps, server
versions and other volatile values replaced by placeholders) and must be equal.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from tests.support.leafnodes import brook_server

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

Step = tuple[Any, ...]
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
VOLATILE_KEYS = {"created", "ts", "leader"}


def normalise(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in ("_nats.ver", "_nats.level"):
                continue  # server identity, not behaviour
            if k == "bytes" and key == "state":
                continue  # accounting of stored bytes is checked by the store suite
            if key == "api":
                out[k] = "<counter>"  # the nats-server is shared by tests; its level differs
                continue
            out[k] = "<volatile>" if k in VOLATILE_KEYS else normalise(v, k)
        return out
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if key == "description" and isinstance(value, str) and value.startswith("invalid JSON: "):
        return "invalid JSON: <parser message>"  # Go's and Python's parser texts differ
    if isinstance(value, str) and TS.match(value) and value != "0001-01-01T00:00:00Z":
        return "<time>"
    return value


def api(subject: str, body: Any = None) -> Step:
    return ("api", subject, body)


def pub(subject: str, payload: bytes = b"x", **headers: str) -> Step:
    return ("pub", subject, {k.replace("_", "-"): v for k, v in headers.items()}, payload)


def direct(subject: str, body: Any = None) -> Step:
    return ("direct", subject, body)


def pub_reply(subject: str, reply: str, payload: bytes = b"x") -> Step:
    """A publish whose reply subject is `reply` (subscribed to for the answer)."""
    return ("pub_reply", subject, reply, payload)


ORDERS = {"name": "ORDERS", "subjects": ["orders.>"]}
DG = {"name": "DG", "subjects": ["dg.>"], "allow_direct": True}

SCENARIOS: dict[str, list[Step]] = {
    "create-info-delete": [
        api("$JS.API.STREAM.CREATE.ORDERS", ORDERS),
        api("$JS.API.STREAM.CREATE.ORDERS", ORDERS),  # idempotent
        api("$JS.API.STREAM.CREATE.ORDERS", {**ORDERS, "max_msgs": 5}),  # 10058
        api("$JS.API.STREAM.INFO.ORDERS"),
        api("$JS.API.STREAM.NAMES"),
        api("$JS.API.STREAM.LIST", {"offset": 0}),
        api("$JS.API.STREAM.DELETE.ORDERS", {"x": 1}),  # 10038
        api("$JS.API.STREAM.DELETE.ORDERS"),
        api("$JS.API.STREAM.INFO.ORDERS"),  # 10059
        api("$JS.API.STREAM.NAMES"),
    ],
    "create-defaults-and-options": [
        api("$JS.API.STREAM.CREATE.A", {"name": "A"}),
        api(
            "$JS.API.STREAM.CREATE.B",
            {
                "name": "B",
                "subjects": ["b.*", "bb.>"],
                "description": "bee",
                "storage": "memory",
                "retention": "workqueue",
                "max_msgs": 10,
                "max_bytes": 1000000,
                "max_age": 60_000_000_000,
                "max_msgs_per_subject": 3,
                "max_msg_size": 512,
                "discard": "new",
                "allow_direct": True,
                "allow_rollup_hdrs": True,
                "metadata": {"team": "x"},
            },
        ),
        api("$JS.API.STREAM.CREATE.C", {"name": "C", "max_age": 1_000_000_000}),
        api("$JS.API.STREAM.CREATE.D", {"name": "D", "subjects": ["b.x"]}),  # overlap 10065
        api("$JS.API.STREAM.NAMES", {"subject": "b.q"}),
        api("$JS.API.STREAM.NAMES", {"subject": "nothing"}),
    ],
    "create-invalid": [
        api("$JS.API.STREAM.CREATE.X", {"name": "Y"}),  # 10056
        api("$JS.API.STREAM.CREATE.X", {"name": "X", "num_replicas": 3}),  # 10074
        api("$JS.API.STREAM.CREATE.X", {"name": "X", "max_age": 5}),  # too small
        api("$JS.API.STREAM.CREATE.X", {"name": "X", "subjects": ["a", "a"]}),
        api(
            "$JS.API.STREAM.CREATE.X", {"name": "X", "deny_purge": True, "allow_rollup_hdrs": True}
        ),
        api("$JS.API.STREAM.CREATE.X", {"name": "X", "sealed": True}),
        api("$JS.API.STREAM.CREATE.X", {"name": "X", "discard_new_per_subject": True}),
        api("$JS.API.STREAM.CREATE.X", "not json"),
        api("$JS.API.STREAM.CREATE.X", "not json either"),
    ],
    "update": [
        api("$JS.API.STREAM.CREATE.U", {"name": "U", "subjects": ["u.>"]}),
        api("$JS.API.STREAM.UPDATE.U", {"name": "U", "subjects": ["u.>"], "max_msgs": 2}),
        api("$JS.API.STREAM.UPDATE.U", {"name": "U", "subjects": ["u.>"], "storage": "memory"}),
        api("$JS.API.STREAM.UPDATE.NOPE", {"name": "NOPE"}),
    ],
    "publish-headers": [
        api("$JS.API.STREAM.CREATE.P", {"name": "P", "subjects": ["p.>"]}),
        pub("p.a", b"one", Nats_Msg_Id="m1"),
        pub("p.a", b"one", Nats_Msg_Id="m1"),  # duplicate
        pub("p.b", b"two", Nats_Expected_Last_Sequence="1"),
        pub("p.b", b"two", Nats_Expected_Last_Sequence="1"),  # 10071
        pub("p.c", b"3", Nats_Expected_Stream="OTHER"),  # 10060
        pub("p.a", b"4", Nats_Expected_Last_Subject_Sequence="1"),
        pub("p.a", b"5", Nats_Expected_Last_Subject_Sequence="1"),  # 10071
        pub("p.new", b"6", Nats_Expected_Last_Subject_Sequence="0"),
        pub("p.x", b"7", Nats_Expected_Last_Msg_Id="m1"),  # last msg had no id: 10070
        pub("p.x", b"8", Nats_Rollup="sub"),  # rollup not permitted
        api("$JS.API.STREAM.INFO.P"),
    ],
    "limits": [
        api("$JS.API.STREAM.CREATE.L", {"name": "L", "subjects": ["l.>"], "max_msgs": 2}),
        pub("l.a", b"1"),
        pub("l.a", b"2"),
        pub("l.a", b"3"),
        api("$JS.API.STREAM.INFO.L"),
        api(
            "$JS.API.STREAM.CREATE.N",
            {"name": "N", "subjects": ["n.>"], "max_msgs": 1, "discard": "new", "max_msg_size": 4},
        ),
        pub("n.a", b"1"),
        pub("n.a", b"2"),  # maximum messages exceeded
        pub("n.a", b"too big"),  # 10054
        api(
            "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"], "max_msgs_per_subject": 1}
        ),
        pub("s.a", b"1"),
        pub("s.a", b"2"),
        pub("s.b", b"3"),
        api("$JS.API.STREAM.INFO.S", {"subjects_filter": ">"}),
    ],
    # Every field of nats-server's StreamConfigRequest is refused or honoured, never
    # dropped; a field it does not know is an error (its decoder is strict).
    "config-fields": [
        api("$JS.API.STREAM.CREATE.P1", {"name": "P1", "persist_mode": "default"}),
        api("$JS.API.STREAM.CREATE.P2", {"name": "P2", "persist_mode": ""}),
        api("$JS.API.STREAM.CREATE.P3", {"name": "P3", "persist_mode": "fast"}),
        api("$JS.API.STREAM.CREATE.P3", {"name": "P3", "persist_mode": None}),
        api(
            "$JS.API.STREAM.CREATE.P3", {"name": "P3", "persist_mode": "async", "storage": "memory"}
        ),
        api("$JS.API.STREAM.UPDATE.P1", {"name": "P1", "persist_mode": "default", "max_msgs": 5}),
        api("$JS.API.STREAM.CREATE.L1", {"name": "L1", "placement": {}}),
        api("$JS.API.STREAM.CREATE.L2", {"name": "L2", "placement": {"cluster": "c1"}}),
        api(
            "$JS.API.STREAM.CREATE.L3",
            {"name": "L3", "placement": {"cluster": "", "tags": ["a", "b"]}},
        ),
        api("$JS.API.STREAM.INFO.L3"),
        api("$JS.API.STREAM.CREATE.L3", {"name": "L3", "placement": {"tags": ["a", "b"]}}),
        api("$JS.API.STREAM.CREATE.L4", {"name": "L4", "placement": {"preferred": "n1"}}),
        api("$JS.API.STREAM.CREATE.L4", {"name": "L4", "placement": {"cluster": "c", "zone": 1}}),
        api("$JS.API.STREAM.CREATE.L4", {"name": "L4", "placement": "c1"}),
        api("$JS.API.STREAM.CREATE.C1", {"name": "C1", "consumer_limits": {"max_ack_pending": 0}}),
        api(
            "$JS.API.STREAM.CREATE.C2",
            {
                "name": "C2",
                "consumer_limits": {"max_ack_pending": 10, "inactive_threshold": 5_000_000_000},
            },
        ),
        api("$JS.API.STREAM.CREATE.C3", {"name": "C3", "consumer_limits": {"max_pending": 1}}),
        api(
            "$JS.API.STREAM.CREATE.C3",
            {"name": "C3", "consumer_limits": {"inactive_threshold": "5s"}},
        ),
        api("$JS.API.STREAM.CREATE.U1", {"name": "U1", "max_msg": 5}),  # misspelt: refused
        api("$JS.API.STREAM.CREATE.X", {"name": "Y", "bogus": 1}),  # decoding comes first
        api("$JS.API.STREAM.CREATE.U1", {"name": "U1", "pedantic": "yes"}),
        api("$JS.API.STREAM.UPDATE.P1", {"name": "P1", "bogus": 1}),
    ],
    # The request's `pedantic`: refuse rather than adjust what the request set.
    "config-pedantic": [
        api("$JS.API.STREAM.CREATE.D1", {"name": "D1", "duplicate_window": -5}),
        api("$JS.API.STREAM.CREATE.D1", {"name": "D1", "max_age": -5}),
        api("$JS.API.STREAM.CREATE.D1", {"name": "D1", "num_replicas": 7}),
        api("$JS.API.STREAM.CREATE.D1", {"name": "D1", "num_replicas": -1}),
        api("$JS.API.STREAM.CREATE.D1", {"name": "D1", "description": "d" * 4097}),
        api("$JS.API.STREAM.CREATE.D1", {"name": "D1", "metadata": {"k": "v" * 131072}}),
        *(
            api("$JS.API.STREAM.CREATE.D2", {"name": "D2", "pedantic": True, key: -5})
            for key in (
                "max_msgs",
                "max_msgs_per_subject",
                "max_bytes",
                "max_msg_size",
                "max_consumers",
            )
        ),
        api("$JS.API.STREAM.CREATE.D2", {"name": "D2", "pedantic": True, "max_age": 1_000_000_000}),
        api(
            "$JS.API.STREAM.CREATE.D2",
            {"name": "D2", "pedantic": True, "subject_delete_marker_ttl": 2_000_000_000},
        ),
        api(
            "$JS.API.STREAM.CREATE.D2",
            {
                "name": "D2",
                "pedantic": True,
                "subject_delete_marker_ttl": 2_000_000_000,
                "allow_msg_ttl": True,
            },
        ),
        api(
            "$JS.API.STREAM.CREATE.D3",
            {
                "name": "D3",
                "pedantic": True,
                "max_age": 1_000_000_000,
                "duplicate_window": 500_000_000,
                "max_msgs": 0,
            },
        ),
        api("$JS.API.STREAM.CREATE.D4", {"name": "D4", "pedantic": False, "max_msgs": -5}),
        api("$JS.API.STREAM.UPDATE.D4", {"name": "D4", "pedantic": True, "sealed": True}),
        api("$JS.API.STREAM.UPDATE.D4", {"name": "D4", "pedantic": True, "max_msgs": -4}),
    ],
    # Batch publishes to a stream that allows none: refused, nothing stored. Which headers
    # and reply subjects make a publish a batch one, and which checks come first.
    "batch-publish-refused": [
        api("$JS.API.STREAM.CREATE.B", {"name": "B", "subjects": ["b.>"]}),
        pub("b.a", b"1", Nats_Batch_Id="x"),  # 10174
        pub("b.a", b"2", Nats_Batch_Id="x", Nats_Batch_Sequence="1"),  # 10174
        pub("b.a", b"3", Nats_Batch_Id="x", Nats_Batch_Commit="1"),  # 10174
        pub("b.a", b"4", Nats_Batch_Id="x", Nats_Expected_Stream="OTHER"),  # 10174 first
        pub("b.a", b"5", Nats_Batch_Id="x", Nats_Msg_Id="m1"),  # 10174
        pub("b.a", b"6", Nats_Batch_Id="x", X_Big="y" * 70000),  # 10174 before 10097
        pub("b.a", b"7", Nats_Batch_Sequence="1"),  # stored
        pub("b.a", b"8", Nats_Batch_Commit="1"),  # stored
        pub("b.a", b"9", Nats_Batch_Id=""),  # stored
        pub("b.a", b"10", **{"nats-batch-id": "x"}),  # stored: names are case-sensitive
        pub_reply("b.a", "in.abc.10.fail.1.0.$FI"),  # fast batch: 10205
        pub_reply("b.a", "in.$FI"),  # 10205, malformed as it is
        pub_reply("b.a", "in.x$FI"),  # stored
        api("$JS.API.STREAM.INFO.B"),
        api(
            "$JS.API.STREAM.CREATE.M",
            {"name": "M", "subjects": ["m.>"], "max_msg_size": 40},
        ),
        pub("m.a", b"x" * 50, Nats_Batch_Id="x"),  # 10054 first
        pub_reply("m.a", "in.$FI", b"x" * 50),  # 10054 first
        api("$JS.API.STREAM.CREATE.SE", {"name": "SE", "subjects": ["se"]}),
        api("$JS.API.STREAM.UPDATE.SE", {"name": "SE", "subjects": ["se"], "sealed": True}),
        pub("se", b"1", Nats_Batch_Id="x"),  # 10109 first
    ],
    # nats-py's JSMTest::test_jsm_stream_info_options: no match means no `subjects`.
    "info-subjects-filter": [
        api("$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"]}),
        pub("s.a", b"1"),
        pub("s.b", b"2"),
        api("$JS.API.STREAM.INFO.S", {"subjects_filter": "nothing"}),
        api("$JS.API.STREAM.INFO.S", {"subjects_filter": "nothing", "offset": 3}),
        api("$JS.API.STREAM.INFO.S", {"subjects_filter": "s.*", "offset": 1}),
        api("$JS.API.STREAM.INFO.S", {"subjects_filter": "s.*", "offset": 2}),
        api("$JS.API.STREAM.INFO.S", {"subjects_filter": "s.*", "offset": 9}),
        api("$JS.API.STREAM.INFO.S", {"subjects_filter": "s.b"}),
    ],
    "get-delete-purge": [
        api("$JS.API.STREAM.CREATE.G", {"name": "G", "subjects": ["g.>"]}),
        pub("g.a", b"first", Nats_Msg_Id="m-1"),
        pub("g.b", b"second"),
        pub("g.a", b"third"),
        pub("g.c", b"fourth"),
        api("$JS.API.STREAM.MSG.GET.G", {"seq": 1}),
        api("$JS.API.STREAM.MSG.GET.G", {"last_by_subj": "g.a"}),
        api("$JS.API.STREAM.MSG.GET.G", {"seq": 1, "next_by_subj": "g.b"}),
        api("$JS.API.STREAM.MSG.GET.G", {"last_by_subj": "g.>"}),
        api("$JS.API.STREAM.MSG.GET.G", {"seq": 99}),
        api("$JS.API.STREAM.MSG.DELETE.G", {"seq": 2}),
        api("$JS.API.STREAM.MSG.DELETE.G", {"seq": 2}),  # 10043
        api("$JS.API.STREAM.MSG.DELETE.G", {"seq": 50}),  # 10057
        api("$JS.API.STREAM.INFO.G", {"deleted_details": True}),
        api("$JS.API.STREAM.PURGE.G", {"filter": "g.a", "keep": 1}),
        api("$JS.API.STREAM.PURGE.G", {"seq": 4}),
        api("$JS.API.STREAM.PURGE.G", {"seq": 4, "keep": 1}),  # 10003
        api("$JS.API.STREAM.PURGE.G", {}),
        api("$JS.API.STREAM.INFO.G"),
        pub("g.z", b"after purge"),
    ],
    "direct-get": [
        api("$JS.API.STREAM.CREATE.DG", DG),
        pub("dg.a", b"1", X_Custom="kept"),
        pub("dg.b", b"2"),
        pub("dg.a", b"3"),
        pub("dg.c", b"4"),
        direct("$JS.API.DIRECT.GET.DG", {"seq": 2}),
        direct("$JS.API.DIRECT.GET.DG", {"last_by_subj": "dg.a"}),
        direct("$JS.API.DIRECT.GET.DG", {"seq": 1, "next_by_subj": "dg.c"}),
        direct("$JS.API.DIRECT.GET.DG.dg.a"),
        direct("$JS.API.DIRECT.GET.DG.dg.nothing"),
        direct("$JS.API.DIRECT.GET.DG", {"seq": 99}),
        direct("$JS.API.DIRECT.GET.DG", {"seq": 1, "batch": 3}),
        direct("$JS.API.DIRECT.GET.DG", {"seq": 2, "batch": 10, "next_by_subj": "dg.a"}),
        direct("$JS.API.DIRECT.GET.DG", {"multi_last": ["dg.a", "dg.b"]}),
        direct("$JS.API.DIRECT.GET.DG", {"multi_last": ["none.*"]}),
        direct("$JS.API.DIRECT.GET.DG"),
        direct("$JS.API.DIRECT.GET.DG", "{not json"),
        direct("$JS.API.DIRECT.GET.DG.dg.a", {"seq": 1}),
        api("$JS.API.STREAM.CREATE.ND", {"name": "ND", "subjects": ["nd"]}),
        direct("$JS.API.DIRECT.GET.ND", {"seq": 1}),  # no allow_direct: no responders
    ],
    "direct-get-batch-options": [
        api("$JS.API.STREAM.CREATE.DG", DG),
        pub("dg.a", b"11111"),
        pub("dg.b", b"22222"),
        pub("dg.a", b"33333"),
        pub("dg.c", b"44444"),
        direct("$JS.API.DIRECT.GET.DG", {"seq": 1, "batch": 10, "max_bytes": 12}),
        direct("$JS.API.DIRECT.GET.DG", {"seq": 1, "batch": 10, "up_to_seq": 2}),
        direct("$JS.API.DIRECT.GET.DG", {"start_time": "2000-01-01T00:00:00Z", "batch": 2}),
        direct("$JS.API.DIRECT.GET.DG", {"start_time": "2000-01-01T00:00:00Z"}),
        direct("$JS.API.DIRECT.GET.DG", {"multi_last": ["dg.>"], "up_to_seq": 3}),
        direct("$JS.API.DIRECT.GET.DG", {"multi_last": ["dg.*"], "batch": 1}),
        direct("$JS.API.DIRECT.GET.DG", {"seq": 5, "batch": 3}),
    ],
    # Batches longer than Brook's read runs (direct.BATCH_RUN_MAX, 256): the pending counts,
    # last sequences, filter and byte limit carried across runs.
    "direct-get-runs": [
        api("$JS.API.STREAM.CREATE.DR", {"name": "DR", "subjects": ["dr.*"], "allow_direct": True}),
        *(pub(f"dr.{'ab'[i % 2]}", b"%d" % i) for i in range(600)),
        direct("$JS.API.DIRECT.GET.DR", {"seq": 1, "batch": 550}),
        direct("$JS.API.DIRECT.GET.DR", {"seq": 3, "batch": 290, "next_by_subj": "dr.b"}),
        direct("$JS.API.DIRECT.GET.DR", {"seq": 1, "batch": 600, "max_bytes": 1500}),
    ],
    "config-options": [
        api("$JS.API.STREAM.CREATE.FS", {"name": "FS", "subjects": ["fs"], "first_seq": 100}),
        pub("fs", b"x"),
        api("$JS.API.STREAM.INFO.FS"),
        api("$JS.API.STREAM.CREATE.CP", {"name": "CP", "subjects": ["cp"], "compression": "s2"}),
        api(
            "$JS.API.STREAM.CREATE.IN", {"name": "IN", "subjects": ["in"], "retention": "interest"}
        ),
        api(
            "$JS.API.STREAM.CREATE.WQ", {"name": "WQ", "subjects": ["wq"], "retention": "workqueue"}
        ),
        api("$JS.API.STREAM.CREATE.NA", {"name": "NA", "subjects": ["na"], "no_ack": True}),
        api("$JS.API.STREAM.CREATE.TY", {"name": "TY", "max_msgs": "ten"}),
        api("$JS.API.STREAM.CREATE.TY", {"name": "TY", "subjects": "ty"}),
        api("$JS.API.STREAM.CREATE.TY", {"name": "TY", "storage": "disk"}),
        api("$JS.API.STREAM.INFO.FS", "[1,2]"),
    ],
    "sealed-deny": [
        api("$JS.API.STREAM.CREATE.SE", {"name": "SE", "subjects": ["se"]}),
        pub("se", b"1"),
        pub("se", b"2"),
        api("$JS.API.STREAM.MSG.DELETE.SE", {"seq": 1, "no_erase": True}),
        api("$JS.API.STREAM.UPDATE.SE", {"name": "SE", "subjects": ["se"], "sealed": True}),
        pub("se", b"3"),
        api("$JS.API.STREAM.PURGE.SE"),
        api("$JS.API.STREAM.MSG.DELETE.SE", {"seq": 2}),
        api("$JS.API.STREAM.UPDATE.SE", {"name": "SE", "subjects": ["se"], "sealed": False}),
        api(
            "$JS.API.STREAM.CREATE.DD",
            {"name": "DD", "subjects": ["dd"], "deny_delete": True, "deny_purge": True},
        ),
        pub("dd", b"1"),
        api("$JS.API.STREAM.MSG.DELETE.DD", {"seq": 1}),
        api("$JS.API.STREAM.PURGE.DD"),
        api("$JS.API.STREAM.UPDATE.DD", {"name": "DD", "subjects": ["dd"]}),
    ],
    "account-info": [
        api("$JS.API.STREAM.CREATE.AI", {"name": "AI", "subjects": ["ai"], "storage": "memory"}),
        api("$JS.API.INFO"),
    ],
    # Per-message TTL. Accepted TTLs are all >= 30 s so nothing expires mid-scenario.
    "msg-ttl-values": [
        api("$JS.API.STREAM.CREATE.A", {"name": "A", "subjects": ["a.>"], "allow_msg_ttl": True}),
        *(
            pub("a.x", Nats_TTL=value)
            for value in (
                "30",
                "030",
                "30s",
                "1h30m",
                "30500ms",  # truncated to whole seconds
                "+30s",
                "18446744073709551646",  # 2^64 + 30: digit strings wrap like int64
                "never",
                "NEVER",
                "00",  # zero digits: no TTL
                "",
                " 30",
                "500ms",  # below 1 s
                "999ms",
                "1ns",
                "0",
                "0s",
                "-1",
                "+5",
                "1.5",
                "1d",
                "5S",
                "abc",
                "never1",
                "9223372036854775808",  # 2^63 wraps negative
                "2562048h",  # overflows a Go duration
            )
        ),
        api("$JS.API.STREAM.INFO.A"),
    ],
    "msg-ttl-disabled": [
        api("$JS.API.STREAM.CREATE.D", {"name": "D", "subjects": ["d.>"]}),
        pub("d.x", Nats_TTL="5"),  # 10166
        pub("d.x", Nats_TTL="never"),  # 10166
        pub("d.x", Nats_TTL="abc"),  # 10165: an invalid value is reported as invalid
        pub("d.x", Nats_TTL="0"),  # 10165
        pub("d.x", Nats_TTL="00"),  # no TTL: stored
        pub("d.x", Nats_TTL=""),  # no TTL: stored
        api("$JS.API.STREAM.INFO.D"),
    ],
    # Messages failing two checks at once show which one nats-server makes first.
    "msg-ttl-check-order": [
        api(
            "$JS.API.STREAM.CREATE.L",
            {
                "name": "L",
                "subjects": ["l.>"],
                "allow_msg_ttl": True,
                "allow_rollup_hdrs": True,
                "max_msgs": 1,
                "discard": "new",
                "max_msg_size": 100,
                "duplicate_window": 60_000_000_000,
            },
        ),
        pub("l.a", Nats_Msg_Id="m1"),
        pub("l.a", Nats_TTL="abc", Nats_Expected_Stream="OTHER"),  # 10060
        pub("l.a", Nats_TTL="abc", Nats_Expected_Last_Subject_Sequence="7"),  # 10071
        pub("l.a", Nats_TTL="abc", Nats_Expected_Last_Sequence="7"),  # 10071
        pub("l.a", Nats_TTL="abc", Nats_Msg_Id="m1"),  # duplicate
        pub("l.a", Nats_TTL="abc", Nats_Expected_Last_Msg_Id="zz"),  # 10070
        pub("l.a", Nats_TTL="abc", Nats_Rollup="bogus"),  # 10111
        pub("l.a", b"x" * 200, Nats_TTL="abc"),  # 10054
        pub("l.a", Nats_TTL="abc"),  # 10165 before the discard-new limit
        pub("l.a", Nats_TTL="30"),  # 10077
        api(
            "$JS.API.STREAM.CREATE.N",
            {"name": "N", "subjects": ["n.>"], "max_msg_size": 100},
        ),
        pub("n.a", b"x" * 200, Nats_Expected_Stream="OTHER"),  # 10054 first
        pub("n.a", b"x" * 200, Nats_TTL="5"),  # 10054 before 10166
        pub("n.a", Nats_TTL="5", Nats_Expected_Stream="OTHER"),  # 10060 before 10166
        pub("n.a", Nats_TTL="5", Nats_Expected_Last_Sequence="7"),  # 10166 before 10071
        pub("n.a", Nats_TTL="abc", Nats_Expected_Last_Sequence="7"),  # 10071 before 10165
        api("$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"]}),
        pub("s.a", Nats_TTL="5", X_Big="y" * 70000),  # 10097 before 10166
        pub("s.a", Nats_Expected_Stream="OTHER", X_Big="y" * 70000),  # 10097 before 10060
    ],
}


async def delete_all_streams(nc: Any) -> None:
    """The nats-server is shared by all scenarios: each starts from no streams at all."""
    names = json.loads((await nc.request("$JS.API.STREAM.NAMES", b"", timeout=5)).data)
    for name in names.get("streams") or []:
        await nc.request(f"$JS.API.STREAM.DELETE.{name}", b"", timeout=5)


async def run_scenario(url: str, steps: list[Step]) -> list[Any]:
    nc = await nats.connect(url, allow_reconnect=False)
    results: list[Any] = []
    await delete_all_streams(nc)
    try:
        for step in steps:
            if step[0] == "api":
                _, subject, body = step
                data = (
                    b"" if body is None else (body if isinstance(body, str) else json.dumps(body))
                )
                data = data.encode() if isinstance(data, str) else data
                reply = await nc.request(subject, data, timeout=5)
            elif step[0] == "direct":
                results.append(await direct_get(nc, step[1], step[2]))
                continue
            elif step[0] == "pub_reply":
                _, subject, reply_to, payload = step
                sub = await nc.subscribe(reply_to)
                await nc.publish(subject, payload, reply=reply_to)
                reply = await sub.next_msg(timeout=5)
                await sub.unsubscribe()
            else:
                _, subject, headers, payload = step
                reply = await nc.request(subject, payload, timeout=5, headers=headers or None)
            results.append(normalise(json.loads(reply.data)))
    finally:
        await delete_all_streams(nc)
        await nc.close()
    return results


async def direct_get(nc: Any, subject: str, body: Any) -> list[Any]:
    """Every reply to one direct-get request: (headers, data) until a terminal status."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    data = b"" if body is None else (body if isinstance(body, str) else json.dumps(body))
    await nc.publish(subject, data.encode() if isinstance(data, str) else data, reply=inbox)
    replies: list[Any] = []
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=1)
            except Exception:
                replies.append("<timeout>")
                break
            headers = dict(msg.headers or {})
            if "Nats-Time-Stamp" in headers:
                headers["Nats-Time-Stamp"] = "<time>"
            replies.append((headers, msg.data))
            status = headers.get("Status")
            if status is not None or "Nats-Num-Pending" not in headers:
                break  # a status ends the exchange; so does a plain single reply
    finally:
        await sub.unsubscribe()
    return replies


@pytest.fixture
async def brook_url(tmp_path: Path) -> AsyncIterator[str]:
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        yield server.url


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_stream_api_matches_nats_server(
    name: str, brook_url: str, nats_server_url: str
) -> None:
    steps = SCENARIOS[name]
    expected = await run_scenario(nats_server_url, steps)
    actual = await run_scenario(brook_url, steps)
    for i, (step, want, got) in enumerate(zip(steps, expected, actual, strict=True)):
        assert got == want, f"step {i} {step[:2]}"


async def test_direct_get_batch_stops_at_configured_max_pending(tmp_path: Path) -> None:
    """A batch without `max_bytes` stops at the message that reaches the server's
    configured `max_pending`, nats-server's default. Brook only: nats-server then most
    often closes the requester as a slow consumer, as the batch fills the same bound."""
    steps = [
        api("$JS.API.STREAM.CREATE.MP", {"name": "MP", "subjects": ["mp"], "allow_direct": True}),
        *(pub("mp", b"%04d" % i + b"x" * 4996) for i in range(40)),
        direct("$JS.API.DIRECT.GET.MP", {"seq": 1, "batch": 40}),
    ]
    conf = f'max_pending: 100000\nmax_payload: 8000\njetstream {{ store_dir: "{tmp_path}" }}\n'
    async with brook_server(conf) as server:
        replies = (await run_scenario(server.url, steps))[-1]
    # 20 messages of 5,002 bytes (subject and payload) reach 100,000
    *messages, (end, _) = replies
    assert [data[:4] for _, data in messages] == [b"%04d" % i for i in range(20)]
    assert (end["Status"], end["Nats-Num-Pending"]) == ("204", "20")
