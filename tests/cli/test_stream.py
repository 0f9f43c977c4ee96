"""`brook stream ...` against a live server: Brook in this process and (where marked by
the `url` fixture) the real nats-server, through the in-process runner. Every command's
effect is read back with nats-py, not from the command's own output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.runner import cli, ok

pytestmark = pytest.mark.timeout(60)


async def test_add_with_flags_reaches_the_stream(url: str, client: Any, name: str) -> None:
    added = await ok(
        url, "stream", "add", name, "--subjects", f"{name}.a", "--subjects", f"{name}.b,{name}.c",
        "--storage", "memory", "--retention", "work", "--max-msgs", "100",
        "--max-bytes", "1MB", "--max-age", "1h", "--replicas", "1", "--dupe-window", "30s",
        "--max-msgs-per-subject", "7", "--discard", "new", "--description", "orders",
        "--metadata", "team=a", "--deny-delete", "--defaults", "--json",
    )  # fmt: skip
    c = (await client.jetstream().stream_info(name)).config
    assert c.subjects == [f"{name}.a", f"{name}.b", f"{name}.c"]
    assert (c.storage, c.retention, c.max_msgs, c.max_bytes, c.max_age) == (
        "memory", "workqueue", 100, 1_048_576, 3600,
    )  # fmt: skip
    assert (c.duplicate_window, c.max_msgs_per_subject, c.discard, c.description) == (
        30, 7, "new", "orders",
    )  # fmt: skip
    assert (c.deny_delete, c.deny_purge, c.allow_direct, c.num_replicas) == (True, False, True, 1)
    assert c.metadata["team"] == "a"
    document = added.json()
    assert document["config"]["max_bytes"] == 1_048_576  # binary units, as the nats CLI
    assert document["config"]["max_age"] == 3600 * 10**9  # the API's nanoseconds, as sent
    assert "type" not in document
    human = await ok(url, "stream", "info", name)
    assert f"Information for Stream {name}" in human.out
    assert "Maximum Messages: 100" in human.out
    # The defaults of `nats stream add --defaults` for what was not given.
    plain = await ok(url, "stream", "add", name + "D", "--subjects", name + "d.>", "--json")
    pc = plain.json()["config"]
    assert (pc["retention"], pc["storage"], pc["max_msgs"], pc["max_bytes"]) == (
        "limits", "file", -1, -1,
    )  # fmt: skip
    assert (pc["discard"], pc["duplicate_window"], pc["allow_direct"]) == (
        "old", 120 * 10**9, True,
    )  # fmt: skip
    await ok(url, "stream", "rm", name, "-f")
    await ok(url, "stream", "rm", name + "D", "-f")


async def test_config_file_edit_and_refusals(
    url: str, client: Any, name: str, tmp_path: Path
) -> None:
    config = tmp_path / "stream.json"
    config.write_text(json.dumps({"subjects": [f"{name}.>"], "max_msgs": 10, "storage": "file"}))
    await ok(url, "stream", "add", name, "--config", str(config))
    assert (await client.jetstream().stream_info(name)).config.max_msgs == 10
    dry = await ok(url, "stream", "edit", name, "--max-msgs", "20", "--dry-run", "--json")
    assert dry.json() == {"changes": {"max_msgs": 20}, "removed": []}
    assert (await client.jetstream().stream_info(name)).config.max_msgs == 10
    edited = await ok(url, "stream", "edit", name, "--max-msgs", "20", "--description", "x")
    assert "Maximum Messages: 20" in edited.out
    c = (await client.jetstream().stream_info(name)).config
    assert (c.max_msgs, c.description, c.subjects) == (20, "x", [f"{name}.>"])
    # The server's own refusals, in the `nats` CLI's words, and the same on both servers.
    storage = await cli(url, "stream", "edit", name, "--storage", "memory")
    assert (storage.code, storage.err) == (
        1, "brook stream edit: stream configuration update can not change storage type (10052)\n",
    )  # fmt: skip
    again = await cli(url, "stream", "add", name, "--subjects", "other")
    assert again.code == 1
    assert again.err.endswith("(10058)\n")  # stream name already in use, with another config
    saved = tmp_path / "saved.json"
    written = await ok(url, "stream", "add", name + "O", "--subjects", f"{name}o",
                       "--max-msgs", "5", "--output", str(saved))  # fmt: skip
    assert written.out == f"Configuration written to {saved}\n"
    assert name + "O" not in (await ok(url, "stream", "ls", "-j")).json()  # nothing created
    await ok(url, "stream", "add", "--config", str(saved))  # the name from the file
    assert (await client.jetstream().stream_info(name + "O")).config.max_msgs == 5
    await ok(url, "stream", "rm", name + "O", "-f")
    missing = await cli(url, "stream", "info", name + "X")
    assert (missing.code, missing.err) == (1, "brook stream info: stream not found (10059)\n")
    await ok(url, "stream", "rm", name, "-f")


async def test_ls_info_and_rm(server: Any, js: Any) -> None:
    url = server.url
    assert (await ok(url, "stream", "ls")).out == "No Streams defined\n"
    await js.add_stream(name="ORDERS", subjects=["orders.>"], description="the orders")
    await js.add_stream(name="AUDIT", subjects=["audit"])
    await js.create_key_value(bucket="cfg")
    for _ in range(3):
        await js.publish("orders.new", b"x" * 10)
    assert (await ok(url, "stream", "ls", "--json")).json() == ["AUDIT", "ORDERS"]
    assert (await ok(url, "stream", "ls", "-a", "--json")).json() == ["AUDIT", "KV_cfg", "ORDERS"]
    assert (await ok(url, "stream", "ls", "--names")).out == "AUDIT\nORDERS\n"
    assert (await ok(url, "stream", "ls", "--subject", "orders.x", "-j")).json() == ["ORDERS"]
    table = (await ok(url, "stream", "ls")).out.splitlines()
    assert table[0] == "Streams"
    assert table[2].split() == [
        "Name",
        "Description",
        "Created",
        "Messages",
        "Size",
        "Last",
        "Message",
    ]
    assert table[-1].split()[:4] == ["ORDERS", "the", "orders", table[-1].split()[3]]
    assert table[-1].split()[4] == "3"  # the largest stream last, as the nats CLI sorts
    state = (await ok(url, "stream", "info", "ORDERS", "--state", "--json")).json()
    assert (state["messages"], state["first_seq"], state["last_seq"]) == (3, 1, 3)
    info = (await ok(url, "stream", "info", "ORDERS", "--json")).json()
    assert info["config"]["description"] == "the orders"
    refused = await cli(url, "stream", "rm", "ORDERS")
    assert (refused.code, refused.err) == (
        1, "brook stream rm: refusing to delete stream ORDERS without -f/--force\n",
    )  # fmt: skip
    assert (await js.stream_info("ORDERS")).state.messages == 3
    assert (await ok(url, "stream", "rm", "ORDERS", "-f")).out == "Deleted stream ORDERS\n"
    assert (await ok(url, "stream", "ls", "-j")).json() == ["AUDIT"]
    gone = await cli(url, "stream", "rm", "ORDERS", "-f")
    assert gone.err == "brook stream rm: stream not found (10059)\n"


async def test_purge_really_purges(url: str, client: Any, name: str) -> None:
    js = client.jetstream()
    await js.add_stream(name=name, subjects=[f"{name}.*"])
    for i in range(10):
        await js.publish(f"{name}.{'a' if i % 2 else 'b'}", str(i).encode())
    refused = await cli(url, "stream", "purge", name)
    assert refused.code == 1
    assert (await js.stream_info(name)).state.messages == 10
    by_subject = await ok(url, "stream", "purge", name, "-f", "--subject", f"{name}.a", "--json")
    assert by_subject.json() == {"success": True, "purged": 5}
    state = (await js.stream_info(name, subjects_filter=">")).state
    assert (state.messages, state.subjects) == (5, {f"{name}.b": 5})
    kept = await ok(url, "stream", "purge", name, "-f", "--keep", "2")
    assert kept.out.startswith(f"Purged 3 messages from {name}\n")
    assert "Messages: 2" in kept.out
    assert (await js.stream_info(name)).state.first_seq == 7  # .b's 7 and 9 kept
    both = await cli(url, "stream", "purge", name, "-f", "--seq", "9", "--keep", "1")
    assert both.err.endswith("sequence and keep cannot be combined when purging\n")
    await ok(url, "stream", "purge", name, "-f", "--seq", "9")
    state = (await js.stream_info(name)).state
    assert (state.messages, state.first_seq) == (1, 9)
    await ok(url, "stream", "purge", name, "-f")
    assert (await js.stream_info(name)).state.messages == 0
    await js.delete_stream(name)


async def test_get_and_view(server: Any, js: Any) -> None:
    url = server.url
    await js.add_stream(name="EV", subjects=["ev.*"])
    await js.publish("ev.a", b"first", headers={"Trace": "t1"})
    await js.publish("ev.b", b"second")
    await js.publish("ev.a", b"\xff\xfe")
    got = await ok(url, "stream", "get", "EV", "1")
    assert got.out.startswith("Item: EV#1 received ")
    assert " on Subject ev.a\n" in got.out
    assert "Headers:\n  Trace: t1\n" in got.out
    assert got.out.endswith("first\n")
    message = (await ok(url, "stream", "get", "EV", "--last-for", "ev.a", "-j")).json()
    assert (message["seq"], message["subject"], message["data"]) == (3, "ev.a", "//4=")
    missing = await cli(url, "stream", "get", "EV", "9")
    assert (missing.code, missing.err) == (1, "brook stream get: no message found (10037)\n")
    lines = (await ok(url, "stream", "view", "EV", "--json")).out.splitlines()
    viewed = [json.loads(line) for line in lines]
    assert [(v["seq"], v["subject"], v["data"]) for v in viewed] == [
        (1, "ev.a", "first"), (2, "ev.b", "second"), (3, "ev.a", None),
    ]  # fmt: skip
    assert viewed[0]["headers"] == {"Trace": "t1"}
    assert viewed[2]["data_b64"] == "//4="
    only_a = await ok(url, "stream", "view", "EV", "--subject", "ev.a", "--raw")
    assert only_a.raw == b"first\n\\xff\\xfe\n"
    from_2 = await ok(url, "stream", "view", "EV", "--id", "2", "--count", "1", "-j")
    assert [json.loads(line)["seq"] for line in from_2.out.splitlines()] == [2]
    recent = await ok(url, "stream", "view", "EV", "--since", "1h", "-j")
    assert len(recent.out.splitlines()) == 3
    human = await ok(url, "stream", "view", "EV", "--count", "1")
    assert human.out.startswith("[1] Subject: ev.a Received: ")
    assert human.err == "1 message(s) shown\n"


async def _messages(js: Any, stream: str) -> list[tuple[int, str, bytes, Any]]:
    info = await js.stream_info(stream)
    out = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        msg = await js.get_msg(stream, seq)
        out.append((msg.seq, msg.subject, msg.data, dict(msg.headers or {})))
    return out


async def _fill(js: Any, name: str) -> list[tuple[int, str, bytes, Any]]:
    await js.add_stream(name=name, subjects=[f"{name}.>"], max_msgs_per_subject=3)
    for i in range(40):
        await js.publish(f"{name}.{i % 4}", f"message {i}".encode() * 20, headers={"N": str(i)})
    await js.add_consumer(name, durable_name="WORKER", ack_policy="explicit")
    return await _messages(js, name)


async def test_backup_rm_restore_gives_the_same_stream(
    server: Any, js: Any, tmp_path: Path
) -> None:
    url = server.url
    before = await _fill(js, "BK")
    target = tmp_path / "backup"
    done = await ok(url, "stream", "backup", "BK", str(target), "--json")
    assert done.json()["messages"] == len(before) == 12
    assert sorted(p.name for p in target.iterdir()) == ["backup.json", "stream.tar.s2"]
    assert json.loads((target / "backup.json").read_text())["config"]["name"] == "BK"
    again = await cli(url, "stream", "backup", "BK", str(target))
    assert again.err == f"brook stream backup: {target} exists and is not empty\n"
    exists = await cli(url, "stream", "restore", str(target))
    assert exists.code == 1
    assert exists.err.endswith("(10130)\n")  # the stream is still there
    await ok(url, "stream", "rm", "BK", "-f")
    restored = await ok(url, "stream", "restore", str(target), "--json")
    assert restored.json()["state"]["messages"] == 12
    assert await _messages(js, "BK") == before
    assert (await js.consumer_info("BK", "WORKER")).config.durable_name == "WORKER"
    assert (await js.stream_info("BK")).config.max_msgs_per_subject == 3
    # --no-consumers leaves them out.
    await ok(url, "stream", "backup", "BK", str(tmp_path / "bare"), "--no-consumers")
    await ok(url, "stream", "rm", "BK", "-f")
    await ok(url, "stream", "restore", str(tmp_path / "bare"))
    assert await _messages(js, "BK") == before
    assert (await ok(url, "consumer", "ls", "BK", "-j")).json() == []


async def test_backup_and_restore_on_nats_server_and_across(
    server: Any, js: Any, nats_server_url: str, tmp_path: Path
) -> None:
    """The same commands back up and restore on nats-server. Its snapshot holds its own
    file store, which Brook's differs from (ADR 0008), so Brook refuses it by name."""
    import nats

    other = await nats.connect(nats_server_url, allow_reconnect=False)
    try:
        ojs = other.jetstream(timeout=5)
        before = await _fill(ojs, "XN")
        await ok(nats_server_url, "stream", "backup", "XN", str(tmp_path / "n"))
        await ok(nats_server_url, "stream", "rm", "XN", "-f")
        await ok(nats_server_url, "stream", "restore", str(tmp_path / "n"))
        assert await _messages(ojs, "XN") == before
        assert (await ojs.consumer_info("XN", "WORKER")).config.durable_name == "WORKER"
        await ojs.delete_stream("XN")
    finally:
        await other.close()
    refused = await cli(server.url, "stream", "restore", str(tmp_path / "n"))
    assert refused.code == 1
    assert refused.err.startswith("brook stream restore: restore failed: not a Brook snapshot")
    assert refused.err.endswith("(10062)\n")
    assert (await ok(server.url, "stream", "ls", "-j")).json() == []
