"""A `Server`'s accounts changed while it runs (`AccountChanges`, a part of `Server`: ADR
0031): a JWT account the resolver holds added at its first login or claim update, its
JetStream limits, started or stopped by an update, its deletion (ADR 0033), its JWT's
mappings, exports and imports (ADR 0034); the account's logged-in clients a claim update
walks."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from brook.routing.internal import InternalClient

if TYPE_CHECKING:
    from brook import jwt
    from brook.server.accounts import Account, Accounts
    from brook.server.auth import Authenticator
    from brook.server.connection import ClientConnection
    from brook.server.statistics import SystemServices

log = logging.getLogger("brook.server")


class AccountChanges:
    """`Server`'s part for accounts changed by JWT updates (a mixin, ADR 0031)."""

    if TYPE_CHECKING:  # what it uses of `Server`, which sets all of it
        accounts: Accounts
        authenticator: Authenticator
        clients: dict[int, ClientConnection]
        system: SystemServices | None
        _background: set[asyncio.Future[None]]

    async def add_account(self, name: str, limits: jwt.AccountLimits) -> Account:
        """A JWT account the resolver holds, added at its first login or claim update
        (ADR 0033): its router, its JetStream with its JWT's limits (when its JWT enables
        it, not the system account's) and the system services imported into it, as for
        accounts at start."""
        system = self.accounts.system_account
        known = self.accounts.get(name) is not None  # deleted, loaded anew: imports kept
        account = await self.accounts.add(name, limits)
        if self.system is not None and not account.is_system and not known:
            self.system.add_account(name, InternalClient(account.router, f"{system.name} imports"))
        operator = self.authenticator.operator
        claims = operator.claims(name) if operator is not None else None
        if claims is not None:
            await self.account_links(claims)
        return account

    async def account_links(self, claims: jwt.AccountClaims) -> None:
        """An account JWT's mappings, exports and imports (ADR 0034), its exporters not
        loaded yet looked up in the resolver and added first, as nats-server's
        `lookupAccount`."""
        operator = self.authenticator.operator
        assert operator is not None
        for imported in claims.imports:
            exporter = self.accounts.get(imported.account)
            if exporter is None or exporter.deleted:
                await operator.fetch(imported.account)  # the URL resolver's
                found = operator.lookup(imported.account)
                if found is not None:
                    await self.add_account(found.subject, found.limits)
        self._apply_jwt(claims)

    def _apply_jwt(self, claims: jwt.AccountClaims) -> None:
        """The JWT's mappings (for the account's connected clients too), exports and
        imports."""
        self.accounts.apply_jwt(claims)
        account = self.accounts.get(claims.subject)
        if account is not None:
            for client in self.account_clients(claims.subject):
                client.mappings = account.mappings

    def account_imports(self, claims: jwt.AccountClaims) -> None:
        """An account JWT update's mappings, exports and imports: applied at once when
        every exporter is loaded, else once they are (in the background)."""
        if all(
            (a := self.accounts.get(i.account)) is not None and not a.deleted
            for i in claims.imports
        ):
            self._apply_jwt(claims)
            return
        task = asyncio.ensure_future(self.account_links(claims))
        self._background.add(task)
        task.add_done_callback(self._background_done)

    def account_clients(self, account: str) -> list[ClientConnection]:
        """The account's logged-in clients, oldest first (a claim update walks them)."""
        return [c for c in self.clients.values() if c.connected and c.account.name == account]

    def account_jetstream(self, name: str, limits: jwt.AccountLimits) -> None:
        """An account JWT update (ADR 0033): its JetStream limits apply at once; an
        enabled or disabled JetStream starts or stops the account's engine in the
        background, as nats-server's `configJetStream` after the update's reply."""
        account = self.accounts.get(name)
        if account is None or account.is_system:
            return
        self.accounts.set_jetstream_limits(account, limits)
        enabled = limits.jetstream_enabled
        if enabled == account.jetstream_enabled and enabled == (account.jetstream is not None):
            return
        task = asyncio.ensure_future(self.accounts.set_jetstream(account, enabled))
        self._background.add(task)
        task.add_done_callback(self._background_done)

    def account_deleted(self, name: str) -> None:
        """An account's JWT was deleted (ADR 0033): its JetStream stops in the background
        (`Accounts.remove`), as nats-server's `removeCb` disables it."""
        account = self.accounts.get(name)
        if account is None or account.is_system:
            return
        task = self.accounts.remove(account)
        self._background.add(task)
        task.add_done_callback(self._background_done)

    def _background_done(self, task: asyncio.Future[None]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("account JetStream change failed: %r", task.exception())
