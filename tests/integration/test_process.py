"""The `brook` command as a real process: flags, config files, signals, graceful shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

import brook
from tests.support.natsserver import free_port, wait_for_port

pytestmark = pytest.mark.timeout(30)

BROOK = [sys.executable, "-m", "brook"]


@contextlib.contextmanager
def brook_process(*args: str, port: int) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [*BROOK, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for_port(port)
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        assert proc.stdout is not None
        assert proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()


def run_brook(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BROOK, *args], capture_output=True, text=True, timeout=20)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_nats_server_flags_and_clean_exit_on_signal(tmp_path: Path, sig: int) -> None:
    port, http_port = free_port(), free_port()
    store = tmp_path / "store"
    args = ["-a", "127.0.0.1", "-p", str(port), "-m", str(http_port), "-js", f"-sd={store}"]
    with brook_process(*args, port=port) as proc:
        nc = await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)
        assert nc.connected_server_version.major == 2
        assert nc._server_info.get("jetstream") is True
        sub = await nc.subscribe("ping")
        await nc.publish("ping", b"pong")
        assert (await sub.next_msg(timeout=2)).data == b"pong"
        varz = json.loads(
            await asyncio.to_thread(
                lambda: urllib.request.urlopen(
                    f"http://127.0.0.1:{http_port}/varz", timeout=5
                ).read()
            )
        )
        assert varz["port"] == port
        assert varz["connections"] == 1
        proc.send_signal(sig)
        assert await asyncio.to_thread(proc.wait, 10) == 0
        assert proc.stderr is not None
        assert "Brook stopped" in proc.stderr.read()
        await nc.close()


def test_shutdown_flushes_output_owed_to_a_slow_reader() -> None:
    port = free_port()
    n, size = 2000, 1024
    with brook_process("serve", "--host", "127.0.0.1", "--port", str(port), port=port) as proc:
        sub = socket.socket()
        sub.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a reader that lags behind
        sub.connect(("127.0.0.1", port))
        sub.settimeout(10)
        sub.sendall(b'CONNECT {"verbose":false}\r\nSUB owed 1\r\nPING\r\n')
        received = b""
        while b"PONG\r\n" not in received:
            received += sub.recv(65536)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as pub:
            pub.sendall(b'CONNECT {"verbose":false}\r\n')
            pub.sendall(b"PUB owed %d\r\n%b\r\n" % (size, b"x" * size) * n + b"PING\r\n")
            reply = b""
            while b"PONG\r\n" not in reply:
                reply += pub.recv(65536)
        # Every message is routed; much of it still sits in the server's buffers.
        proc.send_signal(signal.SIGTERM)
        frame = len(b"MSG owed 1 %d\r\n" % size) + size + 2
        tail = received.split(b"PONG\r\n", 1)[1]
        total = len(tail)
        while chunk := sub.recv(65536):
            total += len(chunk)
        sub.close()
        assert total == n * frame, "the server closed only after sending everything owed"
        assert proc.wait(10) == 0


def test_serve_word_is_optional_and_help_lists_flags() -> None:
    help_ = run_brook("serve", "--help")
    assert help_.returncode == 0
    for flag in ("--port", "-js", "--store_dir", "--max-payload", "-DV"):
        assert flag in help_.stdout
    assert run_brook("--version").stdout.startswith("brook ")


def test_unknown_flag_is_named_and_exits_2() -> None:
    result = run_brook("serve", "--no-such-flag")
    assert result.returncode == 2
    assert "--no-such-flag" in result.stderr


def test_bad_config_key_is_named(tmp_path: Path) -> None:
    conf = tmp_path / "bad.conf"
    conf.write_text("port: 4222\nauthorization { tokn: abc }\n")
    result = run_brook("serve", "-c", str(conf))
    assert result.returncode == 1  # a configuration error: nats-server's exit status
    assert "authorization.tokn" in result.stderr


async def test_config_file_with_users_and_flag_override(tmp_path: Path) -> None:
    port = free_port()
    conf = tmp_path / "brook.conf"
    conf.write_text(
        "listen: 127.0.0.1:1\n"  # overridden by -p below
        'authorization { users = [ { user: app, password: "s3cret" } ] }\n'
    )
    with brook_process("-c", str(conf), "-p", str(port), port=port):
        nc = await nats.connect(
            f"nats://127.0.0.1:{port}", user="app", password="s3cret", allow_reconnect=False
        )
        assert nc.is_connected
        await nc.close()
        with pytest.raises(Exception, match=r"(?i)authorization violation"):
            await nats.connect(
                f"nats://127.0.0.1:{port}",
                user="app",
                password="wrong",
                allow_reconnect=False,
                max_reconnect_attempts=0,
            )


async def test_store_dir_is_created_and_checked(tmp_path: Path) -> None:
    store = tmp_path / "nested" / "store"
    async with brook.serve(port=0, store_dir=str(store)):
        assert store.is_dir()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = run_brook("serve", "-p", "0", "-js", "-sd", str(blocker / "store"))
    assert result.returncode == 1
    assert "store_dir" in result.stderr


async def test_store_check_command(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with brook.serve(port=0, store_dir=str(store)) as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="CHK", subjects=["chk"])
        for i in range(20):
            await js.publish("chk", b"message %d" % i)
        await nc.close()
    data = store / "streams" / "CHK" / "data"
    healthy = run_brook("store", "check", str(data), "--json")
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    report = json.loads(healthy.stdout)
    assert (report["healthy"], report["messages"], report["last_seq"]) == (True, 20, 20)
    segment = next((data / "msgs").glob("*.seg"))
    raw = bytearray(segment.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # corrupt one byte in the middle of the log
    segment.write_bytes(bytes(raw))
    damaged = run_brook("store", "check", str(data), "--json")
    assert damaged.returncode == 1
    findings = json.loads(damaged.stdout)
    assert findings["healthy"] is False
    assert findings["findings"], "the corrupt record is reported"
    assert run_brook("store", "check").returncode == 2
