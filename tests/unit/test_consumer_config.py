"""Consumer config model: defaults, validation errors, update rules, JSON shape."""

from __future__ import annotations

from typing import Any

import pytest

from brook.jetstream.errors import ApiError
from brook.jetstream.models.consumer_config import (
    ConsumerConfig,
    create_action,
)
from brook.jetstream.models.consumer_json import (
    SequenceInfo,
    consumer_config_to_json,
    consumer_info_to_json,
)
from brook.jetstream.models.consumer_rules import (
    check_consumer_update,
    check_workqueue,
    parse_consumer_create,
    same_consumer_config,
)
from brook.jetstream.models.stream_config import parse_stream_config

S = parse_stream_config({"name": "S", "subjects": ["s.>"]})
WQ = parse_stream_config({"name": "WQ", "subjects": ["wq.>"], "retention": "workqueue"})


def parse(
    config: Any = None,
    *,
    consumer: str | None = None,
    filt: str | None = None,
    durable: bool = False,
    stream: Any = S,
    **envelope: Any,
) -> ConsumerConfig:
    body = {"stream_name": "S", "config": config if config is not None else {}, **envelope}
    return parse_consumer_create(
        body,
        stream=stream,
        subject_stream="S",
        subject_consumer=consumer,
        subject_filter=filt,
        durable_subject=durable,
    )


def error_of(config: Any = None, **kwargs: Any) -> tuple[int, int, str]:
    with pytest.raises(ApiError) as info:
        parse(config, **kwargs)
    return info.value.code, info.value.err_code, info.value.description


def test_ephemeral_defaults() -> None:
    c = parse({})
    assert (c.name, c.ack_policy, c.max_deliver, c.max_waiting) == ("", "none", -1, 512)
    assert (c.inactive_threshold, c.ack_wait, c.max_ack_pending) == (5_000_000_000, 0, 0)
    assert consumer_config_to_json(c) == {
        "deliver_policy": "all",
        "ack_policy": "none",
        "max_deliver": -1,
        "replay_policy": "instant",
        "max_waiting": 512,
        "inactive_threshold": 5000000000,
        "num_replicas": 0,
        "metadata": {"_nats.req.level": "0"},
    }


def test_durable_pull_defaults_match_transcript() -> None:
    body = {
        "name": "worker",
        "durable_name": "worker",
        "deliver_policy": "all",
        "ack_policy": "explicit",
        "filter_subject": "s.>",
        "replay_policy": "instant",
        "ack_wait": 0,
        "idle_heartbeat": 0,
        "inactive_threshold": 0,
    }
    c = parse(body, consumer="worker", filt="s.>")
    out = consumer_config_to_json(c, server_version="2.15.1", api_level=5)
    assert list(out) == [
        "durable_name",
        "name",
        "deliver_policy",
        "ack_policy",
        "ack_wait",
        "max_deliver",
        "filter_subject",
        "replay_policy",
        "max_waiting",
        "max_ack_pending",
        "num_replicas",
        "metadata",
    ]
    assert (out["ack_wait"], out["max_ack_pending"]) == (30_000_000_000, 1000)
    assert out["metadata"] == {"_nats.level": "5", "_nats.req.level": "0", "_nats.ver": "2.15.1"}


def test_push_ordered_consumer_key_order() -> None:
    c = parse(
        {
            "deliver_policy": "all",
            "ack_policy": "none",
            "ack_wait": 79200000000000,
            "max_deliver": 1,
            "filter_subject": "s.>",
            "replay_policy": "instant",
            "flow_control": True,
            "idle_heartbeat": 5000000000,
            "deliver_subject": "_INBOX.x",
            "num_replicas": 1,
            "mem_storage": True,
            "inactive_threshold": 0,
        }
    )
    assert list(consumer_config_to_json(c)) == [
        "deliver_policy",
        "ack_policy",
        "ack_wait",
        "max_deliver",
        "filter_subject",
        "replay_policy",
        "flow_control",
        "deliver_subject",
        "idle_heartbeat",
        "inactive_threshold",
        "num_replicas",
        "mem_storage",
        "metadata",
    ]


def test_backoff_sets_ack_wait_and_negatives_normalise() -> None:
    c = parse({"ack_policy": "explicit", "backoff": [2, 3], "max_deliver": -9, "max_batch": -1})
    assert (c.ack_wait, c.max_deliver, c.max_batch) == (2, -1, 0)
    assert parse({"max_ack_pending": -7}).max_ack_pending == -1


def test_subject_name_rules() -> None:
    assert parse({"name": "other"}, consumer="c").name == "c"
    assert parse({"durable_name": "d"}, consumer="d", durable=True).name == "d"
    assert parse({"name": "n1", "durable_name": "n2"}, consumer="n2").name == "n2"


def test_start_time_keeps_offset() -> None:
    c = parse({"deliver_policy": "by_start_time", "opt_start_time": "2024-01-02T03:04:05.5+02:00"})
    assert consumer_config_to_json(c)["opt_start_time"] == "2024-01-02T03:04:05.5+02:00"


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {"config": {"durable_name": "x"}},
            (400, 10020, "consumer expected to be ephemeral but a durable name was set in request"),
        ),
        (
            {"config": {}, "consumer": "d", "durable": True},
            (400, 10018, "consumer expected to be durable but a durable name was not set"),
        ),
        (
            {"config": {"durable_name": "e"}, "consumer": "d", "durable": True},
            (400, 10017, "consumer name in subject does not match durable name in request"),
        ),
        (
            {"config": {"filter_subject": "s.a"}, "consumer": "c", "filt": "s.b"},
            (
                400,
                10131,
                "Consumer create request did not match filtered subject from create subject",
            ),
        ),
        (
            {"config": {"filter_subjects": ["s.a"]}, "consumer": "c", "filt": "s.a"},
            (400, 10137, "consumer with multiple subject filters cannot use subject based API"),
        ),
        (
            {"config": {"name": "a/b"}},
            (400, 10127, "Consumer name can not contain path separators"),
        ),
        (
            {"config": {"name": "a.b"}},
            (500, 10052, "consumer name can not contain '.', '*', '>', '\\', '/'"),
        ),
        (
            {"config": {"num_replicas": 3}},
            (500, 10074, "replicas > 1 not supported in non-clustered mode"),
        ),
        ({"config": {}, "stream": None}, (404, 10059, "stream not found")),
        ({"config": {"num_replicas": -1}}, (400, 10133, "replicas count cannot be negative")),
        ({"config": {"backoff": [-1]}}, (400, 10184, "consumer backoff needs to be positive")),
        ({"config": {"ack_wait": -1}}, (400, 10183, "consumer ack wait needs to be positive")),
        (
            {"config": {"backoff": [1, 2], "max_deliver": 1}},
            (400, 10116, "max deliver is required to be > length of backoff values"),
        ),
        (
            {"config": {"description": "x" * 4097}},
            (400, 10107, "consumer description is too long, maximum allowed is 4096"),
        ),
        (
            {"config": {"deliver_subject": "a.*"}},
            (400, 10079, "consumer deliver subject has wildcards"),
        ),
        (
            {"config": {"deliver_subject": "a..b"}},
            (400, 10112, "invalid push consumer deliver subject"),
        ),
        (
            {"config": {"deliver_subject": "s.x"}},
            (400, 10081, "consumer deliver subject forms a cycle"),
        ),
        (
            {"config": {"deliver_subject": "d", "max_waiting": 1}},
            (400, 10080, "consumer in push mode can not set max waiting"),
        ),
        (
            {"config": {"deliver_subject": "d", "max_ack_pending": 1}},
            (400, 10082, "consumer requires ack policy for max ack pending"),
        ),
        (
            {"config": {"deliver_subject": "d", "idle_heartbeat": 5}},
            (400, 10083, "consumer idle heartbeat needs to be >= 100ms"),
        ),
        (
            {"config": {}, "stream": WQ},
            (400, 10084, "consumer in pull mode requires explicit ack policy on workqueue stream"),
        ),
        (
            {"config": {"rate_limit_bps": 1}},
            (400, 10086, "consumer in pull mode can not have rate limit set"),
        ),
        (
            {"config": {"idle_heartbeat": 1000000000}},
            (400, 10088, "consumer idle heartbeat requires a push based consumer"),
        ),
        (
            {"config": {"flow_control": True}},
            (400, 10089, "consumer flow control requires a push based consumer"),
        ),
        (
            {"config": {"max_expires": 10}},
            (400, 10115, "consumer max request expires needs to be >= 1ms"),
        ),
        (
            {"config": {"filter_subject": "a", "filter_subjects": ["b"]}},
            (400, 10136, "consumer cannot have both FilterSubject and FilterSubjects specified"),
        ),
        ({"config": {"filter_subject": "a..b"}}, (500, 10052, "invalid subject")),
        (
            {"config": {"filter_subjects": ["a", ""]}},
            (400, 10139, "consumer filter in FilterSubjects cannot be empty"),
        ),
        (
            {"config": {"filter_subjects": ["s.a", "s.*"]}},
            (400, 10138, "consumer subject filters cannot overlap"),
        ),
        (
            {"config": {"deliver_policy": "by_start_sequence"}},
            (
                400,
                10094,
                "consumer delivery policy is deliver by start sequence, "
                "but optional start sequence is not set",
            ),
        ),
        (
            {"config": {"deliver_policy": "all", "opt_start_seq": 3}},
            (
                400,
                10094,
                "consumer delivery policy is deliver all, but optional start sequence is also set",
            ),
        ),
        (
            {"config": {"deliver_policy": "last_per_subject"}},
            (
                400,
                10094,
                "consumer delivery policy is deliver last per subject, "
                "but optional filter subject is not set",
            ),
        ),
        (
            {"config": {"sample_freq": "abc"}},
            (
                400,
                10095,
                "failed to parse consumer sampling configuration: "
                'strconv.Atoi: parsing "abc": invalid syntax',
            ),
        ),
        (
            {"config": {"deliver_subject": "d", "flow_control": True}},
            (400, 10108, "consumer with flow control also needs heartbeats"),
        ),
        (
            {"config": {"metadata": {"a": "x" * 140000}}},
            (400, 10135, "consumer metadata exceeds maximum size of 128KB"),
        ),
        (
            {"config": {"durable_name": "a" * 300}, "consumer": "a" * 300, "durable": True},
            (400, 10102, "consumer name is too long, maximum allowed is 255"),
        ),
        ({"config": {"unknown": 1}}, (400, 10025, 'invalid JSON: json: unknown field "unknown"')),
        (
            {"config": {"priority_policy": "overflow"}},
            (400, 10159, "Setting PriorityPolicy requires at least one PriorityGroup to be set"),
        ),
        (
            {"config": {"priority_policy": "pinned_client", "priority_groups": [""]}},
            (400, 10161, "Group name cannot be an empty string"),
        ),
        (
            {"config": {"priority_policy": "prioritized", "priority_groups": ["a.b"]}},
            (
                400,
                10162,
                "Valid priority group name must match A-Z, a-z, 0-9, -_/=)+ and may not "
                "exceed 16 characters",
            ),
        ),
        (
            {"config": {"priority_policy": "overflow", "priority_groups": ["g"] * 1 + ["x" * 17]}},
            (
                400,
                10162,
                "Valid priority group name must match A-Z, a-z, 0-9, -_/=)+ and may not "
                "exceed 16 characters",
            ),
        ),
        (
            {
                "config": {
                    "priority_policy": "overflow",
                    "priority_groups": ["g"],
                    "deliver_subject": "push.here",
                }
            },
            (400, 10178, "priority groups can not be used with push consumers"),
        ),
        (
            {"config": {"priority_groups": ["g"]}},
            (400, 10196, "consumer can not have priority groups when policy is none"),
        ),
        (
            {"config": {"priority_policy": "none", "priority_timeout": 5}},
            (400, 10197, "PinnedTTL cannot be set when PriorityPolicy is none"),
        ),
        (
            {"config": {"priority_policy": "first"}},
            (400, 10025, 'invalid JSON: unknown priority policy: "first"'),
        ),
    ],
)
def test_validation_errors(kwargs: dict[str, Any], expected: tuple[int, int, str]) -> None:
    config = kwargs.pop("config")
    assert error_of(config, **kwargs) == expected


def test_stream_mismatch_and_actions() -> None:
    with pytest.raises(ApiError) as info:
        parse_consumer_create({"stream_name": "T", "config": {}}, stream=S, subject_stream="S")
    assert info.value.err_code == 10056
    assert create_action({"action": "update"}) == "update"
    with pytest.raises(ApiError) as info:
        create_action({"action": "bogus"})
    assert info.value.description == 'invalid JSON: unknown consumer action: "bogus"'


def test_update_rules() -> None:
    old = parse({"durable_name": "u", "ack_policy": "explicit"}, consumer="u", durable=True)
    same = parse({"durable_name": "u", "ack_policy": "explicit"}, consumer="u", durable=True)
    assert same_consumer_config(old, same)
    changed = parse(
        {"durable_name": "u", "ack_policy": "explicit", "max_deliver": 3, "description": "d"},
        consumer="u",
        durable=True,
    )
    assert check_consumer_update(old, changed).max_deliver == 3
    for field, value, text in [
        ("deliver_policy", "new", "deliver policy can not be updated"),
        ("mem_storage", True, "storage type can not be updated"),
        ("replay_policy", "original", "replay policy can not be updated"),
        ("max_waiting", 10, "max waiting can not be updated"),
        ("deliver_subject", "dd", "can not update pull consumer to push based"),
        ("ack_policy", "all", "ack policy can not be updated"),
    ]:
        new = parse(
            {"durable_name": "u", "ack_policy": "explicit", field: value},
            consumer="u",
            durable=True,
        )
        with pytest.raises(ApiError) as info:
            check_consumer_update(old, new)
        assert (info.value.code, info.value.err_code, info.value.description) == (500, 10012, text)


def test_ephemeral_resend_is_not_same_config() -> None:
    a = parse({}, consumer="e")
    assert not same_consumer_config(a, parse({}, consumer="e"))
    assert same_consumer_config(a, parse({"inactive_threshold": 5_000_000_000}, consumer="e"))


def test_workqueue_rules() -> None:
    first = parse({"ack_policy": "explicit"}, consumer="a", stream=WQ)
    check_workqueue(first, WQ, {})
    second = parse({"ack_policy": "explicit"}, consumer="b", stream=WQ)
    with pytest.raises(ApiError) as info:
        check_workqueue(second, WQ, {"a": first})
    assert info.value.err_code == 10099
    with pytest.raises(ApiError) as info:
        check_workqueue(parse({"ack_policy": "all"}, consumer="c", stream=S), WQ, {})
    assert info.value.err_code == 10098


def test_info_shape() -> None:
    c = parse(
        {"durable_name": "p", "deliver_subject": "d", "ack_policy": "explicit"},
        consumer="p",
        durable=True,
    )
    out = consumer_info_to_json(
        stream_name="S",
        name="p",
        created_ns=1,
        config=c,
        delivered=SequenceInfo(5, 4, 2_000_000_000),
        ack_floor=SequenceInfo(),
        num_ack_pending=0,
        num_redelivered=0,
        num_waiting=0,
        num_pending=0,
        ts_ns=3,
        push_bound=True,
    )
    assert list(out) == [
        "stream_name",
        "name",
        "created",
        "config",
        "delivered",
        "ack_floor",
        "num_ack_pending",
        "num_redelivered",
        "num_waiting",
        "num_pending",
        "push_bound",
        "ts",
    ]
    assert out["delivered"] == {
        "consumer_seq": 5,
        "stream_seq": 4,
        "last_active": "1970-01-01T00:00:02Z",
    }
    assert out["ack_floor"] == {"consumer_seq": 0, "stream_seq": 0}


def test_priority_groups_defaults_and_json() -> None:
    """pinned_client gets nats-server's 2 min pin TTL; the fields close the config's JSON,
    and priority groups need API level 1."""
    c = parse({"priority_policy": "pinned_client", "priority_groups": ["A/b=c_d-1"]})
    assert c.priority_timeout == 120_000_000_000
    out = consumer_config_to_json(c)
    assert list(out)[-3:] == ["priority_groups", "priority_policy", "priority_timeout"]
    assert out["priority_groups"] == ["A/b=c_d-1"]
    assert out["metadata"] == {"_nats.req.level": "1"}
    assert parse({"priority_policy": "overflow", "priority_groups": ["g"]}).priority_timeout == 0
    negative = {"priority_policy": "overflow", "priority_groups": ["g"], "priority_timeout": -1}
    assert parse(negative).priority_timeout == 0
    assert error_of(negative, pedantic=True) == (
        400,
        10157,
        "pedantic mode: priority_timeout must not be negative",
    )
