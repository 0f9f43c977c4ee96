"""`brook` entry point.

`brook serve [options]` runs a server until SIGINT/SIGTERM, then shuts down gracefully
and exits 0. So that tools written to launch nats-server can launch Brook, a command line
that starts with a flag (`brook -p 4222 -js`) means `brook serve` (and so does any command
line when the program is named `nats-server`), the log has nats-server's
format and start-up lines (cli/logformat.py), and failures exit as nats-server's do: a bad
config file or setting, or a start-up failure (a busy port, an unusable store directory),
prints one line naming the cause and exits 1; a malformed command line exits 2.
SIGHUP, SIGUSR1 and SIGUSR2, which nats-server uses for reload, log reopening and lame
duck mode, are logged and otherwise ignored until Brook has those operations: they must
never end the process without closing its stores.
"""

from __future__ import annotations

import gc
import logging
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
# signal`) and, for those Brook does not act on yet, the operation nats-server performs.
_STOP_SIGNALS = {signal.SIGINT: "interrupt", signal.SIGTERM: "terminated"}
_IGNORED_SIGNALS = {
    signal.SIGHUP: ("hangup", "configuration reload"),
    signal.SIGUSR1: ("user defined signal 1", "reopening the log file"),
    signal.SIGUSR2: ("user defined signal 2", "lame duck mode"),
}


def version_text() -> str:
    """`brook --version`: Brook's version, then the nats-server version it speaks as,
    which launchers that gate features on `nats-server --version` read (`v2.x.y`)."""
    return f"brook {__version__} (nats-server v{limits.NATS_COMPAT_VERSION} compatible)"


def _configure_logging(settings: Settings) -> None:
    from brook.cli.logformat import NatsServerFormatter

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(NatsServerFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if settings.debug or settings.trace else logging.INFO)


def _ignore_signal(sig: signal.Signals) -> None:
    name, operation = _IGNORED_SIGNALS[sig]
    log.info('Trapped "%s" signal', name)
    log.warning("%s is not supported yet: signal ignored", operation.capitalize())


def _stop_signal(stop: asyncio.Event, sig: signal.Signals) -> None:
    log.info('Trapped "%s" signal', _STOP_SIGNALS[sig])
    stop.set()


async def _serve(settings: Settings, ports: BoundPorts) -> None:
    import asyncio

    from brook.monitor import MonitorServer
    from brook.monitor.system import SystemServices
    from brook.server.server import Server

    # Every handler is in place before the server starts: a launcher may signal as soon
    # as it reads "Server is ready", and a stop asked for during start-up waits for it.
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in _IGNORED_SIGNALS:
        loop.add_signal_handler(sig, _ignore_signal, sig)
    for sig in _STOP_SIGNALS:
        loop.add_signal_handler(sig, _stop_signal, stop, sig)
    server = Server(settings, monitor=MonitorServer, system=SystemServices, ports=ports)
    loop.add_signal_handler(signal.SIGHUP, server.reload_signal)  # config reload (ADR 0042)
    await server.start()
    # What recovery loaded lives as long as the server: out of the collector's way.
    gc.freeze()
    await stop.wait()
    await server.shutdown()


def _run(settings: Settings, ports: BoundPorts) -> None:
    # asyncio, uvloop and the server's modules are imported only now, after the ports
    # are bound (serve_command).
    import asyncio

    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency where it installs
        asyncio.run(_serve(settings, ports))
    else:
        uvloop.run(_serve(settings, ports))


def serve_command(argv: list[str]) -> int:
    from brook.config.flags import (
        ArgumentError,
        HelpRequested,
        VersionRequested,
        parse_serve_args,
    )

    try:
        settings = parse_serve_args(argv)
    except HelpRequested as help_:
        print(help_.text)
        return 0
    except VersionRequested:
        print(version_text())
        return 0
    except ConfigError as exc:
        print(f"brook: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, ArgumentError) else 1
    _configure_logging(settings)
    gc.set_threshold(GC_GEN0_THRESHOLD, *gc.get_threshold()[1:])
    try:
        # The ports first, before the server's modules (aiohttp, uvloop, JetStream) are
        # imported and the streams recovered: a client connecting meanwhile waits in the
        # backlog instead of being refused (server/listen.py).
        ports = bind_ports(settings)
    except OSError as exc:
        log.critical("%s", exc)
        return 1
    try:
        _run(settings, ports)
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
