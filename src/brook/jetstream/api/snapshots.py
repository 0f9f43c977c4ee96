"""STREAM.SNAPSHOT and STREAM.RESTORE: requests checked in nats-server's order, then handed to
the sessions of jetstream/snapshot/ (the chunk flows and the archive live there).

SNAPSHOT: an empty request is 10003 (before the stream is looked up), then 10059, invalid
JSON or an unknown field 10025, a deliver subject that is not a valid publish subject 10015.
The response carries the stream's stored `config` and its `state` at the moment of the
snapshot; the chunks follow on the deliver subject.

RESTORE: an empty request is 10003, invalid JSON 10025, a `config.name` other than the
subject's 10056 (a missing one is taken from the subject), then the configuration's own
checks, then 10130 if the stream exists. The response carries the `deliver_subject` to send
chunks to (`""` in error responses, as nats-server's); the final answer goes to the reply
subject of the empty message that ends the upload.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from brook import subjects
from brook.config.settings import JetStreamSettings
from brook.jetstream import models
from brook.jetstream.api.dispatch import ApiDispatcher, Endpoint, Request
from brook.jetstream.engine import JetStream
from brook.jetstream.errors import api_error
from brook.jetstream.fields import get_field, invalid_json
from brook.jetstream.snapshot.archive import freeze
from brook.jetstream.snapshot.restore import RestoreSession
from brook.jetstream.snapshot.sender import SnapshotSender
from brook.jetstream.snapshot.transfers import Transfers
from brook.jetstream.store.base import StoreError
from brook.jetstream.stream import Stream

_SNAPSHOT_FIELDS = {"deliver_subject", "no_consumers", "chunk_size", "window_size", "jsck"}
_RESTORE_FIELDS = {"config", "state"}


def _is_empty(body: bytes) -> bool:
    """nats-server's `isEmptyRequest`: nothing, or a JSON object without keys."""
    text = body.strip()
    if not text:
        return True
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(value, dict) and not value


def _strict(request: Request, known: set[str]) -> dict[str, Any]:
    """The body as nats-server's strict decoder reads it: unknown fields are 10025."""
    body = request.json()
    for key in body:
        if key not in known:
            raise invalid_json(f'json: unknown field "{key}"')
    return body


class SnapshotApi:
    def __init__(
        self,
        js: JetStream,
        transfers: Transfers,
        *,
        api_level: int,
    ) -> None:
        self.js = js
        self.transfers = transfers
        self.api_level = api_level

    def register(self, api: ApiDispatcher) -> None:
        api.serve(self, ENDPOINTS)

    def snapshot(self, request: Request) -> dict[str, Any]:
        if _is_empty(request.body):
            raise api_error("BAD_REQUEST")
        stream = self.js.get(request.tokens[2])
        body = _strict(request, _SNAPSHOT_FIELDS)
        deliver = get_field(body, "deliver_subject", str, "", invalid_json)
        chunk_size = get_field(body, "chunk_size", int, 0, invalid_json)
        window_size = get_field(body, "window_size", int, 0, invalid_json)
        no_consumers = get_field(body, "no_consumers", bool, False, invalid_json)
        get_field(body, "jsck", bool, False, invalid_json)  # every read checks CRCs anyway
        if not deliver or not subjects.is_valid_literal_subject(deliver.encode()):
            raise api_error("SNAPSHOT_DELIVER_SUBJECT_INVALID")
        runners = list(self.js.consumers.public(stream.name).values())
        try:
            image = freeze(stream, runners, include_consumers=not no_consumers)
        except (OSError, StoreError) as exc:  # descriptors exhausted, say
            raise api_error("STREAM_SNAPSHOT", err=str(exc)) from None
        state = models.stream_state_to_json(stream.store.state(), stream.consumer_count)
        # nats-server announces the snapshot's start and end (after this response).
        advisories, name, client = self.js.advisories, stream.name, request.client_info()
        start_ns = advisories.now_ns()
        sender = SnapshotSender(
            self.transfers,
            image,
            deliver,
            chunk_size=chunk_size,
            window_size=window_size,
            on_start=lambda: advisories.snapshot_created(name, state, client),
            on_end=lambda error: advisories.snapshot_completed(name, start_ns, client, error),
        )
        self.transfers.spawn(sender.run())  # starts after this response is sent
        return {
            "config": models.stream_config_to_json(stream.config, api_level=self.api_level),
            "state": state,
        }

    def restore(self, request: Request) -> dict[str, Any]:
        if _is_empty(request.body):
            raise api_error("BAD_REQUEST")
        body = _strict(request, _RESTORE_FIELDS)
        raw = get_field(body, "config", dict, {}, invalid_json)
        name = request.tokens[2]
        if not raw.get("name"):
            raw = {**raw, "name": name}
        if raw["name"] != name:
            raise api_error("STREAM_MISMATCH")
        config = models.parse_stream_update(raw, subject_name=name)  # a sealed one too
        if name in self.js.streams:
            raise api_error("STREAM_NAME_EXIST_RESTORE_FAILED")
        client = request.client_info()
        session = RestoreSession(self.transfers, config, client)
        session.start()
        return {"deliver_subject": session.deliver_subject}


ENDPOINTS: tuple[Endpoint[SnapshotApi], ...] = (
    Endpoint("STREAM.SNAPSHOT.*", "stream_snapshot_response", SnapshotApi.snapshot),
    Endpoint(
        "STREAM.RESTORE.*",
        "stream_restore_response",
        SnapshotApi.restore,
        {"deliver_subject": ""},
    ),
)
"""The snapshot and restore endpoints, as `SnapshotApi` serves them."""


def register(
    api: ApiDispatcher,
    js: JetStream,
    settings: JetStreamSettings,
    stream_info: Callable[[Stream], dict[str, Any]],
    *,
    api_level: int,
) -> Transfers:
    """Serve STREAM.SNAPSHOT and STREAM.RESTORE; the returned `Transfers` is stopped with
    the server."""
    transfers = Transfers(
        js,
        stream_info,
        restore_max_bytes=settings.restore_max_bytes,
        restore_idle_timeout_s=settings.restore_idle_timeout_s,
    )
    transfers.start()
    SnapshotApi(js, transfers, api_level=api_level).register(api)
    return transfers
