"""Account resolvers: where operator mode finds account JWTs (ADR 0028, ADR 0033).

`MemoryResolver` is `resolver: MEMORY`: the `resolver_preload` JWTs, in memory.
`DirectoryResolver` is nats-server's `full` and `cache` resolvers over its `DirJWTStore`
(server/dirstore.go), laid out as nats-server lays it out, so a directory nats-server
wrote opens here and the other way round: one `<account public key>.jwt` file per account
(the bare JWT, no newline) directly in `dir` (no sharding: nats-server's resolvers do not
shard), a deleted one renamed `<key>.jwt.deleted` (`allow_delete`) or removed
(`hard_delete`). At start every `*.jwt` file below `dir` is indexed, as Go's
`filepath.Walk` finds them; the index keeps, per key, when the JWT expires (its `exp`,
or for `cache` with a `ttl` that long after its last use), its SHA-256 (the store's hash
is their XOR, as nats-server's pack requests compare) and the least recently used order.

`full` holds any number of JWTs unless `limit` is set (then a new one is refused with
"jwt store is full"); `cache` holds up to `limit` (1000 unless set) and evicts the least
recently used file for a new one. Expired JWTs' files are removed by `sweep`, which the
server runs every minute (or half the `ttl`), as the store's expiration goroutine.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from brook import jwt, limits
from brook.config.settings import ConfigError, OperatorSettings
from brook.config.settings import DirectoryResolver as DirectorySettings
from brook.nkey import Prefix

log = logging.getLogger("brook.auth")

FILE_EXTENSION = ".jwt"
CACHE_LIMIT = 1000  # nats-server's NewCacheDirAccResolver default
SWEEP_INTERVAL_S = 60.0  # nats-server's expiration check, at most a minute apart

Clock = Callable[[], float]


class ResolverError(Exception):
    """A store operation refused; the message is nats-server's."""


def valid_key(key: str) -> bool:
    """nats-server's `nkeys.IsValidPublicKey`: a public key of any kind."""
    return any(jwt.is_public_key(key, prefix) for prefix in Prefix)


class MemoryResolver:
    """`resolver: MEMORY`: the preloaded JWTs; updates over `$SYS` replace them."""

    directory: DirectorySettings | None = None
    full = False

    def __init__(self, preload: dict[str, str]) -> None:
        self._jwts = dict(preload)

    def load(self, key: str) -> str | None:
        return self._jwts.get(key)

    def store(self, key: str, token: str) -> None:
        self._jwts[key] = token


@dataclass(slots=True)
class _Item:
    expires_at: float  # unix seconds; inf: never
    digest: bytes  # SHA-256 of the file's contents


class DirectoryResolver:
    """nats-server's `DirJWTStore` as its `full` and `cache` resolvers use it."""

    def __init__(self, settings: DirectorySettings, *, clock: Clock = time.time) -> None:
        self.directory = settings
        self.full = settings.kind == "FULL"
        self._root = Path(settings.dir)
        # nats-server's cache resolver deletes hard whatever the config says.
        self._delete = settings.delete if self.full else "hard"
        self._limit = settings.limit or (0 if self.full else CACHE_LIMIT)
        self._ttl_s = settings.ttl_s
        self._clock = clock
        self._index: OrderedDict[str, _Item] = OrderedDict()  # least recently used first
        self._hash = bytes(32)
        self._root.mkdir(parents=True, exist_ok=True)
        for path in _walk(self._root):
            try:
                data = path.read_bytes()
            except OSError:
                continue
            self._track(path.name.removesuffix(FILE_EXTENSION), data)

    @property
    def sweep_interval_s(self) -> float:
        """How often `sweep` runs: nats-server's expireCheck (half the ttl, at most 1 min)."""
        return min(self._ttl_s / 2, SWEEP_INTERVAL_S) if self._ttl_s else SWEEP_INTERVAL_S

    @property
    def hash(self) -> bytes:
        """The XOR of the indexed JWTs' SHA-256 (what pack requests compare)."""
        return self._hash

    def __len__(self) -> int:
        return len(self._index)

    def path(self, key: str) -> Path | None:
        """nats-server's `pathForKey`: `<dir>/<key>.jwt`, None for a key that is not one."""
        if len(key) < 2 or not valid_key(key):
            return None
        return self._root / f"{key}{FILE_EXTENSION}"

    # ------------------------------------------------------------------ reads

    def load(self, key: str) -> str | None:
        """The JWT stored for `key` (None when there is none); counts as a use."""
        path = self.path(key)
        if path is None:
            return None
        try:
            data = path.read_bytes()
        except OSError:
            return None
        item = self._index.get(key)
        if item is not None:
            if self._ttl_s:
                item.expires_at = self._clock() + self._ttl_s
            if not self.full:
                self._index.move_to_end(key)
        return data.decode("utf-8", "replace")

    def keys(self) -> list[str]:
        """The indexed, unexpired accounts, in the directory's lexical order (nats-server's
        `PackWalk`, which `$SYS.REQ.CLAIMS.LIST` and `PACK` use)."""
        return [key for key, _ in self.pack()]

    def pack(self) -> Iterator[tuple[str, str]]:
        now = self._clock()
        for path in _walk(self._root):
            key = path.name.removesuffix(FILE_EXTENSION)
            if key not in self._index:
                continue
            try:
                token = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if not token:
                continue
            expires = _expires(token)
            if 0 < expires < now:
                continue
            yield key, token

    # ------------------------------------------------------------------ writes

    def save(self, key: str, token: str) -> bool:
        """Store `token` for `key` (nats-server's `save`): True when the file changed."""
        path = self.path(key)
        if path is None:
            raise ResolverError("invalid public key")
        if not token:
            raise ResolverError("invalid JWT")
        data = token.encode()
        digest = hashlib.sha256(data).digest()
        item = self._index.get(key)
        if item is not None:
            self._index.move_to_end(key)
            if item.digest == digest:
                return False
        elif self._limit and len(self._index) >= self._limit:
            if self.full:
                raise ResolverError("jwt store is full")
            evicted = next(iter(self._index))
            evicted_path = self.path(evicted)
            try:
                if evicted_path is not None:
                    evicted_path.unlink()
            except OSError as exc:
                raise ResolverError(str(exc)) from None
            self._untrack(evicted)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except OSError as exc:
            raise ResolverError(str(exc)) from None
        self._track(key, data)
        return True

    def store(self, key: str, token: str) -> None:
        """nats-server's `saveIfNewer` (resolver `Store`, preloads): kept unless newer."""
        path = self.path(key)
        if path is None:
            raise ResolverError("invalid public key")
        try:
            existing = path.read_text(encoding="utf-8")
        except OSError:
            existing = None
        if existing is not None:
            new = jwt.decode(token)
            try:
                old = jwt.decode(existing)
            except jwt.InvalidJwt:
                old = None
            if old is not None:
                if old.id == new.id or old.issued_at > new.issued_at:
                    return
                if new.subject != key:
                    raise ResolverError("jwt subject nkey and provided nkey do not match")
                if old.subject != new.subject:
                    raise ResolverError("subject of existing and new jwt do not match")
        self.save(key, token)

    def delete(self, key: str) -> bool:
        """`$SYS.REQ.CLAIMS.DELETE` for one account: True when it was there."""
        if self._delete == "none":
            raise ResolverError("store is not set up to for delete")
        path = self.path(key)
        if path is None:
            raise ResolverError("invalid public key")
        try:
            if self._delete == "rename":
                os.replace(path, path.with_name(path.name + ".deleted"))
            else:
                path.unlink()
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise ResolverError(str(exc)) from None
        self._untrack(key)
        return True

    def sweep(self) -> list[str]:
        """Remove the files of expired JWTs (nats-server's expiration goroutine); the keys."""
        now = self._clock()
        gone = [key for key, item in self._index.items() if item.expires_at <= now]
        for key in gone:
            path = self.path(key)
            try:
                if path is not None:
                    path.unlink()
            except OSError:
                continue
            self._untrack(key)
        return gone

    # ------------------------------------------------------------------ index

    def _track(self, key: str, data: bytes) -> None:
        digest = hashlib.sha256(data).digest()
        if self._ttl_s:
            expires_at = self._clock() + self._ttl_s
        else:
            expires = _expires(data.decode("utf-8", "replace"))
            expires_at = float(expires) if expires else float("inf")
        old = self._index.pop(key, None)
        if old is not None:
            self._hash = _xor(self._hash, old.digest)
        self._index[key] = _Item(expires_at, digest)
        self._hash = _xor(self._hash, digest)

    def _untrack(self, key: str) -> None:
        item = self._index.pop(key, None)
        if item is not None:
            self._hash = _xor(self._hash, item.digest)


def _walk(root: Path) -> list[Path]:
    """The `*.jwt` files below `root` in Go's `filepath.Walk` order (lexical, depth first)."""
    found: list[Path] = []
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return found
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            found.extend(_walk(Path(entry.path)))
        elif entry.name.endswith(FILE_EXTENSION):
            found.append(Path(entry.path))
    return found


def _expires(token: str) -> int:
    """A JWT's `exp` as jwt's `DecodeGeneric` reads it; 0 when none or unreadable."""
    try:
        return jwt.decode(token).expires
    except jwt.InvalidJwt:
        return 0


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


class UrlResolver(MemoryResolver):
    """`resolver: URL("http://host/jwt/v1/accounts/")` (nats-server's `URLAccResolver`):
    an account's JWT is fetched by `GET <url><key>` the first time it is needed (a login,
    an import's exporter; ADR 0034), kept in memory after, and replaced by claim updates
    over `$SYS` as MEMORY's are. aiohttp's client, imported at the first fetch."""

    def __init__(self, url: str) -> None:
        super().__init__({})
        self.url = url
        self._fetching: dict[str, asyncio.Future[str | None]] = {}

    async def fetch(self, key: str) -> str | None:
        """The account's JWT, fetched unless held (concurrent fetches of one key share
        the first); None, the reason logged as nats-server's, when the server answers
        anything but 200 or not within `ACCOUNT_FETCH_TIMEOUT_S`."""
        held = self.load(key)
        if held is not None:
            return held
        pending = self._fetching.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._fetch(key))
            self._fetching[key] = pending
            pending.add_done_callback(lambda _: self._fetching.pop(key, None))
        return await asyncio.shield(pending)

    async def check(self) -> None:
        """nats-server's start-up test of the account server ("to see if anyone is
        home"): its base URL must answer 200, else the server does not start."""
        failure, _ = await self._get(self.url)
        if failure is not None:
            raise ConfigError(failure)

    async def _fetch(self, key: str) -> str | None:
        failure, body = await self._get(self.url + key)
        if failure is not None:
            log.debug("%s", failure)
            return None
        token = body.decode("utf-8", "replace")
        self.store(key, token)
        return token

    @staticmethod
    async def _get(url: str) -> tuple[str | None, bytes]:
        """(None, body) of a 200 answer to `GET url`; else (nats-server's words, b"")."""
        import aiohttp  # only the URL resolver fetches

        timeout = aiohttp.ClientTimeout(total=limits.ACCOUNT_FETCH_TIMEOUT_S)
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.get(url) as response,
            ):
                if response.status != 200:
                    return f'could not fetch <"{url}">: {response.status} {response.reason}', b""
                return None, await response.content.read(jwt.MAX_TOKEN_BYTES + 1)
        except (aiohttp.ClientError, TimeoutError) as exc:
            return f'could not fetch <"{url}">: {exc}', b""


Resolver = MemoryResolver | DirectoryResolver


def open_resolver(settings: OperatorSettings) -> Resolver:
    """The configured resolver, its preloads stored in it (nats-server's
    `configureResolver`: a directory keeps a file newer than its preload)."""
    if settings.url:
        return UrlResolver(settings.url)
    if settings.directory is None:
        return MemoryResolver(settings.preload)
    resolver = DirectoryResolver(settings.directory)
    for key, token in settings.preload.items():
        try:
            resolver.store(key, token)
        except ResolverError as exc:
            raise ConfigError(
                f"resolver_preload: preload account error for {key!r}: {exc}"
            ) from None
    return resolver
