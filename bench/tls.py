"""TLS on the client port: Brook and nats-server side by side, in one run, ratios printed.

Both servers start with the same flags (`--tls --tlscert --tlskey`, a certificate made by
trustme for the run). Two workloads:

* core pub→sub over TLS: one publisher and one subscriber process on TLS sockets (the
  same raw frames as bench/core.py, encrypted by Python's ssl in the load generators);
* TLS connection set-up rate: clients that connect, read INFO, upgrade to TLS, send
  CONNECT and PING, wait for the PONG and close, from two processes.

    python -m bench.tls [--messages N] [--size BYTES] [--connections N]

Never part of the test run; numbers go in closing notes and docs, not in assertions.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing as mp
import os
import socket
import ssl
import tempfile
import time
from collections.abc import Callable
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import trustme

from bench.core import BATCH, CONNECT, brook_server, count_received, nats_server, received_bytes


@functools.cache
def client_context(ca_file: str) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=ca_file)


def make_certs(directory: str) -> dict[str, str]:
    """A CA and a server certificate for 127.0.0.1 made for the run: "ca", "cert" and
    "key" PEM files in `directory`."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    paths = {name: str(Path(directory) / f"{name}.pem") for name in ("ca", "cert", "key")}
    ca.cert_pem.write_to_path(paths["ca"])
    cert.cert_chain_pems[0].write_to_path(paths["cert"])
    cert.private_key_pem.write_to_path(paths["key"])
    return paths


def tls_connect(port: int, ca_file: str) -> ssl.SSLSocket:
    """A client as nats-py is one: INFO in plain text, the TLS upgrade, CONNECT, PONG."""
    raw = socket.create_connection(("127.0.0.1", port))
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    while b"\r\n" not in buf:
        buf += raw.recv(4096)
    s = client_context(ca_file).wrap_socket(raw, server_hostname="127.0.0.1")
    s.sendall(CONNECT)
    read_until(s, b"PONG\r\n")
    return s


def read_until(s: ssl.SSLSocket, marker: bytes) -> None:
    buf = b""
    while marker not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf = buf[-16:] + chunk


def publisher(port: int, ca: str, count: int, size: int, ready: Barrier) -> None:
    s = tls_connect(port, ca)
    frame = b"PUB bench.tls %d\r\n%b\r\n" % (size, b"x" * size)
    ready.wait()
    full, rest = divmod(count, BATCH)
    batch = frame * BATCH
    for _ in range(full):
        s.sendall(batch)
    s.sendall(frame * rest + b"PING\r\n")
    read_until(s, b"PONG\r\n")
    s.close()


def subscriber(
    port: int, ca: str, count: int, size: int, ready: Barrier, out: Queue[tuple[int, float]]
) -> None:
    s = tls_connect(port, ca)
    s.sendall(b"SUB bench.tls 1\r\nPING\r\n")
    read_until(s, b"PONG\r\n")
    frame_len = len(b"MSG bench.tls 1 %d\r\n" % size) + size + 2
    count_received(s, functools.partial(received_bytes, s), frame_len, count, ready, out)


def pub_sub(port: int, ca: str, n: int, size: int) -> float:
    ready = mp.Barrier(3)
    out: Queue[tuple[int, float]] = mp.Queue()
    sub = mp.Process(target=subscriber, args=(port, ca, n, size, ready, out))
    sub.start()
    time.sleep(0.3)
    pub = mp.Process(target=publisher, args=(port, ca, n, size, ready))
    pub.start()
    ready.wait()
    received, elapsed = out.get(timeout=300)
    pub.join()
    sub.join()
    return received / elapsed


def connector(port: int, ca: str, count: int, ready: Barrier) -> None:
    ready.wait()
    for _ in range(count):
        tls_connect(port, ca).close()


def setup_rate(port: int, ca: str, n: int) -> float:
    ready = mp.Barrier(3)
    procs = [mp.Process(target=connector, args=(port, ca, n // 2, ready)) for _ in range(2)]
    for p in procs:
        p.start()
    ready.wait()
    start = time.perf_counter()
    for p in procs:
        p.join()
    return (n // 2) * 2 / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--connections", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-tls-") as tmp:
        paths = make_certs(tmp)
        flags = ["--tls", "--tlscert", paths["cert"], "--tlskey", paths["key"]]
        workloads: list[tuple[str, str, Callable[[int], float]]] = [
            (
                f"pub→sub over TLS, {args.size} B",
                "msgs",
                lambda port: pub_sub(port, paths["ca"], args.messages, args.size),
            ),
            (
                "TLS connection set-up",
                "conns",
                lambda port: setup_rate(port, paths["ca"], args.connections),
            ),
        ]
        print(f"{os.cpu_count()} cores\n")
        print(f"{'workload':30} {'nats-server':>16} {'brook':>16} {'ratio':>7}")
        for name, unit, run in workloads:
            rates = {}
            with nats_server(args=flags) as port:
                rates["nats-server"] = run(port)
            with brook_server(args=flags) as port:
                rates["brook"] = run(port)
            ref, ours = rates["nats-server"], rates["brook"]
            print(f"{name:30} {ref:>9,.0f} {unit}/s {ours:>9,.0f} {unit}/s {ours / ref:>6.2f}x")


if __name__ == "__main__":
    main()
