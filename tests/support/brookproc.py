"""Brook as its own process (`python -m brook serve`): for tests that kill it with SIGKILL
and restart it on the same store, and (`LoggedProcess`) for tests that read its log as a
launcher does."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from tests.support.natsserver import wait_for_info


def start_brook(
    store: Path, port: int, *, log: Path | None = None, args: Sequence[str] = ()
) -> subprocess.Popen[bytes]:
    """Serve JetStream from `store` on 127.0.0.1:`port`, once it serves (sends its INFO);
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
    wait_for_info(port, 30)
    return proc


async def sigkill_rounds(
    store: Path,
    port: int,
    rounds: int,
    until_killed: Callable[[subprocess.Popen[bytes], int], Awaitable[None]],
    *,
    log: Path | None = None,
) -> None:
    """A crash test's rounds: each starts Brook on `store` (its log appended to `log`, if
    given) and runs `until_killed(proc, round)`, which has it killed with SIGKILL at some
    moment; the process is then reaped (killed first, should it still run)."""
    for round_ in range(rounds):
        proc = start_brook(store, port, log=log)
        try:
            await until_killed(proc, round_)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


async def publish_until_killed(
    nc: Any,
    pid: int,
    kill_after_s: float,
    publish: Callable[[int], Awaitable[None]],
    in_flight: int = 32,
) -> None:
    """Have process `pid` killed with SIGKILL in `kill_after_s`, and meanwhile run
    `publish(n)` for n = 0, 1, ... `in_flight` at a time, until one fails (the server is
    gone); closes `nc`, the connection `publish` uses."""
    asyncio.get_running_loop().call_later(kill_after_s, os.kill, pid, signal.SIGKILL)
    k = 0
    try:
        while True:
            batch = range(k, k + in_flight)
            k += in_flight
            results = await asyncio.gather(*(publish(n) for n in batch), return_exceptions=True)
            if any(isinstance(r, BaseException) for r in results):
                return
    finally:
        if not nc.is_closed:
            await nc.close()


BROOK_CMD = [sys.executable, "-m", "brook"]


class LoggedProcess:
    """A server process whose stderr (its log) is read line by line as it comes, so a test
    can wait for a line as a launcher does, and read the whole log afterwards."""

    def __init__(self, cmd: list[str], *, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env if env is not None else dict(os.environ),
        )
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    @property
    def log(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, pattern: str, timeout_s: float = 15.0) -> re.Match[str]:
        """The first log line matching `pattern`, waiting for it; fails if the process
        ends or the time runs out first."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout_s
        seen = 0
        with self._changed:
            while True:
                for line in self.lines[seen:]:
                    if match := regex.search(line):
                        return match
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0 or (not self._reader.is_alive() and seen == len(self.lines)):
                    raise AssertionError(f"no log line matches {pattern!r}:\n{self.log}")
                self._changed.wait(min(left, 0.5))

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 15.0) -> int:
        """Send `sig` (if still running), wait for the exit; the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        self._reader.join(5)
        return code

    def __enter__(self) -> LoggedProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._reader.join(5)
