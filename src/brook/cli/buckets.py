"""The bucket plumbing `brook kv` and `brook object` share: opening a bucket, deleting
one, listing the streams behind buckets, with nats-py's errors as CLI errors."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from brook.cli.base import CliError, Ctx


async def open_bucket(open_: Callable[[str], Awaitable[Any]], name: str) -> Any:
    """`js.key_value` or `js.object_store`, with nats-py's errors as CLI errors."""
    import nats.js.errors as jserr

    try:
        return await open_(name)
    except jserr.BucketNotFoundError:
        raise CliError(f"bucket {name!r} not found") from None
    except jserr.InvalidBucketNameError:
        raise CliError(f"invalid bucket name {name!r}") from None


async def delete_bucket(ctx: Ctx, delete: Callable[[str], Awaitable[Any]]) -> int:
    """`js.delete_key_value` or `js.delete_object_store`, reported."""
    import nats.js.errors as jserr

    bucket = ctx.args.bucket
    try:
        await delete(bucket)
    except jserr.InvalidBucketNameError:
        raise CliError(f"invalid bucket name {bucket!r}") from None
    except jserr.NotFoundError:
        raise CliError(f"bucket {bucket!r} not found") from None
    if ctx.out.json_mode:
        ctx.out.json({"bucket": bucket, "deleted": True})
    else:
        ctx.out.line(f"deleted bucket {bucket!r}")
    return 0


async def bucket_streams(js: Any, prefix: str) -> list[tuple[str, Any]]:
    """(bucket name, stream info) of every stream named `<prefix><bucket>`, by name."""
    infos = sorted(await js.streams_info(), key=lambda s: s.config.name)
    return [
        (si.config.name[len(prefix) :], si) for si in infos if si.config.name.startswith(prefix)
    ]
