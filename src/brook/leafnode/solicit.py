"""A remote of `leafnodes { remotes [...] }`: dialled, and dialled again whenever the
connection ends, as nats-server's `connectToRemoteLeafNode` (ADR 0032).

The URLs are tried in turn: those the hub's INFO gave (`leafnode_urls`, unless
`ignore_discovered_servers`) first, then the configured ones, the one just dialled moved
last (nats-server's `updateLeafNodeURLs` and `pickNextURL`); a discovered URL takes the
user and password of the first configured URL that has them. After a connection ends
the spoke waits `reconnect_delay` (30 s when a loop was detected) before it dials again;
after a failed dial, that delay plus a random jitter of up to as much again, so spokes
cut off together do not all come back at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import ssl
from collections.abc import Callable
from urllib.parse import unquote, urlsplit

from brook import limits
from brook.config.settings import LeafRemoteSettings, TLSSettings
from brook.leafnode.connection import LeafConnection, LeafLimits
from brook.leafnode.peers import AccountLeafs

log = logging.getLogger("brook.leafnode")

_CONNECT_ERROR = "Error trying to connect as leafnode to remote server %r (attempt %d): %s"


def client_context(tls: TLSSettings) -> ssl.SSLContext:
    """A dialling side's TLS: the hub's certificate checked against `ca_file` (the
    system's CAs without one) and its name, `cert_file`/`key_file` presented."""
    context = ssl.create_default_context(cafile=tls.ca_file or None)
    if tls.cert_file:
        context.load_cert_chain(tls.cert_file, tls.key_file or None)
    return context


def _same(conn: LeafConnection) -> LeafConnection:
    return conn


class Remote:
    """One configured hub and the task that keeps a connection to it."""

    def __init__(
        self,
        settings: LeafRemoteSettings,
        leafs: AccountLeafs,
        config: LeafLimits,
        *,
        reconnect_delay_s: float,
        next_cid: Callable[[], int],
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self.leafs = leafs
        self.config = config
        self.reconnect_delay_s = reconnect_delay_s
        self._next_cid = next_cid
        self._random = (rng or random.Random()).random
        self.urls = list(settings.urls)  # tried in turn (`_pick`)
        self._current: str | None = None
        # nats-server's `saveUserPassword`: for a discovered URL, which has none
        self._user = next((p for p in map(urlsplit, settings.urls) if p.username is not None), None)
        self._tls = client_context(settings.tls) if settings.tls is not None else None
        self._tls_timeout_s = settings.tls.timeout_s if settings.tls else limits.TLS_TIMEOUT_S
        self.connection: LeafConnection | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        conn = self.connection
        if conn is not None:
            conn.close("server shutdown")
            await conn.closed

    def _pick(self) -> str:
        """nats-server's `pickNextURL`: the first URL, after the one dialled last is moved
        to the end."""
        urls = self.urls
        if self._current is not None and len(urls) > 1 and urls[0] == self._current:
            urls.append(urls.pop(0))
        self._current = urls[0]
        return self._current

    def _discovered(self, hub_urls: list[str]) -> None:
        """The hub's `leafnode_urls` (`host:port`) first, but those of configured URLs,
        then the configured ones (nats-server's `doUpdateLNURLs`)."""
        configured = {(p.hostname, p.port) for p in map(urlsplit, self.settings.urls)}
        found = [f"nats-leaf://{u}" for u in hub_urls]
        self.urls = [
            u for u in found if (urlsplit(u).hostname, urlsplit(u).port) not in configured
        ] + list(self.settings.urls)

    async def _run(self) -> None:
        attempts = 0
        while True:
            url = self._pick()
            parts = urlsplit(url)
            user = None
            known = parts if parts.username is not None else self._user
            if known is not None and known.username is not None:
                password = None if known.password is None else unquote(known.password)
                user = (unquote(known.username), password)
            loop = asyncio.get_running_loop()
            settings = self.settings
            conn = LeafConnection(
                self.leafs,
                self.config,
                url_user=user,
                credentials=settings.credentials,
                nkey_seed=settings.nkey,
                # a tls:// URL without a `tls {}` block: the system's CAs
                tls=self._tls or (ssl.create_default_context() if parts.scheme == "tls" else None),
                hostname=parts.hostname or "",
                tls_timeout_s=self._tls_timeout_s,
                deny_imports=tuple(d.encode() for d in settings.deny_imports),
                deny_exports=tuple(d.encode() for d in settings.deny_exports),
                cid=self._next_cid(),
                solicited=True,
            )
            try:
                await loop.create_connection(
                    functools.partial(_same, conn), parts.hostname or "", parts.port or 0
                )
            except OSError as exc:
                attempts += 1
                log.error(_CONNECT_ERROR, parts.netloc, attempts, exc)
                delay = self.reconnect_delay_s
                await asyncio.sleep(delay + self._random() * delay)
                continue
            attempts = 0
            self.connection = conn
            await asyncio.shield(conn.closed)  # stop() cancels this task, not the future
            self.connection = None
            if conn.leafnode_urls and not settings.ignore_discovered_servers:
                self._discovered(conn.leafnode_urls)
            delay = limits.LEAF_LOOP_DELAY_S if conn.loop_detected else self.reconnect_delay_s
            await asyncio.sleep(delay)
