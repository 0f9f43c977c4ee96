"""Spark's discovery hook for the `jetstream` format (part of `brook-nats[spark]`).

At the first use of a Python data source Spark imports every top-level module named
`pyspark_*` and registers its `DefaultSource`, so `spark.read.format("jetstream")` needs no
`spark.dataSource.register(...)` call. The implementation lives in `brook_spark`.

Spark imports this module in every application of the environment, so it must never fail:
when a dependency of the extra is missing, the format still registers and says what to
install when it is used, and the user's other data sources keep working.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource

try:
    from brook_spark.source import JetStreamDataSource as DefaultSource
except ImportError as missing:  # pragma: no cover - exercised only without the extra
    _reason = f"{missing}"

    class DefaultSource(DataSource):  # type: ignore[no-redef]
        """Stands in for the connector when brook-nats[spark] is only partly installed."""

        @classmethod
        def name(cls) -> str:
            return "jetstream"

        def schema(self) -> Any:
            raise _missing()

        def writer(self, schema: Any, overwrite: bool) -> Any:
            raise _missing()

        def streamWriter(self, schema: Any, overwrite: bool) -> Any:
            raise _missing()

    def _missing() -> ImportError:
        return ImportError(
            f"the jetstream format needs: pip install 'brook-nats[spark]' ({_reason})"
        )


__all__ = ["DefaultSource"]
