"""JetStream publish throughput: acknowledged publishes per second, Brook and nats-server.

Raw-socket publishers in separate processes keep a window of publishes in flight (each a
PUB with a reply inbox) and count PubAcks as they arrive, so the client costs almost
nothing per message. Both servers use file storage. Brook acknowledges only after fsync
(group commit, ADR 0004); nats-server acknowledges before its periodic fsync, so the ratio
compares a stronger guarantee against a weaker one. The `file, sync always` row compares
equal guarantees: nats-server with `jetstream { sync_interval: always }`, which fsyncs each
message before its PubAck, against the same Brook. The `file, Nats-Msg-Id` row publishes
each message with its own `Nats-Msg-Id` header, as Spark's writes do, so each is also
checked against and remembered in the stream's duplicate window.

    python -m bench.jetstream [--messages N] [--size BYTES] [--publishers P] [--window W]
                              [--sync-messages N]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import tempfile
import time
from multiprocessing.queues import Queue
from pathlib import Path

from bench.core import _connect, _read_until, brook_server, nats_server

ACK_MARK = b'"seq":'


def create_stream(port: int, storage: str) -> None:
    s = _connect(port)
    body = json.dumps({"name": "BENCH", "subjects": ["js.bench.>"], "storage": storage}).encode()
    s.sendall(
        b"SUB _INBOX.create 1\r\nPUB $JS.API.STREAM.CREATE.BENCH _INBOX.create %d\r\n%b\r\n"
        % (len(body), body)
    )
    reply = _read_until(s, b"stream_create_response")
    if b'"error"' in reply:
        raise SystemExit(f"stream create failed: {reply[:300]!r}")
    s.close()


def publisher(
    port: int,
    index: int,
    count: int,
    size: int,
    window: int,
    out: Queue[tuple[int, float]],
    msg_ids: bool = False,
) -> None:
    """`count` publishes, `window` in flight; with `msg_ids`, each with a `Nats-Msg-Id`
    of its own (the frames made before the clock starts)."""
    s = _connect(port)
    s.setblocking(True)
    inbox = b"_INBOX.b%d" % index
    s.sendall(b"SUB %b.* 1\r\nPING\r\n" % inbox)
    _read_until(s, b"PONG\r\n")
    payload = b"x" * size
    frame = b"PUB js.bench.%d %b.x %d\r\n%b\r\n" % (index, inbox, size, payload)
    chunk = 64
    frames: list[bytes] = []
    if msg_ids:
        for k in range(count):
            hdr = b"NATS/1.0\r\nNats-Msg-Id: %d-%d\r\n\r\n" % (index, k)
            head = b"HPUB js.bench.%d %b.x %d %d\r\n" % (index, inbox, len(hdr), len(hdr) + size)
            frames.append(head + hdr + payload + b"\r\n")
    sent = acked = 0
    tail = b""
    start = time.perf_counter()
    while acked < count:
        while sent < count and sent - acked < window:
            n = min(chunk, count - sent)
            s.sendall(b"".join(frames[sent : sent + n]) if msg_ids else frame * n)
            sent += n
        data = s.recv(1 << 20)
        if not data:
            break
        buf = tail + data
        acked += buf.count(ACK_MARK)
        tail = buf[-(len(ACK_MARK) - 1) :]
        if b'"error"' in buf:
            raise SystemExit(f"publish failed: {buf[:300]!r}")
    out.put((acked, time.perf_counter() - start))
    s.close()


def run(
    port: int, n: int, size: int, pubs: int, window: int, storage: str, msg_ids: bool = False
) -> float:
    create_stream(port, storage)
    out: Queue[tuple[int, float]] = mp.Queue()
    procs = [
        mp.Process(target=publisher, args=(port, i, n // pubs, size, window, out, msg_ids))
        for i in range(pubs)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join()
    return sum(r[0] for r in results) / max(r[1] for r in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--publishers", type=int, default=2)
    parser.add_argument("--window", type=int, default=1000)
    # nats-server fsyncing each message is slow: fewer for the equal-durability row.
    parser.add_argument("--sync-messages", type=int, default=20_000)
    args = parser.parse_args()
    print(
        f"{args.messages} acknowledged publishes of {args.size} bytes, "
        f"{args.publishers} publishers, window {args.window}\n"
    )
    print(f"{'storage':18} {'nats-server':>14} {'brook':>14} {'ratio':>7}")
    for storage in ("file", "memory"):
        with nats_server(jetstream=True) as port:
            ref = run(port, args.messages, args.size, args.publishers, args.window, storage)
        with brook_server(jetstream=True) as port:
            ours = run(port, args.messages, args.size, args.publishers, args.window, storage)
        print(f"{storage:18} {ref:>10,.0f}/s {ours:>10,.0f}/s {ours / ref:>6.2f}x")
    with nats_server(jetstream=True) as port:
        ref = run(port, args.messages, args.size, args.publishers, args.window, "file", True)
    with brook_server(jetstream=True) as port:
        ours = run(port, args.messages, args.size, args.publishers, args.window, "file", True)
    label = "file, Nats-Msg-Id"
    print(f"{label:18} {ref:>10,.0f}/s {ours:>10,.0f}/s {ours / ref:>6.2f}x")
    with tempfile.TemporaryDirectory(prefix="nats-bench-") as tmp:
        conf = Path(tmp) / "sync-always.conf"
        conf.write_text("jetstream { sync_interval: always }\n")
        with nats_server(jetstream=True, args=["-c", str(conf)]) as port:
            ref = run(port, args.sync_messages, args.size, args.publishers, args.window, "file")
    with brook_server(jetstream=True) as port:
        ours = run(port, args.sync_messages, args.size, args.publishers, args.window, "file")
    label = "file, sync always"
    print(f"{label:18} {ref:>10,.0f}/s {ours:>10,.0f}/s {ours / ref:>6.2f}x")


if __name__ == "__main__":
    main()
