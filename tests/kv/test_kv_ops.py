"""Key-Value operations that need no consumer: put, get, create, update, delete, purge, and
the stream rules they lean on (history, rollup, discard new, deny delete, size limits)."""

from __future__ import annotations

from typing import Any

import nats.js.errors as jserr
import pytest

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(params=[False, True], ids=["msg-get", "direct-get"])
async def kv(js: Any, request: pytest.FixtureRequest) -> Any:
    """A bucket with history 5, read through STREAM.MSG.GET or through direct get."""
    return await js.create_key_value(bucket="b", history=5, direct=request.param)


async def test_put_then_get_latest(kv: Any) -> None:
    assert await kv.put("a", b"1") == 1
    assert await kv.put("a", b"2") == 2
    entry = await kv.get("a")
    assert (entry.key, entry.value, entry.revision, entry.bucket) == ("a", b"2", 2, "b")
    assert entry.operation is None


async def test_get_by_revision(kv: Any) -> None:
    await kv.put("a", b"1")
    await kv.put("b", b"x")
    await kv.put("a", b"2")
    assert (await kv.get("a", revision=1)).value == b"1"
    assert (await kv.get("a", revision=3)).value == b"2"
    with pytest.raises(jserr.KeyNotFoundError):
        await kv.get("a", revision=2)  # revision 2 belongs to another key
    with pytest.raises(jserr.KeyNotFoundError):
        await kv.get("a", revision=99)


async def test_get_missing_key(kv: Any) -> None:
    with pytest.raises(jserr.KeyNotFoundError):
        await kv.get("nope")


async def test_empty_value(kv: Any) -> None:
    await kv.put("e", b"")
    entry = await kv.get("e")
    assert entry.value in (b"", None)
    assert entry.revision == 1


async def test_large_value(kv: Any) -> None:
    value = bytes(range(256)) * 2048  # 512 KiB, under the default 1 MiB max_payload
    await kv.put("big", value)
    assert (await kv.get("big")).value == value


@pytest.mark.parametrize(
    "key", ["a.b.c", "dir/file", "k=v", "with-dash_and_underscore", "A1", "x" * 200]
)
async def test_valid_keys(kv: Any, key: str) -> None:
    rev = await kv.put(key, b"v")
    assert (await kv.get(key)).revision == rev


@pytest.mark.parametrize("key", [".a", "a.", "a b", "a*", "a>", "", "ä"])
async def test_invalid_keys_are_refused_by_the_client(kv: Any, key: str) -> None:
    with pytest.raises(jserr.InvalidKeyError):
        await kv.put(key, b"v")


async def test_create_only_when_absent(kv: Any) -> None:
    assert await kv.create("c", b"1") == 1
    with pytest.raises(jserr.KeyWrongLastSequenceError) as err:
        await kv.create("c", b"2")
    assert "wrong last sequence: 1" in str(err.value.description)
    assert (await kv.get("c")).value == b"1"


async def test_create_after_delete_and_after_purge(kv: Any) -> None:
    await kv.create("c", b"1")
    await kv.delete("c")
    assert await kv.create("c", b"2") == 3
    await kv.purge("c")
    assert await kv.create("c", b"3") == 5
    assert (await kv.get("c")).value == b"3"


async def test_update_is_compare_and_set(kv: Any) -> None:
    rev = await kv.put("u", b"1")
    rev2 = await kv.update("u", b"2", last=rev)
    assert rev2 == rev + 1
    with pytest.raises(jserr.KeyWrongLastSequenceError):
        await kv.update("u", b"3", last=rev)
    assert (await kv.get("u")).value == b"2"
    with pytest.raises(jserr.KeyWrongLastSequenceError):
        await kv.update("fresh", b"x", last=7)
    assert await kv.update("fresh", b"x", last=0) == rev2 + 1  # last 0: only if absent


async def test_delete_leaves_a_marker(kv: Any, js: Any) -> None:
    await kv.put("d", b"1")
    assert await kv.delete("d") is True
    with pytest.raises(jserr.KeyNotFoundError) as err:
        await kv.get("d")
    assert err.value.op == "DEL"
    assert err.value.entry.revision == 2
    msg = await js.get_msg("KV_b", subject="$KV.b.d")
    assert msg.headers == {"KV-Operation": "DEL"}
    assert (await kv.get("d", revision=1)).value == b"1"  # delete keeps history


async def test_delete_with_expected_revision(kv: Any) -> None:
    await kv.put("d", b"1")
    with pytest.raises(jserr.BadRequestError) as err:
        await kv.delete("d", last=5)
    assert err.value.err_code == 10071
    await kv.delete("d", last=1)
    with pytest.raises(jserr.KeyNotFoundError):
        await kv.get("d")


async def test_purge_drops_history(kv: Any, js: Any) -> None:
    for i in range(4):
        await kv.put("p", str(i).encode())
    await kv.put("other", b"x")
    assert await kv.purge("p") is True
    with pytest.raises(jserr.KeyNotFoundError) as err:
        await kv.get("p")
    assert err.value.op == "PURGE"
    with pytest.raises(jserr.KeyNotFoundError):
        await kv.get("p", revision=1)
    info = await js.stream_info("KV_b")
    assert info.state.messages == 2  # the purge marker and "other"
    msg = await js.get_msg("KV_b", subject="$KV.b.p")
    assert msg.headers == {"KV-Operation": "PURGE", "Nats-Rollup": "sub"}


async def test_history_keeps_the_newest_revisions(js: Any) -> None:
    kv = await js.create_key_value(bucket="h", history=3)
    for i in range(1, 8):
        assert await kv.put("k", str(i).encode()) == i
    info = await js.stream_info("KV_h")
    assert (info.state.messages, info.state.first_seq, info.state.last_seq) == (3, 5, 7)
    with pytest.raises(jserr.KeyNotFoundError):
        await kv.get("k", revision=4)
    assert (await kv.get("k", revision=5)).value == b"5"


async def test_discard_new_does_not_block_a_key_at_its_history_limit(js: Any) -> None:
    """KV streams are discard new, but a key at max_msgs_per_subject still takes puts."""
    kv = await js.create_key_value(bucket="one", history=1)
    for i in range(10):
        await kv.put("k", str(i).encode())
    assert (await kv.get("k")).value == b"9"
    assert (await kv.status()).values == 1


async def test_max_value_size(js: Any) -> None:
    kv = await js.create_key_value(bucket="small", max_value_size=16)
    await kv.put("ok", b"x" * 16)
    with pytest.raises(jserr.BadRequestError) as err:
        await kv.put("big", b"x" * 17)
    assert err.value.err_code == 10054
    assert err.value.description == "message size exceeds maximum allowed"


async def test_max_bytes_with_discard_new(js: Any) -> None:
    kv = await js.create_key_value(bucket="full", max_bytes=200)
    await kv.put("a", b"x" * 100)
    with pytest.raises(jserr.APIError) as err:
        await kv.put("b", b"x" * 100)
    assert (err.value.code, err.value.err_code) == (503, 10077)
    assert err.value.description == "maximum bytes exceeded"
    await kv.put("a", b"y" * 90)  # replacing a key's only revision (history 1) still fits


async def test_deny_delete_refuses_message_deletes(kv: Any, js: Any) -> None:
    await kv.put("a", b"1")
    with pytest.raises(jserr.APIError) as err:
        await js.delete_msg("KV_b", 1)
    assert (err.value.code, err.value.err_code) == (500, 10057)
    assert err.value.description == "message delete not permitted"


async def test_direct_get_by_last_subject_on_the_wire(js: Any, nc: Any) -> None:
    """What nats-py's direct get sends and reads, checked byte-level on the headers."""
    kv = await js.create_key_value(bucket="d", direct=True)
    await kv.put("k", b"hello")
    reply = await nc.request("$JS.API.DIRECT.GET.KV_d.$KV.d.k", b"", timeout=5)
    assert reply.data == b"hello"
    assert reply.headers["Nats-Stream"] == "KV_d"
    assert reply.headers["Nats-Subject"] == "$KV.d.k"
    assert reply.headers["Nats-Sequence"] == "1"
    assert reply.headers["Nats-Time-Stamp"].endswith("Z")
    missing = await nc.request("$JS.API.DIRECT.GET.KV_d.$KV.d.zz", b"", timeout=5)
    assert missing.headers["Status"] == "404"  # nats-py's key for the inline status


async def test_keys_are_isolated_between_buckets(js: Any) -> None:
    one = await js.create_key_value(bucket="one")
    two = await js.create_key_value(bucket="two")
    await one.put("k", b"1")
    with pytest.raises(jserr.KeyNotFoundError):
        await two.get("k")


async def test_memory_bucket(js: Any) -> None:
    kv = await js.create_key_value(bucket="mem", storage="memory", history=2)
    await kv.put("k", b"1")
    await kv.put("k", b"2")
    await kv.put("k", b"3")
    assert (await kv.get("k")).value == b"3"
    assert (await kv.status()).values == 2
