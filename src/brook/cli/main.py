"""`brook` entry point.

`brook serve [options]` runs a server until SIGINT/SIGTERM, then shuts down gracefully
and exits 0. So that tools written to launch nats-server can launch Brook, a command line
that starts with a flag (`brook -p 4222 -js`) means `brook serve`. Configuration errors
print one line naming the key or flag and exit 1 (argument errors exit 2).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys

from brook import __version__
from brook.config.settings import ConfigError, Settings

USAGE = """usage: brook <command> [options]

commands:
  serve          run a Brook server (also the default when the first argument is a flag)
  store check    verify a stream's file-store directory offline: brook store check DIR
  kv             Key-Value buckets on any NATS server (kv --help)
  object         Object Store buckets on any NATS server (object --help)
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


def _configure_logging(settings: Settings) -> None:
    level = logging.DEBUG if settings.debug or settings.trace else logging.INFO
    logging.basicConfig(
        level=level,
        format="%(asctime)s [%(levelname)s] %(name)s: %(message)s",
        stream=sys.stderr,
    )


async def _serve(settings: Settings) -> None:
    from brook.server.server import Server

    server = Server(settings)
    await server.start()
    # What recovery loaded lives as long as the server: out of the collector's way.
    gc.freeze()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, server.request_shutdown)
    await server.wait_stopped()


def _run(settings: Settings) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency where it installs
        asyncio.run(_serve(settings))
    else:
        uvloop.run(_serve(settings))


def serve_command(argv: list[str]) -> int:
    from brook.config.flags import HelpRequested, parse_serve_args

    try:
        settings = parse_serve_args(argv)
    except HelpRequested as help_:
        print(help_.text)
        return 0
    except ConfigError as exc:
        print(f"brook: {exc}", file=sys.stderr)
        return 2
    _configure_logging(settings)
    gc.set_threshold(GC_GEN0_THRESHOLD, *gc.get_threshold()[1:])
    try:
        _run(settings)
    except ConfigError as exc:
        print(f"brook: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"brook: cannot listen on {settings.host}:{settings.port}: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    command = args[0]
    if command in ("version", "--version"):
        print(f"brook {__version__}")
        return 0
    if command == "serve":
        return serve_command(args[1:])
    if command == "store" and args[1:2] == ["check"]:
        from brook.cli.store import store_check_command

        return store_check_command(args[2:])
    if command == "kv":
        from brook.cli.kv import kv_command

        return kv_command(args[1:])
    if command in ("object", "obj"):
        from brook.cli.objects import object_command

        return object_command(args[1:])
    if command.startswith("-"):
        return serve_command(args)
    print(f"brook: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
