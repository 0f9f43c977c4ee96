"""JetStream's lifecycle and audit advisories, as nats-server 2.15 publishes them.

nats-server announces, in the account of the stream or of the API request:

* `$JS.EVENT.ADVISORY.STREAM.{CREATED,UPDATED,DELETED}.<stream>`: a `stream_action`
  (`create`, `modify`, `delete`), from `stream.go`'s `sendCreateAdvisory`,
  `sendUpdateAdvisoryLocked` and `sendDeleteAdvisoryLocked`;
* `$JS.EVENT.ADVISORY.CONSUMER.{CREATED,DELETED}.<stream>.<consumer>`: a
  `consumer_action` (`create`, `delete`; an update announces nothing), from `consumer.go`;
* `$JS.EVENT.ADVISORY.STREAM.{SNAPSHOT,RESTORE}_{CREATE,COMPLETE}.<stream>`: a
  snapshot's and a restore's start and end, naming the requester (`jetstream_api.go`);
* `$JS.EVENT.ADVISORY.API`: an `api_audit` of each API answer that goes through its API
  layer (`sendAPIResponse`, `sendAPIErrResponse`: the requests `$JS.API` counts in
  `api.total`), naming the server, the requester (`ClientInfo.forAdvisory`: no JWT), the
  subject, the request body (left out when empty) and the response as sent.

Each is built only when someone in the account listens on its subject (nats-server's
`publishAdvisory` checks interest first), so an API request or a consumer made with nobody
listening costs one subscription lookup more. The JSON is Go's: its key order, compact, its
HTML-safe escapes, `domain` only where JetStream has one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from brook.config.settings_auth import GLOBAL_ACCOUNT
from brook.jetstream.models.info import format_ts_ns
from brook.nuid import random_id
from brook.routing.internal import InternalClient

STREAM_PREFIX = "$JS.EVENT.ADVISORY.STREAM"
CONSUMER_PREFIX = "$JS.EVENT.ADVISORY.CONSUMER"
API_AUDIT_SUBJECT = b"$JS.EVENT.ADVISORY.API"

STREAM_ACTION_TYPE = "io.nats.jetstream.advisory.v1.stream_action"
SNAPSHOT_CREATE_TYPE = "io.nats.jetstream.advisory.v1.snapshot_create"
SNAPSHOT_COMPLETE_TYPE = "io.nats.jetstream.advisory.v1.snapshot_complete"
RESTORE_CREATE_TYPE = "io.nats.jetstream.advisory.v1.restore_create"
RESTORE_COMPLETE_TYPE = "io.nats.jetstream.advisory.v1.restore_complete"
CONSUMER_ACTION_TYPE = "io.nats.jetstream.advisory.v1.consumer_action"
API_AUDIT_TYPE = "io.nats.jetstream.advisory.v1.api_audit"

# nats-server's `ActionAdvisoryType`s, and the last token of each action's subject.
CREATE, MODIFY, DELETE = "create", "modify", "delete"
_STREAM_SUBJECT_TOKEN = {CREATE: "CREATED", MODIFY: "UPDATED", DELETE: "DELETED"}

# Where Go's structs put `domain` when an event has one of these fields (the pinned and
# unpinned advisories: before `group`); otherwise it is their last field.
_DOMAIN_BEFORE = ("group", "batch", "error")

# What Go's encoding/json escapes beyond what Python's does (its HTML-safe default).
GO_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def go_json(value: Any) -> bytes:
    """`value` as Go's `json.Marshal` writes it: compact, UTF-8, HTML-safe escapes."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":")).translate(GO_ESCAPES)
    return text.encode("utf-8", "surrogateescape")


class Advisories:
    """Publishes one account's JetStream advisories through `internal` (its engine's or
    API's in-process client), each only when its subject has interest."""

    def __init__(
        self,
        internal: InternalClient,
        *,
        account: str = GLOBAL_ACCOUNT,
        domain: str = "",
        now_ns: Callable[[], int],
    ) -> None:
        self._internal = internal
        self._router = internal.router
        self.account = account  # the account's name, where an advisory names it
        self.domain = domain
        self._now_ns = now_ns

    def now_ns(self) -> int:
        """The time an advisory names (the engine's clock)."""
        return self._now_ns()

    def _event(self, event_type: str) -> dict[str, Any]:
        """`TypedEvent`'s fields, first in every advisory."""
        return {"type": event_type, "id": random_id(), "timestamp": format_ts_ns(self._now_ns())}

    def _send(self, subject: bytes, body: dict[str, Any]) -> None:
        if self.domain:
            body["domain"] = self.domain
        self._internal.publish(subject, go_json(body))

    def event(self, subject: str, payload: dict[str, Any]) -> None:
        """Another advisory or metric (a consumer's: actions.py), `payload` its `type`
        and fields in Go's order: sent with its id, time and domain, if anyone listens.
        An `account` of None is this account's name (a consumer does not know its
        account; nats-server's pinned and unpinned advisories name it)."""
        subj = subject.encode("utf-8", "surrogateescape")
        if not self._router.has_interest(subj):
            return
        body = self._event(payload["type"])
        domain = self.domain
        for key, value in payload.items():
            if domain and key in _DOMAIN_BEFORE:
                body["domain"] = domain
                domain = ""
            if value is None and key == "account":
                value = self.account
            body[key] = value
        if domain:
            body["domain"] = domain
        self._internal.publish(subj, go_json(body))

    def stream_action(self, stream: str, action: str) -> None:
        """`JSStreamActionAdvisory`: `stream` was created, updated or deleted."""
        subject = f"{STREAM_PREFIX}.{_STREAM_SUBJECT_TOKEN[action]}.{stream}".encode()
        if not self._router.has_interest(subject):
            return
        body = self._event(STREAM_ACTION_TYPE)
        body["stream"] = stream
        body["action"] = action
        self._send(subject, body)

    def snapshot_created(
        self, stream: str, state: dict[str, Any], client: dict[str, Any] | None
    ) -> None:
        """`JSSnapshotCreateAdvisory`: a snapshot's chunks start (`state`: the stream's at
        the snapshot, as its response has it)."""
        payload: dict[str, Any] = {"type": SNAPSHOT_CREATE_TYPE, "stream": stream}
        payload |= {"state": state, "client": client}
        self.event(f"{STREAM_PREFIX}.SNAPSHOT_CREATE.{stream}", payload)

    def snapshot_completed(
        self, stream: str, start_ns: int, client: dict[str, Any] | None, error: str
    ) -> None:
        """`JSSnapshotCompleteAdvisory`: its chunks ended (`error`: why not all went)."""
        payload: dict[str, Any] = {"type": SNAPSHOT_COMPLETE_TYPE, "stream": stream}
        payload |= {"start": format_ts_ns(start_ns), "end": format_ts_ns(self._now_ns())}
        payload["client"] = client
        if error:
            payload["error"] = error
        self.event(f"{STREAM_PREFIX}.SNAPSHOT_COMPLETE.{stream}", payload)

    def restore_created(self, stream: str, client: dict[str, Any] | None) -> None:
        """`JSRestoreCreateAdvisory`: a restore's upload may start."""
        payload: dict[str, Any] = {"type": RESTORE_CREATE_TYPE, "stream": stream}
        payload["client"] = client
        self.event(f"{STREAM_PREFIX}.RESTORE_CREATE.{stream}", payload)

    def restore_completed(
        self, stream: str, start_ns: int, nbytes: int, client: dict[str, Any] | None
    ) -> None:
        """`JSRestoreCompleteAdvisory`: a restore's final answer (`nbytes` uploaded)."""
        payload: dict[str, Any] = {"type": RESTORE_COMPLETE_TYPE, "stream": stream}
        payload |= {"start": format_ts_ns(start_ns), "end": format_ts_ns(self._now_ns())}
        payload |= {"bytes": nbytes, "client": client}
        self.event(f"{STREAM_PREFIX}.RESTORE_COMPLETE.{stream}", payload)

    def consumer_action(self, stream: str, consumer: str, action: str) -> None:
        """`JSConsumerActionAdvisory`: a consumer was created or deleted."""
        token = "CREATED" if action == CREATE else "DELETED"
        subject = f"{CONSUMER_PREFIX}.{token}.{stream}.{consumer}".encode()
        if not self._router.has_interest(subject):
            return
        body = self._event(CONSUMER_ACTION_TYPE)
        body["stream"] = stream
        body["consumer"] = consumer
        body["action"] = action
        self._send(subject, body)

    def audits(self) -> bool:
        """Whether an API audit would reach anyone now (asked before it is built)."""
        return self._router.has_interest(API_AUDIT_SUBJECT)

    def api_audit(
        self,
        *,
        server: str,
        client: dict[str, Any] | None,
        subject: str,
        request: bytes,
        response: bytes,
    ) -> None:
        """`JSAPIAudit` of one answered request (the caller asked `audits` first)."""
        body = self._event(API_AUDIT_TYPE)
        body["server"] = server
        body["client"] = client
        body["subject"] = subject
        # Go's strings: invalid UTF-8 is written as U+FFFD.
        if request:
            body["request"] = request.decode("utf-8", "replace")
        body["response"] = response.decode("utf-8", "replace")
        self._send(API_AUDIT_SUBJECT, body)
