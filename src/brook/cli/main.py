"""`brook` entry point.

`brook serve [options]` runs a server until SIGINT/SIGTERM, then shuts down gracefully
and exits 0. So that tools written to launch nats-server can launch Brook, a command line
that starts with a flag (`brook -p 4222 -js`) means `brook serve` (and so does any command
line when the program is named `nats-server`), the log has nats-server's
format and start-up lines (cli/logformat.py), and failures exit as nats-server's do: a bad
config file or setting, or a start-up failure (a busy port, an unusable store directory),
prints one line naming the cause and exits 1; a malformed command line exits 2.
Signals are nats-server's (ADR 0041): SIGINT stops at once (gracefully), SIGTERM too
unless lame-duck mode is under way, SIGUSR2 enters lame-duck mode (server/lameduck.py),
SIGUSR1 reopens the log file, SIGHUP reloads the configuration (`_reload_signal`). No
signal ends the process without closing its stores. `--signal` sends them (cli/
signals.py), `-t` checks a config file, `-P` writes a pid file (removed at a clean exit),
`-l` logs to a file (cli/logformat.py).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from brook import limits
from brook.config.settings import ConfigError, Settings
from brook.server.listen import BoundPorts, bind_ports
from brook.version import __version__

if TYPE_CHECKING:
    import asyncio

    from brook.cli.logformat import NatsServerLogFile
    from brook.config.settings import ProcessSettings
    from brook.server.server import Server

USAGE = """usage: brook <command> [options]

commands:
  serve          run a Brook server (also the default when the first argument is a flag)
  store check    verify a stream's file-store directory offline: brook store check DIR
  pub, sub       publish messages; subscribe and print them (pub --help, sub --help)
  req, reply     send requests and print the replies; answer requests
  bench          benchmark publishing and consuming, core NATS and JetStream (bench --help)
  server         server info [ID|NAME]; server check connection|stream|jetstream|server|... (Nagios)
  kv             Key-Value buckets on any NATS server (kv --help)
  object         Object Store buckets on any NATS server (object --help)
  stream         JetStream streams on any NATS server (stream --help)
  consumer       JetStream consumers on any NATS server (consumer --help)
  version        print Brook's version

`brook serve --help` lists the server options.
"""


# The cyclic garbage collector's youngest-generation threshold for a `brook serve`
# process (CPython's default is 700). A consumer keeps its unacknowledged deliveries alive
# (up to max_ack_pending objects each), so at the default most collections scan live
# objects that cannot be garbage: storing and then consuming 100k messages (bench/
# consumers.py, max_ack_pending 20000) spent 0.34 s of server CPU in the collector at the
# default, 0.08 s at this threshold. Reference counting still frees everything acyclic at
# once; only cycles wait longer. The process's owner sets it, not `brook.serve()`, which
# may be embedded in someone else's process.
GC_GEN0_THRESHOLD = 10_000


log = logging.getLogger("brook")

# Signals a server handles, with Go's names for them (nats-server logs `Trapped "hangup"
# signal`).
_SIGNAL_NAMES = {
    signal.SIGINT: "interrupt",
    signal.SIGTERM: "terminated",
    signal.SIGHUP: "hangup",
    signal.SIGUSR1: "user defined signal 1",
    signal.SIGUSR2: "user defined signal 2",
}


def program_name() -> str:
    """`nats-server` when installed or linked under that name, else `brook`: the prefix
    of its error lines and the process name `--signal` looks for without a pid."""
    return "nats-server" if Path(sys.argv[0]).name == "nats-server" else "brook"


def version_text() -> str:
    """`brook --version`: Brook's version, then the nats-server version it speaks as,
    which launchers that gate features on `nats-server --version` read (`v2.x.y`)."""
    return f"brook {__version__} (nats-server v{limits.NATS_COMPAT_VERSION} compatible)"


class _ProcessOutputs:
    """What `brook serve` writes besides the server's own files: the log (stderr or the
    log file, in nats-server's format) and the pid file. A config reload that changes
    `logtime`, `logtime_utc`, `log_file` or `pid_file` applies them here (`apply`, the
    server's `process_reload`), as nats-server's `ConfigureLogger` and `logPid` do."""

    def __init__(self, settings: Settings) -> None:
        self.process = settings.process
        self.log_file: NatsServerLogFile | None = None
        self.handler = self._handler(self.process)  # OSError: the log file cannot open
        root = logging.getLogger()
        root.addHandler(self.handler)
        root.setLevel(logging.DEBUG if settings.debug or settings.trace else logging.INFO)
        self.pid_files = [_PidFile(self.process.pid_file)]

    def _handler(self, process: ProcessSettings) -> logging.Handler:
        from brook.cli.logformat import NatsServerFormatter, NatsServerLogFile

        handler: logging.Handler
        if process.log_file:
            handler = self.log_file = NatsServerLogFile(
                process.log_file, size_limit=process.log_size_limit, max_files=process.log_max_num
            )
        else:
            self.log_file = None
            handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(NatsServerFormatter(logtime=process.logtime, utc=process.logtime_utc))
        return handler

    def apply(self, process: ProcessSettings) -> None:
        old, self.process = self.process, process
        if (
            process.log_file != old.log_file
            or process.logtime != old.logtime
            or (process.logtime_utc != old.logtime_utc)
        ):
            previous = self.handler, self.log_file
            try:
                self.handler = self._handler(process)
            except OSError as exc:
                self.handler, self.log_file = previous
                log.error("Failed to open log file %s: %s", process.log_file, exc)
            else:
                root = logging.getLogger()
                root.addHandler(self.handler)
                root.removeHandler(previous[0])
                if previous[1] is not None:
                    previous[1].close()
        if process.pid_file and process.pid_file != old.pid_file:
            pid_file = _PidFile(process.pid_file)
            try:
                pid_file.write()
            except ConfigError as exc:
                log.error("Failed to write pidfile: %s", exc)
            else:
                self.pid_files.append(pid_file)

    def remove_pid_files(self) -> None:
        for pid_file in self.pid_files:
            pid_file.remove()


def _reload_signal(server: Server) -> None:
    """SIGHUP, all of it (the `Trapped` line included): reload the configuration
    (server/reload.py, ADR 0042)."""
    server.reload_signal()


def _reopen_signal(log_file: NatsServerLogFile | None) -> None:
    """SIGUSR1: reopen the log file, in nats-server's words."""
    if log_file is None:
        log.info("File log re-open ignored, not a file logger")
        return
    log_file.reopen()
    log.info("File log re-opened")


def _on_signal(
    sig: signal.Signals, server: Server, stop: asyncio.Event, outputs: _ProcessOutputs
) -> None:
    if sig == signal.SIGHUP:
        _reload_signal(server)
        return
    log.info('Trapped "%s" signal', _SIGNAL_NAMES[sig])
    if sig == signal.SIGINT or (sig == signal.SIGTERM and not server.lame_duck):
        stop.set()  # SIGTERM in lame-duck mode is ignored, as by nats-server
    elif sig == signal.SIGUSR2:
        server.enter_lame_duck_mode()
    elif sig == signal.SIGUSR1:
        _reopen_signal(outputs.log_file)


class _PidFile:
    """`-P FILE`: the pid, written (without a newline, as nats-server) once serving
    starts; removed at a clean exit if it still holds this process's pid (nats-server
    leaves it behind, which `--signal ldm=FILE` would then aim at a stranger)."""

    def __init__(self, path: str) -> None:
        self.path = Path(path) if path else None
        self.pid = str(os.getpid())

    def write(self) -> None:
        if self.path is not None:
            try:
                self.path.write_text(self.pid)
            except OSError as exc:
                raise ConfigError(f"Could not write pidfile: {exc}") from None

    def remove(self) -> None:
        if self.path is None:
            return
        with contextlib.suppress(OSError):
            if self.path.read_text() == self.pid:
                self.path.unlink()


async def _serve(settings: Settings, ports: BoundPorts, outputs: _ProcessOutputs) -> None:
    import asyncio

    from brook.monitor import MonitorServer
    from brook.monitor.system import SystemServices
    from brook.server.server import Server

    # Every handler is in place before the server starts: a launcher may signal as soon
    # as it reads "Server is ready", and a stop asked for during start-up waits for it.
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    server = Server(settings, monitor=MonitorServer, system=SystemServices, ports=ports)
    server.process_reload = outputs.apply
    for sig in _SIGNAL_NAMES:
        loop.add_signal_handler(sig, _on_signal, sig, server, stop, outputs)
    outputs.pid_files[0].write()
    try:
        await server.start()
        # What recovery loaded lives as long as the server: out of the collector's way.
        gc.freeze()
        # A stop signal, or the end of lame-duck mode (which shuts the server down).
        asked = asyncio.ensure_future(stop.wait())
        stopped = asyncio.ensure_future(server.wait_stopped())
        await asyncio.wait((asked, stopped), return_when=asyncio.FIRST_COMPLETED)
        asked.cancel()
        stopped.cancel()
        await server.shutdown()
    finally:
        outputs.remove_pid_files()


def _run(settings: Settings, ports: BoundPorts, outputs: _ProcessOutputs) -> None:
    # asyncio, uvloop and the server's modules are imported only now, after the ports
    # are bound (serve_command).
    import asyncio

    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency where it installs
        asyncio.run(_serve(settings, ports, outputs))
    else:
        uvloop.run(_serve(settings, ports, outputs))


def _raise_open_files_limit() -> None:
    """The soft limit on open files raised to the hard one, as the Go runtime does for
    nats-server at start (Go 1.19 and later, on Linux and macOS). Brook holds a file per
    store segment (about 770 for 100M small messages in one stream, ADR 0061): the usual
    soft limit of 1024 would refuse the next stream's files or clients, while the hard
    limit the administrator set is the bound meant. The numbers are in the Prometheus
    metrics (`process_open_fds`, `process_max_fds`)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Windows
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or (soft >= hard and hard != resource.RLIM_INFINITY):
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (OSError, ValueError):  # an unlimited hard limit the kernel caps (nr_open)
        return


def serve_command(argv: list[str]) -> int:
    from brook.cli.signals import SignalError, send_signal
    from brook.config.flags import (
        ArgumentError,
        ConfigChecked,
        HelpRequested,
        SignalRequested,
        VersionRequested,
        parse_serve_args,
    )

    program = program_name()
    try:
        settings = parse_serve_args(argv)
    except HelpRequested as help_:
        print(help_.text)
        return 0
    except VersionRequested:
        print(version_text())
        return 0
    except SignalRequested as asked:
        try:
            send_signal(asked.command, program)
        except SignalError as exc:
            print(f"{program}: {exc}", file=sys.stderr)
            return 1
        return 0
    except ConfigChecked as ok:
        print(f"{program}: configuration file {ok.path} is valid ({ok.digest})", file=sys.stderr)
        return 0
    except ConfigError as exc:
        print(f"{program}: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, ArgumentError) else 1
    try:
        outputs = _ProcessOutputs(settings)
    except OSError as exc:
        print(f"{program}: error opening file: {exc}", file=sys.stderr)
        return 1
    gc.set_threshold(GC_GEN0_THRESHOLD, *gc.get_threshold()[1:])
    _raise_open_files_limit()
    try:
        # The ports first, before the server's modules (aiohttp, uvloop, JetStream) are
        # imported and the streams recovered: a client connecting meanwhile waits in the
        # backlog instead of being refused (server/listen.py).
        ports = bind_ports(settings)
    except OSError as exc:
        log.critical("%s", exc)
        return 1
    try:
        _run(settings, ports, outputs)
    except (ConfigError, OSError) as exc:  # the store directory, a port: named in the text
        log.critical("%s", exc)
        return 1
    finally:
        ports.close()  # those a failed start never handed to a listener
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if Path(sys.argv[0]).name == "nats-server":
        # Installed or linked as nats-server, Brook takes nats-server's command line
        # (no subcommands; no arguments at all start a server), so launchers and test
        # harnesses written for nats-server run it unchanged.
        return serve_command(args)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    command = args[0]
    if command in ("version", "--version", "-v"):
        print(version_text())
        return 0
    if command == "serve":
        return serve_command(args[1:])
    if command == "store" and args[1:2] == ["check"]:
        from brook.cli.store import store_check_command

        return store_check_command(args[2:])
    from brook.cli.commands import client_command

    client = client_command(command)
    if client is not None:
        return client(args[1:])
    if command.startswith("-"):
        return serve_command(args)
    print(f"brook: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
