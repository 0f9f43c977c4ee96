"""HTTP monitoring compatible with nats-server's `/varz`, `/connz`, `/subsz` and `/healthz`.

Above the core server and apart from it: the server hands monitoring plain-data snapshots
(`brook.server.statistics.StatisticsFeed`) and never imports this package; whoever composes
a server (`brook.serve()`, `brook serve`) passes `MonitorServer` in as its monitor factory.
The JSON shapes, which follow nats-server field for field, live here in one place.
"""

from __future__ import annotations

__all__ = ["MonitorServer"]

from brook.monitor.http import MonitorServer
