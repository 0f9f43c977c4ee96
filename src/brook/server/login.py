"""A client connection's login: CONNECT (its options, the credentials checked by
`server/auth.py`, bcrypt in a thread), the no_auth_user's login without one, the account
it binds the connection to, a user JWT's limits and expiry (ADR 0028), the auth timeout,
and whom monitoring names as its user."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Any, cast

from brook.protocol import encoder
from brook.protocol import errors as perr
from brook.protocol.parser import ProtocolError
from brook.server.auth import Login, connect_refusal, merge_connect_options, verify_bcrypt
from brook.server.permissions import (
    CompiledPermissions,
    ConnectionPermissions,
    may_subscribe,
)

if TYPE_CHECKING:
    from brook.protocol.parser import ClientParser
    from brook.routing.mappings import SubjectMappings
    from brook.routing.router import Router
    from brook.routing.sublist import Subscription
    from brook.server.accounts import Account
    from brook.server.auth import Authenticator
    from brook.server.connection import ClientConnection
    from brook.server.jwtauth import JwtUser
    from brook.server.server import Server
    from brook.server.tls import CertificateNames
    from brook.server.websocket import WebSocketListener

log = logging.getLogger("brook.connection")


class ClientLogin:
    """`ClientConnection`'s login part (a mixin, ADR 0031)."""

    if TYPE_CHECKING:  # what it uses of `ClientConnection`, which sets all of it
        server: Server
        websocket: WebSocketListener | None
        authenticator: Authenticator
        cid: int
        host: str
        parser: ClientParser
        transport: asyncio.Transport | None
        loop: asyncio.AbstractEventLoop
        closed: bool
        connected: bool
        account: Account
        router: Router
        mappings: SubjectMappings | None
        subs: dict[bytes, Subscription]
        max_subs: int
        ping_interval_s: float
        certificate: CertificateNames | None
        nonce: str
        credential_cookies: dict[str, str]
        _connect_options: dict[str, Any]
        _admitted: JwtUser | None
        _auth_handle: asyncio.TimerHandle | None
        _ping_handle: asyncio.TimerHandle | None
        verbose: bool
        pedantic: bool
        echo: bool
        headers: bool
        no_responders: bool
        protocol: int
        name: str
        lang: str
        version: str
        user: str
        login: Login | None
        perms: ConnectionPermissions | None
        started_mono: float
        rtt_s: float | None
        rtt_measured_at: float | None

        def _send(self, data: bytes) -> None: ...
        def close(self, reason: str) -> None: ...
        def close_with_error(self, err_text: str, reason: str) -> None: ...
        def remove_subscription(self, sub: Subscription) -> None: ...
        def _ping_tick(self) -> None: ...

    def _require_connect(self) -> bool:
        """Before CONNECT on a server with auth, every operation is an authorization violation
        (unless it logs the client in as the no_auth_user)."""
        if self.connected or not self.authenticator.required:
            return True
        if self._login_without_connect():
            return True
        self.close_with_error(perr.AUTH_VIOLATION, "operation before CONNECT")
        return False

    def _login_without_connect(self) -> bool:
        """nats-server lets a client that starts with another operation than CONNECT (a
        telnet demo) in as the no_auth_user when that is a password user: as after an
        empty CONNECT, but with no +OK for it."""
        login = self.authenticator.login_without_connect(
            self.nonce, websocket=self.websocket is not None
        )
        if login is None:
            return False
        self._finish_connect(login, {}, acknowledge=False)
        return True

    def on_connect(self, options: dict[str, Any]) -> None:
        if self.rtt_measured_at is None:
            # nats-server's first estimate of the round-trip time, until a PING measures
            # it: the time from accepting the connection to its CONNECT.
            self.rtt_s = max(time.monotonic() - self.started_mono, 1e-9)
        options = merge_connect_options(self._connect_options, options)
        for key, value in self.credential_cookies.items():
            if not options.get(key):  # a WebSocket cookie stands in for what CONNECT lacks
                options[key] = value
        self._connect_options = options
        operator = self.authenticator.operator
        fetch = operator.account_to_fetch(options) if operator is not None else None
        if operator is not None and fetch is not None:
            # The URL resolver (ADR 0034): hold this connection, as for bcrypt, until
            # the account's JWT is fetched, then log in as with any resolver.
            self.parser.paused = True
            if self.transport is not None:
                self.transport.pause_reading()
            future = asyncio.ensure_future(operator.fetch(fetch))
            future.add_done_callback(lambda _: self._fetched(options))
            return
        self._log_in(options)

    def _fetched(self, options: dict[str, Any]) -> None:
        if self.closed:
            return
        self._log_in(options)
        self._resume_after_connect()

    def _log_in(self, options: dict[str, Any]) -> None:
        ws = self.websocket
        tls_map = self.server.tls_map if ws is None else ws.tls_map
        login = self.authenticator.connect_login(
            options, self.nonce, tls_map, self.certificate, host=self.host, websocket=ws is not None
        )
        if login is not None and login.bcrypt is not None:
            # bcrypt takes tens of milliseconds: verify in a thread and hold this
            # connection's later operations (and reads) until the answer is in.
            self.parser.paused = True
            if self.transport is not None:
                self.transport.pause_reading()
            future = self.loop.run_in_executor(None, verify_bcrypt, *login.bcrypt)
            future.add_done_callback(lambda f: self._auth_done(f, login, options))
            return
        self._finish_connect(login, options)

    def _auth_done(
        self, future: asyncio.Future[bool], login: Login, options: dict[str, Any]
    ) -> None:
        if self.closed:
            return
        ok = not future.cancelled() and future.exception() is None and future.result()
        self._finish_connect(login if ok else None, options)
        self._resume_after_connect()

    def _add_account(self, login: Login, options: dict[str, Any], acknowledge: bool) -> None:
        """A JWT login to an account the server has not loaded yet (or whose JWT was
        deleted since, ADR 0033): hold this connection (as for bcrypt) until the account
        is added (its JetStream started), then log in."""
        assert login.jwt is not None
        self.parser.paused = True
        if self.transport is not None:
            self.transport.pause_reading()
        future = asyncio.ensure_future(
            self.server.add_account(login.account, login.jwt.account_limits)
        )

        def added(done: asyncio.Future[Account]) -> None:
            if self.closed:
                return
            if done.cancelled() or done.exception() is not None:
                log.error(
                    "cid=%d account %s could not be added: %r",
                    self.cid,
                    login.account,
                    None if done.cancelled() else done.exception(),
                )
                self._finish_connect(None, options)
                return
            self._finish_connect(login, options, acknowledge=acknowledge)
            self._resume_after_connect()

        future.add_done_callback(added)

    def _resume_after_connect(self) -> None:
        if not self.connected:  # authentication failed and the connection is closed
            return
        if self.transport is not None:
            self.transport.resume_reading()
        try:
            self.parser.resume()
        except ProtocolError as exc:
            if exc.err_text is None:
                self.close(f"protocol violation: {exc.reason}")
            else:
                self.close_with_error(exc.err_text, f"protocol violation: {exc.reason}")

    def _finish_connect(
        self, login: Login | None, options: dict[str, Any], *, acknowledge: bool = True
    ) -> None:
        if login is None:
            who = options.get("user") or options.get("nkey") or ""
            log.info("cid=%d authentication failed (user=%r)", self.cid, who)
            self.close_with_error(perr.AUTH_VIOLATION, "authentication failure")
            return
        account = self.server.accounts.get(login.account)
        if (account is None or account.deleted) and login.jwt is not None:
            self._add_account(login, options, acknowledge)
            return
        if account is None:  # a login to an account this server does not have
            log.info("cid=%d authentication failed (no account %r)", self.cid, login.account)
            self.close_with_error(perr.AUTH_VIOLATION, "authentication failure")
            return
        if login.jwt is not None:
            if self._admitted is not None:  # a CONNECT again: counted anew
                self.authenticator.release(self._admitted)
                self._admitted = None
            if not self.authenticator.admit(login.jwt):
                log.info("cid=%d account %s: maximum connections", self.cid, login.jwt.account)
                self.close_with_error(perr.MAX_ACCOUNT_CONNECTIONS, "maximum account connections")
                return
            self._admitted = login.jwt
        refusal = connect_refusal(options)
        if refusal is not None:
            self.close_with_error(*refusal)
            return
        if account is not self.account:
            self._bind(account)
        if self._auth_handle is not None:
            self._auth_handle.cancel()
            self._auth_handle = None
        if self._ping_handle is not None and not self.connected:
            self._ping_handle.cancel()
            first = min(self.ping_interval_s, self.server.first_ping_interval_s)
            self._ping_handle = self.loop.call_later(first, self._ping_tick)
        self.verbose = options.get("verbose", True)
        self.pedantic = options.get("pedantic", True)
        self.echo = options.get("echo", True)
        self.headers = options.get("headers", False)
        self.no_responders = options.get("no_responders", False)
        self.protocol = options.get("protocol", 0)
        self.name = options.get("name", "")
        self.lang = options.get("lang", "")
        self.version = options.get("version", "")
        self.user = login.name
        self.login = login
        compiled = self.authenticator.permissions(login)
        self.perms = ConnectionPermissions(compiled) if compiled is not None else None
        if not self.connected:  # a CONNECT again changes options, it is no new client
            self.connected = True
            self.server.client_connected(cast("ClientConnection", self))  # the mixin's only user
        if self.verbose and acknowledge:
            self._send(encoder.OK)
        if login.jwt is not None:
            self._apply_jwt_limits(login.jwt)

    def _apply_jwt_limits(self, user: JwtUser) -> None:
        """A user JWT's limits (nats-server's `applyAccountLimits`, `setExpiration`): the
        payload and subscription bounds lowered to the user's and its account's, and the
        login ended when the JWT (or its account's) expires or its connect-time window closes."""
        if user.max_payload >= 0:
            self.parser.max_payload = min(self.parser.max_payload, user.max_payload)
        if user.max_subs >= 0:
            self.max_subs = (
                user.max_subs if self.max_subs < 0 else min(self.max_subs, user.max_subs)
            )
        if self.max_subs == 0:  # as nats-server: at the limit already, so told and closed
            self.close_with_error(perr.MAX_SUBSCRIPTIONS, "maximum subscriptions exceeded")
            return
        ends = [
            (seconds, text)
            for seconds, text in (
                (user.expires_in_s, perr.AUTH_EXPIRED),
                (user.account_expires_in_s, perr.ACCOUNT_AUTH_EXPIRED),
            )
            if seconds is not None
        ]
        if ends:
            seconds, text = min(ends)
            self._auth_handle = self.loop.call_later(seconds, self._auth_expired, text)

    @property
    def jwt_user(self) -> JwtUser | None:
        """The user JWT's login, in operator mode."""
        return self.login.jwt if self.login is not None else None

    def account_updated(self, update: JwtUser | str) -> None:
        """This JWT login's account JWT was updated (ADR 0031): `update` is the login
        under the new claims (`OperatorMode.recheck`), or the `-ERR` text it ends with.
        As nats-server's `applyAccountLimits`: the payload and subscription bounds are
        computed anew (a client at or over the new `subs` is told and closed), the
        expiry timer follows the new `exp`, and users without permissions of their own
        get the account's new `default_permissions`."""
        if self.closed or self.login is None or self.login.jwt is None:
            return
        if isinstance(update, str):
            if update:
                self.close_with_error(update, "account JWT update: " + update)
            else:  # nats-server's AuthenticationViolation close: no -ERR
                self.close("authentication failure")
            return
        settings = self.server.settings
        self.parser.max_payload = settings.max_payload_bytes
        self.max_subs = settings.max_subscriptions or -1
        previous = self.login.jwt
        self.login = dataclasses.replace(self.login, jwt=update)
        if self._auth_handle is not None:
            self._auth_handle.cancel()
            self._auth_handle = None
        self._apply_jwt_limits(update)
        closed: bool = self.closed  # (it may have closed the connection)
        if closed:
            return
        # As nats-server: at the new `subs` already (counted before the new permissions
        # drop any), told after those drops and closed.
        at_limit = 0 <= self.max_subs <= len(self.subs)
        if not update.own_permissions and update.permissions != previous.permissions:
            compiled = CompiledPermissions(update.permissions) if update.permissions else None
            self.perms = ConnectionPermissions(compiled) if compiled is not None else None
            self.login = dataclasses.replace(self.login, compiled=compiled)
            if compiled is not None:
                self._drop_forbidden_subscriptions()
        if at_limit:
            self.close_with_error(perr.MAX_SUBSCRIPTIONS, "maximum subscriptions exceeded")

    def reauthorize(self) -> None:
        """A config reload changed the server's users (server/reload.py): this client is
        checked again as nats-server's `reloadAuthorization` does. A client whose CONNECT
        named a user or nkey that is gone or now in another account is closed without a
        word; one whose credentials no longer log in (a new password or token) gets
        `-ERR 'Authorization Violation'` and is closed; the others take their user's new
        permissions, which drop the subscriptions they no longer allow. Operator mode's
        users are not the config file's: JWT logins are left as they are."""
        if self.closed or not self.connected or self.jwt_user is not None:
            return
        ws = self.websocket
        self.authenticator = self.server.authenticator if ws is None else ws.authenticator
        options = self._connect_options
        if options.get("user") or options.get("nkey"):
            entry = self.authenticator.configured(options)
            if entry is None or entry.account != self.account.name:
                self.close("client closed")  # nats-server's ClientClosed: no -ERR
                return
        tls_map = self.server.tls_map if ws is None else ws.tls_map
        login = self.authenticator.connect_login(
            options, self.nonce, tls_map, self.certificate, host=self.host, websocket=ws is not None
        )
        pending = login.bcrypt if login is not None else None
        if login is not None and pending is not None:
            previous = self.login.entry if self.login is not None else None
            checked = dataclasses.replace(login, bcrypt=None)
            if getattr(previous, "password", None) == pending[1]:
                login = checked  # the hash it logged in with: checked then
            else:
                future = self.loop.run_in_executor(None, verify_bcrypt, *pending)
                future.add_done_callback(
                    lambda f: self._reauthorized(
                        checked
                        if not f.cancelled() and f.exception() is None and f.result()
                        else None
                    )
                )
                return
        self._reauthorized(login)

    def _reauthorized(self, login: Login | None) -> None:
        if self.closed:
            return
        if login is None or login.account != self.account.name:
            log.error("cid=%d - authentication error - %s", self.cid, self.auth_user or "client")
            self.close_with_error(perr.AUTH_VIOLATION, "authentication failure")
            return
        self.user = login.name
        self.login = login
        compiled = self.authenticator.permissions(login)
        self.perms = ConnectionPermissions(compiled) if compiled is not None else None
        if compiled is not None:
            self._drop_forbidden_subscriptions()

    def _drop_forbidden_subscriptions(self) -> None:
        """nats-server's `processSubsOnConfigReload`: the subscriptions the new
        permissions do not allow are removed, each told with an `-ERR` and logged."""
        for sub in list(self.subs.values()):
            if may_subscribe(self.perms, sub.subject, sub.queue):
                continue
            self.remove_subscription(sub)
            sid = perr.go_quote(sub.sid)
            text = perr.subscribe_violation(sub.subject, sub.queue)
            self._send(encoder.err(f"{text} (sid {sid})"))
            log.info("cid=%d removed sub %r (sid %s): not authorized", self.cid, sub.subject, sid)

    def _bind(self, account: Account) -> None:
        """Use `account`'s subjects from now on. A CONNECT logging in again, to another
        account, leaves the subscriptions made before receiving nothing from either, as
        on nats-server: they leave the old account's router and stay unsubscribable."""
        for sub in self.subs.values():
            self.router.unsubscribe(sub)
        self.account, self.router = account, account.router
        self.mappings = account.mappings

    @property
    def auth_user(self) -> str:
        """Whom `/connz?auth=true` names, as nats-server's `getRawAuthUser`: the nkey or
        user name CONNECT gave (or the one no_auth_user or verify_and_map stood in for),
        "[REDACTED]" for a token, whether or not the server asks for credentials."""
        if not self.connected:
            return ""
        options = self._connect_options
        for key in ("nkey", "user"):
            value = options.get(key)
            if value:
                return self.user or str(value)
        if self.user:
            return self.user
        return "[REDACTED]" if options.get("auth_token") else ""

    def _auth_timeout(self) -> None:
        self._auth_handle = None
        if not self.connected and not self.closed:
            self.close_with_error(perr.AUTH_TIMEOUT, "authentication timeout")

    def _auth_expired(self, text: str) -> None:
        """The user JWT or its account JWT expired (nats-server's `authExpired`,
        `accountAuthExpired`)."""
        self._auth_handle = None
        if not self.closed:
            self.close_with_error(text, "authentication expired")
