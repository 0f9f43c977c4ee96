"""The server's store limits (`jetstream { max_memory_store, max_file_store }`): the same
config file and the same steps on Brook and nats-server, JSON replies compared.

Stream creates and updates reserve `max_bytes` (1 byte for a stream without), refused
with 10028 (memory) or 10047 (file) past the limit; publishes are refused with 10023
once the streams of that storage hold more than the limit; `$JS.API.INFO` reports the
usage and the reservations (jetstream/quota.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.test_stream_api_conformance import Step, api, pub, run_scenario

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]

CONFIG = "jetstream { max_memory_store: 1000, max_file_store: 3000 }\n"
BODY = b"x" * 200  # 217 bytes in a memory store under "m", 232 in a file store under "f2"


def create(name: str, storage: str, **config: object) -> Step:
    body = {"name": name, "subjects": [name.lower()], "storage": storage, **config}
    return api(f"$JS.API.STREAM.CREATE.{name}", body)


def update(name: str, storage: str, **config: object) -> Step:
    body = {"name": name, "subjects": [name.lower()], "storage": storage, **config}
    return api(f"$JS.API.STREAM.UPDATE.{name}", body)


INFO = api("$JS.API.INFO")

SCENARIOS: dict[str, list[Step]] = {
    "memory-reservations": [
        create("M1", "memory", max_bytes=600),
        create("M2", "memory", max_bytes=500),  # 600 + 500 > 1000: 10028
        create("M2", "memory", max_bytes=400),  # exactly the limit
        create("M3", "memory"),  # 1 byte more than is left: 10028
        create("M1", "memory", max_bytes=600),  # the same again: nats-server counts it twice
        update("M1", "memory", max_bytes=700),  # 100 more: 10028
        update("M1", "memory", max_bytes=300),
        create("M3", "memory"),
        update("M3", "memory", max_bytes=301),  # 1000 - 700 = 300 left: 10028
        update("M3", "memory", max_bytes=300),
        INFO,
        api("$JS.API.STREAM.DELETE.M2"),
        create("M4", "memory", max_bytes=400),
        INFO,
    ],
    "memory-publishes": [
        create("M", "memory"),
        *[pub("m", BODY) for _ in range(6)],  # the 5th takes it past 1000, the 6th: 10023
        INFO,
        api("$JS.API.STREAM.PURGE.M"),
        pub("m", BODY),
        INFO,
        create("F", "file"),
        pub("f", BODY),  # file storage has room of its own
    ],
    "file-limits": [
        create("F1", "file", max_bytes=2000),
        create("F2", "file", max_bytes=1001),  # 10047
        create("F2", "file"),
        *[pub("f2", BODY) for _ in range(14)],  # 13 take 3016 bytes; the 14th: 10023
        pub("f1", BODY),  # the limit is the server's, over every stream of its storage
        INFO,
        update("F1", "file", max_bytes=3000),  # F2 reserves nothing: 1000 more fit
        api("$JS.API.STREAM.DELETE.F2"),
        pub("f1", BODY),
        INFO,
    ],
    "both-limits-reserved": [
        create("M", "memory", max_bytes=1000),
        create("MM", "memory", max_bytes=1),  # 10028
        create("F", "file", max_bytes=3000),
        create("FF", "file"),  # 10047
        INFO,
    ],
}


@pytest.fixture(scope="module")
def conf_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("store-limits") / "limits.conf"
    path.write_text(CONFIG)
    return path


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_store_limits_match_nats_server(
    name: str, conf_brook_url: str, conf_reference_url: str
) -> None:
    steps = SCENARIOS[name]
    expected = await run_scenario(conf_reference_url, steps)
    actual = await run_scenario(conf_brook_url, steps)
    for i, (step, want, got) in enumerate(zip(steps, expected, actual, strict=True)):
        assert got == want, f"step {i} {step[:3]}"
