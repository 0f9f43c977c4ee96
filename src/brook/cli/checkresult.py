"""A health check's result, rendered as the `nats server check` commands render theirs
(jsm.go's monitor.Result), so monitoring systems that run the `nats` CLI's checks can
run `brook server check` unchanged.

A check collects OK, warning and critical messages and performance data; its status is
CRITICAL if any critical message, else WARNING if any warning, else OK, and the exit
status is Nagios's: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN. Formats (`--format`):

* nagios (default): `OK Connection OK:connected to ... | connect_time=0.0012s;0.5000;1.0000`
* json: `{"status", "check_suite", "check_name", "warning", "critical", "ok", "perf_data"}`
* text: the status, then a table of messages and one of the metrics.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from brook.cli.output import Output

EXIT_CODES = {"OK": 0, "WARNING": 1, "CRITICAL": 2, "UNKNOWN": 3}
FORMATS = ("nagios", "json", "text")


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

    def render(self, out: Output, fmt: str) -> int:
        """Print the result in `fmt`; the Nagios exit status."""
        if fmt == "json" or out.json_mode:
            out.line(json.dumps(self.document(), indent=2))
        elif fmt == "text":
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
        else:
            out.line(self.nagios())
        return self.exit_code
