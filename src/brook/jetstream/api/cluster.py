"""Endpoints that only a JetStream cluster can serve: a single server refuses them.

nats-server answers each of these, on a server that is not clustered, with 10010
("JetStream clustering support required") before looking at the request or the stream
(or its required API level), in the response type of the endpoint. Brook is always a
single server, so it gives the same answer (checked against nats-server by
tests/conformance/test_api_subjects_conformance.py).

The meta-level endpoints (`META.LEADER.STEPDOWN`, `SERVER.REMOVE`, `SERVER.EVACUATE`,
`META.RESCUE`, `ACCOUNT.PURGE.*`, `ACCOUNT.STREAM.MOVE.*.*`,
`ACCOUNT.STREAM.CANCEL_MOVE.*.*`) are answered by nats-server only to the system account;
a client of the global account, which is every Brook client, gets no reply from it at all,
and none from Brook.
"""

from __future__ import annotations

from typing import Any

from brook.jetstream.api.dispatch import Endpoint, Request
from brook.jetstream.errors import api_error


def _cluster_required(_: object, request: Request) -> dict[str, Any]:
    raise api_error("CLUSTER_REQUIRED")


ENDPOINTS: tuple[Endpoint[object], ...] = tuple(
    Endpoint(pattern, response_type, _cluster_required, checks_level=False)
    for pattern, response_type in (
        ("STREAM.PEER.REMOVE.*", "stream_remove_peer_response"),
        ("STREAM.PEER.EVACUATE.*", "stream_evacuate_peer_response"),
        ("STREAM.CANCEL_MOVE.*", "stream_cancel_move_response"),
        ("STREAM.LEADER.STEPDOWN.*", "stream_leader_stepdown_response"),
        ("CONSUMER.LEADER.STEPDOWN.*.*", "consumer_leader_stepdown_response"),
    )
)
"""The endpoints only a cluster serves, as nats-server 2.15 names their responses; they
need no engine, so nothing owns them (`ApiDispatcher.serve(None, ENDPOINTS)`)."""
