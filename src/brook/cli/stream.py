"""`brook stream`: JetStream streams on any NATS server, with the `nats` CLI's names and flags.

    brook stream ls [--names] [--subject S] [-a]
    brook stream info STREAM [--state]
    brook stream add STREAM --subjects 'orders.>' [--storage file] [--retention limits]
                     [--max-msgs N] [--max-bytes 1GB] [--max-age 24h] [--replicas 1] ...
                     [--config FILE] [--defaults]
    brook stream edit STREAM [the add flags] [--config FILE] [--dry-run]
    brook stream rm STREAM -f
    brook stream purge STREAM -f [--subject S] [--seq N | --keep N]
    brook stream get STREAM SEQ | --last-for SUBJECT
    brook stream view STREAM [--id N | --since 1h] [--subject S] [--count N] [--raw]
    brook stream backup STREAM DIR [--no-consumers] [--no-progress]
    brook stream restore DIR [--config FILE] [--replicas N] [--no-progress]

Nothing prompts: `add` takes what the `nats` CLI's `--defaults` answers for every setting
not given (`--defaults` is accepted and changes nothing), deletions need `-f`. `--json`
prints the server's documents (`info`, `add`, `edit`, `restore`: the stream info; `get`:
the stored message as the API returns it, body and headers base64; `ls`: the names, as
`nats stream ls --json` does). A backup directory has the `nats` CLI's layout:
`backup.json` (the snapshot response's `config` and `state`) beside `stream.tar.s2` (the
snapshot's bytes as the server sent them), so backups move between the two CLIs and
between Brook and nats-server.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
from pathlib import Path
from typing import Any

from brook.cli.base import (
    ApiError,
    CliError,
    Ctx,
    command_group,
    confirm_forced,
    duration_arg,
    run_group,
    size_arg,
)
from brook.cli.jsapi import (
    b64,
    body_json,
    load_json_file,
    metadata_arg,
    ns,
    paged,
    parse_headers,
    seconds,
    split_subjects,
    without_type,
    write_config,
)
from brook.cli.output import Output, human_count, human_duration, human_size, printable

# Streams the `nats` CLI lists only with `-a` (jsm.go's IsInternalStream).
INTERNAL_PREFIXES = ("KV_", "OBJ_", "$MQTT_")
BACKUP_META = "backup.json"
BACKUP_DATA = "stream.tar.s2"
RESTORE_CHUNK_BYTES = 128 * 1024  # jsm.go's RestoreSnapshotFromDirectory default
DUPLICATE_WINDOW_S = 120.0  # the `nats` CLI's default, cut to max_age when that is shorter

_RETENTION = {"limits": "limits", "interest": "interest", "workq": "workqueue", "work": "workqueue"}
_STORAGE = {"file": "file", "f": "file", "memory": "memory", "m": "memory"}


# ---------------------------------------------------------------------- configuration


def _defaults(name: str) -> dict[str, Any]:
    """What `nats stream add --defaults` sends for settings not given."""
    return {
        "name": name,
        "retention": "limits",
        "max_consumers": -1,
        "max_msgs": -1,
        "max_bytes": -1,
        "max_age": 0,
        "max_msgs_per_subject": -1,
        "max_msg_size": -1,
        "discard": "old",
        "storage": "file",
        "num_replicas": 1,
        "duplicate_window": ns(DUPLICATE_WINDOW_S),
        "compression": "none",
        "allow_direct": True,
        "deny_delete": False,
        "deny_purge": False,
        "allow_rollup_hdrs": False,
        "sealed": False,
    }


def _source(text: str) -> dict[str, Any]:
    """`--mirror`/`--source`: a stream name, or a StreamSource as a JSON object."""
    if text.lstrip().startswith("{"):
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise CliError(f"invalid stream source {text!r}: {exc}") from None
        if not isinstance(value, dict):
            raise CliError(f"invalid stream source {text!r}")
        return value
    return {"name": text}


def _apply_flags(config: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The configuration with every flag the user gave applied (unset flags are None)."""
    c = dict(config)
    simple = {
        "description": args.description,
        "max_msgs": args.max_msgs,
        "max_msgs_per_subject": args.max_msgs_per_subject,
        "max_bytes": args.max_bytes,
        "max_msg_size": args.max_msg_size,
        "max_consumers": args.max_consumers,
        "num_replicas": args.replicas,
        "compression": args.compression,
        "first_seq": args.first_sequence,
        "allow_rollup_hdrs": args.allow_rollup,
        "deny_delete": args.deny_delete,
        "deny_purge": args.deny_purge,
        "allow_direct": args.allow_direct,
        "mirror_direct": args.allow_mirror_direct,
        "allow_msg_ttl": args.allow_msg_ttl,
        "discard_new_per_subject": args.discard_per_subject,
    }
    c.update({k: v for k, v in simple.items() if v is not None})
    if args.subjects is not None:
        c["subjects"] = split_subjects(args.subjects)
    if args.storage is not None:
        c["storage"] = _STORAGE[args.storage]
    if args.retention is not None:
        c["retention"] = _RETENTION[args.retention]
    if args.discard is not None:
        c["discard"] = args.discard
    if args.discard_per_subject:
        c["discard"] = "new"
    if args.max_age is not None:
        c["max_age"] = ns(max(args.max_age, 0))
    if args.dupe_window is not None:
        c["duplicate_window"] = ns(args.dupe_window)
    elif args.max_age and c.get("duplicate_window", 0) > ns(args.max_age):
        c["duplicate_window"] = ns(args.max_age)
    if args.subject_del_markers_ttl is not None:
        c["subject_delete_marker_ttl"] = ns(args.subject_del_markers_ttl)
    if args.ack is not None:
        c["no_ack"] = not args.ack
    if args.mirror is not None:
        c["mirror"] = _source(args.mirror)
        c.pop("subjects", None)
    if args.source:
        c["sources"] = [_source(s) for s in args.source]
    if args.metadata:
        c["metadata"] = {**(c.get("metadata") or {}), **dict(args.metadata)}
    if args.republish_source and args.republish_destination:
        c["republish"] = {
            "src": args.republish_source,
            "dest": args.republish_destination,
            "headers_only": bool(args.republish_headers),
        }
    if args.transform_source and args.transform_destination:
        c["subject_transform"] = {
            "src": args.transform_source,
            "dest": args.transform_destination,
        }
    return _without_reserved(c)


def _without_reserved(config: dict[str, Any]) -> dict[str, Any]:
    """A configuration without the server's own metadata (`_nats.ver`, ...), which the
    server sets itself, as the `nats` CLI sends it."""
    metadata = {
        k: v for k, v in (config.get("metadata") or {}).items() if not k.startswith("_nats.")
    }
    out = {k: v for k, v in config.items() if k != "metadata"}
    if metadata:
        out["metadata"] = metadata
    return out


def _add_config_flags(p: argparse.ArgumentParser) -> None:
    """The configuration flags of `add` and `edit` (the `nats` CLI's names); all default
    to None, "not given", so `edit` changes only what is named."""
    a = p.add_argument
    a("--subjects", action="append", metavar="SUBJECTS", help="subjects (repeat or a,b)")
    a("--description")
    a("--storage", choices=sorted(_STORAGE), help="file (default) or memory")
    a("--compression", choices=("none", "s2"))
    a("--replicas", type=int)
    a("--retention", choices=sorted(_RETENTION), help="limits (default), interest, work")
    a("--discard", choices=("old", "new"), help="which messages go at a limit (default old)")
    a("--discard-per-subject", action="store_true", default=None, help="discard new per subject")
    a("--first-sequence", type=int)
    a("--max-age", type=duration_arg, help="oldest message kept, e.g. 24h (default forever)")
    a("--max-bytes", type=size_arg, help="total size kept, e.g. 1GB (default -1, unlimited)")
    a("--max-consumers", type=int)
    a("--max-msg-size", type=size_arg)
    a("--max-msgs", type=int, help="messages kept (default -1, unlimited)")
    a("--max-msgs-per-subject", type=int)
    a("--dupe-window", type=duration_arg, help="duplicate tracking window (default 2m)")
    a("--mirror", metavar="STREAM", help="mirror a stream (a name or a StreamSource JSON)")
    a("--source", action="append", metavar="STREAM", help="source a stream (repeatable)")
    a("--allow-rollup", action=argparse.BooleanOptionalAction)
    a("--deny-delete", action=argparse.BooleanOptionalAction)
    a("--deny-purge", action=argparse.BooleanOptionalAction)
    a("--allow-direct", action=argparse.BooleanOptionalAction, help="direct get (default on)")
    a("--allow-mirror-direct", action=argparse.BooleanOptionalAction)
    a("--allow-msg-ttl", action="store_true", default=None)
    a("--subject-del-markers-ttl", type=duration_arg, metavar="DURATION")
    a("--ack", action=argparse.BooleanOptionalAction, help="acknowledge publishes (default on)")
    a("--metadata", action="append", type=metadata_arg, metavar="KEY=VALUE")
    a("--republish-source", metavar="SOURCE")
    a("--republish-destination", metavar="DEST")
    a("--republish-headers", action="store_true", default=None)
    a("--transform-source", metavar="SOURCE")
    a("--transform-destination", metavar="DEST")
    a("--config", metavar="FILE", help="the configuration as a JSON file")


# ---------------------------------------------------------------------- showing


def _when(value: Any) -> str:
    if not value or str(value).startswith("0001-01-01"):
        return "never"
    return str(value)


def show_stream(out: Output, info: dict[str, Any]) -> None:
    """A stream info for people: its configuration, then its state."""
    config, state = info.get("config") or {}, info.get("state") or {}
    name = config.get("name", "")
    fields: list[tuple[str, Any]] = []
    if config.get("description"):
        fields.append(("Description", config["description"]))
    if config.get("subjects"):
        fields.append(("Subjects", ", ".join(config["subjects"])))
    fields += [
        ("Replicas", config.get("num_replicas", 1)),
        ("Storage", config.get("storage", "")),
        ("Retention", config.get("retention", "")),
        ("Discard", config.get("discard", "")),
        ("Maximum Messages", human_count(config.get("max_msgs"))),
        ("Maximum Per Subject", human_count(config.get("max_msgs_per_subject"))),
        ("Maximum Bytes", human_size(config.get("max_bytes"))),
        ("Maximum Age", human_duration(seconds(config.get("max_age")))),
        ("Maximum Message Size", human_size(config.get("max_msg_size"))),
        ("Maximum Consumers", human_count(config.get("max_consumers"))),
        ("Duplicate Window", human_duration(seconds(config.get("duplicate_window")))),
        ("Allows Direct", _yes(config.get("allow_direct"))),
        ("Allows Rollups", _yes(config.get("allow_rollup_hdrs"))),
        ("Deny Delete", _yes(config.get("deny_delete"))),
        ("Deny Purge", _yes(config.get("deny_purge"))),
    ]
    if config.get("mirror"):
        fields.append(("Mirror", config["mirror"].get("name", "")))
    for source in config.get("sources") or []:
        fields.append(("Source", source.get("name", "")))
    fields.append(("Created", info.get("created", "")))
    out.fields(fields, title=f"Information for Stream {name}")
    out.line()
    show_state(out, state)


def show_state(out: Output, state: dict[str, Any]) -> None:
    fields = [
        ("Messages", f"{int(state.get('messages') or 0):,}"),
        ("Bytes", human_size(int(state.get("bytes") or 0))),
        ("First Sequence", f"{state.get('first_seq', 0)} @ {_when(state.get('first_ts'))}"),
        ("Last Sequence", f"{state.get('last_seq', 0)} @ {_when(state.get('last_ts'))}"),
        ("Active Consumers", state.get("consumer_count", 0)),
    ]
    if state.get("num_subjects") is not None:
        fields.append(("Number of Subjects", state["num_subjects"]))
    if state.get("num_deleted"):
        fields.append(("Deleted Messages", state["num_deleted"]))
    out.fields(fields, title="State:")


def _yes(value: Any) -> str:
    return "true" if value else "false"


def show_message(out: Output, stream: str, seq: int, subject: str, time: str,
                 headers: list[tuple[str, str]], data: bytes) -> None:  # fmt: skip
    """A stored message for people: the `nats` CLI's `stream get` layout."""
    out.line(f"Item: {stream}#{seq} received {time} on Subject {subject}")
    out.line()
    if headers:
        out.line("Headers:")
        for name, value in headers:
            out.line(f"  {name}: {value}")
        out.line()
    out.line(printable(data))


# ---------------------------------------------------------------------- commands


async def _info(ctx: Ctx, name: str) -> dict[str, Any]:
    return without_type(await ctx.api(f"STREAM.INFO.{name}"))


async def stream_ls(ctx: Ctx) -> int:
    args, out = ctx.args, ctx.out
    request = {"subject": args.subject} if args.subject else {}
    infos = await paged(ctx, "STREAM.LIST", "streams", request)
    shown = [i for i in infos if args.all or not i["config"]["name"].startswith(INTERNAL_PREFIXES)]
    names = sorted(i["config"]["name"] for i in shown)
    if args.names or out.json_mode:
        if out.json_mode:
            out.json(names)
        for name in [] if out.json_mode else names:
            out.line(name)
        return 0
    if not shown:
        hidden = len(infos) > len(shown)
        out.line("No Streams defined" + (", pass -a to include system streams" if hidden else ""))
        return 0
    shown.sort(key=lambda i: int(i["state"].get("bytes") or 0))
    rows = [
        (i["config"]["name"], i["config"].get("description") or "", i.get("created", ""),
         f"{int(i['state'].get('messages') or 0):,}",
         human_size(int(i["state"].get("bytes") or 0)), _when(i["state"].get("last_ts")))
        for i in shown
    ]  # fmt: skip
    title = f"Streams matching {args.subject}" if args.subject else "Streams"
    headers = ("Name", "Description", "Created", "Messages", "Size", "Last Message")
    out.table(headers, rows, title=title)
    return 0


async def stream_info(ctx: Ctx) -> int:
    info = await _info(ctx, ctx.args.stream)
    if ctx.args.state:
        return ctx.out.document(info.get("state") or {}, show_state)
    return ctx.out.document(info, show_stream)


async def stream_add(ctx: Ctx) -> int:
    args = ctx.args
    if args.config:
        config = load_json_file(args.config, "stream")
        config["name"] = args.stream or config.get("name") or ""
    else:
        config = _defaults(args.stream or "")
    if not config.get("name"):
        raise CliError("a stream name is required (STREAM or the --config file's name)")
    config = _apply_flags(config, args)
    if not config.get("subjects") and not config.get("mirror") and not config.get("sources"):
        config["subjects"] = [config["name"]]  # as nats-server does for a stream without any
    if args.output:
        return await write_config(ctx, args.output, config)
    reply = await ctx.api(f"STREAM.CREATE.{config['name']}", config)
    return ctx.out.document(without_type(reply), show_stream)


async def stream_edit(ctx: Ctx) -> int:
    args = ctx.args
    current = _without_reserved((await _info(ctx, args.stream))["config"])
    config = current
    if args.config:
        config = {**load_json_file(args.config, "stream"), "name": args.stream}
    config = _apply_flags(config, args)
    if args.dry_run:
        changed = {k: v for k, v in config.items() if current.get(k) != v}
        removed = sorted(k for k in current if k not in config)
        return ctx.out.document({"changes": changed, "removed": removed}, _show_changes)
    reply = await ctx.api(f"STREAM.UPDATE.{args.stream}", config)
    return ctx.out.document(without_type(reply), show_stream)


def _show_changes(out: Output, diff: dict[str, Any]) -> None:
    if not diff["changes"] and not diff["removed"]:
        out.line("No differences")
        return
    for key, value in sorted(diff["changes"].items()):
        out.line(f"  {key}: {json.dumps(value)}")
    for key in diff["removed"]:
        out.line(f"  {key}: (removed)")


async def stream_rm(ctx: Ctx) -> int:
    confirm_forced(ctx.args, f"delete stream {ctx.args.stream}")
    await ctx.api(f"STREAM.DELETE.{ctx.args.stream}")
    if ctx.out.json_mode:
        ctx.out.json({"stream": ctx.args.stream, "deleted": True})
    else:
        ctx.out.line(f"Deleted stream {ctx.args.stream}")
    return 0


async def stream_purge(ctx: Ctx) -> int:
    args, out = ctx.args, ctx.out
    confirm_forced(args, f"purge stream {args.stream}")
    if args.seq and args.keep:
        raise CliError("sequence and keep cannot be combined when purging")
    request: dict[str, Any] = {}
    if args.subject:
        request["filter"] = args.subject
    if args.seq:
        request["seq"] = args.seq
    if args.keep:
        request["keep"] = args.keep
    reply = await ctx.api(f"STREAM.PURGE.{args.stream}", request or None)
    purged = int(reply.get("purged") or 0)
    if out.json_mode:
        out.json(without_type(reply))
        return 0
    out.line(f"Purged {purged:,} messages from {args.stream}")
    out.line()
    show_state(out, (await _info(ctx, args.stream)).get("state") or {})
    return 0


async def stream_get(ctx: Ctx) -> int:
    args, out = ctx.args, ctx.out
    if args.last_for:
        request: dict[str, Any] = {"last_by_subj": args.last_for}
    elif args.seq is not None:
        request = {"seq": args.seq}
    else:
        raise CliError("give a sequence (SEQ) or --last-for SUBJECT")
    message = (await ctx.api(f"STREAM.MSG.GET.{args.stream}", request))["message"]
    if out.json_mode:
        out.json(message)  # as the API returns it: hdrs and data base64
        return 0
    show_message(
        out, args.stream, message["seq"], message["subject"], message.get("time", ""),
        parse_headers(b64(message.get("hdrs"))), b64(message.get("data")),
    )  # fmt: skip
    return 0


async def stream_view(ctx: Ctx) -> int:
    """Messages in order, from a sequence or a time, read one by one with the
    `next_by_subj` message get (no consumer is created, nothing is acknowledged)."""
    args, out = ctx.args, ctx.out
    request: dict[str, Any] = {"seq": max(args.id or 1, 1), "next_by_subj": args.subject or ">"}
    if args.since is not None:
        start = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=args.since)
        request["start_time"] = start.isoformat().replace("+00:00", "Z")
    shown = 0
    while args.count is None or shown < args.count:
        try:
            message = (await ctx.api(f"STREAM.MSG.GET.{args.stream}", request))["message"]
        except ApiError as err:
            if err.err_code == 10037:  # no message found: the end of the stream
                break
            raise
        request.pop("start_time", None)
        request["seq"] = int(message["seq"]) + 1
        shown += 1
        headers, data = parse_headers(b64(message.get("hdrs"))), b64(message.get("data"))
        if out.json_mode:
            out.json_line({
                "stream": args.stream, "seq": message["seq"], "subject": message["subject"],
                "time": message.get("time"), "headers": dict(headers), **body_json(data),
            })  # fmt: skip
        elif args.raw:
            out.line(printable(data))
        else:
            out.line(f"[{message['seq']}] Subject: {message['subject']} "
                     f"Received: {message.get('time', '')}")  # fmt: skip
            for name, value in headers:
                out.line(f"  {name}: {value}")
            out.line()
            out.line(printable(data))
            out.line()
    if not out.json_mode and not args.raw:
        out.error(f"{shown} message(s) shown")
    return 0


async def stream_backup(ctx: Ctx) -> int:
    """The JetStream snapshot API, as jsm.go's `SnapshotToDirectory`: every chunk is
    acknowledged as it arrives; an empty message (status 204, or an error status) ends."""
    args, out, nc = ctx.args, ctx.out, ctx.nc
    target = Path(args.directory)
    if await asyncio.to_thread(_has_files, target):
        raise CliError(f"{target} exists and is not empty")
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    request: dict[str, Any] = {"deliver_subject": inbox, "no_consumers": not args.consumers}
    if args.chunk_size:
        request["chunk_size"] = args.chunk_size
    if args.window_size:
        request["window_size"] = args.window_size
    try:
        meta = without_type(await ctx.api(f"STREAM.SNAPSHOT.{args.stream}", request))
        await asyncio.to_thread(target.mkdir, parents=True, exist_ok=True)
        received = 0
        with (
            (target / BACKUP_DATA).open("wb") as data,
            out.progress("backup", None, enabled=args.progress) as advance,
        ):
            while True:
                msg = await sub.next_msg(timeout=max(ctx.timeout, 10.0))
                if not msg.data:
                    status = (msg.headers or {}).get("Status", "")
                    if status and status != "204":
                        reason = (msg.headers or {}).get("Description", "")
                        raise CliError(f"snapshot failed: {status} {reason}".strip())
                    break
                await asyncio.to_thread(data.write, msg.data)
                received += len(msg.data)
                advance(len(msg.data))
                if msg.reply:
                    await nc.publish(msg.reply, b"")
        (target / BACKUP_META).write_text(
            json.dumps({"config": meta.get("config"), "state": meta.get("state")}, indent=2)
        )
    finally:
        await sub.unsubscribe()
    state = meta.get("state") or {}
    result = {
        "stream": args.stream, "directory": str(target), "bytes": received,
        "messages": state.get("messages", 0),
    }  # fmt: skip
    if out.json_mode:
        out.json(result)
    else:
        out.line(f"Backed up stream {args.stream}: {state.get('messages', 0):,} messages, "
                 f"{human_size(received)} in {target}")  # fmt: skip
    return 0


def _has_files(directory: Path) -> bool:
    return directory.exists() and any(directory.iterdir())


async def stream_restore(ctx: Ctx) -> int:
    """The JetStream restore API, as jsm.go's `RestoreSnapshotFromDirectory`: the backup's
    configuration and state, then the data in chunks (each a request awaiting its ack),
    then an empty request whose reply is the restored stream's info."""
    args, out, nc = ctx.args, ctx.out, ctx.nc
    source = Path(args.directory)
    meta = load_json_file(str(source / BACKUP_META), "backup")
    if args.config:
        meta["config"] = load_json_file(args.config, "stream")
    if args.replicas:
        meta["config"]["num_replicas"] = args.replicas
    name = (meta.get("config") or {}).get("name")
    if not name:
        raise CliError(f"{source / BACKUP_META} names no stream")
    data_file = source / BACKUP_DATA
    try:
        size = data_file.stat().st_size
    except OSError as exc:
        raise CliError(f"cannot read {data_file}: {exc.strerror}") from None
    started = await ctx.api(f"STREAM.RESTORE.{name}", meta)
    deliver = started["deliver_subject"]
    with (
        data_file.open("rb") as data,
        out.progress("restore", size, enabled=args.progress) as advance,
    ):
        while chunk := await asyncio.to_thread(data.read, RESTORE_CHUNK_BYTES):
            reply = await nc.request(deliver, chunk, timeout=max(ctx.timeout, 10.0))
            if reply.data:
                _raise_reply(reply.data)
            advance(len(chunk))
    final = await nc.request(deliver, b"", timeout=max(ctx.timeout, 60.0))
    _raise_reply(final.data)
    info = without_type(json.loads(final.data))
    return out.document(info, show_stream)


def _raise_reply(data: bytes) -> None:
    """A restore chunk's or final reply: an error document raises."""
    try:
        reply = json.loads(data)
    except ValueError:
        raise CliError(f"unexpected restore reply {data[:80]!r}") from None
    if isinstance(reply, dict) and isinstance(reply.get("error"), dict):
        raise ApiError(reply["error"])


# ---------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser, command = command_group(
        "brook stream", "JetStream streams on a NATS server (Brook or nats-server)."
    )
    p = command("ls", "list streams", stream_ls, aliases=("list",))
    p.add_argument("-n", "--names", action="store_true", help="only the names")
    p.add_argument("--subject", help="streams whose subjects match this one")
    p.add_argument("-a", "--all", action="store_true", help="include KV, object and MQTT streams")

    p = command("info", "show a stream's configuration and state", stream_info)
    p.add_argument("stream")
    p.add_argument("--state", action="store_true", help="only the state")

    p = command("add", "create a stream (flags, or --config FILE)", stream_add, aliases=("create",))
    p.add_argument("stream", nargs="?")
    _add_config_flags(p)
    p.add_argument("--defaults", action="store_true", help="accepted for the nats CLI; no-op")
    p.add_argument("--output", metavar="FILE", help="write the configuration, create nothing")

    p = command("edit", "change a stream's configuration", stream_edit, aliases=("update",))
    p.add_argument("stream")
    _add_config_flags(p)
    p.add_argument("-f", "--force", action="store_true", help="accepted for the nats CLI; no-op")
    p.add_argument("--dry-run", action="store_true", help="show the changes only")

    p = command("rm", "delete a stream and its messages", stream_rm, aliases=("delete",))
    p.add_argument("stream")
    p.add_argument("-f", "--force", action="store_true", help="required: really delete")

    p = command("purge", "delete a stream's messages", stream_purge)
    p.add_argument("stream")
    p.add_argument("-f", "--force", action="store_true", help="required: really purge")
    p.add_argument("--subject", help="only messages on this subject")
    p.add_argument("--seq", type=int, help="up to but not including this sequence")
    p.add_argument("--keep", type=int, help="keep this many of the newest messages")

    p = command("get", "show one stored message", stream_get)
    p.add_argument("stream")
    p.add_argument("seq", type=int, nargs="?")
    p.add_argument("-S", "--last-for", metavar="SUBJECT", help="the last message on SUBJECT")

    p = command("view", "show a stream's messages in order", stream_view)
    p.add_argument("stream")
    p.add_argument("--id", type=int, help="start at this sequence")
    p.add_argument("--since", type=duration_arg, help="start this long ago, e.g. 1h")
    p.add_argument("--subject", help="only messages on this subject (wildcards too)")
    p.add_argument("--count", type=int, help="stop after this many messages")
    p.add_argument("--raw", action="store_true", help="only the bodies")

    p = command("backup", "snapshot a stream into a directory", stream_backup)
    p.add_argument("stream")
    p.add_argument("directory")
    p.add_argument("--consumers", action=argparse.BooleanOptionalAction, default=True,
                   help="include the consumers (default)")  # fmt: skip
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                   help="a progress bar on a terminal (default)")  # fmt: skip
    p.add_argument("--chunk-size", type=size_arg)
    p.add_argument("--window-size", type=size_arg)

    p = command("restore", "restore a stream from a backup directory", stream_restore)
    p.add_argument("directory")
    p.add_argument("--config", metavar="FILE", help="restore with this configuration instead")
    p.add_argument("--replicas", type=int, help="override the replica count")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                   help="a progress bar on a terminal (default)")  # fmt: skip
    return parser


def stream_command(argv: list[str]) -> int:
    return run_group(build_parser(), argv)
