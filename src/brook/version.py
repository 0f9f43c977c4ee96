"""Brook's own version, a leaf: modules that report it import it from here rather than from
the `brook` package, whose `__init__` imports `brook.serve()` and with it the server."""

from __future__ import annotations

__version__ = "0.1.0"
