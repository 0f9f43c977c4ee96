"""Object Store through nats-py: buckets, chunked puts far larger than max_payload, gets
whole and streamed, info, list, watch, delete, update_meta, links, seal and status.

nats-py 2.16.0 has no `add_link` / `add_bucket_link`; links are written here exactly as
nats.go's `AddLink` / `AddBucketLink` write them (a meta message whose `options.link` names
the target), and nats-py's `get` follows them.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from pathlib import Path
from typing import Any

import nats.js.errors as jserr
import pytest
from nats.js import api

pytestmark = pytest.mark.timeout(40)

CHUNK = 128 * 1024


@pytest.fixture
async def obs(js: Any) -> Any:
    return await js.create_object_store("files")


def _digest(data: bytes) -> str:
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


async def test_create_bind_and_delete_the_bucket(js: Any) -> None:
    await js.create_object_store("b", config=api.ObjectStoreConfig(description="blobs"))
    c = (await js.stream_info("OBJ_b")).config
    assert c.subjects == ["$O.b.C.>", "$O.b.M.>"]
    assert (c.discard, c.allow_rollup_hdrs, c.allow_direct) == ("new", True, True)
    assert c.description == "blobs"
    bound = await js.object_store("b")
    assert bound._stream == "OBJ_b"
    assert await js.delete_object_store("b") is True
    with pytest.raises(jserr.BucketNotFoundError):
        await js.object_store("b")


async def test_invalid_bucket_name(js: Any) -> None:
    with pytest.raises(jserr.InvalidBucketNameError):
        await js.create_object_store("a.b")


@pytest.mark.parametrize(
    "data", [b"hello", "text, encoded by the client", b""], ids=["bytes", "str", "empty"]
)
async def test_put_and_get_small(obs: Any, data: bytes | str) -> None:
    raw = data.encode() if isinstance(data, str) else data
    info = await obs.put("small", data)
    assert (info.name, info.bucket, info.size) == ("small", "files", len(raw))
    assert info.chunks == (1 if raw else 0)
    assert info.digest == _digest(raw)
    result = await obs.get("small")
    assert result.data == raw
    assert result.info.nuid == info.nuid


async def test_big_object_is_chunked_far_beyond_max_payload(obs: Any, nc: Any, js: Any) -> None:
    data = bytes(i * 7 % 251 for i in range(5 * 1024 * 1024 + 123))  # 5 MiB, max_payload 1 MiB
    assert nc.max_payload <= 1024 * 1024
    info = await obs.put("big.bin", io.BytesIO(data))
    assert info.chunks == len(data) // CHUNK + 1
    assert info.size == len(data)
    state = (await js.stream_info("OBJ_files")).state
    assert state.messages == info.chunks + 1  # chunks and one meta message
    assert (await obs.get("big.bin")).data == data


async def test_put_from_a_file_and_get_into_a_file(obs: Any, tmp_path: Path) -> None:
    src = tmp_path / "in.bin"
    data = bytes(range(256)) * 1500  # 375 KiB: three chunks
    src.write_bytes(data)
    with src.open("rb") as f:
        info = await obs.put("from-file", f)
    assert info.chunks == 3
    dst = tmp_path / "out.bin"
    with dst.open("wb") as f:
        result = await obs.get("from-file", writeinto=f)
    assert result.info.size == len(data)
    assert dst.read_bytes() == data


async def test_put_with_metadata_and_custom_chunk_size(obs: Any) -> None:
    meta = api.ObjectMeta(
        name="ignored",
        description="a report",
        headers={"Content-Type": ["text/plain"]},
        options=api.ObjectMetaOptions(max_chunk_size=1000),
    )
    info = await obs.put("report.txt", b"x" * 2500, meta=meta)
    assert (info.name, info.chunks) == ("report.txt", 3)
    stored = await obs.get_info("report.txt")
    assert stored.description == "a report"
    assert stored.headers == {"Content-Type": ["text/plain"]}
    assert stored.options.max_chunk_size == 1000
    assert (await obs.get("report.txt")).data == b"x" * 2500


async def test_meta_message_on_the_wire(obs: Any, js: Any) -> None:
    """Names become URL-safe base64 (with padding) meta subjects; meta rolls up."""
    await obs.put("dir/name with spaces.txt", b"1")
    subject = "$O.files.M." + base64.urlsafe_b64encode(b"dir/name with spaces.txt").decode()
    msg = await js.get_last_msg("OBJ_files", subject)
    assert msg.headers == {"Nats-Rollup": "sub"}
    meta = json.loads(msg.data)
    assert meta["name"] == "dir/name with spaces.txt"
    assert meta["digest"] == _digest(b"1")


async def test_put_again_replaces_and_purges_old_chunks(obs: Any, js: Any) -> None:
    first = await obs.put("f", b"a" * (CHUNK * 2))
    second = await obs.put("f", b"b" * 10)
    assert first.nuid != second.nuid
    state = (await js.stream_info("OBJ_files")).state
    assert state.messages == 2  # one chunk and one meta: the old chunks and meta are gone
    assert (await obs.get("f")).data == b"b" * 10


async def test_info(obs: Any) -> None:
    with pytest.raises(jserr.ObjectNotFoundError):
        await obs.get_info("missing")
    put = await obs.put("i", b"abc")
    info = await obs.get_info("i")
    assert (info.name, info.size, info.chunks, info.nuid) == ("i", 3, 1, put.nuid)
    assert info.deleted is False
    assert info.digest == _digest(b"abc")


async def test_delete(obs: Any, js: Any) -> None:
    await obs.put("d", b"z" * (CHUNK + 1))
    await obs.delete("d")
    with pytest.raises(jserr.ObjectNotFoundError):
        await obs.get("d")
    info = await obs.get_info("d", show_deleted=True)
    assert (info.deleted, info.size, info.chunks, info.digest) == (True, 0, 0, "")
    state = (await js.stream_info("OBJ_files")).state
    assert state.messages == 1  # the deleted meta only
    with pytest.raises(jserr.ObjectNotFoundError):
        await obs.delete("never-there")


async def test_list(obs: Any) -> None:
    with pytest.raises(jserr.NotFoundError):
        await obs.list()
    await obs.put("b", b"2")
    await obs.put("a", b"1")
    await obs.put("gone", b"3")
    await obs.delete("gone")
    await obs.put("a", b"1 again")
    listed = await obs.list()
    assert [(i.name, i.deleted) for i in listed] == [("b", False), ("gone", True), ("a", False)]
    assert [i.name for i in await obs.list(ignore_deletes=True)] == ["b", "a"]


async def test_update_meta(obs: Any) -> None:
    await obs.put("old", b"data")
    await obs.update_meta("old", api.ObjectMeta(name="old", description="described"))
    assert (await obs.get_info("old")).description == "described"
    await obs.put("taken", b"t")
    with pytest.raises(jserr.ObjectAlreadyExists):
        await obs.update_meta("old", api.ObjectMeta(name="taken"))
    with pytest.raises(jserr.ObjectDeletedError):
        await obs.update_meta("missing", api.ObjectMeta(name="x"))


async def test_watch(obs: Any) -> None:
    await obs.put("a", b"1")
    await obs.put("a", b"2")
    await obs.put("b", b"3")
    watcher = await obs.watch()
    first = [await watcher.updates(timeout=5) for _ in range(3)]
    assert [i.name if i else None for i in first] == ["a", "b", None]
    await obs.put("c", b"4")
    assert (await watcher.updates(timeout=5)).name == "c"
    await obs.delete("a")
    update = await watcher.updates(timeout=5)
    assert (update.name, update.deleted) == ("a", True)
    await watcher.stop()


async def test_watch_empty_bucket_and_options(obs: Any) -> None:
    watcher = await obs.watch()
    assert await watcher.updates(timeout=5) is None
    await watcher.stop()
    await obs.put("x", b"1")
    await obs.put("y", b"2")
    await obs.delete("y")
    history = await obs.watch(include_history=True)
    seen = [await history.updates(timeout=5) for _ in range(3)]
    # Meta messages roll up, so even the history holds only each name's latest state.
    assert [(i.name, i.deleted) if i else None for i in seen] == [
        ("x", False), ("y", True), None,
    ]  # fmt: skip
    await history.stop()
    no_deletes = await obs.watch(ignore_deletes=True)
    assert (await no_deletes.updates(timeout=5)).name == "x"
    assert await no_deletes.updates(timeout=5) is None
    await no_deletes.stop()
    updates_only = await obs.watch(updates_only=True)
    await obs.put("z", b"3")
    assert (await updates_only.updates(timeout=5)).name == "z"
    await updates_only.stop()


async def _add_link(js: Any, obs: Any, name: str, bucket: str, target: str | None) -> None:
    """nats.go AddLink (target object) / AddBucketLink (target None): a meta message."""
    link: dict[str, Any] = {"bucket": bucket}
    if target is not None:
        link["name"] = target
    meta = {
        "name": name,
        "bucket": obs._name,
        "nuid": "LINK" + name.upper(),
        "size": 0,
        "chunks": 0,
        "mtime": "2026-01-01T00:00:00Z",
        "digest": "",
        "options": {"link": link},
    }
    subject = f"$O.{obs._name}.M." + base64.urlsafe_b64encode(name.encode()).decode()
    await js.publish(subject, json.dumps(meta).encode(), headers={"Nats-Rollup": "sub"})


async def test_links_are_followed(js: Any, obs: Any) -> None:
    other = await js.create_object_store("other")
    await other.put("target", b"linked data")
    await _add_link(js, obs, "shortcut", "other", "target")
    info = await obs.get_info("shortcut")
    assert info.is_link()
    result = await obs.get("shortcut")
    assert result.data == b"linked data"
    assert result.info.bucket == "other"
    await _add_link(js, obs, "dir", "other", None)
    with pytest.raises(jserr.LinkIsABucketError):
        await obs.get("dir")


async def test_seal(obs: Any) -> None:
    await obs.put("kept", b"1")
    await obs.seal()
    status = await obs.status()
    assert status.sealed is True
    with pytest.raises(jserr.APIError) as err:
        await obs.put("more", b"2")
    assert err.value.err_code == 10109
    assert (await obs.get("kept")).data == b"1"


async def test_status(js: Any) -> None:
    obs = await js.create_object_store(
        "st",
        config=api.ObjectStoreConfig(description="d", ttl=3600, storage=api.StorageType.MEMORY),
    )
    await obs.put("x", b"y" * 1000)
    status = await obs.status()
    assert status.bucket == "st"
    assert status.description == "d"
    assert status.ttl == 3600
    assert status.storage_type == "memory"
    assert status.replicas == 1
    assert status.sealed is False
    assert status.size > 1000


async def test_max_bytes(js: Any) -> None:
    obs = await js.create_object_store("cap", config=api.ObjectStoreConfig(max_bytes=1000))
    with pytest.raises(jserr.APIError) as err:
        await obs.put("big", b"x" * 5000)
    assert err.value.description == "maximum bytes exceeded"
    with pytest.raises(jserr.ObjectNotFoundError):
        await obs.get_info("big")
