"""HTTP monitoring compatible with nats-server's monitoring port (`/varz`, `/connz`, ...).

Above the core server and apart from it: the server hands monitoring plain-data snapshots
(`brook.server.statistics.StatisticsFeed`) and never imports this package; whoever composes
a server (`brook.serve()`, `brook serve`) passes `MonitorServer` in as its monitor factory.
The JSON shapes, which follow nats-server field for field, live here in one place.

`MonitorServer` imports the HTTP stack (aiohttp, `brook.monitor.http`) only when a server
is given a monitoring port: a server without one starts without loading it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from brook.server.statistics import Monitor, StatisticsFeed

__all__ = ["MonitorServer"]


def MonitorServer(feed: StatisticsFeed) -> Monitor:
    """The monitoring listener of `feed`'s server (`brook.monitor.http.MonitorServer`)."""
    from brook.monitor.http import MonitorServer as Listener

    return Listener(feed)
