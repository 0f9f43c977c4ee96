"""The output path of the client commands (brook.cli.output): literal text, tables that
pipe cleanly, progress bars only on a terminal and never with --json."""

from __future__ import annotations

import io

import pytest

from brook.cli.output import Output


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_piped_table_has_one_line_per_row_without_padding(
    capsys: pytest.CaptureFixture[str],
) -> None:
    wide = "v" * 300  # wider than any terminal: never wrapped when piped
    Output(json_mode=False).table(("NAME", "VALUE"), [("a", wide), ("[bold]b[/bold]", None)])
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "NAME" + " " * 12 + "VALUE",
        "a" + " " * 15 + wide,
        "[bold]b[/bold]",  # rich markup is not interpreted: values print as they are
    ]


def test_fields_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    out = Output(json_mode=False)
    out.fields([("Name", "x"), ("Longer name", 2)], title="Title")
    assert capsys.readouterr().out == "Title\n\n       Name: x\nLonger name: 2\n"
    assert Output(json_mode=True).document({"a": b"\xff"}, lambda o, v: None) == 0
    assert capsys.readouterr().out == '{\n  "a": "\\\\xff"\n}\n'


def test_progress_only_on_a_terminal_and_never_with_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for json_mode, enabled, terminal, drawn in (
        (False, True, True, True),
        (True, True, True, False),
        (False, False, True, False),
        (False, True, False, False),
    ):
        stderr = Terminal() if terminal else io.StringIO()
        monkeypatch.setattr("sys.stderr", stderr)
        with Output(json_mode=json_mode).progress("backup", 100, enabled=enabled) as advance:
            advance(60)
            advance(40)
        assert ("backup" in stderr.getvalue()) is drawn, (json_mode, enabled, terminal)
