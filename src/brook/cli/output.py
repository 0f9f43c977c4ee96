"""One output path for the `brook` client commands (ADR 0043).

A command hands its result to `Output` once: with `--json` it is one JSON document on
stdout (indented, as the `nats` CLI prints them; streaming commands such as `kv watch`
print one compact document per line with `json_line`), else it is shown for people:
`fields` (an aligned `Name: value` block), `table` (a rich table without borders, header
first), `line`. Progress bars (`progress`) draw on stderr only when stderr is a terminal
and `--json` is off, so scripts and pipes see the data only. Errors go to stderr.

Text is printed literally: rich's markup and highlighting are off, so a value such as
`[x]` or a URL is never restyled or swallowed.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

# Width of tables when stdout is not a terminal (a pipe, a file): wide enough that rows
# are never wrapped, so `grep`/`awk` see one row per line.
PIPE_WIDTH = 512


class Output:
    """Where a command's results go; `json_mode` is `--json`."""

    def __init__(self, *, json_mode: bool) -> None:
        self.json_mode = json_mode

    # --------------------------------------------------------------- documents

    def document(self, value: Any, show: Callable[[Output, Any], None] | None = None) -> int:
        """A command's result: `value` as JSON (`--json`), else as `show(out, value)`
        prints it (JSON when there is no `show`); the command's exit status (0)."""
        if self.json_mode or show is None:
            self.json(value)
        else:
            show(self, value)
        return 0

    def listing(
        self,
        items: Sequence[Any],
        none: str,
        headers: Sequence[str],
        row: Callable[[Any], Sequence[Any]],
        title: str | None = None,
    ) -> int:
        """A list: `items` as a JSON array (`--json`), else `none` when there are none,
        else a table of `headers` with a `row` per item; the exit status (0)."""
        if self.json_mode:
            self.json(list(items))
        elif not items:
            self.line(none)
        else:
            self.table(headers, [row(item) for item in items], title=title)
        return 0

    def json(self, value: Any) -> None:
        _write(json.dumps(value, indent=2, default=_json_default) + "\n")

    def json_line(self, value: Any) -> None:
        _write(json.dumps(value, default=_json_default) + "\n", flush=True)

    # --------------------------------------------------------------- for people

    def line(self, text: str = "", *, flush: bool = False) -> None:
        _write(text + "\n", flush=flush)

    def raw(self, data: bytes) -> None:
        """Bytes as they are (a value, an object's content), for pipes."""
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()

    def fields(self, pairs: Sequence[tuple[str, Any]], title: str | None = None) -> None:
        """`Name: value` lines, names right-aligned; an optional title line above."""
        if title:
            self.line(title)
            self.line()
        if not pairs:
            return
        width = max(len(name) for name, _ in pairs)
        for name, value in pairs:
            self.line(f"{name.rjust(width)}: {value}")

    def table(
        self, headers: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None
    ) -> None:
        """A table: header row, then one line per row, columns separated by two spaces."""
        if title:
            self.line(title)
            self.line()
        table = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), show_edge=False)
        for header in headers:
            table.add_column(Text(str(header), style="bold"), no_wrap=True)
        for row in rows:
            table.add_row(*(Text("" if c is None else str(c)) for c in row))
        out = sys.stdout
        if out.isatty():
            _console(out, tty=True).print(table)
            return
        buffer = io.StringIO()
        _console(buffer, tty=False).print(table)
        # rich pads every cell to its column's width; a pipe gets the lines without the
        # trailing blanks, so `awk`, `cut` and tests see the values only.
        _write("".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines()))

    def error(self, text: str) -> None:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()

    @contextlib.contextmanager
    def progress(
        self, description: str, total: int | None, *, enabled: bool = True, counting: bool = False
    ) -> Iterator[Callable[[int], None]]:
        """A progress bar on stderr (a terminal only, never with `--json`); yields
        `advance(n)`. `total` None draws a bar without an end. The bar counts bytes, or
        items (`counting`: messages, as `pub` and `bench` do)."""
        if not enabled or self.json_mode or not sys.stderr.isatty():
            yield lambda _n: None
            return
        bar = Progress(
            TextColumn("{task.description}"), BarColumn(),
            MofNCompleteColumn() if counting else DownloadColumn(),
            TimeRemainingColumn(), console=Console(stderr=True), transient=True,
        )  # fmt: skip
        with bar:
            task = bar.add_task(description, total=total)
            yield lambda n: bar.advance(task, n)


def _console(file: Any, *, tty: bool) -> Console:
    return Console(
        file=file, highlight=False, markup=False, emoji=False,
        width=None if tty else PIPE_WIDTH, color_system="auto" if tty else None,
    )  # fmt: skip


def _write(text: str, *, flush: bool = False) -> None:
    sys.stdout.write(text)
    if flush:
        sys.stdout.flush()


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, datetime.datetime):
        return iso_time(value)
    return str(value)


# ---------------------------------------------------------------------- formatting


def human_size(n: int | None) -> str:
    if n is None or n < 0:
        return "unlimited"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover - the loop always returns


def human_duration(seconds: float | None) -> str:
    if not seconds or seconds < 0:
        return "forever"
    total = int(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    text += f"{secs}s" if secs else ""
    return text or f"{seconds}s"


def human_count(n: int | None) -> str:
    return "unlimited" if n is None or n < 0 else f"{n:,}"


def iso_time(value: Any) -> str | None:
    if isinstance(value, datetime.datetime):
        return value.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")
    return None if value is None else str(value)


def printable(value: bytes | None, limit: int | None = None) -> str:
    """Bytes for a terminal: UTF-8 with escapes for the rest, cut to `limit`."""
    text = (value or b"").decode("utf-8", "backslashreplace")
    if limit is not None and len(text) > limit:
        return text[: limit - 3] + "..."
    return text
