"""Consumer create requests sent to the real nats-server and to Brook's config model.

Each case is a raw `$JS.API.CONSUMER.*CREATE*` request. The nats-server answer (the
`config` of the consumer info, or the error object) must equal what
`parse_consumer_create` / `check_consumer_update` / `consumer_config_to_json` produce.
Generated names, timestamps and server identity metadata are ignored. Cases run in order
against one stream set; the model keeps the consumers it created to decide updates.
"""

from __future__ import annotations

import json
from typing import Any

import nats
import pytest

from brook.jetstream.errors import ApiError, api_error
from brook.jetstream.models.consumer_config import (
    ConsumerConfig,
    create_action,
)
from brook.jetstream.models.consumer_json import (
    consumer_config_to_json,
)
from brook.jetstream.models.consumer_rules import (
    check_consumer_update,
    check_workqueue,
    parse_consumer_create,
    same_consumer_config,
)
from brook.jetstream.models.stream_config import StreamConfig, parse_stream_config

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

STREAMS: dict[str, dict[str, Any]] = {
    "CC": {"name": "CC", "subjects": ["cc.>"]},
    "CCWQ": {"name": "CCWQ", "subjects": ["ccwq.>"], "retention": "workqueue"},
    "CCIN": {"name": "CCIN", "subjects": ["ccin.>"], "retention": "interest"},
    "CCL": {
        "name": "CCL",
        "subjects": ["ccl.>"],
        "consumer_limits": {"max_ack_pending": 50, "inactive_threshold": 60_000_000_000},
    },
}
C = "$JS.API.CONSUMER.CREATE.CC"
D = "$JS.API.CONSUMER.DURABLE.CREATE.CC"


def req(config: Any, stream: str = "CC", **extra: Any) -> dict[str, Any]:
    return {"stream_name": stream, "config": config, **extra}


# nats-py 2.16 request bodies, as captured in the reference transcripts.
PY_PULL_DURABLE = req(
    {
        "name": "pd",
        "durable_name": "pd",
        "deliver_policy": "all",
        "ack_policy": "explicit",
        "filter_subject": "cc.>",
        "replay_policy": "instant",
        "ack_wait": 0,
        "idle_heartbeat": 0,
        "inactive_threshold": 0,
    }
)
PY_PUSH_DURABLE = req(
    {
        "durable_name": "pushd",
        "deliver_policy": "all",
        "ack_policy": "explicit",
        "filter_subject": "cc.>",
        "replay_policy": "instant",
        "flow_control": False,
        "deliver_subject": "_INBOX.pushd",
        "ack_wait": 0,
        "idle_heartbeat": 0,
        "inactive_threshold": 0,
    }
)
PY_ORDERED = req(
    {
        "deliver_policy": "all",
        "ack_policy": "none",
        "ack_wait": 79200000000000,
        "max_deliver": 1,
        "filter_subject": "cc.>",
        "replay_policy": "instant",
        "flow_control": True,
        "idle_heartbeat": 5000000000,
        "deliver_subject": "_INBOX.ordered",
        "num_replicas": 1,
        "mem_storage": True,
        "inactive_threshold": 0,
    }
)
PY_ADD_CONSUMER = {  # js.add_consumer("CC", durable_name=..., **options)
    "deliver_policy": "all",
    "ack_policy": "explicit",
    "replay_policy": "instant",
    "ack_wait": 0,
    "idle_heartbeat": 0,
    "inactive_threshold": 0,
}

CASES: list[tuple[str, Any]] = [
    (f"{C}.pd.cc.>", PY_PULL_DURABLE),
    (f"{D}.pushd", PY_PUSH_DURABLE),
    (C, PY_ORDERED),
    (C, req({})),
    (C, req({"ack_policy": "explicit"})),
    (f"{D}.ac1", req({**PY_ADD_CONSUMER, "durable_name": "ac1", "max_deliver": 5})),
    (
        f"{D}.ac2",
        req(
            {
                **PY_ADD_CONSUMER,
                "durable_name": "ac2",
                "backoff": [1000000000, 5000000000],
                "max_deliver": 4,
                "max_ack_pending": 20,
                "max_waiting": 16,
                "max_batch": 10,
                "max_expires": 30000000000,
                "max_bytes": 1024,
                "headers_only": True,
                "description": "with options",
                "metadata": {"team": "x"},
                "sample_freq": "50%",
            }
        ),
    ),
    (
        f"{C}.named",
        req(
            {
                **PY_ADD_CONSUMER,
                "name": "named",
                "filter_subjects": ["cc.a", "cc.b"],
                "deliver_policy": "last_per_subject",
            }
        ),
    ),
    (
        f"{C}.st",
        req({"deliver_policy": "by_start_time", "opt_start_time": "2024-01-02T03:04:05.5+02:00"}),
    ),
    (f"{C}.sq", req({"deliver_policy": "by_start_sequence", "opt_start_seq": 7})),
    (C, req({"max_deliver": -5, "max_ack_pending": -7, "max_batch": -1, "idle_heartbeat": -1})),
    (C, req({"durable_name": "x"})),  # 10020
    (f"{D}.d1", req({})),  # 10018
    (f"{D}.d1", req({"durable_name": "d2"})),  # 10017
    (f"{C}.f1.cc.b", req({"filter_subject": "cc.a"})),  # 10131
    (f"{C}.f1.cc.a", req({"filter_subjects": ["cc.a"]})),  # 10137
    ("$JS.API.CONSUMER.CREATE.NOPE", req({}, stream="NOPE")),  # 10059
    (f"{C}.x", req({}, stream="OTHER")),  # 10056
    (C, req({"name": "a/b"})),  # 10127
    (C, req({"name": "a.b"})),  # 10052
    (C, req({"num_replicas": 3})),  # 10074
    (C, req({"num_replicas": -1})),  # 10133
    (C, req({"ack_policy": "none", "max_ack_pending": 5, "deliver_subject": "dx"})),  # 10082
    (C, req({"deliver_subject": "dx", "max_waiting": 5})),  # 10080
    (C, req({"flow_control": True, "deliver_subject": "dx"})),  # 10108
    (C, req({"flow_control": True})),  # 10089
    (C, req({"idle_heartbeat": 1000000000})),  # 10088
    (C, req({"idle_heartbeat": 1000, "deliver_subject": "dx"})),  # 10083
    (C, req({"rate_limit_bps": 100})),  # 10086
    (C, req({"deliver_subject": "d.*"})),  # 10079
    (C, req({"deliver_subject": "cc.x"})),  # 10081
    (C, req({"backoff": [1, 2], "max_deliver": 1, "ack_policy": "explicit"})),  # 10116
    (C, req({"backoff": [-1], "ack_policy": "explicit"})),  # 10184
    (C, req({"ack_wait": -1, "ack_policy": "explicit"})),  # 10183
    (C, req({"deliver_policy": "by_start_sequence"})),  # 10094
    (C, req({"deliver_policy": "new", "opt_start_seq": 3})),  # 10094
    (C, req({"deliver_policy": "last_per_subject"})),  # 10094
    (C, req({"filter_subject": "cc.a", "filter_subjects": ["cc.b"]})),  # 10136
    (C, req({"filter_subjects": ["cc.a", ""]})),  # 10139
    (C, req({"filter_subjects": ["cc.a", "cc.*"]})),  # 10138
    (C, req({"filter_subject": "a..b"})),  # 10052 invalid subject
    (C, req({"max_expires": 10})),  # 10115
    (C, req({"description": "x" * 5000})),  # 10107
    (C, req({"sample_freq": "abc"})),  # 10095
    (C, req({"metadata": {"a": "x" * 140000}})),  # 10135
    (C, req({"unknown": 1})),  # 10025
    (C, req({"deliver_policy": "bogus"})),  # 10025
    (C, req({}, action="bogus")),  # 10025
    ("$JS.API.CONSUMER.CREATE.CCWQ", req({}, stream="CCWQ")),  # 10084
    ("$JS.API.CONSUMER.CREATE.CCWQ", req({"ack_policy": "all"}, stream="CCWQ")),  # 10098
    (
        "$JS.API.CONSUMER.CREATE.CCWQ",
        req({"ack_policy": "explicit", "deliver_policy": "new"}, stream="CCWQ"),
    ),  # 10101
    ("$JS.API.CONSUMER.CREATE.CCIN", req({"num_replicas": 1}, stream="CCIN")),
    # `pedantic`: refused (10157) where a default would change what the request set.
    *(
        (C, req({key: -5}, pedantic=True))
        for key in (
            "max_deliver",
            "max_waiting",
            "max_ack_pending",
            "max_batch",
            "max_expires",
            "max_bytes",
            "idle_heartbeat",
            "inactive_threshold",
        )
    ),
    (C, req({"max_deliver": -5, "deliver_subject": "a.*"}, pedantic=True)),  # 10157 first
    (C, req({"ack_policy": "explicit", "backoff": [1_000_000_000]}, pedantic=True)),
    (
        C,
        req(
            {"ack_policy": "explicit", "backoff": [10**9], "ack_wait": 10**9, "max_deliver": 2},
            pedantic=True,
        ),
    ),
    (C, req({"ack_policy": "explicit"}, pedantic=True)),
    (C, req({"max_deliver": 0, "max_waiting": 0}, pedantic=True)),  # 0 means default
    (C, req({"max_deliver": -5}, pedantic=False)),
    (C, req({}, pedantic="yes")),  # 10025
    ("$JS.API.CONSUMER.CREATE.CCL", req({}, stream="CCL", pedantic=True)),  # limits apply
    (
        "$JS.API.CONSUMER.CREATE.CCL",
        req({"max_ack_pending": 20}, stream="CCL", pedantic=True),
    ),
    (
        "$JS.API.CONSUMER.CREATE.CCL",
        req({"max_ack_pending": 20, "inactive_threshold": 10**10}, stream="CCL", pedantic=True),
    ),
    ("$JS.API.CONSUMER.CREATE.CCL", req({"ack_policy": "explicit"}, stream="CCL")),
    # Existing consumers: idempotent create, updates, fixed fields.
    (f"{C}.upd", req({"name": "upd"}, action="update")),  # 10149
    (f"{C}.upd", req({"name": "upd"}, action="create")),
    (f"{C}.upd", req({"name": "upd"}, action="create")),  # identical: ok
    (f"{C}.upd", req({"name": "upd", "description": "z"}, action="create")),  # 10148
    (f"{C}.upd", req({"name": "upd", "description": "z", "max_deliver": 3})),
    (f"{C}.upd", req({"name": "upd", "ack_policy": "explicit"}, action="update")),  # 10012
    (f"{D}.pushd", req({**PY_PUSH_DURABLE["config"], "deliver_subject": "_INBOX.other"})),
    (f"{D}.pushd", req({**PY_PUSH_DURABLE["config"], "deliver_subject": ""})),  # push → pull
    (f"{D}.pushd", req({**PY_PUSH_DURABLE["config"], "idle_heartbeat": 1000000000})),
    (f"{C}.pd", req({**PY_PULL_DURABLE["config"], "max_waiting": 10})),
    (f"{C}.pd", req({**PY_PULL_DURABLE["config"], "mem_storage": True})),
    (f"{C}.pd", req({**PY_PULL_DURABLE["config"], "deliver_policy": "new"})),
    (f"{C}.pd", req({**PY_PULL_DURABLE["config"], "replay_policy": "original"})),
    (f"{C}.pd", req({**PY_PULL_DURABLE["config"], "deliver_subject": "dd"})),
]


def normalise(value: Any) -> Any:
    if isinstance(value, dict):
        if "error" in value:
            error = dict(value["error"])
            if error["description"].startswith("invalid JSON: "):
                error["description"] = "invalid JSON: <parser message>"
            return {"error": error}
        config = dict(value["config"])
        meta = {
            k: v
            for k, v in config.get("metadata", {}).items()
            if k not in ("_nats.ver", "_nats.level")
        }
        config["metadata"] = meta
        return {"config": config}
    return value


class Model:
    """The consumer-create decision Brook's API handler makes, minus delivery."""

    def __init__(self) -> None:
        self.streams: dict[str, StreamConfig] = {
            name: parse_stream_config(body) for name, body in STREAMS.items()
        }
        self.consumers: dict[str, dict[str, ConsumerConfig]] = {n: {} for n in STREAMS}

    def create(self, subject: str, body: Any) -> dict[str, Any]:
        tokens = subject.split(".")
        durable = tokens[3] == "DURABLE"
        stream_name = tokens[5] if durable else tokens[4]
        consumer = tokens[6] if durable else (tokens[5] if len(tokens) > 5 else None)
        filt = None if durable or len(tokens) <= 6 else ".".join(tokens[6:])
        try:
            config = parse_consumer_create(
                body,
                stream=self.streams.get(stream_name),
                subject_stream=stream_name,
                subject_consumer=consumer,
                subject_filter=filt,
                durable_subject=durable,
            )
            action = create_action(body)
            existing = self.consumers[stream_name]
            old = existing.get(config.name) if config.name else None
            if old is not None:
                if action == "create" and not same_consumer_config(old, config):
                    raise api_error("CONSUMER_ALREADY_EXISTS")
                config = check_consumer_update(old, config)
            elif action == "update":
                raise api_error("CONSUMER_DOES_NOT_EXIST")
            else:
                check_workqueue(config, self.streams[stream_name], existing)
            if config.name:
                existing[config.name] = config
            return {"config": consumer_config_to_json(config, server_version="x", api_level=0)}
        except ApiError as e:
            return {"error": e.to_json()}


async def test_consumer_create_matches_nats_server(nats_server_url: str) -> None:
    nc = await nats.connect(nats_server_url)
    try:
        for name, body in STREAMS.items():
            await nc.request(f"$JS.API.STREAM.DELETE.{name}", b"", timeout=5)
            reply = json.loads(
                (
                    await nc.request(
                        f"$JS.API.STREAM.CREATE.{name}", json.dumps(body).encode(), timeout=5
                    )
                ).data
            )
            assert "error" not in reply, reply
        model = Model()
        mismatches = []
        for subject, body in CASES:
            raw = json.dumps(body).encode()
            theirs = normalise(json.loads((await nc.request(subject, raw, timeout=5)).data))
            ours = normalise(model.create(subject, body))
            if theirs != ours:
                mismatches.append((subject, body, theirs, ours))
        assert not mismatches, "\n".join(
            f"{s} {json.dumps(b)[:200]}\n  nats-server: {t}\n  brook:       {o}"
            for s, b, t, o in mismatches
        )
        assert len(CASES) >= 30
    finally:
        for name in STREAMS:
            await nc.request(f"$JS.API.STREAM.DELETE.{name}", b"", timeout=5)
        await nc.close()
