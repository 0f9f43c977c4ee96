"""The consumer-create requests a sourcing stream sends its origins, compared with those
nats-server 2.15.1 sent for the same configuration (recorded by subscribing to
`$JS.API.CONSUMER.CREATE.>`): subject, header and JSON byte for byte, but the random
8 characters of the deliver subject (nats-server's `syncSubject`). Go escapes `>` in
JSON strings as `\\u003e`; the recorded bodies are shown unescaped."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import brook
from brook import limits
from brook.jetstream.link_requests import CreateRequest
from brook.jetstream.models import parse_stream_config
from brook.jetstream.sources import Source

pytestmark = pytest.mark.timeout(30)

SOURCES = [
    {"name": "O1", "filter_subject": "a.>"},
    {
        "name": "O2",
        "subject_transforms": [{"src": "b.*", "dest": "x.$1"}, {"src": "b.*.*", "dest": ""}],
    },
    {"name": "O1", "filter_subject": "a.b", "opt_start_time": "2024-01-01T00:00:00+02:00"},
    {"name": "O2", "opt_start_seq": 5, "filter_subject": "b.z"},
]
_TAIL = (
    '"replay_policy":"instant","flow_control":true,"deliver_subject":"$JS.S.<id>",'
    '"idle_heartbeat":1000000000,"inactive_threshold":10000000000,"num_replicas":0,'
    '"direct":true,"sourcing":true,"metadata":{"_nats.src.acc":"$G","_nats.src.stream":"S"}},'
    '"action":""}'
)
_HEAD = '"ack_policy":"none","ack_wait":79200000000000,"max_deliver":1,'
RECORDED = [
    (
        "$JS.API.CONSUMER.CREATE.O1.JS_SRC_kKUvlaDu.a.>",
        '{"stream_name":"O1","config":{"name":"JS_SRC_kKUvlaDu","deliver_policy":"all",'
        + _HEAD
        + '"filter_subject":"a.>",'
        + _TAIL,
    ),
    (
        "$JS.API.CONSUMER.CREATE.O2",
        '{"stream_name":"O2","config":{"name":"JS_SRC_5CpwjNw5","deliver_policy":"all",'
        + _HEAD
        + '"filter_subjects":["b.*","b.*.*"],'
        + _TAIL,
    ),
    (
        "$JS.API.CONSUMER.CREATE.O1.JS_SRC_2bu1B03t.a.b",
        '{"stream_name":"O1","config":{"name":"JS_SRC_2bu1B03t","deliver_policy":"by_start_time",'
        '"opt_start_time":"2024-01-01T00:00:00+02:00",' + _HEAD + '"filter_subject":"a.b",' + _TAIL,
    ),
    (
        "$JS.API.CONSUMER.CREATE.O2.JS_SRC_RSftTIRe.b.z",
        '{"stream_name":"O2","config":{"name":"JS_SRC_RSftTIRe",'
        '"deliver_policy":"by_start_sequence","opt_start_seq":5,'
        + _HEAD
        + '"filter_subject":"b.z",'
        + _TAIL,
    ),
]
# nats-server 2.15.1 asks for level 5; Brook's link asks for at most its own level, so that
# a Brook origin still checks the identity (sources._ASKED_LEVEL, ADR 0020): the one byte
# that differs from the recorded request.
HEADER = b"NATS/1.0\r\nNats-Required-Api-Level: %d\r\nNats-Stream-Identity: \r\n\r\n" % min(
    5, limits.JETSTREAM_API_LEVEL
)


def _shown(request: CreateRequest) -> tuple[str, str]:
    body = json.dumps(request.body, separators=(",", ":"))  # as the link sends it
    return request.subject, re.sub(r'\.S\.[0-9A-Za-z]{8}"', '.S.<id>"', body)


async def test_the_requests_of_four_sources_are_nats_server_s(tmp_path: Path) -> None:
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        js = server.jetstream

        def lookup(name: str) -> Any:
            stream = js.streams.get(name)
            return None if stream is None else stream.config

        for body in ({"name": "O1", "subjects": ["a.>"]}, {"name": "O2", "subjects": ["b.>"]}):
            js.create(parse_stream_config(body, streams=lookup))
        js.create(parse_stream_config({"name": "S", "sources": SOURCES}, streams=lookup))
        sourced = js.sourced("S")
        assert sourced is not None
        requests = []
        for link in sourced.links.values():
            assert isinstance(link.kind, Source)
            request = link.kind.create_request()
            assert request.header == HEADER
            requests.append(_shown(request))
        assert requests == RECORDED


async def test_an_external_source_s_request_is_nats_server_s(tmp_path: Path) -> None:
    """`external.api` replaces `$JS.API` in the subject, `external.deliver` prefixes the
    deliver subject (`<deliver>.S.<id>`)."""
    async with brook.serve(port=0, store_dir=str(tmp_path)) as server:
        js = server.jetstream
        external = {"api": "$JS.ext.API", "deliver": "dlv"}
        body = {
            "name": "S",
            "subjects": ["s.>"],
            "sources": [{"name": "O1", "filter_subject": "a.b", "external": external}],
        }
        js.create(parse_stream_config(body))
        sourced = js.sourced("S")
        assert sourced is not None
        (link,) = sourced.links.values()
        assert isinstance(link.kind, Source)
        request = link.kind.create_request()
        subject, shown = _shown(request)
        assert subject == "$JS.ext.API.CONSUMER.CREATE.O1.JS_SRC_N6lXlrSF.a.b"
        assert shown == (
            '{"stream_name":"O1","config":{"name":"JS_SRC_N6lXlrSF","deliver_policy":"all",'
            + _HEAD
            + '"filter_subject":"a.b",'
            + _TAIL.replace("$JS.S.<id>", "dlv.S.<id>")
        )
