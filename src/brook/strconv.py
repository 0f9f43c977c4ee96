"""Go's decimal integer syntax (`strconv.Atoi`, `ParseInt` base 10), in one place.

nats-server reads integers from JSON literals, query parameters and pull-request bodies
with Go's strconv: an optional sign and ASCII digits, nothing else (no spaces, no
underscores, no other Unicode digits, which Python's `int()` would take). Callers match
`INTEGER` in full before `int()`, and check the range they need themselves.

A leaf module: it imports nothing of Brook (an import-linter contract holds it so).
"""

from __future__ import annotations

import re

__all__ = ["INTEGER"]

INTEGER = re.compile(r"[+-]?[0-9]+")
