"""What `brook bench` measures and how it reports it: one `Sample` per client, a `Report`
over all of them, computed as the `nats` CLI's bench does (natscli internal/bench):

* a client's rate is its job's messages over its own duration; the aggregate rate is all
  messages over the span from the earliest start to the latest end;
* latencies are per operation in nanoseconds (a publish call, a request, a synchronous
  JetStream publish, or an asynchronous batch until its acks); percentile p is the value
  at index ceil(p/100 * n) - 1 of the sorted latencies, shown in microseconds.

The report is a table (one row per client, then the aggregate when there are several) or,
with `--json`, one document with the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

PERCENTILES = (50.0, 90.0, 99.0, 99.9)
MIB = 1024 * 1024


@dataclass
class Sample:
    """One client's run: `msgs` messages of `msg_size` bytes between `start` and `end`
    (time.perf_counter seconds), with the latencies of its operations in nanoseconds."""

    msgs: int
    msg_size: int
    start: float
    end: float
    latencies: list[int] = field(default_factory=list)

    @property
    def duration(self) -> float:
        return max(self.end - self.start, 1e-9)

    @property
    def rate(self) -> float:
        return self.msgs / self.duration

    @property
    def throughput(self) -> float:
        """Bytes of payload per second."""
        return self.msgs * self.msg_size / self.duration


def percentile(ordered: Sequence[int], p: float) -> float:
    """natscli's PercentileLatency, in microseconds, of latencies sorted ascending."""
    if not ordered:
        return 0.0
    index = max(math.ceil(p / 100 * len(ordered)) - 1, 0)
    return ordered[index] / 1000


def latency_summary(latencies: Sequence[int]) -> dict[str, float] | None:
    """min, avg, the percentiles, max and the standard deviation in microseconds; None
    for a benchmark that measures no latencies (subscribers)."""
    if not latencies:
        return None
    ordered = sorted(latencies)
    n = len(ordered)
    avg = sum(ordered) / n
    variance = sum((x - avg) ** 2 for x in ordered) / n
    summary = {"min": ordered[0] / 1000, "avg": avg / 1000}
    for p in PERCENTILES:
        summary[f"p{p:g}".replace(".", "_")] = percentile(ordered, p)
    summary["max"] = ordered[-1] / 1000
    summary["stddev"] = math.sqrt(variance) / 1000
    return {k: round(v, 3) for k, v in summary.items()}


@dataclass
class Report:
    """A benchmark's result: its kind (`pub`, `js pub sync`, ...), label ("Core NATS
    publisher"), options as shown in the banner, and each client's sample."""

    kind: str
    label: str
    options: dict[str, Any]
    samples: list[Sample]

    @property
    def msgs(self) -> int:
        return sum(s.msgs for s in self.samples)

    @property
    def duration(self) -> float:
        if not self.samples:
            return 0.0
        start = min(s.start for s in self.samples)
        return max(max(s.end for s in self.samples) - start, 1e-9)

    @property
    def bytes(self) -> int:
        return sum(s.msgs * s.msg_size for s in self.samples)

    def latencies(self) -> list[int]:
        return [x for s in self.samples for x in s.latencies]

    def document(self) -> dict[str, Any]:
        """The `--json` form."""
        duration = self.duration
        return {
            "benchmark": self.kind,
            "label": self.label,
            "options": self.options,
            "msgs": self.msgs,
            "bytes": self.bytes,
            "duration_s": round(duration, 6),
            "msgs_per_sec": round(self.msgs / duration, 1) if self.samples else 0,
            "bytes_per_sec": round(self.bytes / duration, 1) if self.samples else 0,
            "latency_us": latency_summary(self.latencies()),
            "clients": [
                {
                    "client": i,
                    "msgs": s.msgs,
                    "duration_s": round(s.duration, 6),
                    "msgs_per_sec": round(s.rate, 1),
                    "bytes_per_sec": round(s.throughput, 1),
                    "operations_timed": len(s.latencies),
                    "latency_us": latency_summary(s.latencies),
                }
                for i, s in enumerate(self.samples, 1)
            ],
        }

    def tables(self) -> list[tuple[str, list[str], list[list[str]]]]:
        """The tables for people, (title, headers, rows), each a row per client and, with
        several, the aggregate: throughput, then latencies when there are any. Two tables
        so that each fits an 80-column terminal."""
        runs = [(f"#{i}", s.msgs, s.duration, s.latencies) for i, s in enumerate(self.samples, 1)]
        if len(self.samples) > 1:
            runs.append(("all", self.msgs, self.duration, self.latencies()))
        throughput = [
            [
                name, f"{msgs:,}", f"{msgs / duration:,.0f}",
                f"{msgs * self._size / duration / MIB:,.2f}", f"{duration:.3f}s",
            ]
            for name, msgs, duration, _ in runs
        ]  # fmt: skip
        tables = [("Throughput", ["Client", "Msgs", "Msgs/s", "MiB/s", "Duration"], throughput)]
        if self.latencies():
            keys = ("min", "avg", "p50", "p90", "p99", "p99_9", "max")
            latency = []
            for name, _, _, latencies in runs:
                summary = latency_summary(latencies) or {}
                latency.append([name, *(f"{summary[k]:,.1f}" if summary else "" for k in keys)])
            headers = ["Client", "min", "avg", "p50", "p90", "p99", "p99.9", "max"]
            tables.append(("Latency per operation (µs)", headers, latency))
        return tables

    @property
    def _size(self) -> int:
        return self.samples[0].msg_size if self.samples else 0


def csv_text(report: Report, run_id: str) -> str:
    """natscli's `--csv` file: a row per client (`P0`, `P1`... for publishers, `S0`... for
    consumers), latencies in microseconds when the benchmark has them. MsgCount is the
    client's job (natscli counts the connection's messages both ways)."""
    import csv
    import io

    measured = bool(report.latencies())
    headers = ["#RunID", "ClientID", "MsgCount", "MsgBytes", "MsgsPerSec", "BytesPerSec"]
    headers.append("DurationSecs")
    if measured:
        headers += [
            "MinLatencyMicroSecs", "AvgLatencyMicroSecs", "MaxLatencyMicroSecs",
            "P50LatencyMicroSecs", "P90LatencyMicroSecs", "P99LatencyMicroSecs",
            "P99.9LatencyMicroSecs", "StdDevLatencyMicroSecs",
        ]  # fmt: skip
    prefix = "P" if report.kind in PUBLISHERS else "S"
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(headers)
    for i, s in enumerate(report.samples):
        row = [run_id, f"{prefix}{i}", s.msgs, s.msgs * s.msg_size, int(s.rate)]
        row += [f"{s.throughput:f}", f"{s.duration:f}"]
        summary = latency_summary(s.latencies)
        if measured and summary:
            keys = ("min", "avg", "max", "p50", "p90", "p99", "p99_9", "stddev")
            row += [f"{summary[k]:f}" for k in keys]
        writer.writerow(row)
    return buffer.getvalue()


# Benchmarks natscli's CSV names `P<n>` (the others `S<n>`).
PUBLISHERS = ("pub", "service request", "js pub sync", "js pub async", "kv put")


def split(total: int, clients: int) -> list[int]:
    """natscli's msgsPerClient: `total` spread over `clients`, the first ones taking the
    remainder."""
    if clients <= 0:
        return []
    share, rest = divmod(total, clients)
    return [share + (1 if i < rest else 0) for i in range(clients)]
