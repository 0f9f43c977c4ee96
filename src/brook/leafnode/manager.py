"""The server's leafnode side (ADR 0032): each account's `AccountLeafs`, the remotes it
dials, and what monitoring reads of them. The server composes one `LeafNodes` and calls
`start` and `stop`; nothing here runs when `leafnodes {}` is not configured."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from brook.config.settings import LeafNodeSettings
from brook.leafnode.connection import LeafConnection, LeafLimits
from brook.leafnode.peers import AccountLeafs
from brook.leafnode.solicit import Remote
from brook.routing.router import Router


class LeafNodes:
    def __init__(
        self,
        settings: LeafNodeSettings,
        router_of: Callable[[str], Router | None],
        limits_of: Callable[[str], LeafLimits],
    ) -> None:
        """`router_of(account)` is the account's router (None: no such account),
        `limits_of(account)` the connection settings of a leaf bound to it."""
        self.settings = settings
        self._router_of = router_of
        self._limits_of = limits_of
        self.accounts: dict[str, AccountLeafs] = {}
        self.remotes: list[Remote] = []

    def account(self, name: str) -> AccountLeafs:
        leafs = self.accounts.get(name)
        if leafs is None:
            router = self._router_of(name)
            if router is None:
                raise ValueError(f"leafnodes: unknown account {name!r}")
            leafs = self.accounts[name] = AccountLeafs(name, router)
        return leafs

    def start(self) -> None:
        for remote in self.settings.remotes:
            r = Remote(
                remote,
                self.account(remote.account),
                self._limits_of(remote.account),
                reconnect_delay_s=self.settings.reconnect_delay_s,
            )
            self.remotes.append(r)
            r.start()

    async def stop(self) -> None:
        for r in self.remotes:
            await r.stop()

    def connections(self) -> Iterator[LeafConnection]:
        for leafs in self.accounts.values():
            yield from leafs.connections
