"""Key-Value buckets: create, bind, delete and status, with the stream nats-py builds."""

from __future__ import annotations

import json
from typing import Any

import nats.js.errors as jserr
import pytest

from tests.kv.conftest import SERVERS, Target, connect, start_target

pytestmark = pytest.mark.timeout(30)


async def _raw_config(nc: Any, stream: str) -> dict[str, Any]:
    msg = await nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=5)
    config: dict[str, Any] = json.loads(msg.data)["config"]
    return config


async def test_create_key_value_makes_the_stream_nats_py_asks_for(js: Any) -> None:
    kv = await js.create_key_value(
        bucket="cfg", history=5, ttl=3600, max_value_size=1024, max_bytes=1 << 20,
        description="settings",
    )  # fmt: skip
    assert kv._stream == "KV_cfg"
    c = (await js.stream_info("KV_cfg")).config
    assert c.subjects == ["$KV.cfg.>"]
    assert c.description == "settings"
    assert c.max_msgs_per_subject == 5
    assert c.max_age == 3600
    assert c.duplicate_window == 120
    assert c.max_msg_size == 1024
    assert c.max_bytes == 1 << 20
    assert c.max_msgs == -1
    assert c.max_consumers == -1
    assert c.discard == "new"
    assert c.allow_rollup_hdrs is True
    assert c.deny_delete is True
    assert c.deny_purge is False
    assert c.allow_msg_ttl is True
    assert c.allow_direct is False
    assert c.storage == "file"
    assert c.num_replicas == 1
    assert c.subject_delete_marker_ttl is None


async def test_short_bucket_ttl_shrinks_the_duplicate_window(js: Any) -> None:
    await js.create_key_value(bucket="short", ttl=30)
    c = (await js.stream_info("KV_short")).config
    assert c.max_age == 30
    assert c.duplicate_window == 30


async def test_stream_config_json_is_the_same_on_both_servers(tmp_path: Any) -> None:
    """The raw STREAM.INFO config of buckets made by nats-py, key for key."""
    configs: dict[str, list[dict[str, Any]]] = {}
    for kind in SERVERS:
        async for t in start_target(kind, tmp_path / kind):
            nc = await connect(t.url)
            js = nc.jetstream(timeout=5)
            await js.create_key_value(bucket="plain")
            await js.create_key_value(
                bucket="full", history=64, ttl=60, max_value_size=100, max_bytes=10_000,
                storage="memory", direct=True, description="d", limit_marker_ttl=5,
            )  # fmt: skip
            await js.create_object_store("obj")
            configs[kind] = [
                await _raw_config(nc, name) for name in ("KV_plain", "KV_full", "OBJ_obj")
            ]
            await nc.close()
    for brook_cfg, nats_cfg in zip(configs["brook"], configs["nats-server"], strict=True):
        for cfg in (brook_cfg, nats_cfg):
            cfg["metadata"].pop("_nats.ver")
            cfg["metadata"].pop("_nats.level")  # API level: Brook advertises fewer features
        assert brook_cfg == nats_cfg
        assert list(brook_cfg) == list(nats_cfg)


@pytest.mark.parametrize("history", [1, 64])
async def test_history_up_to_64(js: Any, history: int) -> None:
    kv = await js.create_key_value(bucket="h", history=history)
    assert (await kv.status()).history == history


async def test_history_above_64_is_refused_by_the_client(js: Any) -> None:
    with pytest.raises(jserr.KeyHistoryTooLargeError):
        await js.create_key_value(bucket="h", history=65)


@pytest.mark.parametrize("name", ["a.b", "a b", "a*", ">", ""])
async def test_invalid_bucket_names(js: Any, name: str) -> None:
    with pytest.raises(jserr.InvalidBucketNameError):
        await js.create_key_value(bucket=name)


async def test_bind_to_an_existing_bucket(js: Any) -> None:
    await js.create_key_value(bucket="b", direct=True)
    kv = await js.key_value("b")
    assert kv._direct is True
    await kv.put("k", b"v")
    assert (await kv.get("k")).value == b"v"


async def test_bind_to_a_missing_bucket(js: Any) -> None:
    with pytest.raises(jserr.BucketNotFoundError):
        await js.key_value("nope")


async def test_bind_to_a_stream_that_is_not_a_bucket(js: Any) -> None:
    await js.add_stream(name="KV_odd", subjects=["$KV.odd.>"])  # max_msgs_per_subject -1
    with pytest.raises(jserr.BadBucketError):
        await js.key_value("odd")


async def test_create_is_idempotent_and_a_different_config_conflicts(js: Any) -> None:
    await js.create_key_value(bucket="b", history=2)
    await js.create_key_value(bucket="b", history=2)
    with pytest.raises(jserr.BadRequestError) as err:
        await js.create_key_value(bucket="b", history=3)
    assert err.value.err_code == 10058


async def test_delete_key_value(js: Any) -> None:
    kv = await js.create_key_value(bucket="gone")
    await kv.put("k", b"v")
    assert await js.delete_key_value("gone") is True
    with pytest.raises(jserr.BucketNotFoundError):
        await js.key_value("gone")
    with pytest.raises(jserr.NotFoundError):
        await js.delete_key_value("gone")


@pytest.mark.parametrize("storage", ["file", "memory"])
async def test_status(js: Any, storage: str) -> None:
    kv = await js.create_key_value(bucket="st", history=3, ttl=120, storage=storage)
    await kv.put("a", b"1")
    await kv.put("a", b"2")
    await kv.put("b", b"3")
    status = await kv.status()
    assert status.bucket == "st"
    assert status.values == 3
    assert status.history == 3
    assert status.ttl == 120
    assert status.marker_ttl is None
    assert status.stream_info.config.storage == storage
    assert status.stream_info.state.last_seq == 3


async def test_limit_marker_ttl_needs_api_level_and_sets_the_stream(js: Any) -> None:
    kv = await js.create_key_value(bucket="lm", limit_marker_ttl=5)
    status = await kv.status()
    assert status.marker_ttl == 5
    assert status.stream_info.config.allow_msg_ttl is True
    info = await js.account_info()
    assert info.api.level >= 1


async def test_buckets_listed_as_streams(target: Target, js: Any) -> None:
    await js.create_key_value(bucket="one")
    await js.create_key_value(bucket="two")
    names = sorted([si.config.name for si in await js.streams_info()])
    assert names == ["KV_one", "KV_two"]


async def test_buckets_survive_a_brook_restart(tmp_path: Any) -> None:
    """Brook only: bucket settings (markers included) and values come back from disk."""
    import brook

    store = str(tmp_path / "store")
    async with brook.serve(port=0, store_dir=store) as srv:
        nc = await connect(srv.url)
        js = nc.jetstream(timeout=5)
        kv = await js.create_key_value(bucket="keep", history=3, ttl=3600, limit_marker_ttl=7)
        await kv.put("a", b"1")
        await kv.put("a", b"2")
        obs = await js.create_object_store("blobs")
        await obs.put("o", b"x" * 300_000)
        await nc.close()
    async with brook.serve(port=0, store_dir=store) as srv:
        nc = await connect(srv.url)
        js = nc.jetstream(timeout=5)
        kv = await js.key_value("keep")
        status = await kv.status()
        assert (status.history, status.ttl, status.marker_ttl, status.values) == (3, 3600, 7, 2)
        assert (await kv.get("a")).value == b"2"
        assert [e.value for e in await kv.history("a")] == [b"1", b"2"]
        obs = await js.object_store("blobs")
        assert (await obs.get("o")).data == b"x" * 300_000
        await nc.close()
