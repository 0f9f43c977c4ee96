"""Accounts as nats-server has them (accounts.go): each account's subjects are its own.

An `Account` owns a `Router`: a client logged in to it (`auth.Login.account`) publishes
and subscribes there only, so the same subject in two accounts reaches nobody across the
boundary, and its JetStream engine (if the account has JetStream) subscribes to that
account's `$JS.API.>` and stores under the account's own directory (ADR 0027). `Accounts`
is the server's registry: the global account `$G` (the users of no configured account,
everyone on a server without accounts), the configured accounts and the system account
(`system_account`, by default `$SYS`, created when not configured).

Which accounts get JetStream, as nats-server's `enableJetStreamAccounts`: with no account
configured besides the system account, `$G`; otherwise each account whose config says
`jetstream: enabled`. Every other account (the system account included, whose clients
nats-server's own API subscriptions answer) answers the JetStream API with 10039
"JetStream not enabled for account", each endpoint in its response type.

JetStream-wide state is shared by the engines: the bound on PubAcks awaiting a group
commit (`CommitBacklog`), the atomic batches' totals (`BatchLimits`) and the store
filesystem's free-space guard (`StoreSpace`), made when JetStream starts: a server
without JetStream never imports `brook.jetstream` (its start-up is shorter, which a
restarted server's reconnecting clients notice). The usage and API counters monitoring shows
are added up over the accounts, as nats-server's `/varz` does.

Service and stream imports publish into another account's `router` (server/imports.py's
`Links`, from the config and from account JWTs); subject mappings apply before
`Router.publish` in the connection; account limits are checked by the account's engine
(`Account.jetstream`) and at login (`Accounts.get`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brook import limits
from brook.config.settings import (
    GLOBAL_ACCOUNT,
    ConfigError,
    JetStreamAccountLimits,
    MapDestination,
    Settings,
    SubjectMapping,
)
from brook.routing.internal import InternalClient
from brook.routing.mappings import SubjectMappings
from brook.routing.router import Router
from brook.server.imports import Links

if TYPE_CHECKING:
    from brook import jwt
    from brook.jetstream.api.dispatch import ApiDispatcher
    from brook.jetstream.api.streams import StreamApi
    from brook.jetstream.backlog import CommitBacklog
    from brook.jetstream.batch import BatchLimits
    from brook.jetstream.engine import JetStream
    from brook.jetstream.quota import ServerLimits
    from brook.jetstream.snapshot.transfers import Transfers
    from brook.jetstream.space import StoreSpace

log = logging.getLogger("brook.server")

ACCOUNTS_STORE_DIR = "jetstream"
"""Under the store directory, `jetstream/<account>/streams/<name>` holds the streams of an
account other than `$G`, whose streams stay in `streams/<name>` (storage-format.md)."""

_REFUSED_LISTS: dict[str, dict[str, Any]] = {
    "STREAM.NAMES": {"streams": None},
    "STREAM.LIST": {"streams": []},
}
"""What nats-server's 10039 answers to the stream lists carry besides the paging fields."""


class Account:
    """One account: its subjects (`router`) and, with JetStream, its engine and API."""

    def __init__(
        self,
        name: str,
        *,
        jetstream: bool = False,
        system: bool = False,
        jetstream_limits: JetStreamAccountLimits | None = None,
        mappings: Sequence[SubjectMapping] = (),
    ) -> None:
        self.name = name
        self.router = Router()
        # What its clients' publishes are mapped by (ADR 0030); a bad one is refused here.
        self.mappings = SubjectMappings.compile(mappings)
        self.jetstream_enabled = jetstream  # gets an engine when the server has JetStream
        # Its JetStream limits (`jetstream { max_mem: ... }`; none: no limit), which its
        # engine enforces (jetstream/quota.py).
        self.jetstream_limits = jetstream_limits or JetStreamAccountLimits()
        # An account JWT's `tiered_limits` by tier (None: not tiered); its limits above
        # are then its R1 tier's (ADR 0034).
        self.jetstream_tiers: dict[str, JetStreamAccountLimits] | None = None
        self.is_system = system
        # Its JWT was deleted (`$SYS.REQ.CLAIMS.DELETE`): no engine, nothing answering
        # its API, until a login loads it anew (`Accounts.add`).
        self.deleted = False
        self.jetstream: JetStream | None = None
        self.api: ApiDispatcher | None = None  # its `$JS.API.>`: an engine's, or refusals
        self.transfers: Transfers | None = None  # snapshots and restores (with an engine)
        self.stream_api: StreamApi | None = None  # its stream endpoints (shapes for /jsz)
        self._refusals: InternalClient | None = None

    def __repr__(self) -> str:
        return f"Account({self.name!r})"

    def store_dir(self, root: str) -> Path:
        """Where this account's JetStream keeps its streams (`<dir>/streams`)."""
        if self.name == GLOBAL_ACCOUNT:
            return Path(root)  # the layout of a server without accounts, unchanged
        return Path(root) / ACCOUNTS_STORE_DIR / self.name

    async def start_jetstream(
        self,
        settings: Settings,
        *,
        server_name: str,
        commit_backlog: CommitBacklog,
        batch_limits: BatchLimits,
        space: StoreSpace,
        server_limits: ServerLimits,
        executor: Executor,
    ) -> None:
        from brook.jetstream.api import cluster, snapshots
        from brook.jetstream.api.consumers import ConsumerApi
        from brook.jetstream.api.dispatch import ApiDispatcher
        from brook.jetstream.api.streams import StreamApi
        from brook.jetstream.engine import JetStream

        js_settings = settings.jetstream
        self.jetstream = js = JetStream(
            self.router,
            str(self.store_dir(js_settings.store_path)),
            server_limits=server_limits,
            account_limits=self.jetstream_limits,
            limit_tiers=self.jetstream_tiers,
            sync_interval_s=js_settings.sync_interval_s,
            consumer_flush_interval_s=js_settings.consumer_flush_interval_s,
            free_space_reserve_bytes=js_settings.free_space_reserve_bytes,
            index_snapshot_interval_s=js_settings.index_snapshot_interval_s,
            index_hot_segments=js_settings.index_hot_segments,
            segment_slots_max=js_settings.segment_slots_max,
            write_buffer_bytes=js_settings.write_buffer_bytes,
            batch_limits=batch_limits,
            commit_backlog=commit_backlog,
            space=space,
            executor=executor,
            account=self.name,
            domain=js_settings.domain,
            direct_max_bytes=settings.max_pending_bytes,
        )
        await js.start()
        api = ApiDispatcher(
            js.internal,
            api_level=limits.JETSTREAM_API_LEVEL,
            advisories=js.advisories,  # its answers audited
            server_name=server_name,
            account=self.name,
        )
        self.api = api
        streams = StreamApi(
            js,
            server_name=server_name,
            version=limits.NATS_COMPAT_VERSION,
            api_level=limits.JETSTREAM_API_LEVEL,
        )
        streams.register(api)
        self.stream_api = streams
        ConsumerApi(
            js, version=limits.NATS_COMPAT_VERSION, api_level=limits.JETSTREAM_API_LEVEL
        ).register(api)
        api.serve(None, cluster.ENDPOINTS)
        self.transfers = snapshots.register(
            api, js, js_settings, streams.created_info, api_level=limits.JETSTREAM_API_LEVEL
        )
        api.start()

    def refuse_jetstream(self, *, server_name: str = "", domain: str = "") -> None:
        """No JetStream here: every API endpoint answers 10039 (nats-server's reply in an
        account without JetStream on a server with it), listed from the API classes'
        tables, so no engine need run anywhere; audited as nats-server's answers are
        (`server_name`, `domain`: what the audit names)."""
        import time

        from brook.jetstream.advisories import Advisories
        from brook.jetstream.api import cluster, consumers, snapshots, streams
        from brook.jetstream.api.dispatch import ApiDispatcher
        from brook.jetstream.errors import api_error

        self._refusals = InternalClient(self.router, "jetstream")
        self.api = ApiDispatcher.refusing(
            self._refusals,
            (*streams.ENDPOINTS, *consumers.ENDPOINTS, *cluster.ENDPOINTS, *snapshots.ENDPOINTS),
            api_error("NOT_ENABLED_FOR_ACCOUNT"),
            _REFUSED_LISTS,
            api_level=limits.JETSTREAM_API_LEVEL,
            advisories=Advisories(
                self._refusals, account=self.name, domain=domain, now_ns=time.time_ns
            ),
            server_name=server_name,
            account=self.name,
        )
        self.api.start()

    async def stop(self) -> None:
        if self.transfers is not None:
            await self.transfers.stop()
            self.transfers = None
        if self.jetstream is not None:
            await self.jetstream.stop()  # closes its client: its API unsubscribed
            self.jetstream = None
        if self._refusals is not None:
            self._refusals.close()
            self._refusals = None
        self.api = self.stream_api = None


class Accounts:
    """The server's accounts by name: `$G`, the configured ones and the system account."""

    def __init__(self, settings: Settings) -> None:
        system = settings.system_account_name
        configured = settings.accounts
        # nats-server: with no account besides the system account, `$G` has JetStream.
        # In operator mode (ADR 0028) nobody logs in to `$G`; the resolver's accounts are
        # named by their public keys and have JetStream when their JWT's limits allow it.
        operator = settings.operator
        global_only = not operator.jwts and all(a.name == system for a in configured)
        js = settings.jetstream
        domain = js.domain if js.enabled else ""
        self._settings = settings
        self._domain = domain
        self.global_account = Account(
            GLOBAL_ACCOUNT,
            jetstream=global_only,
            mappings=_with_domain(settings.mappings, domain, system=False),
        )
        self._by_name: dict[str, Account] = {GLOBAL_ACCOUNT: self.global_account}
        for entry in configured:
            self._by_name[entry.name] = Account(
                entry.name,
                jetstream=entry.jetstream,
                system=entry.name == system,
                jetstream_limits=entry.jetstream_limits,
                mappings=_with_domain(entry.mappings, domain, system=entry.name == system),
            )
        # A directory resolver's other accounts are added at their first login (`add`).
        preloaded = []
        for key, token in operator.preload.items() if operator.jwts else ():
            from brook.jwt import decode_account  # only operator mode reads JWTs

            preloaded.append(claims := decode_account(token))
            self._by_name[key] = self._jwt_account(key, claims.limits)
        if system not in self._by_name:
            mappings = _with_domain((), domain, system=True)
            self._by_name[system] = Account(system, system=True, mappings=mappings)
        self.system_account = self._by_name[system]
        # Where messages cross between accounts (server/imports.py, ADR 0030).
        self.links = Links(settings, self._by_name)
        for claims in preloaded:  # their JWTs' mappings, exports and imports (ADR 0034)
            self.apply_jwt(claims)
        self.commit_backlog: CommitBacklog | None = None  # JetStream's, once started
        self.executor: ThreadPoolExecutor | None = None
        self.batch_limits: BatchLimits | None = None
        self.space: StoreSpace | None = None
        # `max_memory_store` and `max_file_store`, over every account's engine.
        self.server_limits: ServerLimits | None = None
        self._server_name = ""
        self._adding: dict[str, asyncio.Future[Account]] = {}
        self._removing: dict[str, asyncio.Task[None]] = {}  # deleted accounts' engines stopping
        self._run_prefixes: tuple[bytes, ...] | None = None

    def __iter__(self) -> Iterator[Account]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def get(self, name: str) -> Account | None:
        return self._by_name.get(name)

    @property
    def with_jetstream(self) -> list[Account]:
        return [a for a in self if a.jetstream is not None]

    def run_prefixes(self) -> tuple[bytes, ...]:
        """Every account's exclusive routing prefixes (`$JS.ACK.`), for the parser of
        each new connection: kept until an engine starts (which adds them), so that a
        connection costs the same with thousands of accounts."""
        if self._run_prefixes is None:
            prefixes: dict[bytes, None] = {}
            for account in self:
                prefixes.update(dict.fromkeys(account.router.sublist.exclusive_prefixes))
            self._run_prefixes = tuple(prefixes)
        return self._run_prefixes

    def _jwt_account(self, key: str, limits: jwt.AccountLimits) -> Account:
        """A JWT account (ADR 0028), named by its public key: JetStream with its JWT's
        limits when they allow storage (never the system account's), the domain's
        mappings."""
        system = key == self._settings.system_account_name
        account = Account(
            key,
            jetstream=limits.jetstream_enabled and not system,
            system=system,
            mappings=_with_domain((), self._domain, system=system),
        )
        account.jetstream_limits, account.jetstream_tiers = _jwt_jetstream(limits)
        return account

    async def add(self, name: str, limits: jwt.AccountLimits) -> Account:
        """The account `name`, added while the server runs if it has none yet (a JWT
        account at its first login, ADR 0033): its router, and its JetStream engine with
        its JWT's limits when the server has JetStream and the JWT enables it (else its
        10039 refusals), as the accounts created at start. Each added account costs what
        one created at start does; nothing walks the others. Concurrent adds of one name
        share the first."""
        existing = self._by_name.get(name)
        if existing is not None and not existing.deleted:
            return existing
        pending = self._adding.get(name)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[Account] = asyncio.get_running_loop().create_future()
        self._adding[name] = future
        try:
            if existing is None:
                account = self._jwt_account(name, limits)
            else:  # deleted, its JWT pushed again: loaded anew, as nats-server's lookup
                account = existing
                removing = self._removing.get(name)
                if removing is not None:
                    await asyncio.shield(removing)
                account.deleted = False
                account.jetstream_enabled = limits.jetstream_enabled
                account.jetstream_limits, account.jetstream_tiers = _jwt_jetstream(limits)
            await self._start_account_jetstream(account)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: the adder raises it
            raise
        finally:
            del self._adding[name]
        self._by_name[name] = account
        if account.jetstream is not None:
            self._run_prefixes = None  # its engine's, for the connections to come
        future.set_result(account)
        return account

    def apply_jwt(self, claims: jwt.AccountClaims) -> None:
        """An account JWT's mappings and its exports and imports (ADR 0034), at its load
        and at each update, in place of what it had."""
        account = self._by_name.get(claims.subject)
        if account is not None:
            own = _jwt_mappings(claims)
            mappings = _with_domain(own, self._domain, system=account.is_system)
            account.mappings = SubjectMappings.compile(mappings)
        self.links.apply_jwt(claims)

    def set_jetstream_limits(self, account: Account, limits: jwt.AccountLimits) -> None:
        """An account JWT update's JetStream limits: its engine admits by them from now
        on (streams and consumers already there stay, as on nats-server)."""
        account.jetstream_limits, account.jetstream_tiers = _jwt_jetstream(limits)
        if account.jetstream is not None:
            account.jetstream.set_account_limits(account.jetstream_limits, account.jetstream_tiers)

    def add_configured(self, name: str) -> Account | None:
        """An account of users alone, added to the config file (a config reload, ADR
        0042): its router, and JetStream's 10039 refusals when the server has JetStream,
        as for such an account at start. None when the server has it already (one a
        reload took out of the file stays, without users)."""
        if name in self._by_name:
            return None
        account = Account(name, mappings=_with_domain((), self._domain, system=False))
        self._by_name[name] = account
        if self.space is not None:
            account.refuse_jetstream(server_name=self._server_name, domain=self._domain)
        self._run_prefixes = None
        return account

    def remove(self, account: Account) -> asyncio.Task[None]:
        """A deleted account (nats-server's `removeCb`): its engine stops in the
        background, its streams staying on disk (`disableJetStream`), and nothing answers
        its `$JS.API.>` (nats-server drops the account's service imports, the API's
        among them); its next login loads it anew (`add`)."""
        account.deleted = True
        account.jetstream_enabled = False
        self.links.forget(account.name)
        task = asyncio.ensure_future(self._stop(account))
        self._removing[account.name] = task

        def stopped(done: asyncio.Task[None]) -> None:
            if self._removing.get(account.name) is done:
                del self._removing[account.name]

        task.add_done_callback(stopped)
        return task

    async def _stop(self, account: Account) -> None:
        await account.stop()
        self._run_prefixes = None

    async def set_jetstream(self, account: Account, enabled: bool) -> None:
        """An account JWT update enabled or disabled JetStream for `account` (nats-server's
        `configJetStream` on a claims update): its engine is started, or stopped (its
        streams stay on disk, as nats-server's `disableJetStream` keeps them) and the
        10039 refusals answer in its place."""
        account.jetstream_enabled = enabled
        if account.is_system or self.space is None:
            return
        if enabled == (account.jetstream is not None):
            return
        await account.stop()
        await self._start_account_jetstream(account)
        self._run_prefixes = None

    async def _start_account_jetstream(self, account: Account) -> None:
        if (
            self.commit_backlog is None
            or self.batch_limits is None
            or self.space is None
            or self.server_limits is None
            or self.executor is None
        ):
            return  # the server has no JetStream
        if account.jetstream_enabled:
            await account.start_jetstream(
                self._settings,
                server_name=self._server_name,
                commit_backlog=self.commit_backlog,
                batch_limits=self.batch_limits,
                space=self.space,
                server_limits=self.server_limits,
                executor=self.executor,
            )
        elif not account.is_system:
            account.refuse_jetstream(server_name=self._server_name, domain=self._domain)

    async def start_jetstream(self, settings: Settings, *, server_name: str) -> None:
        self._server_name = server_name
        from brook.jetstream.backlog import CommitBacklog
        from brook.jetstream.batch import BatchLimits
        from brook.jetstream.quota import ServerLimits
        from brook.jetstream.space import StoreSpace

        js = settings.jetstream
        self.server_limits = ServerLimits(js.max_memory_store_bytes, js.max_file_store_bytes)
        self.commit_backlog = CommitBacklog(js.max_acks_awaiting_sync)
        self.batch_limits = BatchLimits(
            size_max=js.batch_max_msgs,
            inflight_per_stream=js.batch_max_inflight_per_stream
            or limits.ATOMIC_BATCH_INFLIGHT_PER_STREAM,
            inflight_total=js.batch_max_inflight_total or limits.ATOMIC_BATCH_INFLIGHT_TOTAL,
            fast_inflight_per_stream=js.batch_max_inflight_per_stream
            or limits.FAST_BATCH_INFLIGHT_PER_STREAM,
            fast_inflight_total=js.batch_max_inflight_total or limits.FAST_BATCH_INFLIGHT_TOTAL,
            timeout_ns=round(js.batch_timeout_s * 1e9),
        )
        self.space = StoreSpace(Path(js.store_path), js.free_space_reserve_bytes)
        # The sync threads of every account's engine: a fixed number, however many accounts.
        self.executor = ThreadPoolExecutor(limits.SYNC_THREADS, thread_name_prefix="brook-sync")
        for account in self:
            if account.jetstream_enabled:
                await account.start_jetstream(
                    settings,
                    server_name=server_name,
                    commit_backlog=self.commit_backlog,
                    batch_limits=self.batch_limits,
                    space=self.space,
                    server_limits=self.server_limits,
                    executor=self.executor,
                )
        self._run_prefixes = None  # the engines added theirs
        for account in self:
            if account.jetstream is None:  # the system account too, as nats-server
                account.refuse_jetstream(server_name=self._server_name, domain=self._domain)

    def signal_shutdown(self) -> None:
        for account in self.with_jetstream:
            assert account.jetstream is not None
            account.jetstream.signal_shutdown()

    async def drain(self) -> None:
        for account in self.with_jetstream:
            assert account.jetstream is not None
            await account.jetstream.drain()

    async def stop(self) -> None:
        self.links.close()
        for account in self:
            await account.stop()
        if self.executor is not None:
            self.executor.shutdown(wait=True)

    # ------------------------------------------------------------------ monitoring

    def jetstream_accounts(self) -> dict[str, dict[str, Any]]:
        """`/varz` jetstream.brook_accounts: each account's usage, reservations and limits."""
        return {a.name: a.jetstream.account_usage() for a in self if a.jetstream is not None}

    def api_counters(self) -> tuple[int, int]:
        """(requests, errors) of the JetStream API over every account."""
        total = errors = 0
        for account in self:
            if account.api is not None:
                total, errors = total + account.api.total, errors + account.api.errors
        return total, errors

    def store_statistics(self) -> dict[str, Any]:
        """`/varz` jetstream.brook_store: the shared free-space guard, and the damaged
        streams of every account (those of another account than `$G` as
        `<account>/<stream>`)."""
        out: dict[str, Any] = self.space.statistics() if self.space is not None else {}
        damaged: dict[str, Any] = {}
        snapshots = packed = unpacks = buffered = 0
        for account in self.with_jetstream:
            assert account.jetstream is not None
            stats = account.jetstream.store_statistics()
            prefix = "" if account.name == GLOBAL_ACCOUNT else f"{account.name}/"
            damaged.update({prefix + name: r for name, r in stats["damaged_streams"].items()})
            snapshots += stats["index_snapshots"]
            packed += stats["index_packed_segments"]
            unpacks += stats["index_unpacks"]
            buffered += stats["write_buffered_bytes"]
        out["damaged_streams"] = damaged
        interval = self._settings.jetstream.index_snapshot_interval_s
        out["index_snapshot_interval"] = int(interval * 1e9)
        out["index_snapshots"] = snapshots
        out["index_hot_segments"] = self._settings.jetstream.index_hot_segments
        out["segment_slots_max"] = self._settings.jetstream.segment_slots_max
        out["index_packed_segments"] = packed
        out["index_unpacks"] = unpacks
        out["write_buffer"] = self._settings.jetstream.write_buffer_bytes
        out["write_buffered_bytes"] = buffered
        return out


def _jwt_mappings(claims: jwt.AccountClaims) -> list[SubjectMapping]:
    """An account JWT's `mappings` (source: [{subject, weight, cluster}]) as a config
    file's, a weight of 0 read as 100 (jwt's GetWeight); one that does not compile is
    left out, as nats-server ignores `AddWeightedMappings`' error there."""
    out = []
    for source, entries in claims.mappings.items():
        destinations = [
            MapDestination(
                str(entry.get("subject", "")),
                int(entry.get("weight") or 100),
                str(entry.get("cluster") or ""),
            )
            for entry in entries if isinstance(entry, dict)
        ] if isinstance(entries, list) else []  # fmt: skip
        mapping = SubjectMapping(str(source), destinations, f"account {claims.subject}")
        try:
            SubjectMappings.compile([mapping])
        except (ConfigError, ValueError, TypeError) as exc:
            log.debug("account %s: mapping %r left out: %s", claims.subject, source, exc)
            continue
        out.append(mapping)
    return out


def _jwt_jetstream(
    limits: jwt.AccountLimits,
) -> tuple[JetStreamAccountLimits, dict[str, JetStreamAccountLimits] | None]:
    """An account JWT's JetStream limits for its engine: the plain ones, or with
    `tiered_limits` each tier's and the R1 tier's as the engine's (a single server's
    streams are R1; without an R1 tier every stream create gets 10120 first)."""
    if not limits.tiered_limits:
        return _jetstream_limits(limits.jetstream), None
    tiers = {name: _jetstream_limits(tier) for name, tier in limits.tiered_limits.items()}
    return tiers.get("R1", JetStreamAccountLimits()), tiers


def _jetstream_limits(claimed: jwt.JetStreamLimits) -> JetStreamAccountLimits:
    """An account JWT's JetStream limits as nats-server takes them
    (`UpdateAccountClaimsWithRefresh`): the storage, stream and consumer counts as
    written (below 0 no limit; a storage of 0 none allowed, a count of 0 no limit), the
    per-stream bytes and `max_ack_pending` no limit unless positive."""

    def positive(value: int) -> int:
        return value if value > 0 else -1

    return JetStreamAccountLimits(
        max_memory=claimed.mem_storage,
        max_storage=claimed.disk_storage,
        max_streams=claimed.streams,
        max_consumers=claimed.consumer,
        max_ack_pending=positive(claimed.max_ack_pending),
        memory_max_stream_bytes=positive(claimed.mem_max_stream_bytes),
        storage_max_stream_bytes=positive(claimed.disk_max_stream_bytes),
        max_bytes_required=claimed.max_bytes_required,
    )


# What nats-server's `generateJSMappingTable` maps under `$JS.<domain>.API.`.
_DOMAIN_API = {
    "INFO": "$JS.API.INFO",
    **{
        f"{area}.>": f"$JS.API.{area}.>"
        for area in ("STREAM", "CONSUMER", "DIRECT", "META", "SERVER", "ACCOUNT")
    },
    "$KV.>": "$KV.>",
    "$OBJ.>": "$OBJ.>",
}


def _with_domain(
    mappings: Sequence[SubjectMapping], domain: str, *, system: bool
) -> Sequence[SubjectMapping]:
    """An account's mappings and, with a JetStream domain, nats-server's mappings of
    `$JS.<domain>.API.` onto `$JS.API.` so that a local client reaches its JetStream by
    the domain too: in the system account the one `setupJetStreamExports` adds, in every
    other account the table of `enableAllJetStreamServiceImportsAndMappings`; a mapping
    of the account's own with the same source wins."""
    if not domain:
        return mappings
    table = {">": "$JS.API.>"} if system else _DOMAIN_API
    own = {m.source for m in mappings}
    added = [
        SubjectMapping(source, [MapDestination(destination)], f"jetstream.domain {source}", False)
        for suffix, destination in table.items()
        if (source := f"$JS.{domain}.API.{suffix}") not in own
    ]
    return [*mappings, *added]
