"""`brook --signal COMMAND[=PID|=PIDFILE]`: nats-server's `processSignal`, for a Brook (or
nats-server) process. COMMAND is `ldm` (SIGUSR2), `stop` (SIGKILL), `quit` (SIGINT),
`term` (SIGTERM), `reopen` (SIGUSR1) or `reload` (SIGHUP). After `=` comes a pid, a
pid-file path (read if it is a file, as nats-server does), or a pid prefix ending in `*`;
without one, the single process named like this program found by `pgrep`. Errors are
nats-server's texts; the CLI prints them after the program's name and exits 1.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess

__all__ = ["SIGNALS", "SignalError", "send_signal"]

SIGNALS = {
    "stop": signal.SIGKILL,
    "quit": signal.SIGINT,
    "reopen": signal.SIGUSR1,
    "reload": signal.SIGHUP,
    "ldm": signal.SIGUSR2,
    "term": signal.SIGTERM,
}


class SignalError(Exception):
    """The signal was not sent (to every process meant); the text is nats-server's."""


def _read_pid_file(text: str) -> str:
    """nats-server's `maybeReadPidFile`: a readable file's contents, else the text."""
    try:
        with open(text, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return text


def _running(program: str) -> list[int]:
    """The pids of processes named like `program` (`pgrep`), this one excepted."""
    try:
        found = subprocess.run(["pgrep", program], capture_output=True, text=True, check=False)
    except OSError:
        raise SignalError("unable to resolve pid, try providing one") from None
    pids = []
    for line in found.stdout.split("\n"):
        if not line:
            continue
        if not re.fullmatch(r"[0-9]+", line):
            raise SignalError("unable to resolve pid, try providing one")
        if int(line) != os.getpid():
            pids.append(int(line))
    return pids


def send_signal(spec: str, program: str) -> None:
    """Send the signal `spec` names (the `--signal` value) as nats-server does."""
    parts = spec.split("=")
    pid_expr = ""
    if len(parts) == 2:
        pid_expr = _read_pid_file(parts[1])
    elif len(parts) > 2:
        raise SignalError(f"invalid signal parameters: [{' '.join(parts[2:])}]")
    command = parts[0]
    is_glob = pid_expr.endswith("*")
    pid_text = pid_expr.removesuffix("*")
    pids: list[int] = []
    if pid_text:
        if not re.fullmatch(r"[+-]?[0-9]+", pid_text):
            raise SignalError(f"invalid pid: {pid_text}")
        pids = [int(pid_text)]
    if not pid_text or is_glob:
        pids = _running(program)
    if len(pids) > 1 and not is_glob:
        raise SignalError(
            f"multiple {program} processes running:" + "".join(f"\n{p}" for p in pids)
        )
    if not pids:
        raise SignalError(f"no {program} processes running")
    signum = SIGNALS.get(command)
    if signum is None:
        raise SignalError(f'unknown signal "{command}"')
    errors = ""
    for pid in pids:
        if pid_text and str(pid) != pid_text and not (is_glob and str(pid).startswith(pid_text)):
            continue
        try:
            os.kill(pid, signum)
        except OSError as exc:
            reason = os.strerror(exc.errno or 0)
            errors += f'\nsignal "{command}" {pid}: {reason[:1].lower()}{reason[1:]}'
    if errors:
        raise SignalError(errors)
