"""Logins to thousands of JWT accounts of a `full` directory resolver, Brook and nats-server.

Each account of the resolver directory (one `<key>.jwt` file each, as nats-server lays
them out) is loaded at its first login (ADR 0032): its router, the system services
imported into it. One client after another logs in to the next account (TCP connect,
INFO, CONNECT with the user JWT and its nonce signature, PING, PONG) and leaves; the
latency of the first and the last logins shows whether adding an account costs more as
the server holds more (Brook's goal: flat), and each server's numbers are side by side.

    python -m bench.jwt_accounts [--accounts N]

Never part of the test run.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from tests.support.jwts import (
    Key,
    account_jwt,
    account_key,
    b64,
    operator_jwt,
    operator_key,
    user_jwt,
    user_key,
)

from bench.core import brook_server, nats_server

SAMPLE = 200  # logins measured at each end


def _write(root: Path, accounts: int) -> tuple[Path, list[tuple[str, Key]]]:
    """The config, the resolver directory, and a user JWT (and key) per account."""
    operator = operator_key()
    system = account_key()
    (root / "op.jwt").write_text(operator_jwt(operator, system_account=system.public))
    directory = root / "jwt"
    directory.mkdir()
    users = []
    for account in [system, *(account_key() for _ in range(accounts))]:
        (directory / f"{account.public}.jwt").write_text(account_jwt(account, operator))
        if account is not system:
            user = user_key()
            users.append((user_jwt(user, account), user))
    config = root / "server.conf"
    config.write_text(
        f"operator: {root / 'op.jwt'}\nresolver: {{ type: full, dir: {directory} }}\n"
    )
    return config, users


def _login(port: int, token: str, user: Key) -> float:
    """Seconds from connect to the PONG after CONNECT."""
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        reader = sock.makefile("rb")
        info = json.loads(reader.readline().split(b" ", 1)[1])
        signature = b64(user.sign(info["nonce"].encode()))
        connect = {"verbose": False, "pedantic": False, "jwt": token, "sig": signature}
        sock.sendall(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
        line = reader.readline()
        if not line.startswith(b"PONG"):
            raise SystemExit(f"login refused: {line!r}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accounts", type=int, default=3000)
    args = parser.parse_args()
    servers: dict[str, Callable[[tuple[str, ...]], AbstractContextManager[int]]] = {
        "nats-server": lambda flags: nats_server(args=flags),
        "brook": lambda flags: brook_server(args=flags),
    }
    results: dict[str, tuple[float, float]] = {}
    for name, start in servers.items():
        with tempfile.TemporaryDirectory(prefix="bench-jwt-") as tmp:
            config, users = _write(Path(tmp), args.accounts)
            with start(("-c", str(config))) as port:
                latencies = [_login(port, token, user) for token, user in users]
        results[name] = (
            statistics.median(latencies[:SAMPLE]),
            statistics.median(latencies[-SAMPLE:]),
        )
    print(f"{args.accounts} accounts, each loaded at its first login; median of {SAMPLE}\n")
    print(f"{'':14} {'first logins':>13} {'last logins':>13} {'last/first':>11}")
    for name, (first, last) in results.items():
        print(f"{name:14} {first * 1e3:>10.2f} ms {last * 1e3:>10.2f} ms {last / first:>10.2f}x")
    ours, ref = results["brook"][1], results["nats-server"][1]
    print(f"\nbrook/nats-server, last logins: {ours / ref:.2f}x")


if __name__ == "__main__":
    main()
