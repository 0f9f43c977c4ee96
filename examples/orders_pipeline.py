"""Orders to revenue: a Spark Structured Streaming pipeline on JetStream streams.

Start Brook (`make run`), then, in another terminal:

    make example                       # or: .venv/bin/python examples/orders_pipeline.py

1. Generates order events (JSON) for the last ten minutes and writes them into the stream
   ORDERS with `df.write.format("jetstream")`, each keyed by its order id (`msg_id`), so a
   rerun within the duplicate window does not publish an order twice.
2. Reads ORDERS with `spark.readStream.format("jetstream")`, and computes revenue per
   product per minute with a one-minute watermark (late orders still count until then).
3. Writes the closed windows to Parquet (`pipeline-data/revenue/`) and publishes them as JSON
   into the stream REVENUE (`revenue.<product>`) with `df.writeStream.format("jetstream")`.
4. Prints both results.

The queries use `trigger(availableNow=True)`: they process everything available and stop.
Their checkpoints live in `pipeline-data/checkpoints/`, so the next run continues where
this one stopped: new orders are read once, and windows still open now (the last minute,
held back by the watermark) are published when later orders close them.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ORDER_SCHEMA = "order_id string, product string, quantity int, unit_price double, ts timestamp"
PRODUCTS = {"espresso": 2.5, "latte": 3.8, "croissant": 2.9, "bagel": 3.2, "muffin": 2.7}


def ensure_streams(servers: str) -> None:
    """Create ORDERS and REVENUE if they do not exist yet (file storage, direct get on)."""
    import nats
    from nats.js.errors import NotFoundError

    async def go() -> None:
        nc = await nats.connect(servers)
        js = nc.jetstream()
        for name, subjects in (("ORDERS", ["orders.>"]), ("REVENUE", ["revenue.>"])):
            try:
                await js.stream_info(name)
            except NotFoundError:
                await js.add_stream(name=name, subjects=subjects, allow_direct=True)
        await nc.close()

    asyncio.run(go())


def spark_session() -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("brook-orders-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def generate_orders(spark: Any, servers: str, count: int) -> None:
    """Orders spread over the last ten minutes, some of them up to 30 s out of order."""
    now = dt.datetime.now(dt.UTC)
    rows = []
    for i in range(count):
        at = now - dt.timedelta(minutes=10) + dt.timedelta(minutes=10) * i / count
        at -= dt.timedelta(seconds=random.uniform(0, 30))  # late arrivals
        product = random.choice(list(PRODUCTS))
        rows.append(
            (
                f"o-{uuid.uuid4().hex[:12]}",
                product,
                random.randint(1, 4),
                PRODUCTS[product],
                at.isoformat(),
            )
        )
    orders = spark.createDataFrame(rows, ORDER_SCHEMA.replace("ts timestamp", "ts string"))
    (
        orders.selectExpr(
            "to_json(struct(*)) AS data",
            "concat('orders.', product) AS subject",
            "order_id AS msg_id",  # the order's own key makes reruns harmless
        )
        .write.format("jetstream")
        .mode("append")
        .option("servers", servers)
        .option("stream", "ORDERS")
        .save()
    )


def revenue_per_minute(spark: Any, servers: str) -> Any:
    """Closed one-minute windows per product: orders, items and revenue."""
    from pyspark.sql import functions as F

    orders = (
        spark.readStream.format("jetstream")
        .option("servers", servers)
        .option("stream", "ORDERS")
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", "20000")
        .load()
        .select(F.from_json(F.col("data").cast("string"), ORDER_SCHEMA).alias("o"))
        .select("o.*")
    )
    return (
        orders.withWatermark("ts", "1 minute")
        .groupBy(F.window("ts", "1 minute"), "product")
        .agg(
            F.count("*").alias("orders"),
            F.sum("quantity").alias("items"),
            F.round(F.sum(F.col("quantity") * F.col("unit_price")), 2).alias("revenue"),
        )
        .select(F.col("window.start").alias("minute"), "product", "orders", "items", "revenue")
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--servers", default="nats://127.0.0.1:4222")
    parser.add_argument("--orders", type=int, default=5000, help="orders to generate")
    parser.add_argument("--data", default="pipeline-data", help="Parquet output and checkpoints")
    args = parser.parse_args()
    data = Path(args.data).resolve()
    started = time.monotonic()

    ensure_streams(args.servers)
    spark = spark_session()
    from pyspark.sql import functions as F

    print(f"generating {args.orders} orders into ORDERS ...")
    generate_orders(spark, args.servers, args.orders)

    priced = revenue_per_minute(spark, args.servers)

    to_parquet = (
        priced.writeStream.format("parquet")
        .option("path", str(data / "revenue"))
        .option("checkpointLocation", str(data / "checkpoints" / "parquet"))
        .trigger(availableNow=True)
        .start()
    )
    to_stream = (
        priced.select(
            F.to_json(F.struct("minute", "product", "orders", "items", "revenue")).alias("data"),
            F.concat(F.lit("revenue."), F.col("product")).alias("subject"),
        )
        .writeStream.format("jetstream")
        .option("servers", args.servers)
        .option("checkpointLocation", str(data / "checkpoints" / "jetstream"))
        .trigger(availableNow=True)
        .start()
    )
    to_parquet.awaitTermination()
    to_stream.awaitTermination()

    print("\nrevenue per product per minute (Parquet, closed windows):")
    parquet = spark.read.parquet(str(data / "revenue"))
    parquet.orderBy("minute", "product").show(12, truncate=False)
    print("per product, all closed windows so far:")
    parquet.groupBy("product").agg(F.round(F.sum("revenue"), 2).alias("revenue")).orderBy(
        "product"
    ).show()

    published = (
        spark.read.format("jetstream")
        .option("servers", args.servers)
        .option("stream", "REVENUE")
        .load()
    )
    print(f"stream REVENUE holds {published.count()} window results; the latest three:")
    for row in published.orderBy(F.desc("seq")).limit(3).collect():
        print(f"  #{row.seq} {row.subject}: {bytes(row.data).decode()}")
    print(
        f"\ndone in {time.monotonic() - started:.0f}s; run again to continue from the checkpoints"
    )
    spark.stop()


if __name__ == "__main__":
    main()
