"""The atomic batch limits: set in a nats-server configuration file
(`jetstream { limits { batch { ... } } }`), applied to publishes, shown in /varz."""

from __future__ import annotations

import json
from pathlib import Path

import nats
import pytest

import brook
from brook.config.conf import parse_conf, settings_from_conf
from brook.config.settings import ConfigError
from tests.support.monitor import varz

CONF = """
jetstream {
  limits {
    batch {
      max_inflight_per_stream: 2
      max_inflight_total: 3
      max_msgs: 2
      timeout: "3s"
    }
  }
}
"""


def _header(batch: str, seq: int, commit: bool = False) -> dict[str, str]:
    headers = {"Nats-Batch-Id": batch, "Nats-Batch-Sequence": str(seq)}
    if commit:
        headers["Nats-Batch-Commit"] = "1"
    return headers


async def test_configured_batch_limits_apply_and_show_in_varz(tmp_path: Path) -> None:
    settings = settings_from_conf(parse_conf(CONF))
    async with brook.serve(http_port=-1, store_dir=str(tmp_path), settings=settings) as server:
        nc = await nats.connect(server.url)
        await nc.jetstream().add_stream(name="B", subjects=["b.>"], allow_atomic=True)
        await nc.request("b.x", b"", timeout=2, headers=_header("a", 1))
        await nc.request("b.x", b"", timeout=2, headers=_header("b", 1))
        stats = (await varz(server))["jetstream"]["brook_batches"]
        assert stats == {
            "inflight": 2,
            "max_inflight_total": 3,
            "max_inflight_per_stream": 2,
            "max_msgs": 2,
            "timeout": 3_000_000_000,
            "fast_inflight": 0,  # fast batches (fast_batch.py), bounded by the same settings
            "max_fast_inflight_total": 3,
            "max_fast_inflight_per_stream": 2,
        }
        third = await nc.request("b.x", b"", timeout=2, headers=_header("c", 1))
        assert json.loads(third.data)["error"]["err_code"] == 10210
        await nc.request("b.x", b"", timeout=2, headers=_header("a", 2))
        big = await nc.request("b.x", b"", timeout=2, headers=_header("a", 3, commit=True))
        assert json.loads(big.data)["error"]["description"] == (
            "atomic publish batch is too large: 2"
        )
        assert (await varz(server))["jetstream"]["brook_batches"]["inflight"] == 1
        await nc.close()


def test_batch_limits_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="max_msgs"):
        settings_from_conf(parse_conf("jetstream { limits { batch { max_msgs: 0 } } }"))
    with pytest.raises(ConfigError, match="max_batch"):
        settings_from_conf(parse_conf("jetstream { limits { batch { max_batch: 1 } } }"))


async def test_an_idle_batch_is_abandoned_by_its_timer(tmp_path: Path) -> None:
    """Nothing touches the batch after its first message: the stream's idle timer
    abandons it when the (configured) timeout passes, and announces it."""
    conf = "jetstream { limits { batch { timeout: 300ms } } }"
    settings = settings_from_conf(parse_conf(conf))
    async with brook.serve(http_port=-1, store_dir=str(tmp_path), settings=settings) as server:
        nc = await nats.connect(server.url)
        await nc.jetstream().add_stream(name="B", subjects=["b.>"], allow_atomic=True)
        advisories = await nc.subscribe("$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.*")
        staged = await nc.request("b.x", b"", timeout=2, headers=_header("idle", 1))
        assert staged.data == b""
        assert (await varz(server))["jetstream"]["brook_batches"]["inflight"] == 1
        advisory = await advisories.next_msg(timeout=5)
        assert advisory.subject == "$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.B"
        body = json.loads(advisory.data)
        assert (body["batch"], body["reason"]) == ("idle", "timeout")
        assert (await varz(server))["jetstream"]["brook_batches"]["inflight"] == 0
        await nc.close()
