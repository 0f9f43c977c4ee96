"""The link from a mirror or a source to its origin (ADR 0020), generic over the two.

A link is a client of the origin's JetStream API, through the engine's in-process client
(`routing/internal.py`), exactly as nats-server's `setupMirrorConsumer` and
`setupSourceConsumer` are: it publishes the consumer-create request its kind builds (the
same subject, header and JSON, `external.api` already applied) with a reply subject
`$JSC.R.<id>`, and once the origin answers it subscribes to the consumer's deliver
subject. Locally the request reaches Brook's own API; across a leafnode it will reach a
remote server with no change here. The requests it sends are built by
`link_requests.py`, the deliveries read into what its kind takes by `link_runs.py`.

What it does with the deliveries is its kind's (`LinkKind`: the mirror's or a source's
tracking and ingest); the link handles the rest as nats-server does:

* deliveries are queued and taken a slice per loop turn (`_BATCH`), in order with the
  control messages; the deliveries between two control messages go to the kind as one
  run (its store writes them in one piece); from an origin in this process that alone
  listens on the deliver subject they come as the origin consumer's runs
  (`DeliverRun`, `Router.deliver_object`), whose numbers are read from the run rather
  than from each ack subject: what the kind gets is the same;
* control messages: a flow-control request is answered with the last delivery and origin
  sequences once what was stored before it is durable (the stream's group commit), so
  the origin never runs further ahead than its flow-control window of what is on disk; an
  idle heartbeat whose `Nats-Last-Consumer` is not the last delivery seen means a
  delivery was lost: the consumer is recreated; one naming a stalled flow-control request
  (`Nats-Consumer-Stalled`) gets that request answered;
* a consumer that delivered nothing (not even a heartbeat) for `HEALTH_CHECK_NS` is
  stalled: recreated;
* a create that failed or got no reply within `CREATE_WAIT_NS` is retried after
  `retry_backoff_ns` (nats-server's `calculateRetryBackoff`) plus jitter, and never sooner
  than `RETRY_THRESHOLD_NS` after the previous request;
* a reset of a consumer created beforehand (`consumer`) that nobody answers (it does not
  exist yet) is retried after the backoff too, or at once when the consumer is heard of
  on its deliver subject meanwhile (`_probe`, nats-server's probe subscription);
* each (re)creation asks its kind for the request anew, so that it starts after what the
  stream has stored (a mirror: its last sequence + 1);
* an origin that refuses a sourcing consumer as too new is asked again without it
  (`without_sourcing`); any other refusal the kind may answer by changing its request
  and asking again at once (`LinkKind.refused`: a source whose origin was recreated).

The origin's old consumer is not deleted on a retry: as in nats-server it goes away after
its inactive threshold (10 s); deliveries from it are ignored (`Tracking.consumer`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from brook.jetstream.consumer.actions import DeliverRun
from brook.jetstream.errors import ApiError, api_error
from brook.jetstream.link_requests import (
    HEALTH_CHECK_NS,
    CreateRequest,
    sync_subject,
    without_sourcing,
)
from brook.jetstream.link_runs import Delivered, origin_header, read_ack_reply, split_run, take_run
from brook.jetstream.models.sources import StreamSource
from brook.jetstream.sourcing import Tracking
from brook.protocol import headers as hdrs
from brook.routing.internal import InternalClient
from brook.routing.sublist import Subscription

log = logging.getLogger("brook.link")

RETRY_THRESHOLD_NS = 2_000_000_000  # never two create requests closer than this
CREATE_WAIT_NS = 30_000_000_000  # how long a create request waits for its reply
RESET_WAIT_NS = 5_000_000_000  # a pre-created consumer's reset (srcDurableConsumerWaitTime)
_RETRY_BASE_NS = 5_000_000_000
_RETRY_MAX_NS = 120_000_000_000
_JITTER_NS = 100_000_000
# Deliveries taken per turn of the event loop: the origin's consumer hands over its whole
# flow-control window at once, which the link works through a slice at a time so that
# other clients are served meanwhile (nats-server's ipQueue and its goroutine). The queue
# holds at most that window: the link answers a flow-control request only once it took
# (and synced) what came before it.
_BATCH = 256
_LAST_CONSUMER = b"Nats-Last-Consumer"
_STALLED = b"Nats-Consumer-Stalled"


def retry_backoff_ns(fails: int) -> int:
    """nats-server's `calculateRetryBackoff`: 10 s per failure so far, at most 2 min."""
    return min(_RETRY_BASE_NS * fails * 2, _RETRY_MAX_NS)


class LinkKind(Protocol):
    """What differs between a mirror and a source."""

    # The catalogue name of its setup failures (10029 for a mirror, 10045 for a source),
    # and of a pre-created consumer that is not acked by flow control (10214, 10217).
    setup_error: str
    requires_ack_fc: str
    source: StreamSource  # the mirror or source: its origin's name and the rest

    def create_request(self) -> CreateRequest:
        """The request for a new consumer, starting after what is stored now."""
        ...

    def refused(self, err_code: int) -> bool:
        """The origin refused the consumer with `err_code`; True: ask again at once
        (the kind changed its request), False: after the backoff."""
        ...

    def created(self, info: dict[str, Any], tracking: Tracking, header: bytes | None) -> None:
        """The origin created the consumer (`info`: its ConsumerInfo, `header`: its
        reply's); set `tracking`'s sequences to where the deliveries start. Raises
        `StoreError` to retry."""
        ...

    def delivered(self, tracking: Tracking, run: list[Delivered]) -> bool:
        """A run of deliveries, in order (at least one); False: recreate the consumer
        (the run's deliveries after the one that asked for it are dropped)."""
        ...

    def delivered_run(self, tracking: Tracking, run: DeliverRun) -> bool | None:
        """The same for the current consumer's first deliveries as its executor in this
        process made them (`Router.deliver_object`), at least one, the run's headers as
        the origin stored them: True or False as `delivered`, or None, having changed
        nothing, when the kind takes them only in `delivered`'s form (`take_run`)."""
        ...

    def when_durable(self, callback: Callable[[BaseException | None], None]) -> None:
        """`callback` once what was stored so far is durable."""
        ...

    def delete_subject(self) -> str | None:
        """Where to delete the origin consumer the link asked for last, when the mirror
        or source goes: a durable one stays on an interest or workqueue origin (ADR-60);
        None for a consumer created beforehand (`consumer`), which is the user's."""
        ...


class OriginLink:
    """One mirror's or source's consumer on its origin, kept alive (module docstring)."""

    def __init__(
        self,
        kind: LinkKind,
        client: InternalClient,
        loop: asyncio.AbstractEventLoop,
        now_ns: Callable[[], int],
        label: str,
    ) -> None:
        self.kind = kind
        self._client = client
        self._loop = loop
        self._now_ns = now_ns
        self._label = label  # for logs: "mirror M of O"
        self.tracking = Tracking()
        self.lag = 0
        self.last_active_ns = 0  # the last message from the origin's consumer, 0: none yet
        self.error: ApiError | None = None
        self.fails = 0
        self.requested = False  # a create request was sent (stream info shows the filter)
        self._last_request_ns = 0
        self._reply_sub: Subscription | None = None
        self._deliver_sub: Subscription | None = None
        # Deliveries are taken: set before subscribing, as a consumer that exists
        # already (a durable one) may deliver from within the subscribe call.
        self._receiving = False
        # The deliver subscription is a probe (`_probe`): a message there ends the backoff.
        self._probing = False
        self._timer: asyncio.TimerHandle | None = None
        # Messages as they came (`_on_message`), or runs of deliveries from a consumer in
        # this process (`_on_run`).
        self._inbox: deque[tuple[bytes, bytes | None, bytes | None, bytes] | DeliverRun] = deque()
        self._request: CreateRequest | None = None  # the create request last sent
        # `$JS.ACK.<origin>.<consumer>.`: how the current consumer's ack replies begin
        # (`read_ack_reply` reads only what follows); empty while there is none.
        self._ack_prefix = b""
        self._draining = False  # a `_drain` is scheduled
        self._closed = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Create the consumer soon (nats-server waits 100-200 ms after the stream)."""
        self._schedule(0)

    def close(self) -> None:
        self._closed = True
        self._cancel()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def remove(self) -> None:
        """Closed for good (its source removed, the mirror promoted, the stream
        deleted): the origin's consumer is deleted, one try whose failure is only
        logged (nats-server's `tryDeleteSourcingConsumer`). An ephemeral one goes by
        itself after its inactive threshold (its name has a suffix the delete does not
        know); the durable one of an interest or workqueue origin would keep its
        messages forever. A failure is logged when that was the consumer in use."""
        current = self.tracking.consumer
        self.close()
        subject = self.kind.delete_subject() if self.requested else None
        if subject is None:
            return
        in_use = bool(current) and subject.endswith(f".{current}")
        reply = sync_subject("$JSC.R")
        subs: list[Subscription | None] = []

        def done(*_: Any) -> None:
            if subs and subs[0] is not None:
                self._client.unsubscribe(subs[0])
                subs[0] = None

        def answered(subject: bytes, reply: bytes | None, head: bytes | None, data: bytes) -> None:
            done()
            if in_use and b'"error"' in data:
                log.warning("%s: its origin consumer was not deleted: %r", self._label, data[:200])

        subs.append(self._client.subscribe(reply, answered))
        self._client.publish(subject.encode(), b"", None, reply.encode())
        if subs[0] is not None:
            self._loop.call_later(CREATE_WAIT_NS / 1e9, done)

    def _cancel(self) -> None:
        """Drop the current consumer's subscriptions; its deliveries are ignored now."""
        for sub in (self._reply_sub, self._deliver_sub):
            if sub is not None:
                self._client.unsubscribe(sub)
        self._reply_sub = self._deliver_sub = None
        self._receiving = self._probing = False
        self._inbox.clear()
        self.tracking.consumer = ""
        self._ack_prefix = b""

    def _schedule(self, backoff_ns: int) -> None:
        """The next create: after `backoff_ns`, the request threshold and jitter."""
        if self._closed:
            return
        wait = max(0, RETRY_THRESHOLD_NS - (self._now_ns() - self._last_request_ns))
        if not self._last_request_ns:
            wait = 0
        wait += backoff_ns + _JITTER_NS + random.randrange(_JITTER_NS)
        self._arm(wait, self._create)

    def _arm(self, wait_ns: int, action: Callable[[], None]) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_later(wait_ns / 1e9, action)

    def retry(self) -> None:
        """Recreate the consumer after the last stored (a gap, a stall, an error)."""
        self._cancel()
        self._schedule(retry_backoff_ns(self.fails))

    def _failed(self, error: ApiError) -> None:
        self.error = error
        self.fails += 1
        self.retry()

    # ------------------------------------------------------------------ create

    def _create(self) -> None:
        self._timer = None
        if self._closed:
            return
        self._cancel()
        self.requested = True
        self._last_request_ns = self._now_ns()
        try:
            request = self.kind.create_request()
        except Exception as exc:  # the stream's store failed: try again later
            log.warning("%s: cannot build its consumer request: %s", self._label, exc)
            self._failed(self._setup_failed(str(exc)))
            return
        self._send(request)

    def _send(self, request: CreateRequest) -> None:
        self._request = request
        reply = sync_subject("$JSC.R")
        self._reply_sub = self._client.subscribe(reply, self._on_reply)
        body = b""
        if not request.deliver:
            body = json.dumps(request.body, separators=(",", ":")).encode()
        self._client.publish(request.subject.encode(), body, request.header, reply.encode())
        if self._reply_sub is not None:  # no answer yet (a remote origin): wait for it
            wait = RESET_WAIT_NS if request.deliver else CREATE_WAIT_NS
            self._arm(wait, self._create_timed_out)

    def _create_timed_out(self) -> None:
        self._timer = None
        if self._reply_sub is not None:
            self._client.unsubscribe(self._reply_sub)
            self._reply_sub = None
        if self._request is not None and self._request.deliver:
            # A reset nobody answered (the consumer does not exist: nats-server leaves
            # that unanswered): asked again after the backoff, no error shown, as
            # nats-server's timeout sets none; or sooner, once the consumer is heard of.
            log.warning("%s: no reply to its consumer reset request", self._label)
            self.fails += 1
            self.retry()
            self._probe(self._request.deliver)
            return
        log.warning("%s: no reply to its consumer create request", self._label)
        self._failed(self._setup_failed("timeout"))

    def _probe(self, deliver: str) -> None:
        """nats-server's `startProbeSubscription`: while the link backs off after a reset
        nobody answered, it listens on the consumer's deliver subject; the first message
        there (the consumer, created by its user since, delivering or sending its
        heartbeat to this interest) ends the backoff: the reset is asked for again at
        once (after the request threshold). The next request drops the probe."""
        self._probing = True

        def heard(*_: Any) -> None:
            if self._probing and self.fails:
                self._probing = False
                self.fails = 0
                self._cancel()  # the probe goes
                self._schedule(0)

        sub = self._client.subscribe(deliver, heard)  # may hear it before it returns
        if self._probing:
            self._deliver_sub = sub
        else:
            self._client.unsubscribe(sub)

    def _on_reply(
        self, subject: bytes, reply: bytes | None, header: bytes | None, data: bytes
    ) -> None:
        if self._reply_sub is None:
            return
        self._client.unsubscribe(self._reply_sub)
        self._reply_sub = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        try:
            answer = json.loads(data)
        except ValueError:
            self._failed(api_error("INVALID_JSON"))
            return
        info = answer if isinstance(answer, dict) else {}
        retry = without_sourcing(self._request, info.get("error"))
        if retry is not None:  # an origin that knows no sourcing consumers
            self._send(retry)
            return
        config = info.get("config")
        deliver = config.get("deliver_subject") if isinstance(config, dict) else None
        request = self._request
        if request is not None and request.deliver and isinstance(config, dict):
            deliver = request.deliver  # a pre-created consumer's, as configured
        if info.get("error") or not isinstance(deliver, str) or not deliver:
            error = info.get("error")
            log.warning("%s: origin refused its consumer: %s", self._label, error)
            code = error.get("err_code") if isinstance(error, dict) else None
            if isinstance(code, int) and self.kind.refused(code):
                self._cancel()
                self._schedule(0)
                return
            self._failed(self._origin_error(error))
            return
        durable = request is not None and bool(request.deliver)
        if durable and isinstance(config, dict) and config.get("ack_policy") != "flow_control":
            self._failed(api_error(self.kind.requires_ack_fc))  # the origin's acks need it
            return
        tracking = self.tracking
        try:
            self.kind.created(info, tracking, header)
        except Exception as exc:  # a malformed answer, or the stream's store failed
            self._failed(self._setup_failed(str(exc)))
            return
        tracking.consumer = str(info.get("name", ""))
        self._ack_prefix = f"$JS.ACK.{self.kind.source.name}.{tracking.consumer}.".encode()
        self.error = None
        self.fails = 0
        self.last_active_ns = self._now_ns()  # not stalled at the first check
        self._receiving = True
        self._deliver_sub = self._client.subscribe(
            deliver, self._on_message, object_handler=self._on_run
        )
        self._arm(HEALTH_CHECK_NS, self._health_check)

    # ------------------------------------------------------------------ deliveries

    def _health_check(self) -> None:
        self._timer = None
        if self._now_ns() - self.last_active_ns > HEALTH_CHECK_NS:
            log.info("%s: stalled, recreating its consumer", self._label)
            self.retry()
        else:
            self._arm(HEALTH_CHECK_NS, self._health_check)

    def _on_message(
        self, subject: bytes, reply: bytes | None, header: bytes | None, data: bytes
    ) -> None:
        """Queued, and taken `_BATCH` at a time in later turns of the loop (`_drain`)."""
        if not self._receiving:
            return
        self.last_active_ns = self._now_ns()
        self._inbox.append((subject, reply, header, data))
        if not self._draining:
            self._draining = True
            self._loop.call_soon(self._drain)

    def _on_run(self, run: object) -> int:
        """A run of deliveries from the origin's consumer in this process, as its executor
        holds them (`Router.deliver_object`): queued as one item, its numbers read from it
        in `_drain` (the ack subjects say the same)."""
        if not isinstance(run, DeliverRun):
            return 0
        if self._receiving:
            self.last_active_ns = self._now_ns()
            self._inbox.append(run)
            if not self._draining:
                self._draining = True
                self._loop.call_soon(self._drain)
        return len(run.msgs)

    def _drain(self) -> None:
        """Up to `_BATCH` of the inbox: each run of deliveries to the kind in one call, each
        control message once the deliveries before it are taken."""
        self._draining = False
        inbox = self._inbox
        consumer = self.tracking.consumer
        prefix = self._ack_prefix
        run: list[Delivered] = []
        taken = 0
        while inbox and taken < _BATCH:  # a retry empties the inbox
            item = inbox.popleft()
            if isinstance(item, DeliverRun):
                item, rest = split_run(item, _BATCH - taken)
                if rest is not None:
                    inbox.appendleft(rest)
                taken += len(item.msgs)
                if not run and prefix and item.prefix == prefix and self._deliver_run(item):
                    continue
                take_run(item, _BATCH, prefix, consumer, run)
                continue
            subject, reply, header, data = item
            taken += 1
            if header is not None and header.startswith(b"NATS/1.0 100"):
                if run:
                    self._deliver(run)
                    run = []
                self._control(reply, header)
                consumer, prefix = self.tracking.consumer, self._ack_prefix
                continue
            meta = read_ack_reply(reply, prefix, consumer) if reply else None
            if meta is None or meta[0] != consumer:
                continue  # an older consumer's (nats-server's isCurrentSub)
            if header:
                header = origin_header(header)
            run.append((meta, subject.decode("utf-8", "surrogateescape"), header, data))
        if run:
            self._deliver(run)
        if inbox and not self._draining:
            self._draining = True
            self._loop.call_soon(self._drain)

    def _deliver(self, run: list[Delivered]) -> None:
        pending = run[-1][0][5]
        self.lag = pending - 1 if pending else 0
        if not self.kind.delivered(self.tracking, run):
            self.retry()

    def _deliver_run(self, run: DeliverRun) -> bool:
        """`_deliver` of the current consumer's run as it came, if its kind takes it so
        (`LinkKind.delivered_run`); False, with nothing done, if not."""
        taken = self.kind.delivered_run(self.tracking, run)
        if taken is None:
            return False
        pending = max(run.pending_before - len(run.msgs), 0)  # after its last
        self.lag = pending - 1 if pending else 0
        if not taken:
            self.retry()
        return True

    def _setup_failed(self, reason: str) -> ApiError:
        return api_error(self.kind.setup_error, err=reason)

    def _origin_error(self, error: Any) -> ApiError:
        """The origin's error as it sent it (stream info shows it), or a setup failure."""
        if isinstance(error, dict) and isinstance(error.get("code"), int):
            code, err_code = int(error["code"]), int(error.get("err_code", 0))
            return ApiError("ORIGIN", code, err_code, str(error.get("description", "")))
        return self._setup_failed("invalid consumer create response")

    def _control(self, reply: bytes | None, header: bytes) -> None:
        tracking = self.tracking
        if reply:  # flow control: answered once what came before it is durable
            dseq, sseq = tracking.dseq, tracking.sseq
            answer = b"NATS/1.0\r\nNats-Last-Consumer: %d\r\nNats-Last-Stream: %d\r\n\r\n" % (
                dseq,
                sseq,
            )

            def send(error: BaseException | None) -> None:
                if error is None and not self._closed:
                    self._client.publish(reply, b"", answer)

            self.kind.when_durable(send)
            return
        last = hdrs.raw_value(header, _LAST_CONSUMER)
        if last is not None and last.isdigit() and int(last) > 0 and int(last) != tracking.dseq:
            self.retry()  # a delivery went missing
            return
        stalled = hdrs.raw_value(header, _STALLED)
        if stalled:
            self._client.publish(stalled, b"")
