"""Brook as its own process (`python -m brook serve`), for tests that kill it with SIGKILL
and restart it on the same store."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tests.support.natsserver import wait_for_port


def start_brook(
    store: Path, port: int, *, log: Path | None = None, args: Sequence[str] = ()
) -> subprocess.Popen[bytes]:
    """Serve JetStream from `store` on 127.0.0.1:`port`, once the port accepts connections;
    stderr (the server log) is appended to `log` when given, else discarded. `args` are
    more command-line flags."""
    cmd = [sys.executable, "-m", "brook", "serve", "--host", "127.0.0.1", "--port", str(port),
           "--jetstream", "--store-dir", str(store), *args]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    if log is None:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    else:
        with open(log, "ab") as out:  # the child keeps its own handle
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=out)
    wait_for_port(port)
    return proc
