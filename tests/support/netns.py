"""Two network namespaces joined by a veth pair, for partition tests that cut a real link
(issue 19): the hub in one namespace, the spoke in the other, the leaf connection on a
private subnet between them, traffic never leaving this machine.

    root ns  10.N.1.1 --veth-- 10.N.1.2  [hub ns]   10.N.0.1 --veth (the leaf link)--
    root ns  10.N.2.1 --veth-- 10.N.2.2  [spoke ns] 10.N.0.2 ------------------------

The test's clients reach each server from the root namespace over its own veth; only
the leaf link is cut, in one of two ways:

* `cut("silent")`: a `blackhole` qdisc on both ends of the link drops every packet
  (tc's classifiers and netem are not in every kernel; the blackhole qdisc is);
* `cut("down")`: `ip link set down` on the hub's end, so both ends lose the carrier.

Namespaces need root and a kernel and container that allow them (`netns_unavailable()`
says why not); the servers run as processes under `ip netns exec`, stopped by their PIDs
before the namespaces are deleted.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Literal

NetCut = Literal["silent", "down"]
_PAIRS = itertools.count()  # namespace pairs made by this process: unique names at once


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=10)


@cache
def netns_unavailable() -> str | None:
    """Why namespace tests cannot run here (None when they can)."""
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "iproute2 (ip, tc) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    name = f"brookprobe{os.getpid()}"
    probe = _ip("netns", "add", name, check=False)
    if probe.returncode != 0:
        return f"'ip netns add' is not permitted here: {probe.stderr.strip()}"
    try:
        veth = _ip("link", "add", f"bp{os.getpid()}", "type", "veth", "peer", "name",
                   f"bq{os.getpid()}", check=False)  # fmt: skip
        if veth.returncode != 0:
            return f"veth pairs are not permitted here: {veth.stderr.strip()}"
        _ip("link", "set", f"bp{os.getpid()}", "netns", name)
        _ip("-n", name, "link", "set", f"bp{os.getpid()}", "up")
        qdisc = subprocess.run(
            ["ip", "netns", "exec", name, "tc", "qdisc", "replace", "dev", f"bp{os.getpid()}",
             "root", "blackhole"],
            capture_output=True, text=True, timeout=10,
        )  # fmt: skip
        if qdisc.returncode != 0:
            return f"tc's blackhole qdisc is not available: {qdisc.stderr.strip()}"
    finally:
        _ip("link", "del", f"bq{os.getpid()}", check=False)
        _ip("netns", "del", name, check=False)
    return None


def _free_subnet() -> int:
    """N of a 10.N.0.0/16 no interface of the root namespace uses."""
    used = _ip("-o", "-4", "addr").stdout
    while True:
        n = random.randrange(64, 250)
        if f" 10.{n}." not in used:
            return n


@dataclass
class Namespaces:
    """The two namespaces and their addresses; `run()` starts a process in one."""

    hub_ns: str
    spoke_ns: str
    net: int
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    cut_mode: NetCut | None = None

    @property
    def hub_leaf_ip(self) -> str:
        return f"10.{self.net}.0.1"

    @property
    def hub_client_ip(self) -> str:
        return f"10.{self.net}.1.2"

    @property
    def spoke_client_ip(self) -> str:
        return f"10.{self.net}.2.2"

    @property
    def _link(self) -> tuple[tuple[str, str], tuple[str, str]]:
        """(namespace, device) of the leaf link's two ends."""
        return (self.hub_ns, f"l{self.hub_ns}"), (self.spoke_ns, f"l{self.spoke_ns}")

    def run(self, ns: str, cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                ["ip", "netns", "exec", ns, *cmd],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)),
            )
        self.procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def cut(self, mode: NetCut) -> None:
        if self.cut_mode is not None:
            raise RuntimeError(f"the link is already cut ({self.cut_mode})")
        self.cut_mode = mode
        if mode == "down":
            ns, dev = self._link[0]
            _ip("-n", ns, "link", "set", dev, "down")
            return
        for ns, dev in self._link:
            _ip("netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root", "blackhole")

    def heal(self) -> None:
        mode, self.cut_mode = self.cut_mode, None
        if mode == "down":
            ns, dev = self._link[0]
            _ip("-n", ns, "link", "set", dev, "up")
        elif mode == "silent":
            for ns, dev in self._link:
                _ip("netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root")


def wait_for_info(host: str, port: int, timeout_s: float = 30.0) -> None:
    """Wait until the NATS server at host:port sends its INFO."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), 0.2) as sock:
            sock.settimeout(max(deadline - time.monotonic(), 0.01))
            if sock.recv(4).startswith(b"INFO"):
                return
        time.sleep(0.05)
    raise TimeoutError(f"no NATS server serving on {host}:{port} after {timeout_s}s")


@contextlib.contextmanager
def namespaces() -> Iterator[Namespaces]:
    """A hub namespace and a spoke namespace joined by the leaf link, each reachable from
    the root namespace; every process started in them is stopped, and they are deleted,
    on exit."""
    tag = f"{os.getpid() % 100000}n{next(_PAIRS)}"
    hub, spoke = f"bh{tag}", f"bs{tag}"
    n = _free_subnet()
    ns = Namespaces(hub, spoke, n)
    made: list[str] = []
    try:
        for name in (hub, spoke):
            _ip("netns", "add", name)
            made.append(name)
            _ip("-n", name, "link", "set", "lo", "up")
        _ip("link", "add", f"l{hub}", "type", "veth", "peer", "name", f"l{spoke}")
        for name, host, side in ((hub, 1, 1), (spoke, 2, 2)):
            _ip("link", "set", f"l{name}", "netns", name)
            _ip("-n", name, "addr", "add", f"10.{n}.0.{host}/24", "dev", f"l{name}")
            _ip("-n", name, "link", "set", f"l{name}", "up")
            # the clients' way in from the root namespace
            _ip("link", "add", f"r{name}", "type", "veth", "peer", "name", f"c{name}")
            _ip("link", "set", f"c{name}", "netns", name)
            _ip("addr", "add", f"10.{n}.{side}.1/24", "dev", f"r{name}")
            _ip("-n", name, "addr", "add", f"10.{n}.{side}.2/24", "dev", f"c{name}")
            _ip("link", "set", f"r{name}", "up")
            _ip("-n", name, "link", "set", f"c{name}", "up")
        yield ns
    finally:
        for proc in ns.procs:
            ns.stop(proc)
        for name in made:
            _ip("link", "del", f"r{name}", check=False)
            _ip("netns", "del", name, check=False)
