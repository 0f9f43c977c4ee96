"""Brook's PySpark connector: JetStream streams as Spark DataFrames, in batch and streaming.

Install with `pip install 'brook-nats[spark]'`; then `spark.read.format("jetstream")` works with no
registration call, because Spark discovers the `pyspark_jetstream` module. Where module
discovery is not available (for example code shipped with `--py-files`), call
`brook_spark.register(spark)` once. The server never imports this package.
"""

from __future__ import annotations

from typing import Any

# Brook's package installs, on import, the guard that never lets a stale build of the
# compiled modules run (ADR 0045); the connector's `framescan` is one of them (ADR 0059),
# so the guard must be in place before any module of this package imports it.
import brook  # noqa: F401

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register the `jetstream` format on a SparkSession explicitly."""
    from brook_spark.source import JetStreamDataSource

    spark.dataSource.register(JetStreamDataSource)
