"""Route `$JS.API.*` requests to handlers and write their JSON responses.

Every response is one plain message to the request's reply subject with a `type` and, on
failure, an `error` object from the catalogue (wire reference §2.1-§2.2). A request
without a reply subject is processed and not answered. Unknown subjects are not answered
at all (nats-server 2.15 behaves so, although older documents promise 10003). `DIRECT.GET`
and `CONSUMER.MSG.NEXT` are served by the stream and consumer objects themselves: the
dispatcher declines those, so with no such responder the requester gets the no-responders
status, as from nats-server. Malformed JSON or a handler bug becomes an
error response, never a crash; a write that found the disk full becomes 10023
(insufficient resources).

A request whose `Nats-Required-Api-Level` asks more than Brook's API level is refused with
10185 before anything else is looked at (versioning.py), as nats-server's handlers do; the
few that check something first (`checks_level=False`) call `require_api_level` themselves.

Each answer that counts in `api.total` (or `api.errors`) is also audited on
`$JS.EVENT.ADVISORY.API` when someone listens there (advisories.py): nats-server's
`sendAPIResponse` and `sendAPIErrResponse` do both.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from brook.jetstream import versioning
from brook.jetstream.advisories import Advisories
from brook.jetstream.errors import ApiError, api_error
from brook.jetstream.store.base import is_no_space
from brook.protocol.headers import raw_value
from brook.routing.imports import REQUEST_INFO, requester_info
from brook.routing.internal import InternalClient

log = logging.getLogger("brook.jetstream.api")

API_PREFIX = b"$JS.API."
TYPE_PREFIX = "io.nats.jetstream.api.v1."


@dataclass(slots=True)
class Request:
    """One API request. Not frozen (nobody mutates one): a frozen dataclass's `__init__`
    sets each field through `object.__setattr__`, and one is made per request."""

    tokens: list[str]  # the subject's tokens after `$JS.API.`
    body: bytes
    header: bytes | None
    reply: bytes | None = None
    # Who sent it, as an advisory names the requester (`ApiDispatcher._requester`).
    requester: Callable[[bytes | None, bytes | None], dict[str, Any]] | None = None

    def client_info(self) -> dict[str, Any] | None:
        """The requester's `ClientInfo` for an advisory (None: unknown)."""
        if self.requester is None:
            return None
        return self.requester(self.header, self.reply)

    def json(self, *, required: bool = False) -> dict[str, Any]:
        """The body as a JSON object; empty or `null` bodies are `{}` unless `required`."""
        text = self.body.strip()
        if not text or text in (b"null", b'""'):
            if required:
                raise api_error("BAD_REQUEST")
            return {}
        try:
            value = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise api_error("INVALID_JSON", err=str(exc)) from None
        if not isinstance(value, dict):
            raise api_error("INVALID_JSON", err=f"expected an object, not {type(value).__name__}")
        return value


@dataclass(frozen=True, slots=True)
class WithHeader:
    """A response body sent with a header block (nats-server's `sendAPIHdrResponse`: the
    create reply of a direct consumer carries `Nats-Stream-Identity`)."""

    body: dict[str, Any]
    header: bytes


# A handler's response body, or None to leave the request unanswered (as nats-server leaves
# those its consumers' own subscriptions would serve, when there is no such consumer).
Handler = Callable[[Request], dict[str, Any] | WithHeader | None]


# Which answers count in `api.total` (and `api.errors`): nats-server counts what goes out
# through its API layer; a message got is sent around it ("errors"), and its consumers
# serve resets themselves ("none").
Counts = Literal["all", "errors", "none"]


Owner = TypeVar("Owner")


@dataclass(frozen=True, slots=True)
class Endpoint(Generic[Owner]):
    """One endpoint as its API class declares it, in a table beside the class
    (`ENDPOINTS`): served by `handler` on an object of that class (`ApiDispatcher.serve`),
    and listed without any such object where no engine runs (`ApiDispatcher.refusing`:
    the 10039 answers of an account without JetStream, in each endpoint's shape)."""

    pattern: str  # after `$JS.API.`: literal tokens, "*" for one name, ">" for the rest
    response_type: str
    handler: Callable[[Owner, Request], dict[str, Any] | WithHeader | None]
    error_fields: Mapping[str, Any] = field(default_factory=dict)  # kept in error answers
    checks_level: bool = True  # False: the handler calls `require_api_level` itself
    counts: Counts = "all"


@dataclass(frozen=True, slots=True)
class Route:
    pattern: tuple[str, ...]  # literal tokens, "*" for one name, ">" for the rest
    response_type: str
    handler: Handler
    error_fields: dict[str, Any]  # keys nats-server keeps in error responses (no omitempty)
    checks_level: bool  # False: the handler calls `require_api_level` where nats-server does
    counts: Counts


def _match(pattern: tuple[str, ...], tokens: list[str]) -> bool:
    if pattern and pattern[-1] == ">":
        head = pattern[:-1]
        if len(tokens) <= len(head):
            return False
    elif len(tokens) != len(pattern):
        return False
    else:
        head = pattern
    return all(p == "*" or p == t for p, t in zip(head, tokens, strict=False))


def require_api_level(request: Request, api_level: int) -> None:
    """10185 when the request's `Nats-Required-Api-Level` asks more than `api_level`."""
    if versioning.refuses(request.header, api_level):
        raise api_error("REQUIRED_API_LEVEL")


class ApiDispatcher:
    def __init__(
        self,
        internal: InternalClient,
        *,
        api_level: int,
        advisories: Advisories | None = None,
        server_name: str = "",
        account: str = "",
    ) -> None:
        """`advisories` audits the answers (naming `server_name`, and `account` for a
        requester it cannot find); None: no audit."""
        self._internal = internal
        self.api_level = api_level
        self._advisories = advisories
        self._server_name = server_name
        self._account = account
        self._routes: list[Route] = []
        self.total = 0
        self.errors = 0

    def add(
        self,
        pattern: str,
        response_type: str,
        handler: Handler,
        error_fields: dict[str, Any] | None = None,
        *,
        checks_level: bool = True,
        counts: Counts = "all",
    ) -> None:
        fields = error_fields or {}
        route = Route(
            tuple(pattern.split(".")), response_type, handler, fields, checks_level, counts
        )
        self._routes.append(route)

    def serve(self, owner: Owner, endpoints: Iterable[Endpoint[Owner]]) -> None:
        """Route `endpoints` to their handlers on `owner`."""
        for endpoint in endpoints:
            self.add(
                endpoint.pattern,
                endpoint.response_type,
                functools.partial(endpoint.handler, owner),
                dict(endpoint.error_fields),
                checks_level=endpoint.checks_level,
                counts=endpoint.counts,
            )

    @classmethod
    def refusing(
        cls,
        internal: InternalClient,
        endpoints: Iterable[Endpoint[Any]],
        error: ApiError,
        extra_fields: Mapping[str, Mapping[str, Any]],
        *,
        api_level: int,
        advisories: Advisories | None = None,
        server_name: str = "",
        account: str = "",
    ) -> ApiDispatcher:
        """A dispatcher on `internal` answering each of `endpoints` with `error`, in its
        own response type with its error fields (and `extra_fields`, by pattern): how
        nats-server answers the API in an account without JetStream (10039)."""

        def refuse(request: Request) -> dict[str, Any]:
            raise error

        refusals = cls(
            internal,
            api_level=api_level,
            advisories=advisories,
            server_name=server_name,
            account=account,
        )
        for endpoint in endpoints:
            fields = {**endpoint.error_fields, **extra_fields.get(endpoint.pattern, {})}
            refusals.add(
                endpoint.pattern,
                endpoint.response_type,
                refuse,
                fields,
                checks_level=False,
                counts=endpoint.counts,
            )
        return refusals

    def start(self) -> None:
        self._internal.subscribe(b"$JS.API.>", self._on_request)

    def _on_request(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> bool | None:
        tokens = subject[len(API_PREFIX) :].decode("utf-8", "surrogateescape").split(".")
        if tokens[:2] == ["DIRECT", "GET"] or tokens[:3] == ["CONSUMER", "MSG", "NEXT"]:
            return False  # served by streams and consumers themselves
        route = next((r for r in self._routes if _match(r.pattern, tokens)), None)
        if route is None:
            log.debug("no JetStream API endpoint for %s; not answered", ".".join(tokens))
            return None
        response_type = TYPE_PREFIX + route.response_type
        reply_header: bytes | None = None
        failed = True
        try:
            request = Request(tokens, payload, header, reply, self._requester)
            if route.checks_level:
                require_api_level(request, self.api_level)
            answer = route.handler(request)
            if answer is None:
                return None
            if isinstance(answer, WithHeader):
                reply_header = answer.header
                answer = answer.body
            response: dict[str, Any] = {"type": response_type, **answer}
            failed = False
        except ApiError as err:
            response = {"type": response_type, "error": err.to_json(), **route.error_fields}
        except Exception as exc:
            if is_no_space(exc):  # a full disk: nats-server's answer, no stack trace
                log.warning("API %s: %s", ".".join(tokens), exc)
                failure = api_error("INSUFFICIENT_RESOURCES")
            else:
                log.exception("API handler for %s failed", ".".join(tokens))
                failure = api_error("INTERNAL_ERROR")
            response = {"type": response_type, "error": failure.to_json(), **route.error_fields}
        # After the response is built: as nats-server, INFO excludes itself.
        counted = route.counts == "all" or (failed and route.counts == "errors")
        if counted:
            self.total += 1
            self.errors += failed
        data: bytes | None = None
        if reply is not None:
            data = json.dumps(response, separators=(",", ":")).encode()
            self._internal.publish(reply, data, reply_header)
        advisories = self._advisories
        if counted and advisories is not None and advisories.audits():
            if data is None:
                data = json.dumps(response, separators=(",", ":")).encode()
            advisories.api_audit(
                server=self._server_name,
                client=self._requester(header, reply),
                subject=subject.decode("utf-8", "surrogateescape"),
                request=payload,
                response=data,
            )
        return None

    def _requester(self, header: bytes | None, reply: bytes | None) -> dict[str, Any]:
        """Who sent the request, as nats-server's audit names it (`ClientInfo.forAdvisory`:
        no JWT): a service import's `Nats-Request-Info`, else the client awaiting the
        reply (`requester_info`)."""
        info: dict[str, Any] | None = None
        raw = raw_value(header, REQUEST_INFO.encode()) if header is not None else None
        if raw is not None:
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                info = parsed
        if info is None:
            info = requester_info(self._internal.router, reply, self._account, True)
        info.pop("jwt", None)
        info.pop("alts", None)
        return info
