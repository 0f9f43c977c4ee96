"""`brook consumer ...` against a live server (Brook in this process, and the real
nats-server through the `url` fixture); effects read back with nats-py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.runner import cli, ok

pytestmark = pytest.mark.timeout(60)


async def _stream(client: Any, name: str, count: int) -> Any:
    js = client.jetstream(timeout=5)
    await js.add_stream(name=name, subjects=[f"{name}.*"])
    for i in range(count):
        await js.publish(f"{name}.{'a' if i % 2 else 'b'}", f"m{i}".encode(), headers={"I": str(i)})
    return js


async def test_add_with_flags_reaches_the_consumer(url: str, client: Any, name: str) -> None:
    js = await _stream(client, name, 4)
    added = await ok(
        url, "consumer", "add", name, "PULL", "--pull", "--filter", f"{name}.a",
        "--deliver", "2", "--max-deliver", "5", "--wait", "10s", "--max-pending", "50",
        "--description", "workers", "--defaults", "--json",
    )  # fmt: skip
    c = (await js.consumer_info(name, "PULL")).config
    assert (c.durable_name, c.filter_subject, c.deliver_policy, c.opt_start_seq) == (
        "PULL", f"{name}.a", "by_start_sequence", 2,
    )  # fmt: skip
    assert (c.ack_policy, c.max_deliver, c.ack_wait, c.max_ack_pending, c.description) == (
        "explicit", 5, 10, 50, "workers",
    )  # fmt: skip
    assert c.deliver_subject is None
    document = added.json()
    assert (document["name"], document["num_pending"]) == ("PULL", 2)
    assert "type" not in document
    await ok(url, "consumer", "add", name, "PUSH", "--target", f"push.{name}",
             "--deliver-group", "g", "--deliver", "last")  # fmt: skip
    p = (await js.consumer_info(name, "PUSH")).config
    assert (p.deliver_subject, p.deliver_group, p.ack_policy, p.deliver_policy) == (
        f"push.{name}", "g", "none", "last",
    )  # fmt: skip
    ephemeral = (await ok(url, "consumer", "add", name, "--inactive-threshold", "1m", "-j")).json()
    assert "durable_name" not in ephemeral["config"]
    assert ephemeral["config"]["inactive_threshold"] == 60 * 10**9
    assert (await js.consumer_info(name, ephemeral["name"])).num_pending == 4
    both = await cli(url, "consumer", "add", name, "X", "--pull", "--target", "t")
    assert (both.code, both.err) == (
        1, "brook consumer add: --pull and --target exclude each other\n",
    )  # fmt: skip
    bad = await cli(url, "consumer", "add", name, "a.b")
    assert bad.err == "brook consumer add: durable name can not contain '.', '*', '>'\n"
    missing = await cli(url, "consumer", "add", name + "X", "C")
    assert (missing.code, missing.err) == (1, "brook consumer add: stream not found (10059)\n")
    await js.delete_stream(name)


async def test_config_file_ls_info_rm(server: Any, js: Any, tmp_path: Path) -> None:
    url = server.url
    await js.add_stream(name="ORD", subjects=["ord.*"])
    config = tmp_path / "consumer.json"
    config.write_text(json.dumps({"ack_policy": "all", "filter_subject": "ord.x"}))
    await ok(url, "consumer", "add", "ORD", "FROMFILE", "--config", str(config))
    c = (await js.consumer_info("ORD", "FROMFILE")).config
    assert (c.durable_name, c.ack_policy, c.filter_subject) == ("FROMFILE", "all", "ord.x")
    saved = tmp_path / "saved.json"
    await ok(url, "consumer", "add", "ORD", "SAVED", "--deliver", "new", "--output", str(saved))
    assert json.loads(saved.read_text())["deliver_policy"] == "new"
    assert [c.name for c in await js.consumers_info("ORD")] == ["FROMFILE"]  # none created
    await ok(url, "consumer", "add", "ORD", "B")
    assert (await ok(url, "consumer", "ls", "ORD", "--json")).json() == ["B", "FROMFILE"]
    assert (await ok(url, "consumer", "ls", "ORD", "--names")).out == "B\nFROMFILE\n"
    table = (await ok(url, "consumer", "ls", "ORD")).out.splitlines()
    assert table[0] == "Consumers for Stream ORD"
    assert [row.split()[0] for row in table[3:]] == ["B", "FROMFILE"]
    info = await ok(url, "consumer", "info", "ORD", "B")
    assert "Information for Consumer ORD > B" in info.out
    assert "Ack Policy: explicit" in info.out
    refused = await cli(url, "consumer", "rm", "ORD", "B")
    assert refused.err == (
        "brook consumer rm: refusing to delete consumer ORD > B without -f/--force\n"
    )
    await ok(url, "consumer", "rm", "ORD", "B", "-f")
    assert [c.name for c in await js.consumers_info("ORD")] == ["FROMFILE"]
    gone = await cli(url, "consumer", "info", "ORD", "B")
    assert (gone.code, gone.err) == (1, "brook consumer info: consumer not found (10014)\n")
    empty = await js.add_stream(name="EMPTY", subjects=["empty"])
    assert empty.config.name == "EMPTY"
    assert (
        await ok(url, "consumer", "ls", "EMPTY")
    ).out == "No Consumers defined for stream EMPTY\n"


async def test_next_acks_naks_and_terms(url: str, client: Any, name: str) -> None:
    js = await _stream(client, name, 6)
    await js.add_consumer(name, durable_name="W", ack_policy="explicit", ack_wait=30)
    two = await ok(url, "consumer", "next", name, "W", "--count", "2", "--json")
    got = [json.loads(line) for line in two.out.splitlines()]
    assert [(m["stream_seq"], m["consumer_seq"], m["data"]) for m in got] == [
        (1, 1, "m0"), (2, 2, "m1"),
    ]  # fmt: skip
    assert (got[0]["headers"], got[0]["pending"], got[1]["delivered"]) == ({"I": "0"}, 5, 1)
    info = await js.consumer_info(name, "W")
    assert (info.ack_floor.stream_seq, info.num_ack_pending) == (2, 0)  # both acknowledged
    await ok(url, "consumer", "next", name, "W", "--no-ack", "--raw")
    assert (await js.consumer_info(name, "W")).num_ack_pending == 1
    human = await ok(url, "consumer", "next", name, "W", "--nak")
    assert "subj: " in human.out
    assert "/ str seq: 4 /" in human.out
    assert "Headers:\n\n  I: 3\n" in human.out
    redelivered = await ok(url, "consumer", "next", name, "W", "--term", "-j")
    assert json.loads(redelivered.out)["stream_seq"] == 4  # the nak'd one, at once
    assert json.loads(redelivered.out)["delivered"] == 2
    both = await cli(url, "consumer", "next", name, "W", "--term", "--ack")
    assert both.err == "brook consumer next: can not both Acknowledge and Terminate message\n"
    await ok(url, "consumer", "next", name, "W", "--count", "2")
    empty = await cli(url, "consumer", "next", name, "W", "--timeout", "300ms")
    assert (empty.code, empty.err) == (1, "brook consumer next: no message received\n")
    await js.add_consumer(name, durable_name="P", deliver_subject=f"deliver.{name}")
    push = await cli(url, "consumer", "next", name, "P", "--timeout", "300ms")
    assert push.err == 'brook consumer next: consumer "P" is not a Pull consumer\n'
    missing = await cli(url, "consumer", "next", name, "NOPE", "--timeout", "300ms")
    assert missing.err == "brook consumer next: consumer not found (10014)\n"
    await js.delete_stream(name)
