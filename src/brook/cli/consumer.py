"""`brook consumer`: JetStream consumers on any NATS server, with the `nats` CLI's names and
flags.

    brook consumer ls STREAM [--names]
    brook consumer info STREAM CONSUMER
    brook consumer add STREAM [CONSUMER] [--pull | --target SUBJECT] [--deliver all]
                       [--ack explicit] [--filter S ...] [--max-deliver N] [--wait 30s] ...
                       [--config FILE] [--defaults]
    brook consumer rm STREAM CONSUMER -f
    brook consumer next STREAM CONSUMER [--count N] [--ack | --no-ack | --nak | --term] [--raw]

Nothing prompts: `add` creates a pull consumer unless `--target` names a push subject, and
takes what the `nats` CLI's `--defaults` answers for the rest (deliver all, ack explicit
for pull and none for push, replay instant); `rm` needs `-f`. `--json` prints the server's
consumer info (`info`, `add`), the names (`ls`, as `nats consumer ls --json`), one
message per line (`next`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
from typing import Any

from brook.cli.base import (
    CliError,
    Ctx,
    command_group,
    confirm_forced,
    duration_arg,
    run_group,
)
from brook.cli.jsapi import (
    body_json,
    load_json_file,
    metadata_arg,
    ns,
    paged,
    seconds,
    split_subjects,
    without_type,
    write_config,
)
from brook.cli.output import Output, human_count, human_duration, printable

_ACK = ("none", "all", "explicit")
_REPLAY = ("instant", "original")
# `$JS.ACK.<domain?>.<account hash?>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>`
# (the token count tells the two forms apart): what a delivered message's reply says.
_ACK_V1_TOKENS = 9


# ---------------------------------------------------------------------- configuration


def _start_policy(config: dict[str, Any], policy: str) -> None:
    """`--deliver`: all, new, last, subject, a sequence, or a duration ago (the `nats` CLI's)."""
    if policy == "all":
        config["deliver_policy"] = "all"
    elif policy == "last":
        config["deliver_policy"] = "last"
    elif policy in ("new", "next"):
        config["deliver_policy"] = "new"
    elif policy in ("subject", "last_per_subject"):
        config["deliver_policy"] = "last_per_subject"
    elif re.fullmatch(r"\d+", policy):
        config["deliver_policy"] = "by_start_sequence"
        config["opt_start_seq"] = int(policy)
    else:
        try:
            ago = duration_arg(policy)
        except argparse.ArgumentTypeError as exc:
            raise CliError(f"--deliver: {exc}") from None
        start = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=ago)
        config["deliver_policy"] = "by_start_time"
        config["opt_start_time"] = start.isoformat().replace("+00:00", "Z")


def _config(args: argparse.Namespace) -> dict[str, Any]:
    """The consumer configuration the flags describe (the `nats` CLI's `--defaults`)."""
    if args.config:
        loaded = load_json_file(args.config, "consumer")
        if args.consumer:
            loaded["durable_name"] = args.consumer
            loaded.pop("name", None)
        if args.target:
            loaded["deliver_subject"] = args.target
        return loaded
    push = bool(args.target)
    config: dict[str, Any] = {
        "ack_policy": args.ack or ("none" if push else "explicit"),
        "replay_policy": args.replay or "instant",
        "deliver_policy": "all",
    }
    if args.consumer:
        if re.search(r"[.*>]", args.consumer):
            raise CliError("durable name can not contain '.', '*', '>'")
        config["name" if args.ephemeral else "durable_name"] = args.consumer
    if args.deliver:
        _start_policy(config, args.deliver)
    if push:
        config["deliver_subject"] = args.target
        if args.deliver_group:
            config["deliver_group"] = args.deliver_group
        if args.heartbeat:
            config["idle_heartbeat"] = ns(args.heartbeat)
        if args.flow_control:
            config["flow_control"] = True
    elif args.max_waiting is not None:
        config["max_waiting"] = args.max_waiting
    filters = split_subjects(args.filter)
    if len(filters) == 1:
        config["filter_subject"] = filters[0]
    elif filters:
        config["filter_subjects"] = filters
    optional = {
        "description": args.description,
        "max_deliver": args.max_deliver,
        "max_ack_pending": args.max_pending,
        "max_batch": args.max_pull_batch,
        "headers_only": args.headers_only,
        "num_replicas": args.replicas,
        "mem_storage": True if args.memory else None,
    }
    config.update({k: v for k, v in optional.items() if v is not None})
    if config["ack_policy"] == "none":
        config.setdefault("max_deliver", -1)
    if args.wait is not None and config["ack_policy"] != "none":
        config["ack_wait"] = ns(args.wait)
    if args.inactive_threshold is not None:
        config["inactive_threshold"] = ns(args.inactive_threshold)
    if args.metadata:
        config["metadata"] = dict(args.metadata)
    return config


# ---------------------------------------------------------------------- showing


def show_consumer(out: Output, info: dict[str, Any]) -> None:
    config = info.get("config") or {}
    name = info.get("name", "")
    fields: list[tuple[str, Any]] = []
    if config.get("description"):
        fields.append(("Description", config["description"]))
    fields += [
        ("Name", name),
        ("Durable", "yes" if config.get("durable_name") else "no"),
        ("Mode", "push" if config.get("deliver_subject") else "pull"),
    ]
    if config.get("deliver_subject"):
        fields.append(("Delivery Subject", config["deliver_subject"]))
    filters = config.get("filter_subjects") or (
        [config["filter_subject"]] if config.get("filter_subject") else []
    )
    if filters:
        fields.append(("Filter Subjects", ", ".join(filters)))
    fields += [
        ("Deliver Policy", config.get("deliver_policy", "")),
        ("Ack Policy", config.get("ack_policy", "")),
        ("Ack Wait", human_duration(seconds(config.get("ack_wait")))),
        ("Replay Policy", config.get("replay_policy", "")),
        ("Maximum Deliveries", human_count(config.get("max_deliver"))),
        ("Max Ack Pending", human_count(config.get("max_ack_pending"))),
        ("Created", info.get("created", "")),
    ]
    out.fields(fields, title=f"Information for Consumer {info.get('stream_name', '')} > {name}")
    delivered = info.get("delivered") or {}
    acked = info.get("ack_floor") or {}
    out.line()
    out.fields(
        [
            ("Last Delivered Message", f"Consumer sequence: {delivered.get('consumer_seq', 0)} "
             f"Stream sequence: {delivered.get('stream_seq', 0)}"),
            ("Acknowledgment Floor", f"Consumer sequence: {acked.get('consumer_seq', 0)} "
             f"Stream sequence: {acked.get('stream_seq', 0)}"),
            ("Outstanding Acks", info.get("num_ack_pending", 0)),
            ("Redelivered Messages", info.get("num_redelivered", 0)),
            ("Unprocessed Messages", info.get("num_pending", 0)),
            ("Waiting Pulls", info.get("num_waiting", 0)),
        ],
        title="State:",
    )  # fmt: skip


# ---------------------------------------------------------------------- commands


async def consumer_ls(ctx: Ctx) -> int:
    args, out = ctx.args, ctx.out
    infos = await paged(ctx, f"CONSUMER.LIST.{args.stream}", "consumers", {})
    names = sorted(i["name"] for i in infos)
    if out.json_mode:
        out.json(names)
        return 0
    if args.names:
        for name in names:
            out.line(name)
        return 0
    if not infos:
        out.line(f"No Consumers defined for stream {args.stream}")
        return 0
    rows = [
        (i["name"], (i.get("config") or {}).get("description") or "", i.get("created", ""),
         f"{int(i.get('num_ack_pending') or 0):,}", f"{int(i.get('num_pending') or 0):,}",
         (i.get("delivered") or {}).get("last_active") or "never")
        for i in sorted(infos, key=lambda i: str(i["name"]))
    ]  # fmt: skip
    headers = ("Name", "Description", "Created", "Ack Pending", "Unprocessed", "Last Delivery")
    out.table(headers, rows, title=f"Consumers for Stream {args.stream}")
    return 0


async def consumer_info(ctx: Ctx) -> int:
    info = await ctx.api(f"CONSUMER.INFO.{ctx.args.stream}.{ctx.args.consumer}")
    return ctx.out.document(without_type(info), show_consumer)


async def consumer_add(ctx: Ctx) -> int:
    args = ctx.args
    if args.pull and args.target:
        raise CliError("--pull and --target exclude each other")
    config = _config(args)
    if args.output:
        return await write_config(ctx, args.output, config)
    name = config.get("durable_name") or config.get("name")
    subject = f"CONSUMER.CREATE.{args.stream}" + (f".{name}" if name else "")
    request = {"stream_name": args.stream, "config": config}
    reply = await ctx.api(subject, request)
    return ctx.out.document(without_type(reply), show_consumer)


async def consumer_rm(ctx: Ctx) -> int:
    args = ctx.args
    confirm_forced(args, f"delete consumer {args.stream} > {args.consumer}")
    await ctx.api(f"CONSUMER.DELETE.{args.stream}.{args.consumer}")
    if ctx.out.json_mode:
        ctx.out.json({"stream": args.stream, "consumer": args.consumer, "deleted": True})
    else:
        ctx.out.line(f"Deleted consumer {args.stream} > {args.consumer}")
    return 0


def _ack_metadata(reply: str) -> dict[str, int]:
    """Delivery count, sequences and pending from a JetStream message's ack subject."""
    tokens = reply.split(".")
    if len(tokens) < _ACK_V1_TOKENS or tokens[:2] != ["$JS", "ACK"]:
        return {}
    tail = tokens[-5:] if len(tokens) > _ACK_V1_TOKENS else tokens[4:9]
    delivered, sseq, cseq, _ts, pending = (int(t) for t in tail)
    return {"delivered": delivered, "stream_seq": sseq, "consumer_seq": cseq, "pending": pending}


async def consumer_next(ctx: Ctx) -> int:
    """Pull `--count` messages one request at a time, as `nats consumer next` does, each
    acknowledged (or nak'd, or terminated, or left) before the next is asked for."""
    args, out, nc = ctx.args, ctx.out, ctx.nc
    import nats.errors

    ack = args.ack if args.ack is not None else not args.term  # the `nats` CLI's defaults
    if args.term and (ack or args.nak):
        raise CliError("can not both Acknowledge and Terminate message")
    verb = b"+TERM" if args.term else b"-NAK" if args.nak else b"+ACK" if ack else None
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    subject = f"$JS.API.CONSUMER.MSG.NEXT.{args.stream}.{args.consumer}"
    body = json.dumps({"batch": 1, "expires": ns(ctx.timeout)}).encode()
    try:
        for _ in range(args.count):
            await nc.publish(subject, body, reply=inbox)
            try:
                msg = await sub.next_msg(timeout=ctx.timeout + 1)
            except nats.errors.TimeoutError:
                raise CliError("no message received") from None
            status = (msg.headers or {}).get("Status") if not msg.data else None
            if status:
                await _status_error(ctx, status, (msg.headers or {}).get("Description", ""))
            _show_next(out, args, msg)
            if verb is not None and msg.reply:
                await nc.publish(msg.reply, verb)
                await nc.flush()
    finally:
        await sub.unsubscribe()
    return 0


async def _status_error(ctx: Ctx, status: str, description: str) -> None:
    """A pull's status message: the consumer's own error (not found, push) if there is one,
    else the status as the reason."""
    info = await ctx.api(f"CONSUMER.INFO.{ctx.args.stream}.{ctx.args.consumer}")
    if (info.get("config") or {}).get("deliver_subject"):
        raise CliError(f'consumer "{ctx.args.consumer}" is not a Pull consumer')
    if status in ("404", "408"):
        raise CliError("no message received")
    raise CliError(f"no message received: {status} {description}".strip())


def _show_next(out: Output, args: argparse.Namespace, msg: Any) -> None:
    meta = _ack_metadata(msg.reply or "")
    headers = dict(msg.headers or {})
    if out.json_mode:
        out.json_line({"subject": msg.subject, **meta, "headers": headers, **body_json(msg.data)})
        return
    if args.raw:
        out.line(printable(msg.data))
        return
    if meta:
        out.line(f"[{datetime.datetime.now().strftime('%H:%M:%S')}] subj: {msg.subject} / "
                 f"tries: {meta['delivered']} / cons seq: {meta['consumer_seq']} / "
                 f"str seq: {meta['stream_seq']} / pending: {meta['pending']:,}")  # fmt: skip
    else:
        out.line(f"--- subject: {msg.subject}")
    if headers:
        out.line()
        out.line("Headers:")
        out.line()
        for name, value in headers.items():
            out.line(f"  {name}: {value}")
        out.line()
        out.line("Data:")
    out.line()
    out.line(printable(msg.data))


# ---------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser, command = command_group(
        "brook consumer", "JetStream consumers on a NATS server (Brook or nats-server)."
    )
    p = command("ls", "list a stream's consumers", consumer_ls, aliases=("list",))
    p.add_argument("stream")
    p.add_argument("-n", "--names", action="store_true", help="only the names")

    p = command("info", "show a consumer's configuration and state", consumer_info)
    p.add_argument("stream")
    p.add_argument("consumer")

    p = command("add", "create a consumer (flags, or --config FILE)", consumer_add,
                aliases=("create",))  # fmt: skip
    p.add_argument("stream")
    p.add_argument("consumer", nargs="?", help="its durable name (none: ephemeral)")
    a = p.add_argument
    a("--pull", action="store_true", help="a pull consumer (the default without --target)")
    a("--target", metavar="SUBJECT", help="push: deliver to this subject")
    a("--deliver", metavar="POLICY", help="all (default), new, last, subject, SEQ or 1h")
    a("--deliver-group", metavar="GROUP", help="push: deliver to this queue group only")
    a("--ack", choices=_ACK, help="explicit (pull default), none (push default), all")
    a("--replay", choices=_REPLAY, help="instant (default) or original")
    a("--filter", action="append", metavar="SUBJECTS", help="filter subjects (repeatable)")
    a("--description")
    a("--ephemeral", action="store_true", help="CONSUMER names a non-durable consumer")
    a("--max-deliver", type=int, metavar="TRIES")
    a("--max-pending", type=int, help="maximum unacknowledged messages")
    a("--max-waiting", type=int, metavar="PULLS")
    a("--max-pull-batch", type=int, metavar="BATCH_SIZE")
    a("--wait", type=duration_arg, help="acknowledgement wait, e.g. 30s")
    a("--inactive-threshold", type=duration_arg, metavar="THRESHOLD")
    a("--heartbeat", type=duration_arg, help="push: idle heartbeat interval")
    a("--flow-control", action="store_true", help="push: flow control")
    a("--headers-only", action="store_true", default=None)
    a("--replicas", type=int)
    a("--memory", action="store_true", help="keep the consumer's state in memory")
    a("--metadata", action="append", type=metadata_arg, metavar="KEY=VALUE")
    a("--config", metavar="FILE", help="the configuration as a JSON file")
    a("--defaults", action="store_true", help="accepted for the nats CLI; no-op")
    a("--output", metavar="FILE", help="write the configuration, create nothing")

    p = command("rm", "delete a consumer", consumer_rm, aliases=("delete",))
    p.add_argument("stream")
    p.add_argument("consumer")
    p.add_argument("-f", "--force", action="store_true", help="required: really delete")

    p = command("next", "fetch messages from a pull consumer", consumer_next)
    p.add_argument("stream")
    p.add_argument("consumer")
    p.add_argument("--count", type=int, default=1, help="messages to fetch (default 1)")
    p.add_argument("--ack", action=argparse.BooleanOptionalAction, default=None,
                   help="acknowledge each message (default, unless --nak or --term)")  # fmt: skip
    p.add_argument("--nak", action="store_true", help="negatively acknowledge each message")
    p.add_argument("--term", action="store_true", help="terminate each message")
    p.add_argument("-r", "--raw", action="store_true", help="only the bodies")
    return parser


def consumer_command(argv: list[str]) -> int:
    return run_group(build_parser(), argv)
