"""Brook: a NATS JetStream-compatible streaming server written in Python.

`brook.serve()` runs a complete server inside the caller's event loop, for tests and
embedding::

    async with brook.serve(port=0) as server:
        nc = await nats.connect(server.url)
"""

from __future__ import annotations

from brook.embed import serve
from brook.version import __version__

__all__ = ["__version__", "serve"]
