"""`brook kv` and `brook object` against Brook and against nats-server: the command lines
run in-process (tests/cli/runner.py), but for `kv watch`, which runs as a real process
(its lines are read while it runs, and it ends on its own count).

The in-process Brook server shares the test's event loop, so the watching process runs
through asyncio's subprocess support (a blocking `subprocess.run` would starve the server).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.runner import Result, cli
from tests.kv.conftest import Target

pytestmark = pytest.mark.timeout(60)

SRC = str(Path(__file__).resolve().parents[2] / "src")


async def brook(
    target: Target, *args: str, stdin: bytes | None = None, cwd: Path | None = None
) -> Result:
    return await cli(target.url, *args, stdin=stdin or b"", cwd=cwd)


async def ok(
    target: Target, *args: str, stdin: bytes | None = None, cwd: Path | None = None
) -> Result:
    result = await brook(target, *args, stdin=stdin, cwd=cwd)
    assert result.code == 0, (args, result.out, result.err)
    return result


async def test_kv_round_trip(target: Target) -> None:
    added = await ok(target, "kv", "add", "cfg", "--history", "5", "--ttl", "1h", "--json")
    status = added.json()
    assert (status["bucket"], status["history"], status["ttl"], status["values"]) == (
        "cfg", 5, 3600, 0,
    )  # fmt: skip
    assert "History: 5" in (await ok(target, "kv", "info", "cfg")).out
    assert (await ok(target, "kv", "put", "cfg", "color", "blue")).out.strip() == "1"
    assert (await ok(target, "kv", "put", "cfg", "color", stdin=b"green\n")).out.strip() == "2"
    got = (await ok(target, "kv", "get", "cfg", "color", "--json")).json()
    assert (got["key"], got["revision"], got["value"], got["operation"]) == (
        "color", 2, "green\n", "PUT",
    )  # fmt: skip
    raw = await ok(target, "kv", "get", "cfg", "color", "--revision", "1", "--raw")
    assert raw.raw == b"blue"
    human = await ok(target, "kv", "get", "cfg", "color")
    assert "cfg > color revision 2" in human.out
    assert "green" in human.out
    await ok(target, "kv", "del", "cfg", "color")
    gone = await brook(target, "kv", "get", "cfg", "color")
    assert gone.code == 1
    assert "was deleted (revision 3)" in gone.err
    history = (await ok(target, "kv", "history", "cfg", "color", "--json")).json()
    assert [(h["revision"], h["operation"]) for h in history] == [
        (1, "PUT"), (2, "PUT"), (3, "DEL"),
    ]  # fmt: skip
    table = (await ok(target, "kv", "history", "cfg", "color")).out
    assert table.splitlines()[0].split() == ["REVISION", "OP", "CREATED", "LENGTH", "VALUE"]
    await ok(target, "kv", "put", "cfg", "size", "10")
    await ok(target, "kv", "purge", "cfg", "color")
    purged = (await ok(target, "kv", "history", "cfg", "color", "--json")).json()
    assert [h["operation"] for h in purged] == ["PURGE"]
    assert (await ok(target, "kv", "ls", "cfg", "--json")).json() == ["size"]
    assert (await ok(target, "kv", "ls", "cfg")).out.split() == ["size"]
    buckets = (await ok(target, "kv", "ls", "--json")).json()
    assert [(b["bucket"], b["values"]) for b in buckets] == [("cfg", 2)]
    assert "cfg" in (await ok(target, "kv", "ls")).out
    await ok(target, "kv", "rm", "cfg")
    assert (await ok(target, "kv", "ls", "--json")).json() == []


async def test_kv_errors(target: Target) -> None:
    missing = await brook(target, "kv", "get", "nope", "k")
    assert missing.code == 1
    assert missing.err.strip() == "brook kv get: bucket 'nope' not found"
    await ok(target, "kv", "add", "b")
    bad_key = await brook(target, "kv", "put", "b", "bad key", "v")
    assert (bad_key.code, bad_key.err.strip()) == (1, "brook kv put: invalid key 'bad key'")
    absent = await brook(target, "kv", "get", "b", "absent")
    assert "not found in bucket 'b'" in absent.err
    history = await brook(target, "kv", "add", "h", "--history", "65")
    assert (history.code, history.err.strip()) == (1, "brook kv add: history can be at most 64")
    usage = await brook(target, "kv", "frobnicate")
    assert usage.code == 2
    rm = await brook(target, "kv", "rm", "never")
    assert (rm.code, rm.err.strip()) == (1, "brook kv rm: bucket 'never' not found")


async def test_kv_options_reach_the_stream(target: Target, js: Any) -> None:
    await ok(
        target, "kv", "add", "opts", "--max-value-size", "1KB", "--max-bytes", "1MB",
        "--storage", "memory", "--direct", "--description", "tuned", "--limit-marker-ttl", "5s",
    )  # fmt: skip
    c = (await js.stream_info("KV_opts")).config
    assert (c.max_msg_size, c.max_bytes, c.storage, c.allow_direct) == (
        1024, 1024 * 1024, "memory", True,
    )  # fmt: skip
    assert (c.description, c.subject_delete_marker_ttl) == ("tuned", 5)


async def test_kv_watch(target: Target, js: Any) -> None:
    kv = await js.create_key_value(bucket="w")
    await kv.put("a", b"1")
    env = {**os.environ, "PYTHONPATH": SRC, "NATS_URL": target.url}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "brook", "kv", "watch", "w", "--count", "3", "--json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    assert proc.stdout is not None
    first = json.loads(await asyncio.wait_for(proc.stdout.readline(), 20))
    assert (first["key"], first["value"], first["operation"]) == ("a", "1", "PUT")
    await kv.put("b", b"2")
    await kv.delete("a")
    out, err = await asyncio.wait_for(proc.communicate(), 20)
    lines = [json.loads(line) for line in out.decode().splitlines()]
    assert [(e["key"], e["operation"]) for e in lines] == [("b", "PUT"), ("a", "DEL")]
    assert proc.returncode == 0, err


async def test_kv_watch_human_output(target: Target, js: Any) -> None:
    kv = await js.create_key_value(bucket="w")
    await kv.put("a.b", b"hello")
    result = await ok(target, "kv", "watch", "w", "a.*", "--count", "1")
    assert result.out.strip().endswith("PUT w > a.b: hello")


async def test_object_round_trip(target: Target, tmp_path: Path) -> None:
    data = os.urandom(700_000)  # six chunks
    (tmp_path / "blob.bin").write_bytes(data)
    added = (await ok(target, "object", "add", "files", "--description", "blobs", "--json")).json()
    assert (added["bucket"], added["description"], added["sealed"]) == ("files", "blobs", False)
    put = (await ok(target, "object", "put", "files", "blob.bin", "--json", cwd=tmp_path)).json()
    assert (put["name"], put["size"], put["chunks"]) == ("blob.bin", len(data), 6)
    await ok(target, "object", "put", "files", "-", "--name", "note.txt", stdin=b"hi\n")
    listed = (await ok(target, "object", "ls", "files", "--json")).json()
    assert sorted(o["name"] for o in listed) == ["blob.bin", "note.txt"]
    assert "blob.bin" in (await ok(target, "object", "ls", "files")).out
    info = (await ok(target, "object", "info", "files", "blob.bin", "--json")).json()
    assert info["digest"] == put["digest"]
    assert "Chunks: 6" in (await ok(target, "object", "info", "files", "blob.bin")).out
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    got = (await ok(target, "object", "get", "files", "blob.bin", "--json", cwd=out_dir)).json()
    assert got["size"] == len(data)
    assert (out_dir / "blob.bin").read_bytes() == data
    again = await brook(target, "object", "get", "files", "blob.bin", cwd=out_dir)
    assert again.code == 1
    assert "exists; use --force" in again.err
    await ok(target, "object", "get", "files", "blob.bin", "--force", cwd=out_dir)
    stdout = await ok(target, "object", "get", "files", "note.txt", "-o", "-")
    assert stdout.raw == b"hi\n"
    await ok(target, "object", "rm", "files", "note.txt")
    assert [o["name"] for o in (await ok(target, "object", "ls", "files", "--json")).json()] == [
        "blob.bin"
    ]
    missing = await brook(target, "object", "info", "files", "note.txt")
    assert (missing.code, missing.err.strip()) == (
        1, "brook object info: object 'note.txt' not found in bucket 'files'",
    )  # fmt: skip
    status = (await ok(target, "object", "info", "files", "--json")).json()
    assert status["size"] > len(data)
    buckets = (await ok(target, "object", "ls", "--json")).json()
    assert [b["bucket"] for b in buckets] == ["files"]
    await ok(target, "object", "rm", "files")
    assert (await ok(target, "object", "ls", "--json")).json() == []


async def test_cannot_connect() -> None:
    result = await brook(Target("brook", "nats://127.0.0.1:1"), "kv", "ls", "--timeout", "1")
    assert result.code == 1
    assert result.err.startswith("brook kv ls: cannot connect to nats://127.0.0.1:1")


async def test_help() -> None:
    for command in ("kv", "object"):
        result = await brook(Target("brook", "nats://127.0.0.1:1"), command, "--help")
        assert result.code == 0
        assert "COMMAND" in result.out
    top = await brook(Target("brook", "nats://127.0.0.1:1"), "--help")
    assert "kv" in top.out
    assert "object" in top.out
