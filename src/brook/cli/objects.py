"""`brook object`: Object Store buckets on any NATS server (Brook or nats-server).

Thin wrappers over nats-py's Object Store API (chunked puts, digest-checked gets), sharing
connection options, output helpers, bucket plumbing and exit statuses with `brook kv`
(`base.py`, `output.py`, `buckets.py`).

    brook object add BUCKET [--ttl 1h] [--max-bytes 1GB] [--storage file|memory] ...
    brook object put BUCKET FILE [--name NAME] [--description TEXT]   (FILE "-": stdin)
    brook object get BUCKET NAME [-o FILE] [--force]                  (-o -: stdout)
    brook object ls [BUCKET]        (buckets, or the objects in one bucket)
    brook object info BUCKET [NAME] (a bucket's status, or one object's metadata)
    brook object rm BUCKET [NAME]   (one object, or the whole bucket)
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from brook.cli.base import CliError, Ctx, command_group, duration_arg, run_group, size_arg
from brook.cli.buckets import bucket_streams, delete_bucket, open_bucket
from brook.cli.output import Output, human_duration, human_size

OBJ_PREFIX = "OBJ_"


def _info_json(info: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "bucket": info.bucket,
        "name": info.name,
        "size": info.size or 0,
        "chunks": info.chunks or 0,
        "digest": info.digest or "",
        "mtime": info.mtime or "",
        "nuid": info.nuid,
        "deleted": bool(info.deleted),
    }
    if info.description:
        out["description"] = info.description
    if info.headers:
        out["headers"] = info.headers
    link = info.options.link if info.options is not None else None
    if link is not None:
        out["link"] = {"bucket": link.bucket, "name": link.name}
    return out


def _print_info(out: Output, info: dict[str, Any]) -> None:
    fields: list[tuple[str, Any]] = []
    if info.get("description"):
        fields.append(("Description", info["description"]))
    if "link" in info:
        link = info["link"]
        target = f"{link['bucket']}/{link['name']}" if link["name"] else f"{link['bucket']}/*"
        fields.append(("Link to", target))
    fields += [
        ("Size", f"{info['size']} bytes ({human_size(info['size'])})"),
        ("Chunks", info["chunks"]),
        ("Digest", info["digest"]),
        ("Modified", info["mtime"]),
    ]
    out.fields(fields, title=f"Object {info['name']} in bucket {info['bucket']}")


def _status_json(status: Any) -> dict[str, Any]:
    config = status.stream_info.config
    return {
        "bucket": status.bucket,
        "stream": config.name,
        "description": config.description,
        "ttl": status.ttl or 0,
        "storage": getattr(config.storage, "value", config.storage),
        "replicas": status.replicas,
        "sealed": bool(status.sealed),
        "max_bytes": config.max_bytes,
        "size": status.size,
    }


def _print_status(out: Output, status: dict[str, Any]) -> None:
    fields: list[tuple[str, Any]] = []
    if status["description"]:
        fields.append(("Description", status["description"]))
    fields += [
        ("TTL", human_duration(status["ttl"])),
        ("Max bucket size", human_size(status["max_bytes"])),
        ("Storage", status["storage"]),
        ("Sealed", "yes" if status["sealed"] else "no"),
        ("Size", human_size(status["size"])),
        ("Stream", status["stream"]),
    ]
    out.fields(fields, title=f"Object Store bucket {status['bucket']}")


class _Status:
    """The fields of nats-py's ObjectStoreStatus, from a stream info of a listing."""

    def __init__(self, stream_info: Any, bucket: str) -> None:
        self.stream_info = stream_info
        self.bucket = bucket
        config = stream_info.config
        self.ttl = config.max_age
        self.replicas = config.num_replicas
        self.sealed = config.sealed
        self.size = stream_info.state.bytes


async def _store(js: Any, name: str) -> Any:
    return await open_bucket(js.object_store, name)


async def _object_info(obs: Any, bucket: str, name: str) -> Any:
    import nats.js.errors as jserr

    try:
        return await obs.get_info(name)
    except jserr.NotFoundError:
        raise CliError(f"object {name!r} not found in bucket {bucket!r}") from None


async def obj_add(ctx: Ctx) -> int:
    args, js, out = ctx.args, ctx.js, ctx.out
    import nats.js.errors as jserr
    from nats.js import api

    config = api.ObjectStoreConfig(
        description=args.description,
        ttl=args.ttl,
        max_bytes=args.max_bytes,
        storage=api.StorageType(args.storage) if args.storage else None,
        replicas=args.replicas,
    )
    try:
        obs = await js.create_object_store(args.bucket, config=config)
    except jserr.InvalidBucketNameError:
        raise CliError(f"invalid bucket name {args.bucket!r}") from None
    return out.document(_status_json(await obs.status()), _print_status)


async def obj_put(ctx: Ctx) -> int:
    args, js, out = ctx.args, ctx.js, ctx.out
    from nats.js import api

    obs = await _store(js, args.bucket)
    if args.file == "-":
        if not args.name:
            raise CliError("--name is required when reading the object from stdin")
        name = args.name
        source: Any = sys.stdin.buffer
    else:
        path = Path(args.file)
        try:
            source = await asyncio.to_thread(path.open, "rb")
        except OSError as exc:
            raise CliError(f"cannot read {args.file}: {exc.strerror}") from None
        name = args.name or path.name
    meta = api.ObjectMeta(name=name, description=args.description)
    try:
        info = await obs.put(name, source, meta=meta)
    finally:
        if source is not sys.stdin.buffer:
            source.close()
    return out.document(_info_json(info), _print_info)


async def obj_get(ctx: Ctx) -> int:
    args, js, out = ctx.args, ctx.js, ctx.out
    import nats.js.errors as jserr

    obs = await _store(js, args.bucket)
    await _object_info(obs, args.bucket, args.name)  # a clear error before any file opens
    to_stdout = args.output == "-"
    target = None if to_stdout else Path(args.output or Path(args.name).name)
    if target is not None and not args.force and await asyncio.to_thread(target.exists):
        raise CliError(f"{target} exists; use --force to overwrite it")
    try:
        if target is None:
            result = await obs.get(args.name, writeinto=sys.stdout.buffer)
            sys.stdout.flush()
        else:
            # Written beside the target and renamed, so a failed get leaves no half file.
            partial = target.with_name(target.name + ".partial")
            f = await asyncio.to_thread(partial.open, "wb")
            try:
                result = await obs.get(args.name, writeinto=f)
            finally:
                f.close()
            await asyncio.to_thread(partial.replace, target)
    except jserr.DigestMismatchError:
        raise CliError(f"object {args.name!r}: digest mismatch, data is corrupt") from None
    except jserr.LinkIsABucketError:
        raise CliError(f"object {args.name!r} links to a whole bucket, not an object") from None
    size = result.info.size or 0
    if to_stdout:
        return 0
    if out.json_mode:
        out.json({"bucket": args.bucket, "name": args.name, "size": size, "file": str(target)})
    else:
        out.line(f"wrote {size} bytes to {target}")
    return 0


async def obj_ls(ctx: Ctx) -> int:
    args, js, out = ctx.args, ctx.js, ctx.out
    if args.bucket is None:
        return await _list_buckets(ctx)
    import nats.js.errors as jserr

    obs = await _store(js, args.bucket)
    try:
        infos = await obs.list(ignore_deletes=True)
    except jserr.NotFoundError:
        infos = []
    objects = [_info_json(i) for i in infos if not i.deleted]
    return out.listing(
        objects,
        f"no objects in bucket {args.bucket!r}",
        ("NAME", "SIZE", "CHUNKS", "MODIFIED"),
        lambda o: (o["name"], o["size"], o["chunks"], o["mtime"]),
    )


async def _list_buckets(ctx: Ctx) -> int:
    js, out = ctx.js, ctx.out
    statuses = [_status_json(_Status(si, b)) for b, si in await bucket_streams(js, OBJ_PREFIX)]
    return out.listing(
        statuses,
        "no Object Store buckets",
        ("BUCKET", "SIZE", "SEALED", "DESCRIPTION"),
        lambda s: (s["bucket"], human_size(s["size"]), "yes" if s["sealed"] else "no",
                   s["description"] or ""),
    )  # fmt: skip


async def obj_info(ctx: Ctx) -> int:
    args, js, out = ctx.args, ctx.js, ctx.out
    obs = await _store(js, args.bucket)
    if args.name is None:
        return out.document(_status_json(await obs.status()), _print_status)
    return out.document(_info_json(await _object_info(obs, args.bucket, args.name)), _print_info)


async def obj_rm(ctx: Ctx) -> int:
    args, js, out = ctx.args, ctx.js, ctx.out
    import nats.js.errors as jserr

    if args.name is None:
        return await delete_bucket(ctx, js.delete_object_store)
    obs = await _store(js, args.bucket)
    try:
        await obs.delete(args.name)
    except jserr.NotFoundError:
        raise CliError(f"object {args.name!r} not found in bucket {args.bucket!r}") from None
    if out.json_mode:
        out.json({"bucket": args.bucket, "name": args.name, "deleted": True})
    else:
        out.line(f"deleted {args.name!r} from bucket {args.bucket!r}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser, command = command_group(
        "brook object", "Object Store buckets on a NATS server (Brook or nats-server)."
    )

    p = command("add", "create a bucket (or confirm an identical one exists)", obj_add)
    p.add_argument("bucket")
    p.add_argument("--ttl", type=duration_arg, help="how long objects live (e.g. 24h)")
    p.add_argument("--max-bytes", type=size_arg, help="largest total bucket size")
    p.add_argument("--storage", choices=("file", "memory"), help="default: file")
    p.add_argument("--replicas", type=int, default=1)
    p.add_argument("--description")

    p = command("put", "store a file (FILE - reads stdin)", obj_put)
    p.add_argument("bucket")
    p.add_argument("file")
    p.add_argument("--name", help="object name (default: the file's name)")
    p.add_argument("--description")

    p = command("get", "fetch an object into a file (-o - for stdout)", obj_get)
    p.add_argument("bucket")
    p.add_argument("name")
    p.add_argument("-o", "--output", help="file to write (default: the object's base name)")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")

    p = command("ls", "list buckets, or the objects in BUCKET", obj_ls)
    p.add_argument("bucket", nargs="?")

    p = command("info", "show a bucket's status, or one object's metadata", obj_info)
    p.add_argument("bucket")
    p.add_argument("name", nargs="?")

    p = command("rm", "delete an object, or the whole bucket when NAME is omitted", obj_rm)
    p.add_argument("bucket")
    p.add_argument("name", nargs="?")
    return parser


def object_command(argv: list[str]) -> int:
    return run_group(build_parser(), argv)
