"""A `Server`'s accounts changed while it runs (`AccountChanges`, a part of `Server`: ADR
0031): a JWT account the resolver holds added at its first login or claim update, its
JetStream limits, started or stopped by an update, and its deletion (ADR 0033); the
account's logged-in clients a claim update walks."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from brook.routing.internal import InternalClient

if TYPE_CHECKING:
    from brook import jwt
    from brook.server.accounts import Account, Accounts
    from brook.server.connection import ClientConnection
    from brook.server.statistics import SystemServices

log = logging.getLogger("brook.server")


class AccountChanges:
    """`Server`'s part for accounts changed by JWT updates (a mixin, ADR 0031)."""

    if TYPE_CHECKING:  # what it uses of `Server`, which sets all of it
        accounts: Accounts
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
        return account

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
