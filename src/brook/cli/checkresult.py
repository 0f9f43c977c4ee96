"""A health check's result, rendered as the `nats server check` commands render theirs
(jsm.go's monitor.Result), so monitoring systems that run the `nats` CLI's checks can
run `brook server check` unchanged.

A check collects OK, warning and critical messages and performance data; its status is
CRITICAL if any critical message, else WARNING if any warning, else OK, and the exit
status is Nagios's: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN. Formats (`--format`):

* nagios (default): `OK Connection OK:connected to ... | connect_time=0.0012s;0.5000;1.0000`
* json: `{"status", "check_suite", "check_name", "warning", "critical", "ok", "perf_data"}`
* prometheus: gauges `<namespace>_<check>_<metric>{item=...}` and `..._status_code`,
  exit status 0 (for node_exporter's textfile collector with `--outfile`);
* text: the status, then a table of messages and one of the metrics.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

from brook.cli.output import Output

EXIT_CODES = {"OK": 0, "WARNING": 1, "CRITICAL": 2, "UNKNOWN": 3}
FORMATS = ("nagios", "json", "prometheus", "text")
# natscli's default `--namespace` of the prometheus format.
DEFAULT_NAMESPACE = "nats_server_check"


@dataclass
class PerfData:
    """One metric: Nagios's `name=value[unit][;warn[;crit]]`."""

    name: str
    value: float
    warn: float = 0.0
    crit: float = 0.0
    unit: str = ""
    help: str = ""

    def __str__(self) -> str:
        fmt = "{:.4f}" if self.unit == "s" else "{:.0f}"
        name = f"'{self.name}'" if any(c in self.name for c in " \t") else self.name
        text = f"{name}={fmt.format(self.value)}{self.unit}"
        if self.warn or self.crit:
            text += f";{fmt.format(self.warn)}" if self.warn else ";"
            if self.crit:
                text += f";{fmt.format(self.crit)}"
        return text

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "name": self.name,
            "value": self.value,
            "warning": self.warn,
            "critical": self.crit,
        }
        if self.unit:
            doc["unit"] = self.unit
        return doc


@dataclass
class CheckResult:
    """What a check found. `check` is the suite (`connections`, `stream`, ...), `name`
    the checked item, as jsm.go names them."""

    name: str
    check: str
    oks: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    criticals: list[str] = field(default_factory=list)
    perf: list[PerfData] = field(default_factory=list)

    def ok(self, text: str) -> None:
        self.oks.append(text)

    def warn(self, text: str) -> None:
        self.warnings.append(text)

    def critical(self, text: str) -> None:
        self.criticals.append(text)

    def pd(self, *items: PerfData) -> None:
        self.perf.extend(items)

    @property
    def status(self) -> str:
        if self.criticals:
            return "CRITICAL"
        return "WARNING" if self.warnings else "OK"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def nagios(self) -> str:
        parts = [self.name]
        parts += [f"Crit:{c}" for c in self.criticals]
        parts += [f"Warn:{w}" for w in self.warnings]
        parts += [f"OK:{o}" for o in self.oks]
        line = f"{self.status} {' '.join(parts)}"
        if self.perf:
            line += " | " + " ".join(str(p) for p in self.perf)
        return line

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "status": self.status,
            "check_suite": self.check,
            "check_name": self.name,
        }
        if self.warnings:
            doc["warning"] = self.warnings
        if self.criticals:
            doc["critical"] = self.criticals
        if self.oks:
            doc["ok"] = self.oks
        doc["perf_data"] = [p.document() for p in self.perf]
        return doc

    def prometheus(self, namespace: str) -> str:
        """The text exposition natscli's `--format prometheus` writes: a gauge per metric
        and `<namespace>_<check>_status_code{item,status}`, sorted by name as the Go
        client's registry gathers them."""
        item = self.name.replace('"', ".")
        families: dict[str, tuple[str, str]] = {}
        for p in self.perf:
            help_ = p.help or f"Data about the NATS CLI check {self.check}"
            families[f"{namespace}_{self.check}_{p.name}"] = (
                help_,
                f'{{item="{item}"}} {_go_float(p.value)}',
            )
        families[f"{namespace}_{self.check}_status_code"] = (
            f"Nagios compatible status code for {self.check}",
            f'{{item="{item}",status="{self.status}"}} {self.exit_code}',
        )
        lines = []
        for name in sorted(families):
            help_, sample = families[name]
            lines += [f"# HELP {name} {help_}", f"# TYPE {name} gauge", f"{name}{sample}"]
        return "\n".join(lines)

    def text(self, out: Output) -> str:
        """`--format text`: the status, a table of messages and one of the metrics."""
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            out.line(f"{self.name}: {self.status}")
            out.line()
            rows = [("OK", m) for m in self.oks] + [("Warning", m) for m in self.warnings]
            rows += [("Critical", m) for m in self.criticals]
            if rows:
                out.table(["Status", "Message"], rows, title="Status Detail")
            if self.perf:
                out.line()
                out.table(
                    ["Metric", "Value", "Unit", "Critical Threshold", "Warning Threshold"],
                    [
                        (p.name, f"{p.value:g}", p.unit, f"{p.crit:g}", f"{p.warn:g}")
                        for p in self.perf
                    ],
                    title="Check Metrics",
                )
        return buffer.getvalue().rstrip("\n")

    def render(self, out: Output, fmt: str, namespace: str = DEFAULT_NAMESPACE) -> str:
        """The result in `fmt` (`--json` means json)."""
        if fmt == "json" or out.json_mode:
            return json.dumps(self.document(), indent=2)
        if fmt == "prometheus":
            return self.prometheus(namespace)
        if fmt == "text":
            return self.text(out)
        return self.nagios()

    def exit_status(self, fmt: str) -> int:
        """Nagios's exit status; 0 for prometheus, whose scraper reads the status code."""
        return 0 if fmt == "prometheus" else self.exit_code


def _go_float(value: float) -> str:
    """A sample value as Go's strconv.FormatFloat(v, 'g', -1, 64) writes it."""
    if value == int(value) and abs(value) < 1e21:
        return str(int(value))
    return repr(value)


def write_atomically(path: str, text: str) -> None:
    """`--outfile`: the whole text or nothing, mode 0600, as natscli writes it (a
    temporary file in the same directory, renamed over the target)."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(dir=directory)
    try:
        with os.fdopen(fd, "w") as file:
            file.write(text + "\n")
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
