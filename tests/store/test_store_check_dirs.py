"""`brook store check` on each level of a real store: the store directory (every account's
streams), one stream's directory, its file store; and a clear error for anything else.

The store is written by real Brooks: `$G`'s streams (a memory one, which leaves nothing on
disk), then two JetStream
accounts' streams; one account's stream is then damaged on disk, and the check must say which.
"""

from __future__ import annotations

import json
from pathlib import Path

import nats
import pytest

import brook
from brook.cli.store import store_check_command
from brook.config.conf import load_conf_file

pytestmark = pytest.mark.timeout(60)

CONF = """
authorization { users: [{user: g, password: g}] }
accounts {
  A: { users: [{user: a, password: a}], jetstream: enabled }
  B: { users: [{user: b, password: b}], jetstream: enabled }
}
"""


async def fill(url: str, user: str, stream: str, n: int, storage: str = "file") -> None:
    nc = await nats.connect(url, user=user, password=user, allow_reconnect=False)
    js = nc.jetstream()
    await js.add_stream(name=stream, subjects=[stream.lower()], storage=storage)
    for i in range(n):
        await js.publish(stream.lower(), b"message %d" % i)
    await nc.close()


def check(capsys: pytest.CaptureFixture[str], directory: Path, *args: str) -> tuple[int, str]:
    status = store_check_command([str(directory), *args])
    return status, capsys.readouterr().out


async def test_store_stream_and_file_store_directories(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    conf = tmp_path / "brook.conf"
    conf.write_text(CONF + f'jetstream {{ store_dir: "{store}" }}\n')
    # $G's streams (`streams/`) from a server without accounts, then the accounts' streams
    # (`jetstream/<account>/streams/`) once the same store is configured with accounts.
    async with brook.serve(store_dir=str(store), user="g", password="g") as server:
        await fill(server.url, "g", "G1", 3)
        await fill(server.url, "g", "MEM", 2, storage="memory")
    async with brook.serve(settings=load_conf_file(str(conf))) as server:
        await fill(server.url, "a", "A1", 4)
        await fill(server.url, "b", "B1", 5)

    status, out = check(capsys, store, "--json")
    assert status == 0, out
    doc = json.loads(out)
    assert doc["healthy"] is True
    seen = [(s["account"], s["stream"], s["storage"]) for s in doc["streams"]]
    assert seen == [("$G", "G1", "file"), ("A", "A1", "file"), ("B", "B1", "file")]
    assert [s["report"]["messages"] for s in doc["streams"] if s["report"]] == [3, 4, 5]

    a1 = store / "jetstream" / "A" / "streams" / "A1"
    segment = next((a1 / "data" / "msgs").glob("*.seg"))
    raw = bytearray(segment.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # one byte in the middle of A1's log
    segment.write_bytes(bytes(raw))

    status, out = check(capsys, store, "--json")
    assert status == 1
    doc = json.loads(out)
    assert doc["healthy"] is False
    damaged = [s["stream"] for s in doc["streams"] if s["report"] and not s["report"]["healthy"]]
    assert damaged == ["A1"]
    status, out = check(capsys, store)
    assert status == 1
    assert "stream A1 (account A)" in out
    assert out.rstrip().endswith("3 stream(s): problems found")

    # One stream's directory, and its file store: the same report.
    status, out = check(capsys, a1, "--json")
    assert status == 1
    assert json.loads(out)["report"]["findings"]
    status, out = check(capsys, a1 / "data", "--json")
    assert status == 1
    assert json.loads(out)["findings"]
    status, out = check(capsys, store / "streams" / "G1")
    assert (status, out.splitlines()[0]) == (0, "stream G1")
    assert not (store / "streams" / "MEM").exists()


def test_other_directories_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "something").mkdir()
    assert store_check_command([str(tmp_path / "something")]) == 2
    err = capsys.readouterr().err
    assert "not a Brook store, stream or file-store directory" in err
    (tmp_path / "file").write_text("x")
    assert store_check_command([str(tmp_path / "file")]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_a_damaged_stream_definition_is_a_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stream = tmp_path / "streams" / "BAD"
    stream.mkdir(parents=True)
    (stream / "stream.json").write_text("{not json")
    status, out = check(capsys, tmp_path, "--json")
    assert status == 1
    (entry,) = json.loads(out)["streams"]
    assert (entry["stream"], entry["storage"]) == ("BAD", "unknown")
    assert "unreadable" in entry["report"]["findings"][0]["detail"]
