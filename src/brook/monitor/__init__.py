"""HTTP monitoring compatible with nats-server's `/varz`, `/connz` and `/healthz`.

Kept apart from the core server so that a server without `http_port` never imports it,
and so that the JSON shapes (which follow nats-server field for field) live in one place.
"""

from __future__ import annotations

__all__ = ["MonitorServer"]

from brook.monitor.http import MonitorServer
