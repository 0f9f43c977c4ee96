"""Core pub→sub with and without permissions, on Brook and nats-server, ratios printed.

Both servers read one config file with two users: `open`, without permissions, and
`limited`, whose publish and subscribe permissions allow the benchmark's subject
(`bench.>`) and deny another (`bench.secret.>`), so each publish is checked against an
allow and a deny list. The same raw-socket load generators as `bench.core` (one publisher,
one subscriber) run as each user; the overhead of permissions is `limited` over `open` on
the same server (Brook's goal: within 5 %), and each server's numbers are side by side.

    python -m bench.permissions [--messages N] [--size BYTES] [--rounds R]

Rounds alternate the users on a fresh server each time, so drift on the shared machine
touches both alike. Never part of the test run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.core import brook_server, connect_as, nats_server, run_pub_sub

CONFIG = """
authorization {
  users: [
    {user: open, password: open}
    {user: limited, password: limited, permissions: {
      publish: {allow: ["bench.>", "_INBOX.>"], deny: ["bench.secret.>"]}
      subscribe: {allow: ["bench.>", "_INBOX.>"], deny: ["bench.secret.>"]}
    }}
  ]
}
"""
USERS = ("open", "limited")


@contextlib.contextmanager
def config_file() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="bench-perms-") as tmp:
        path = Path(tmp) / "perms.conf"
        path.write_text(CONFIG)
        yield str(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    servers: dict[str, Callable[[tuple[str, ...]], contextlib.AbstractContextManager[int]]] = {
        "nats-server": lambda flags: nats_server(args=flags),
        "brook": lambda flags: brook_server(args=flags),
    }
    rates: dict[tuple[str, str], list[float]] = {}
    with config_file() as path:
        for _ in range(args.rounds):
            for server, start in servers.items():
                for user in USERS:
                    with start(("-c", path)) as port:
                        result = run_pub_sub(port, args.messages, args.size, 1, 1, connect_as(user))
                    if "LOST" in result.workload:
                        raise SystemExit(f"{server} as {user}: {result.workload}")
                    rates.setdefault((server, user), []).append(result.msgs_per_s)
    print(f"{args.messages} messages of {args.size} bytes, 1 pub → 1 sub; {os.cpu_count()} cores;")
    print(f"median of {args.rounds} rounds\n")
    print(f"{'user':22} {'nats-server':>14} {'brook':>14} {'brook/nats':>11}")
    median = {key: statistics.median(values) for key, values in rates.items()}
    for user in USERS:
        ref, ours = median[("nats-server", user)], median[("brook", user)]
        print(f"{user:22} {ref:>10,.0f}/s {ours:>10,.0f}/s {ours / ref:>10.2f}x")
    for server in servers:
        ratio = median[(server, "limited")] / median[(server, "open")]
        print(f"{server}: with permissions / without: {ratio:.3f}")


if __name__ == "__main__":
    main()
