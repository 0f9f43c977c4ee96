"""Stream and service imports: the only ways a message crosses from one account into another.

Each account routes its own subjects (its own `Router`); nothing published in one account
reaches a subscriber of another, except through what this module builds from the
accounts' `exports` and `imports` (nats-server's accounts.go, ADR 0030):

* A stream import (`{stream: {account: A, subject: "x.>"}, prefix: p}` in B) is an
  in-process subscription in A's router on the imported subject: each message published
  in A there is published again in B's router under the import's subject (`p.x.…`, or
  the `to` mapping), reply and header unchanged. A message no subscriber of B takes is
  declined, so that it does not count as delivered in A (nats-server subscribes in A only
  for B's interest, with the same effect).
* A service import (`{service: {account: A, subject: "svc"}, to: "local.svc"}` in B) is an
  in-process subscription in B's router on the local subject, which publishes each request
  into A's router under the exported subject, after A's subject mappings (nats-server's
  `processServiceImport`), with a `Nats-Request-Info` header naming B. A request's reply
  subject is B's, meaningless in A: it is replaced by a reply of A's own,
  `_R_.<6 characters of A>.<6 random characters>` as nats-server makes them, and A's
  `Responses` route what is published there back to the original reply in B. A singleton
  export's reply routes one response; a streamed or chunked one's routes responses until
  an empty message or until none came for the export's response threshold (2 minutes by
  default). A request that reaches no responder in A is not delivered, so a requester
  with `no_responders` hears a 503, as from nats-server.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from brook import limits
from brook.routing.internal import InternalClient
from brook.routing.mappings import SubjectMappings
from brook.routing.router import Router
from brook.routing.transform import SubjectTransform, tokenized
from brook.subjects import has_wildcard

# nats-server's response types of a service export.
SINGLETON = "singleton"
STREAMED = "stream"
CHUNKED = "chunked"

_DIGITS = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_REPLY_PREFIX = b"_R_."
_JS_ACK_PREFIX = b"$JS.ACK."
REQUEST_INFO = "Nats-Request-Info"


def _random_token(rng: random.Random, length: int) -> bytes:
    return bytes(_DIGITS[rng.randrange(62)] for _ in range(length))


def _with_request_info(header: bytes | None, info: bytes) -> bytes:
    """The header block with nats-server's `Nats-Request-Info` (`info`, its JSON)."""
    line = b"%s: %s\r\n" % (REQUEST_INFO.encode(), info)
    if header is None:
        return b"NATS/1.0\r\n" + line + b"\r\n"
    return header[:-2] + line + b"\r\n"


@runtime_checkable
class Requester(Protocol):
    """A client that can say who it is in a request's `Nats-Request-Info` (the server's
    connections)."""

    def request_info(self, shared: bool) -> dict[str, Any]: ...


def requester_info(
    router: Router, reply: bytes | None, account: str, shared: bool
) -> dict[str, Any]:
    """nats-server's `ClientInfo` of the requester (`getClientInfo`): its account and
    round-trip time, and with `shared` (an import's `share`) who it is too, as the
    requester gives them; else (nobody to ask) the account alone. nats-server knows the
    publishing client; Brook's router does not tell a subscriber who published (ADR 0029),
    so the one client awaiting replies on `reply` stands in. (The JetStream API's audit
    advisory names the requester so too.)"""
    if reply is not None:
        result = router.sublist.match(reply)
        clients = {s.client for s in result.plain}
        clients.update(m.client for members in result.queues for m in members)
        if len(clients) == 1:
            client = next(iter(clients))
            if isinstance(client, Requester):
                return client.request_info(shared)
    return {"acc": account}


def _request_info(router: Router, reply: bytes | None, account: str, shared: bool) -> bytes:
    """`requester_info` as a `Nats-Request-Info` header carries it (JSON)."""
    info = requester_info(router, reply, account, shared)
    return json.dumps(info, separators=(",", ":")).encode()


class _Hops:
    """How many crossings the message being routed has made: routing is synchronous on
    the event loop, one message at a time, so a count around each crossing is the
    message's. A chain of imports nats-server's cycle checks let through (none is known)
    stops at `IMPORT_HOPS_MAX` rather than recursing."""

    depth = 0


def _cross(
    client: InternalClient, to: bytes, payload: bytes, header: bytes | None, reply: bytes | None
) -> bool:
    """Publish into the other account (`client`'s router); True when some subscriber
    took the message."""
    if _Hops.depth >= limits.IMPORT_HOPS_MAX:
        return False
    _Hops.depth += 1
    try:
        return client.router.publish(client, to, reply, header, payload) > 0
    finally:
        _Hops.depth -= 1


def _import_transform(src: bytes, dest: bytes) -> SubjectTransform | None:
    """How an import renames a subject with wildcards (nats-server's strict transform of
    `src` to `dest`'s `$N` form); None when the name is kept or the subject is literal."""
    if src == dest or not has_wildcard(src):
        return None
    return SubjectTransform.compile(src, tokenized(dest), strict=True)


class StreamImport:
    """Messages of the exporting account on `subject`, into the importing account under
    `to` (the prefixed subject, or the import's `to`)."""

    __slots__ = ("_in", "_literal", "_out", "_transform")

    def __init__(self, exporter: Router, importer: Router, subject: bytes, to: bytes) -> None:
        self._transform = _import_transform(subject, to)
        self._literal = to if not has_wildcard(subject) else None
        self._out = InternalClient(importer, "stream import")
        self._in = InternalClient(exporter, "stream import")
        self._in.subscribe(subject, self._forward)

    def _forward(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> bool:
        if self._literal is not None:
            to: bytes | None = self._literal
        elif self._transform is not None:
            to = self._transform.match(subject)
        else:
            to = subject
        if to is None:
            return False
        return _cross(self._out, to, payload, header, reply)

    def close(self) -> None:
        self._in.close()
        self._out.close()


@dataclass(slots=True)
class _Pending:
    """A reply of the exporting account's awaiting responses."""

    target: InternalClient  # publishes in the requester's account
    reply: bytes  # the request's reply subject there
    response_type: str
    threshold_s: float
    stamp: float  # the request or the last response routed


class Responses:
    """One exporting account's replies to requests that came through its service exports:
    `_R_.<prefix>.<token>` back to the requester's account and reply subject."""

    def __init__(
        self,
        router: Router,
        *,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_pending: int = limits.SERVICE_RESPONSES_MAX,
    ) -> None:
        self._rng = rng or random.Random()
        self._clock = clock
        self._max_pending = max_pending
        self.prefix = _REPLY_PREFIX + _random_token(self._rng, 6) + b"."
        self._client = InternalClient(router, "service responses")
        self._subscribed = False
        self._pending: dict[bytes, _Pending] = {}
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._pending)

    def register(
        self, target: InternalClient, reply: bytes, response_type: str, threshold_s: float
    ) -> bytes:
        """A reply of this account's for `reply` in the account `target` publishes in. Past
        `max_pending` the oldest is forgotten."""
        if not self._subscribed:  # as nats-server, at the first request
            self._client.subscribe(self.prefix + b">", self._respond)
            self._subscribed = True
        if len(self._pending) >= self._max_pending:
            del self._pending[next(iter(self._pending))]
        token = self.prefix + _random_token(self._rng, 6)
        self._pending[token] = _Pending(target, reply, response_type, threshold_s, self._clock())
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(threshold_s, self.expire)
        return token

    def forget(self, token: bytes) -> None:
        self._pending.pop(token, None)

    def _respond(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> bool:
        """A response: to the requester, once for a singleton; a stream or chunks until an
        empty message. A response's own reply does not cross (nats-server would map it
        back too; no client relies on it)."""
        pending = self._pending.get(subject)
        if pending is None:
            return False
        delivered = _cross(pending.target, pending.reply, payload, header, None)
        if not delivered or pending.response_type == SINGLETON or (not payload and header is None):
            del self._pending[subject]
        else:
            pending.stamp = self._clock()
        return delivered

    def expire(self) -> None:
        """Forget the replies that waited past their export's threshold; re-arm for the
        rest (nats-server's `checkExpiredResponses`)."""
        self._timer = None
        now = self._clock()
        expired = [t for t, p in self._pending.items() if p.stamp + p.threshold_s <= now]
        for token in expired:
            del self._pending[token]
        if self._pending:
            due = min(p.stamp + p.threshold_s for p in self._pending.values())
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(max(due - now, 0.001), self.expire)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._pending.clear()
        self._client.close()


class ServiceImport:
    """Requests of the importing account on `local`, into the exporting account under
    `remote` (after its mappings), their replies through the exporter's `Responses`."""

    __slots__ = (
        "_account",
        "_in",
        "_mappings",
        "_out",
        "_remote",
        "_response_type",
        "_responses",
        "_share",
        "_threshold_s",
        "_transform",
        "_use_published",
    )

    def __init__(
        self,
        importer: Router,
        account: str,
        local: bytes,
        exporter: Router,
        remote: bytes,
        responses: Responses,
        *,
        mappings: SubjectMappings | None = None,
        response_type: str = SINGLETON,
        threshold_s: float = limits.SERVICE_RESPONSE_THRESHOLD_S,
        share: bool = False,
    ) -> None:
        self._account = account
        self._share = share  # the import's `share`: who the requester is, in its info
        self._remote = remote
        self._use_published = has_wildcard(remote) and remote == local
        # nats-server builds the local-to-remote transform in reverse; same result.
        self._transform = _import_transform(local, remote) if not self._use_published else None
        self._responses = responses
        self._mappings = mappings
        self._response_type = response_type
        self._threshold_s = threshold_s
        self._out = InternalClient(exporter, "service import")
        self._in = InternalClient(importer, "service import")
        self._in.subscribe(local, self._forward)

    def _forward(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> bool:
        if self._transform is not None:
            to = self._transform.match(subject)
            if to is None:
                return False
        else:
            to = subject if self._use_published else self._remote
        if self._mappings is not None:
            mapped = self._mappings.select(to)
            to = to if mapped is None else mapped
        token = None
        if reply is not None and not reply.startswith(_JS_ACK_PREFIX):
            token = self._responses.register(
                self._in, reply, self._response_type, self._threshold_s
            )
        info = _request_info(self._in.router, reply, self._account, self._share)
        header = _with_request_info(header, info)
        delivered = _cross(self._out, to, payload, header, token or reply)
        if not delivered and token is not None:
            self._responses.forget(token)
        return delivered

    def close(self) -> None:
        self._in.close()
        self._out.close()
