"""The server's leafnode side (ADR 0032): each account's `AccountLeafs`, the remotes it
dials, and what monitoring reads of them. The server composes one `LeafNodes` and calls
`start` and `stop`; nothing here runs when `leafnodes {}` is not configured."""

from __future__ import annotations

import asyncio
import functools
import hmac
import logging
import socket
import ssl
from collections.abc import Callable, Iterator
from typing import Any

from brook import limits, nkey, nuid
from brook.config.settings import GLOBAL_ACCOUNT, LeafNodeSettings
from brook.leafnode.accept import LeafAcceptor, auth_user
from brook.leafnode.connection import LeafConnection, LeafLimits
from brook.leafnode.peers import AccountLeafs, SpokeLogin
from brook.leafnode.solicit import Remote
from brook.protocol.errors import AUTH_VIOLATION
from brook.routing.router import Router

log = logging.getLogger("brook.leafnode")

ClientLogin = Callable[[dict[str, Any], str], SpokeLogin | None]
"""A spoke's CONNECT and the nonce it signs -> whom it logs in as among the server's
users (nats-server's `isClientAuthorized`), or None: refused"""


class LeafNodes:
    def __init__(
        self,
        settings: LeafNodeSettings,
        router_of: Callable[[str], Router | None],
        limits_of: Callable[[str], LeafLimits],
        next_cid: Callable[[], int],
        on_closed: Callable[[LeafConnection], None] | None = None,
        client_login: ClientLogin | None = None,
    ) -> None:
        """`router_of(account)` is the account's router (None: no such account),
        `limits_of(account)` the connection settings of a leaf bound to it, `next_cid()`
        a connection id from the clients' sequence (nats-server numbers both alike),
        `on_closed(conn)` told of each connection that closes after its login,
        `client_login(connect, nonce)` how a spoke logs in as one of the clients' users
        when `leafnodes {}` has no authorization of its own (None: any spoke binds `$G`)."""
        self._on_closed = on_closed
        self._client_login = client_login
        self.settings = settings
        self._router_of = router_of
        self._limits_of = limits_of
        self.next_cid = next_cid
        self.accounts: dict[str, AccountLeafs] = {}
        self.remotes: list[Remote] = []
        self._listener: asyncio.Server | None = None
        self.port = 0  # the leafnode listener's, once it listens
        self._host = ""
        self._advertised_port = 0
        self._tls: ssl.SSLContext | None = None

    def account(self, name: str) -> AccountLeafs:
        leafs = self.accounts.get(name)
        if leafs is None:
            router = self._router_of(name)
            if router is None:
                raise ValueError(f"leafnodes: unknown account {name!r}")
            leafs = self.accounts[name] = AccountLeafs(name, router, on_closed=self._on_closed)
        return leafs

    def start(self) -> None:
        for remote in self.settings.remotes:
            r = Remote(
                remote,
                self.account(remote.account),
                self._limits_of(remote.account),
                reconnect_delay_s=self.settings.reconnect_delay_s,
                next_cid=self.next_cid,
            )
            self.remotes.append(r)
            r.start()

    async def listen(
        self, sock: socket.socket, host: str, tls: ssl.SSLContext | None = None
    ) -> None:
        """Accept spokes on `sock` (`leafnodes { listen }`), with TLS after the INFO when
        `tls` (the `leafnodes { tls }` context the server built)."""
        self.port = sock.getsockname()[1]
        self._host = host
        # What the INFO tells spokes (nats-server's `setLeafNodeInfoHostPortAndIP`).
        if self.settings.advertise:
            self._host, self._advertised_port = self.settings.advertised(self.port)
        else:
            self._advertised_port = self.port
        self._tls = tls
        loop = asyncio.get_running_loop()
        self._listener = await loop.create_server(self._acceptor, sock=sock, backlog=128)

    def _acceptor(self) -> LeafAcceptor:
        cid = self.next_cid()
        config = self._limits_of(GLOBAL_ACCOUNT)
        info: dict[str, Any] = {
            "server_id": config.server_id,
            "server_name": config.server_name,
            "version": limits.NATS_COMPAT_VERSION,
            "proto": limits.PROTOCOL_VERSION,
            "host": self._host,
            "port": self._advertised_port,
            "headers": True,
            "auth_required": True,
            "max_payload": config.max_payload,
            "client_id": cid,
            "nonce": nuid.random_id(),
            "compression": "off",
            "info_on_connect": True,
        }
        if not self.settings.no_advertise:
            info["leafnode_urls"] = [  # Go's net.JoinHostPort
                f"[{self._host}]:{self._advertised_port}"
                if ":" in self._host
                else f"{self._host}:{self._advertised_port}"
            ]
        if config.server_jetstream:  # nats-server: its JetStream and domain, for the spoke
            info["jetstream"] = True
        if config.domain:
            info["domain"] = config.domain
        if self._tls is not None:
            info["tls_required"] = True
        tls = self.settings.tls
        return LeafAcceptor(
            info,
            functools.partial(self._login, cid, info["nonce"]),
            self.settings.login_timeout_s,
            max_control_line=config.max_control_line,
            max_payload=config.max_payload,
            tls=self._tls,
            tls_timeout_s=tls.timeout_s if tls is not None else limits.TLS_TIMEOUT_S,
            cid=cid,
        )

    def _login(self, cid: int, nonce: str, connect: dict[str, Any]) -> LeafConnection | None:
        """nats-server's `isLeafNodeAuthorized` for user/password and nkey logins: the
        user of `leafnodes { authorization }` named in CONNECT with its password, or the
        nkey whose signature of `nonce` CONNECT carries, binds its account; without
        either, as nats-server, a spoke logs in as one of the server's client users
        (`client_login`), or binds `$G` when clients need no login."""
        spoke: SpokeLogin | None = None
        account = GLOBAL_ACCOUNT
        users = self.settings.users
        if not users and not self.settings.nkey and self._client_login is not None:
            spoke = self._client_login(connect, nonce)
            if spoke is None or self._router_of(spoke.account) is None:
                return None
            account = spoke.account
        elif self.settings.nkey and not users:
            if not self._nkey_signed(nonce, connect):
                return None
            account = self.settings.nkey_account
        elif users:
            name, password = str(connect.get("user", "")), str(connect.get("pass", ""))
            found = next((u for u in users if u.user == name), None)
            if found is None or not hmac.compare_digest(found.password.encode(), password.encode()):
                return None
            account = found.account
        return LeafConnection(
            self.account(account), self._limits_of(account), cid=cid, solicited=False, spoke=spoke
        )

    def _nkey_signed(self, nonce: str, connect: dict[str, Any]) -> bool:
        """CONNECT names the authorization's nkey and carries its signature of `nonce`."""
        key, sig = connect.get("nkey"), connect.get("sig")
        if key != self.settings.nkey or not isinstance(sig, str):
            return False
        signature = nkey.decode_signature(sig)
        public = nkey.decode_public_key(self.settings.nkey, nkey.Prefix.USER)
        return signature is not None and nkey.verify(public, nonce.encode(), signature)

    def reauthorize(self) -> None:
        """A config reload changed the server's users: as nats-server's
        `reloadAuthorization`, each spoke that logged in as a client is checked again
        with its CONNECT. One no longer let in gets `-ERR 'Authorization Violation'`
        and is closed; one whose user is now in another account or has other
        permissions is closed without a word and logs in again under them (nats-server
        keeps such a leaf with the new permissions, not reversed for the hub's side)."""
        if self._client_login is None or self.settings.users or self.settings.nkey:
            return
        for conn in list(self.connections()):
            if conn.solicited or conn.spoke is None or conn.transport is None:
                continue
            again = self._client_login(conn.remote.info, conn.nonce)
            if again is None:
                log.error(
                    "%s:%d - lid:%d - authentication error - %s",
                    *conn.peer,
                    conn.cid,
                    auth_user(conn.remote.info),
                )
                conn.send_error(AUTH_VIOLATION)
                conn.close("authentication failure")
            elif again != conn.spoke:
                conn.close("client closed")

    async def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
        for r in self.remotes:
            await r.stop()
        for conn in list(self.connections()):
            conn.close("server shutdown")
            await conn.closed

    def connections(self) -> Iterator[LeafConnection]:
        for leafs in self.accounts.values():
            yield from leafs.connections
