"""nats-server's ports file (`--ports_file_dir`): where a started server can be reached.

Launchers of test servers (nats.js's, among others) start the server with port `-1` and
read `<dir>/<program>_<pid>.ports` to learn the ports it picked. The file is JSON of URL
lists, `{"nats": [...], "monitoring": [...]}`, written once every listener is open and
removed at shutdown. `<program>` is the name the process was started as (so Brook
installed as `nats-server` writes `nats-server_<pid>.ports`), `brook` under `python -m`.

For a wildcard host nats-server lists the address of every network interface; Brook lists
the loopback addresses of the families it listens on, which is what a local launcher
connects to (the first URL is the one nats.js uses).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

from brook.server.listen import WILDCARD_HOSTS, host_port

__all__ = ["ports_file_path", "reachable_urls", "write_ports_file"]


def ports_file_path(directory: str) -> Path:
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "brook"
    if program in ("__main__.py", "-c", ""):
        program = "brook"
    return Path(directory) / f"{program}_{os.getpid()}.ports"


def reachable_urls(scheme: str, host: str, sock: socket.socket) -> list[str]:
    """URLs of the listening `sock`, opened for the configured `host`."""
    bound, port = sock.getsockname()[:2]
    if host in WILDCARD_HOSTS:
        hosts = ["127.0.0.1", "::1"] if sock.family == socket.AF_INET6 else ["127.0.0.1"]
    else:
        hosts = [bound]
    return [f"{scheme}://{host_port(h, port)}" for h in hosts]


def write_ports_file(path: Path, ports: dict[str, list[str]]) -> None:
    """Replace `path` in one step, so a launcher polling for it never reads half a file."""
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(json.dumps(ports, separators=(",", ":")))
    os.replace(partial, path)
