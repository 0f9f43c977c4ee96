"""Mirror and source configurations nats-server refuses: the same requests on Brook and
nats-server, error codes and texts compared, and nothing created on either (ADR 0020).

Every configuration here is refused by both servers. Valid mirrors are accepted and copy
their origin (test_mirror_conformance.py); Brook still refuses a valid source, and a
mirror through a durable consumer of its origin (ADR-60), with 10052.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nats
import pytest

from brook.jetstream.models import StreamConfig, parse_stream_config, stream_config_to_json
from tests.conformance.test_stream_api_conformance import delete_all_streams
from tests.conformance.test_transform_conformance import Session, both

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]

ORIGIN = {"name": "O"}
PLAIN = {"name": "P", "subjects": ["p.>"]}
GOOD_TRANSFORM = {"src": "o.*", "dest": "m.$1"}

REFUSED_MIRRORS: list[tuple[str, dict[str, Any]]] = [
    ("with subjects", {"subjects": ["m.>"], "mirror": ORIGIN}),
    ("with first_seq", {"first_seq": 5, "mirror": ORIGIN}),
    ("with sources", {"mirror": ORIGIN, "sources": [{"name": "P"}]}),
    ("with counters", {"mirror": ORIGIN, "allow_msg_counter": True}),
    ("with atomic batches", {"mirror": ORIGIN, "allow_atomic": True}),
    ("with fast batches", {"mirror": ORIGIN, "allow_batched": True}),
    ("with both batches", {"mirror": ORIGIN, "allow_atomic": True, "allow_batched": True}),
    (
        "with batches and schedules",
        {"mirror": ORIGIN, "allow_batched": True, "allow_msg_schedules": True},
    ),
    ("with markers", {"mirror": ORIGIN, "subject_delete_marker_ttl": 1_000_000_000}),
    ("no name", {"mirror": {}}),
    ("bad name", {"mirror": {"name": "a.b"}}),
    ("path in name", {"mirror": {"name": "a/b"}}),
    (
        "filter and transforms",
        {"mirror": {"name": "O", "filter_subject": "o.>", "subject_transforms": [GOOD_TRANSFORM]}},
    ),
    ("transform bad source", {"mirror": {"name": "O", "subject_transforms": [{"src": "a..b"}]}}),
    (
        "transform bad destination",
        {"mirror": {"name": "O", "subject_transforms": [{"src": "o.*", "dest": "m.$2"}]}},
    ),
    (
        "transforms overlap",
        {
            "mirror": {
                "name": "O",
                "subject_transforms": [{"src": "o.*", "dest": ""}, {"src": "o.a", "dest": ""}],
            }
        },
    ),
    (
        "consumer bad name",
        {"mirror": {"name": "O", "consumer": {"name": "c.x", "deliver_subject": "d"}}},
    ),
    (
        "consumer wildcard deliver",
        {"mirror": {"name": "O", "consumer": {"name": "c", "deliver_subject": "d.*"}}},
    ),
    (
        "consumer and start",
        {
            "mirror": {
                "name": "O",
                "opt_start_seq": 3,
                "consumer": {"name": "c", "deliver_subject": "d"},
            }
        },
    ),
    ("external deliver wildcard", {"mirror": {"name": "O", "external": {"deliver": "d.>"}}}),
    ("external api wildcard", {"mirror": {"name": "O", "external": {"api": "$JS.*.API"}}}),
    ("external api overlaps", {"mirror": {"name": "O", "external": {"api": "$JS.API"}}}),
    ("external bad name still checked", {"mirror": {"name": "O", "external": {"api": "x y"}}}),
    ("unknown key", {"mirror": {"name": "O", "x": 1}}),
    ("unknown external key", {"mirror": {"name": "O", "external": {"prefix": "a"}}}),
    ("negative start", {"mirror": {"name": "O", "opt_start_seq": -1}}),
    ("bad start time", {"mirror": {"name": "O", "opt_start_time": "yesterday"}}),
    ("not an object", {"mirror": "O"}),
    ("mirror_direct without mirror", {"mirror_direct": True}),
    ("smaller max_msg_size than its origin", {"mirror": {"name": "BIG"}, "max_msg_size": 10}),
    (
        "pedantic, origin's direct gets not mirrored",
        {"mirror": {"name": "BIG"}, "pedantic": True},
    ),
    ("of itself", {"mirror": {"name": "M"}}),
]

REFUSED_SOURCES: list[tuple[str, list[Any]]] = [
    ("null", [None]),
    ("no name", [{}]),
    ("bad name", [{"name": "a*"}]),
    ("duplicate", [{"name": "O"}, {"name": "O"}]),
    (
        "duplicate filters",
        [{"name": "O", "filter_subject": "o.a"}, {"name": "O", "filter_subject": "o.a"}],
    ),
    (
        "filter and transforms",
        [{"name": "O", "filter_subject": "o.>", "subject_transforms": [GOOD_TRANSFORM]}],
    ),
    ("transform bad source", [{"name": "O", "subject_transforms": [{"src": "a b"}]}]),
    (
        "transform bad destination",
        [{"name": "O", "subject_transforms": [{"src": "o.a", "dest": "{{nope(1)}}"}]}],
    ),
    (
        "transforms overlap",
        [
            {
                "name": "O",
                "subject_transforms": [{"src": "o.>", "dest": ""}, {"src": "o.a", "dest": ""}],
            }
        ],
    ),
    (
        "consumer with filter",
        [{"name": "O", "filter_subject": "o.a", "consumer": {"name": "c", "deliver_subject": "d"}}],
    ),
    (
        "consumer used twice",
        [
            {"name": "O", "consumer": {"name": "c", "deliver_subject": "d"}},
            {
                "name": "O",
                "subject_transforms": [{"src": "o.a", "dest": ""}],
                "consumer": {"name": "c", "deliver_subject": "e"},
            },
        ],
    ),
    (
        "external deliver wildcard",
        [{"name": "O", "external": {"api": "$JS.x.API", "deliver": "*"}}],
    ),
    ("external api overlaps", [{"name": "O", "external": {"api": "$JS.API"}}]),
    ("not a list", {"name": "O"}),  # type: ignore[list-item]
    ("smaller max_msg_size than an origin", [{"name": "O"}, {"name": "BIG"}]),
    ("itself", [{"name": "S"}]),
    ("itself, filtered on its subjects", [{"name": "S", "filter_subject": "s.a"}]),
]


async def refused(s: Session) -> None:
    await s.create("origin", {"name": "O", "subjects": ["o.>"]})
    big = {"name": "BIG", "subjects": ["big.>"], "max_msg_size": 1000, "allow_direct": True}
    await s.create("origin with large messages and direct gets", big)
    for label, extra in REFUSED_MIRRORS:
        await s.create(f"mirror {label}", {"name": "M", **extra})
    for label, sources in REFUSED_SOURCES:
        config = {"name": "S", "subjects": ["s.>"], "sources": sources, "max_msg_size": 10}
        await s.create(f"sources {label}", config)
    await s.create("plain", PLAIN)
    await s.update("update adds a mirror", {"name": "P", "mirror": {"name": "O"}})
    await s.update("update adds a mirror, subjects kept", {**PLAIN, "mirror": {"name": "O"}})
    await s.info("plain unchanged", "P")
    await s.api("nothing else created", "$JS.API.STREAM.NAMES")


async def test_refused_mirrors_and_sources_match_nats_server(
    nats_server_url: str, tmp_path: Path
) -> None:
    await both(nats_server_url, tmp_path, refused)


# ---------------------------------------------------------------------------- accepted

ORIGINS: list[dict[str, Any]] = [
    {"name": "O", "subjects": ["o.>"]},
    {"name": "BIG", "subjects": ["big.>"], "max_msg_size": 1000, "allow_direct": True},
]
ACCEPTED: list[dict[str, Any]] = [
    {"name": "M1", "mirror": {"name": "O"}},
    {"name": "M2", "mirror": {"name": "O", "opt_start_seq": 3, "filter_subject": "o.a"}},
    {
        "name": "M3",
        "mirror": {
            "name": "O",
            "opt_start_time": "2026-01-02T03:04:05.5+02:00",
            "subject_transforms": [{"src": "o.*", "dest": "m.$1"}, {"src": "x.>", "dest": ""}],
        },
    },
    {"name": "M4", "mirror": {"name": "GONE", "external": {"api": "$JS.hub.API", "deliver": "d"}}},
    {"name": "M5", "mirror": {"name": "BIG"}, "max_msg_size": 2000},
    {"name": "M6", "mirror": {"name": "NOT_YET"}, "duplicate_window": 5_000_000_000},
    {
        "name": "S1",
        "sources": [
            {"name": "O"},
            {"name": "O", "filter_subject": "o.b"},
            {"name": "BIG", "opt_start_seq": 2, "opt_start_time": "2026-01-01T00:00:00Z"},
        ],
    },
    {
        "name": "S2",
        "subjects": ["s.>"],
        "sources": [
            {"name": "O", "subject_transforms": [{"src": "o.*", "dest": "s.$1"}]},
            {"name": "X", "external": {"api": "$JS.d.API"}},
            {"name": "S2", "filter_subject": "t.>"},
        ],
    },
]


async def test_accepted_configurations_read_as_nats_server_shows_them(
    nats_server_url: str,
) -> None:
    """Brook's decoding and JSON of valid mirrors and sources against the configuration
    nats-server answers a create with (metadata of the server's version left out). Brook
    does not create them yet; this holds its reading of them to nats-server's."""
    nc = await nats.connect(nats_server_url, allow_reconnect=False)
    try:
        await delete_all_streams(nc)
        ours: dict[str, StreamConfig] = {}
        for body in [*ORIGINS, *ACCEPTED]:
            reply = json.loads(
                (
                    await nc.request(
                        f"$JS.API.STREAM.CREATE.{body['name']}", json.dumps(body).encode(), 5
                    )
                ).data
            )
            assert "error" not in reply, reply
            config = parse_stream_config(body, streams=ours.get)
            ours[config.name] = config
            assert _without_version(stream_config_to_json(config)) == _without_version(
                reply["config"]
            ), body["name"]
        await delete_all_streams(nc)
    finally:
        await nc.close()


def _without_version(config: dict[str, Any]) -> dict[str, Any]:
    metadata = {
        k: v for k, v in config["metadata"].items() if k not in ("_nats.ver", "_nats.level")
    }
    return {**config, "metadata": metadata}
