"""Run a `brook` command line in this process, as a user's shell would run it.

The command runs `brook.cli.main.main(argv)` on a worker thread (it has its own event
loop, so the test's loop keeps serving the in-process Brook it talks to), with stdin,
stdout and stderr replaced by in-memory files for the duration. One command at a time:
the standard streams are the process's. Importing and starting a Python process per
command cost ~0.4 s each; this costs the command's own work.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brook.cli.main import main

_LOCK = threading.Lock()


@dataclass
class Result:
    code: int
    raw: bytes
    err: str

    @property
    def out(self) -> str:
        return self.raw.decode()

    def json(self) -> Any:
        return json.loads(self.raw)


def _run(argv: list[str], stdin: bytes, cwd: Path | None) -> Result:
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    inp = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    with _LOCK:
        saved = sys.stdin, sys.stdout, sys.stderr
        saved_cwd = os.getcwd()
        sys.stdin, sys.stdout, sys.stderr = inp, out, err
        try:
            if cwd is not None:
                os.chdir(cwd)
            code = main(argv)
        finally:
            os.chdir(saved_cwd)
            sys.stdin, sys.stdout, sys.stderr = saved
    out.flush()
    err.flush()
    raw = out.buffer.getvalue()
    return Result(code, raw, err.buffer.getvalue().decode())


async def cli(url: str, *args: str, stdin: bytes = b"", cwd: Path | None = None) -> Result:
    """`brook ARGS -s URL` (in directory `cwd`): the exit status, stdout's bytes and
    stderr's text. An empty `url` leaves `-s` out ($NATS_URL or the default)."""
    argv = [*args, "-s", url] if url else list(args)
    return await asyncio.wait_for(asyncio.to_thread(_run, argv, stdin, cwd), 30)


async def ok(url: str, *args: str, stdin: bytes = b"", cwd: Path | None = None) -> Result:
    """`cli()`, asserting exit status 0."""
    result = await cli(url, *args, stdin=stdin, cwd=cwd)
    assert result.code == 0, (args, result.out, result.err)
    return result
