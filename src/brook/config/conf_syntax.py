"""The syntax half of the nats-server config format: text in, nested dicts and lists out.

`parse_conf` mirrors nats-server's conf/lex.go and conf/parse.go: `=`, `:` or blanks between
key and value; `{}` blocks; `[]` arrays split by commas or new lines; `#` and `//` comments;
double-quoted (with escapes), single-quoted (raw), bare and `(`...`)` block strings; integers
with size suffixes (k=1000, kb/ki/kib=1024, likewise m, g, t); true/yes/on and false/no/off;
`$NAME` resolved through the enclosing blocks, then the environment; `include` relative to
the including file; an optional pair of braces around the whole file. Keys are lower-cased
because nats-server matches them case-insensitively. `parse_size` reads the
same size notation for callers holding a plain string (the mapping, command-line flags);
durations are `brook.durations.parse_seconds`.

What the result means is not decided here: `brook.config.conf` maps it onto `Settings`.
Blocks remember which keys were referenced as `$variables` (`used_vars`) so that the mapping
can exempt them from its unknown-key check, as nats-server's `IsUsedVariable` does.

Deliberate differences from nats-server, each to avoid a silent surprise:
* a bare value that is not a number, such as `2s` or `127.0.0.1:4222`, is a string;
* an integer written with a suffix keeps its text (`SuffixedInt`), so that the mapping can
  read `ping_interval: 2m` as two minutes rather than the two million seconds nats-server
  would.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from pathlib import Path

from brook.config.settings import ConfigError

__all__ = ["SuffixedInt", "parse_conf", "parse_size"]

_PREFIXES = "kmgt"
_SIZE_UNITS: dict[str, int] = (
    {"": 1, "b": 1}
    | {p: 1000**n for n, p in enumerate(_PREFIXES, 1)}
    | {p + s: 1024**n for n, p in enumerate(_PREFIXES, 1) for s in ("b", "i", "ib")}
)
_NUMBER_RE = re.compile(r"(-?\d+)([a-z]*)", re.IGNORECASE | re.ASCII)
_FLOAT_RE = re.compile(r"-?\d+(?:\.\d+)?", re.ASCII)
_BOOLS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", '"': '"', "\\": "\\"}
_BCRYPT_PREFIXES = ("$2a$", "$2b$", "$2y$")  # bare bcrypt hashes are strings, not variables
_VALUE_END = frozenset(" \t\r\n,;]}")
_KEY_END = frozenset(" \t\r\n=:{}[],;#\"'")
_BLOCK_STRING_END = re.compile(r"\n\)[ \t]*(?=\r?\n|$)")
_MAX_INCLUDE_DEPTH = 10


def parse_size(text: str) -> int:
    """Bytes from `1MB`, `64KB`, `1G`, `8M`, `1MiB` or a plain number; K=1000, KB=KiB=1024."""
    match = _NUMBER_RE.fullmatch(text.strip())
    unit = _SIZE_UNITS.get(match.group(2).lower()) if match else None
    if match is None or unit is None:
        raise ValueError(f"not a size: {text!r}")
    return int(match.group(1)) * unit


class SuffixedInt(int):
    """An integer written with a unit suffix; keeps its text so a duration can re-read it."""

    text: str

    def __new__(cls, value: int, text: str) -> SuffixedInt:
        self = super().__new__(cls, value)
        self.text = text
        return self


class _ConfMap(dict[str, object]):
    """A parsed block that remembers which keys were referenced as `$variables`.

    nats-server does not report such keys as unknown (its `IsUsedVariable`); the settings
    mapping needs the same knowledge to stay strict about everything else.
    """

    def __init__(self) -> None:
        super().__init__()
        self.used_vars: set[str] = set()
        self.lines: dict[str, int] = {}  # each key's line, for errors that name it
        # Each key as written, where case matters (account names: `accounts { A: {} }`).
        self.spelled: dict[str, str] = {}


class _Scope:
    """One block while it is parsed: lower-cased output plus keys as written for `$NAME`."""

    __slots__ = ("data", "names")

    def __init__(self) -> None:
        self.data = _ConfMap()
        self.names: dict[str, object] = {}

    def set(self, key: str, value: object, line: int) -> None:
        self.data[key.lower()] = value  # a repeated key overrides, as in nats-server
        self.data.lines[key.lower()] = line
        self.data.spelled[key.lower()] = key
        self.names[key] = value


class _VariableCycle(ConfigError):
    """An environment variable expands, directly or not, to itself."""


class _Parser:
    """Recursive descent over the text; every error carries path:line:col."""

    def __init__(
        self, text: str, path: str | None, includes: tuple[str, ...], env: frozenset[str]
    ) -> None:
        self.text, self.path, self.pos = text.removeprefix("\ufeff"), path, 0
        self.includes = includes  # real paths of the files being parsed, to stop cycles
        self.env = env  # environment variables being expanded, to stop cycles
        self.scopes: list[_Scope] = []

    def fail(self, message: str, at: int | None = None) -> ConfigError:
        at = self.pos if at is None else at
        line = self.text.count("\n", 0, at) + 1
        col = at - self.text.rfind("\n", 0, at)
        # "Parse error" as nats-server words it: launchers match on the phrase.
        return ConfigError(f"{self.path or '<config>'}:{line}:{col}: Parse error: {message}")

    def peek(self) -> str:
        return self.text[self.pos : self.pos + 1]

    def found(self) -> str:
        c = self.peek()
        return "end of file" if not c else "a new line" if c in "\r\n" else repr(c)

    def skip(self, newlines: bool) -> None:
        """Skip blanks and comments, and new lines too when `newlines`."""
        text, end = self.text, len(self.text)
        while self.pos < end:
            c = text[self.pos]
            if c in " \t" or (newlines and c in "\r\n"):
                self.pos += 1
            elif c == "#" or text.startswith("//", self.pos):
                nl = text.find("\n", self.pos)
                self.pos = end if nl < 0 else nl
            else:
                return

    def scan(self, stop: Collection[str]) -> str:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in stop:
            self.pos += 1
        return self.text[start : self.pos]

    def quoted(self) -> str:
        """A single-quoted string or key: raw text up to the closing quote."""
        quote, start = self.peek(), self.pos
        end = self.text.find(quote, start + 1)
        if end < 0:
            raise self.fail(f"unterminated string: expected a closing {quote}", start)
        self.pos = end + 1
        return self.text[start + 1 : end]

    def document(self) -> _Scope:
        top = _Scope()
        self.scopes.append(top)
        self.skip(newlines=True)
        if self.peek() == "{":  # nats-server accepts a whole file wrapped in braces
            self.pos += 1
            self.body(top, "}")
            self.skip(newlines=True)
            if self.peek():
                raise self.fail(
                    f"expected end of file after the closing '}}', found {self.found()}"
                )
        else:
            self.body(top, "")
        return top

    def body(self, scope: _Scope, closer: str) -> None:
        """Entries up to `closer` ('}' for a block, '' for the end of a file)."""
        opened = self.pos - 1
        while True:
            self.skip(newlines=True)
            if self.peek() == closer:
                self.pos += len(closer)
                return
            if not self.peek():
                line = self.text.count("\n", 0, opened) + 1
                raise self.fail(f"expected '}}' to close the block opened on line {line}")
            if self.peek() in "\"'":
                key, bare = self.quoted(), False
            else:
                key, bare = self.scan(_KEY_END), True
                if not key:
                    raise self.fail(f"expected a key, found {self.found()}")
            key_end = self.pos
            key_line = self.text.count("\n", 0, key_end) + 1
            self.skip(newlines=False)
            if (
                bare
                and key.lower() == "include"
                and self.pos > key_end
                and self.peek() not in "=:\r\n"
            ):
                self.include(scope)
            else:
                if self.peek() in ("\r", "\n"):  # a block's '{' may start on the next line
                    mark = self.pos
                    self.skip(newlines=True)
                    if self.peek() != "{":
                        self.pos = mark
                if self.peek() in ("=", ":"):
                    self.pos += 1
                    self.skip(newlines=False)
                if self.peek() in ("", "\r", "\n"):
                    raise self.fail(f"expected a value for {key!r}, found {self.found()}")
                scope.set(key, self.value(), key_line)
            self.skip(newlines=False)
            if self.peek() in (",", ";"):
                self.pos += 1
            elif self.peek() not in ("\r", "\n", closer, ""):
                raise self.fail(
                    f"expected a new line, ',' or ';' after the value of {key!r}, "
                    f"found {self.found()}"
                )

    def value(self) -> object:
        c, start = self.peek(), self.pos
        if c == "{":
            self.pos += 1
            scope = _Scope()
            self.scopes.append(scope)
            self.body(scope, "}")
            self.scopes.pop()
            return scope.data
        if c == "[":
            return self.array()
        if c == '"':
            return self.dq_string()
        if c == "'":
            return self.quoted()
        if c == "(":
            end = _BLOCK_STRING_END.search(self.text, self.pos)
            if end is None:
                raise self.fail("expected ')' alone on a line to close the block string")
            self.pos = end.end()
            return self.text[start + 1 : end.start()]
        word = self.scan(_VALUE_END)
        if not word:
            raise self.fail(f"expected a value, found {self.found()}")
        return self.bare(word, start)

    def bare(self, word: str, start: int) -> object:
        if word.lower() in _BOOLS:
            return _BOOLS[word.lower()]
        if word.startswith("$") and not word.startswith(_BCRYPT_PREFIXES):
            return self.variable(word[1:], start)
        number = _NUMBER_RE.fullmatch(word)
        unit = _SIZE_UNITS.get(number.group(2).lower()) if number else None
        if number and unit is not None:
            value = int(number.group(1)) * unit
            return SuffixedInt(value, word) if number.group(2) else value
        if _FLOAT_RE.fullmatch(word):
            return float(word)
        return word

    def array(self) -> list[object]:
        opened, items = self.pos, list[object]()
        self.pos += 1
        while True:
            self.skip(newlines=True)
            c = self.peek()
            if c == "]":
                self.pos += 1
                return items
            if not c:
                line = self.text.count("\n", 0, opened) + 1
                raise self.fail(f"expected ']' to close the array opened on line {line}")
            if c == ",":
                raise self.fail("expected an array value, found ','")
            items.append(self.value())
            self.skip(newlines=False)
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() not in ("]", "\r", "\n", ""):
                raise self.fail(f"expected ',' or ']' after an array value, found {self.found()}")

    def dq_string(self) -> str:
        text, start, out = self.text, self.pos, bytearray()
        self.pos += 1
        while True:
            if self.pos >= len(text):
                raise self.fail('unterminated string: expected a closing "', start)
            c = text[self.pos]
            self.pos += 1
            if c == '"':
                return out.decode("utf-8", "replace")
            if c != "\\":
                out += c.encode("utf-8", "surrogatepass")
                continue
            e, digits = text[self.pos : self.pos + 1], text[self.pos + 1 : self.pos + 3]
            if e == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", digits):
                out.append(int(digits, 16))  # \xXX is a byte, as in nats-server
                self.pos += 3
            elif e in _ESCAPES:
                out += _ESCAPES[e].encode()
                self.pos += 1
            else:
                raise self.fail(
                    r"invalid escape: expected \t, \n, \r, \", \\ or \xXX", self.pos - 1
                )

    def variable(self, name: str, at: int) -> object:
        """Block scoping first (innermost out), then the environment, as nats-server."""
        for scope in reversed(self.scopes):
            if name in scope.names:
                scope.data.used_vars.add(name.lower())
                return scope.names[name]
        if name in self.env:
            raise _VariableCycle(f"environment variable ${name} refers to itself")
        raw = os.environ.get(name)
        if raw is None:
            raise self.fail(
                f"variable ${name} is neither an earlier key nor set in the environment", at
            )
        try:  # an environment value is read as a config value would be: 4222 is an integer
            return _Parser(f"v={raw}", None, self.includes, self.env | {name}).document().data["v"]
        except _VariableCycle as exc:
            if self.env:
                raise
            raise self.fail(str(exc), at) from None
        except ConfigError:
            return raw

    def include(self, scope: _Scope) -> None:
        at = self.pos
        name = self.quoted() if self.peek() in "\"'" else self.scan(" \t\r\n;,}")
        if not name:
            raise self.fail("expected a file name after include", at)
        if self.path is None:
            raise self.fail(f"cannot include {name!r}: text without a path has no directory", at)
        target = os.path.join(os.path.dirname(self.path), name)
        real = os.path.realpath(target)
        if real in self.includes or len(self.includes) > _MAX_INCLUDE_DEPTH:
            raise self.fail(f"include cycle: {name!r} is already being included", at)
        try:
            text = Path(target).read_text(encoding="utf-8")
        except OSError as exc:
            raise self.fail(f"cannot read include {name!r}: {exc.strerror or exc}", at) from None
        included = _Parser(text, target, (*self.includes, real), self.env).document()
        for key, value in included.names.items():
            scope.set(key, value, included.data.lines[key.lower()])  # its line there
        scope.data.used_vars |= included.data.used_vars


def parse_conf(text: str, *, path: str | None = None) -> dict[str, object]:
    """Parse nats-server config text into nested dicts/lists with lower-cased keys.

    `path` names the text in errors and anchors relative `include`s; without it includes
    are refused because there is no directory to resolve them against.
    """
    includes = (os.path.realpath(path),) if path is not None else ()
    return _Parser(text, path, includes, frozenset()).document().data
