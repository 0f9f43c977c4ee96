"""`brook server info [ID|NAME]` and `brook server check ...` (servercheck.py), with the
`nats server` command's names and flags.

`server info` asks as the `nats` CLI does: `$SYS.REQ.SERVER.<id>.VARZ` for a server ID
(56 upper-case characters), else `$SYS.REQ.SERVER.PING.VARZ` filtered by exact server name
(every server when none is given; the first reply is shown). Those subjects answer only a
user of the system account, so the connection needs system credentials (`--user`/
`--password`, `--creds` ... of a `system_account` user); without them no server answers
and the command says so. `--json` prints the server's `/varz` document as it came.
"""

from __future__ import annotations

import argparse
from typing import Any

from brook.cli.base import Ctx, add_connection_options, run_command
from brook.cli.output import Output, human_size
from brook.cli.servercheck import add_check_parsers, add_format_options, fetch_varz, run_check
from brook.durations import go_string


async def server_info(ctx: Ctx) -> int:
    varz = await fetch_varz(ctx.nc, ctx.args.server_id or "", ctx.timeout)
    return ctx.out.document(varz, show_varz)


def show_varz(out: Output, varz: dict[str, Any]) -> None:
    """natscli's `server info` layout: a heading, then titled sections."""
    name, server_id = varz.get("server_name", ""), varz.get("server_id", "")
    heading = server_id if name == server_id else f"{name} ({server_id})"
    out.line(f"Server information for {heading}")
    sections: list[tuple[str, list[tuple[str, Any]]]] = [
        ("Process Details", [
            ("Version", varz.get("version")),
            ("Git Commit", varz.get("git_commit", "")),
            ("Go Version", varz.get("go", "")),
            ("Start Time", varz.get("start")),
            ("Configuration Load Time", varz.get("config_load_time")),
            ("Uptime", varz.get("uptime")),
        ]),
        ("Connection Details", [
            ("Auth Required", bool(varz.get("auth_required"))),
            ("TLS Required", bool(varz.get("tls_required"))),
            ("Host", f"{varz.get('host')}:{varz.get('port')}"),
            *(("Client URLs" if i == 0 else "", url)
              for i, url in enumerate(varz.get("connect_urls") or [])),
        ]),
    ]  # fmt: skip
    jetstream = varz.get("jetstream") or {}
    config, stats = jetstream.get("config") or {}, jetstream.get("stats") or {}
    if config.get("store_dir"):
        api = stats.get("api") or {}
        sections.append(("JetStream", [
            ("Domain", config.get("domain", "")),
            ("API Support Level", api.get("level", 0)),
            ("Storage Directory", config.get("store_dir")),
            ("Active Accounts", stats.get("accounts", 0)),
            ("Memory In Use", human_size(int(stats.get("memory") or 0))),
            ("File In Use", human_size(int(stats.get("storage") or 0))),
            ("API Requests", api.get("total", 0)),
            ("API Errors", api.get("errors", 0)),
            ("Maximum Memory Storage", human_size(int(config.get("max_memory") or 0))),
            ("Maximum File Storage", human_size(int(config.get("max_storage") or 0))),
        ]))  # fmt: skip
    sections.append(("Limits", [
        ("Maximum Connections", varz.get("max_connections")),
        ("Maximum Subscriptions", varz.get("max_subscriptions")),
        ("Maximum Payload", human_size(int(varz.get("max_payload") or 0))),
        ("TLS Timeout", go_string(int(float(varz.get("tls_timeout") or 0) * 1e9))),
        ("Write Deadline", go_string(int(varz.get("write_deadline") or 0))),
    ]))  # fmt: skip
    sections.append(("Statistics", [
        ("CPU Cores", f"{varz.get('cores', 0)} {float(varz.get('cpu') or 0):.2f}%"),
        ("Memory", human_size(int(varz.get("mem") or 0))),
        ("Connections", varz.get("connections", 0)),
        ("Subscriptions", varz.get("subscriptions", 0)),
        ("Messages", f"{varz.get('in_msgs', 0):,} in {varz.get('out_msgs', 0):,} out"),
        ("Bytes", f"{human_size(int(varz.get('in_bytes') or 0))} in "
                  f"{human_size(int(varz.get('out_bytes') or 0))} out"),
        ("Slow Consumers", varz.get("slow_consumers", 0)),
    ]))  # fmt: skip
    for title, pairs in sections:
        out.line()
        out.fields([(label, _go_value(value)) for label, value in pairs], title=title)


def _go_value(value: Any) -> str:
    """A value as Go's `%v` prints it (the `nats` CLI's columns): `true`, empty for
    absent."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="brook server", description="NATS server information and checks."
    )
    add_connection_options(parser, suppress=False)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def leaf(
        group: Any, name: str, help_: str, aliases: list[str] | None = None
    ) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = group.add_parser(
            name, help=help_, description=help_, aliases=aliases or []
        )
        add_connection_options(p, suppress=True)
        p.set_defaults(check=name)
        return p

    info = leaf(commands, "info", "Show information about a single server", ["i"])
    info.add_argument("server_id", nargs="?", metavar="ID|NAME", help="server ID or name")
    info.set_defaults(func=server_info, check=None)

    check = commands.add_parser("check", help="Health checks for NATS servers (Nagios output)")
    add_format_options(check)
    checks = check.add_subparsers(dest="check", metavar="CHECK", required=True)
    add_check_parsers(checks, leaf)
    return parser


def server_command(argv: list[str]) -> int:
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0)
    if args.command in ("info", "i"):
        return run_command("brook server info", args, server_info)
    aliases = {"conn": "connection", "js": "jetstream", "req": "request"}
    args.check = aliases.get(args.check, args.check)
    return run_check(args)
