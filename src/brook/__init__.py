"""Brook: a NATS JetStream-compatible streaming server written in Python.

`brook.serve()` runs a complete server inside the caller's event loop, for tests and
embedding::

    async with brook.serve(port=0) as server:
        nc = await nats.connect(server.url)
"""

from __future__ import annotations

from brook import _compiled

_compiled.install()  # before anything imports a compiled module (ADR 0045)

from brook.embed import serve  # noqa: E402
from brook.version import __version__  # noqa: E402

__all__ = ["__version__", "serve"]
