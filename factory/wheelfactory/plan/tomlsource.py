"""Read TOML files at the edge into checked values, with errors that name file, key and line.

Every config file of the factory (matrix.toml, a kernel's kernel.toml, the compatibility
table) is read through ``TomlDocument``/``Table`` so that each has the same behaviour:
unknown keys are rejected with a "did you mean", wrong types name the key and the expected
type, and the line is given where it can be found.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from wheelfactory.errors import ConfigError
from wheelfactory.support.inputs import read_input

KeyPath = tuple[str | int, ...]

_DECODE_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")
_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_DOTTED_PART = re.compile(r"\"[^\"]*\"|'[^']*'|[^.\s]+")
_KEY = re.compile(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_-]+)\s*=""")


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def format_key(path: KeyPath) -> str:
    """``("include", 1, "backend")`` -> ``include[2].backend``, readable for people."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part + 1}]"  # people count entries from 1
        else:
            # Quoted keys may hold anything, newlines included: show them as TOML would.
            name = part if _BARE_KEY.fullmatch(part) else json.dumps(part)
            out += f".{name}" if out else name
    return out


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    matches = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f"did you mean '{matches[0]}'?" if matches else None


def _unquote(key: str) -> str:
    key = key.strip()
    if len(key) >= 2 and key[0] == key[-1] and key[0] in "\"'":
        return key[1:-1]
    return key


class _LineIndex:
    """Finds the line of a key by scanning table headers: tomllib keeps no positions.

    Best effort for the common layouts (tables, arrays of tables, plain keys); it returns
    None rather than a wrong line when it cannot tell.
    """

    def __init__(self, text: str) -> None:
        self._lines: dict[KeyPath, int] = {}
        table: KeyPath = ()
        counters: dict[KeyPath, int] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            header = _HEADER.match(line)
            if header and "=" not in line.split("]")[0]:
                names = tuple(_unquote(p) for p in _DOTTED_PART.findall(header.group(2)))
                if header.group(1) == "[[":
                    index = counters.get(names, -1) + 1
                    counters[names] = index
                    table = (*names, index)
                else:
                    table = names
                self._lines.setdefault(table, number)
                continue
            key = _KEY.match(line)
            if key:
                self._lines.setdefault((*table, _unquote(key.group(1))), number)

    def line_of(self, path: KeyPath) -> int | None:
        # Walk up from the most specific path: a list item lives on its key's line.
        for end in range(len(path), 0, -1):
            found = self._lines.get(path[:end])
            if found is not None:
                return found
        return None


@dataclass(frozen=True)
class TomlDocument:
    """A parsed TOML file and what is needed to point at places in it."""

    file: str
    data: dict[str, Any]
    _index: _LineIndex

    @classmethod
    def from_text(cls, text: str, file: str) -> TomlDocument:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            message = str(exc)
            found = _DECODE_POSITION.search(message)
            line = int(found.group(1)) if found else None
            detail = _DECODE_POSITION.sub("", message).strip()
            raise ConfigError(
                f"not valid TOML: {detail}",
                file=file,
                line=line,
                hint="fix the syntax (see https://toml.io)",
            ) from None
        except RecursionError:
            raise ConfigError(
                "not valid TOML: arrays or tables nested too deeply",
                file=file,
                hint="flatten the document",
            ) from None
        return cls(file=file, data=data, _index=_LineIndex(text))

    @classmethod
    def load(cls, path: Path, *, display: str | None = None) -> TomlDocument:
        shown = display or str(path)
        try:
            raw = read_input(path)
        except FileNotFoundError:
            raise ConfigError(
                "file not found", file=shown, hint="pass the right path with -m/--matrix"
            ) from None
        except OSError as exc:
            raise ConfigError(f"cannot be read ({exc.strerror})", file=shown) from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"not UTF-8 text (byte {exc.start})", file=shown, hint="save the file as UTF-8"
            ) from None
        return cls.from_text(text, shown)

    def root(self) -> Table:
        return Table(self, (), self.data)

    def line_of(self, path: KeyPath) -> int | None:
        return self._index.line_of(path)

    def error(self, path: KeyPath, message: str, hint: str | None = None) -> NoReturn:
        raise ConfigError(
            message,
            file=self.file,
            key=format_key(path) or None,
            line=self._index.line_of(path),
            hint=hint,
        )


_TYPE_NAMES = {
    str: "a string",
    bool: "true or false",
    int: "an integer",
    float: "a number",
    list: "an array",
    dict: "a table",
}


@dataclass(frozen=True)
class Table:
    """One TOML table, read key by key with type checks that point at the key."""

    doc: TomlDocument
    path: KeyPath
    data: dict[str, Any]

    def error(self, key: str | int | None, message: str, hint: str | None = None) -> NoReturn:
        path = self.path if key is None else (*self.path, key)
        self.doc.error(path, message, hint)

    def reject_unknown(self, allowed: Iterable[str]) -> None:
        allowed = set(allowed)
        for key in self.data:
            if key not in allowed:
                suggestion = did_you_mean(key, allowed)
                known = ", ".join(sorted(allowed))
                self.error(key, "unknown key", suggestion or f"the keys allowed here are: {known}")

    @property
    def line(self) -> int | None:
        return self.doc.line_of(self.path)

    def has(self, key: str) -> bool:
        return key in self.data

    def _typed(self, key: str, kind: type, default: Any) -> Any:
        if key not in self.data:
            return default
        value = self.data[key]
        # bool is an int subclass in Python; TOML keeps them apart, so do we.
        if not isinstance(value, kind) or (kind in (int, float) and isinstance(value, bool)):
            if kind is float and isinstance(value, int) and not isinstance(value, bool):
                return float(value)
            self.error(key, f"must be {_TYPE_NAMES[kind]}, got {describe(value)}")
        return value

    def string(self, key: str, default: Any = None) -> Any:
        return self._typed(key, str, default)

    def boolean(self, key: str, default: Any = None) -> Any:
        return self._typed(key, bool, default)

    def integer(self, key: str, default: Any = None) -> Any:
        return self._typed(key, int, default)

    def table(self, key: str) -> Table:
        return Table(self.doc, (*self.path, key), self._typed(key, dict, {}))

    def string_list(self, key: str, default: Any = None, *, allow_scalar: bool = True) -> Any:
        """An array of strings; a lone string is taken as a one-item array when allowed."""
        if key not in self.data:
            return default
        value = self.data[key]
        if isinstance(value, str) and allow_scalar:
            return (value,)
        if not isinstance(value, list):
            self.error(key, f"must be an array of strings, got {describe(value)}")
        for index, item in enumerate(value):
            if not isinstance(item, str):
                self.error(key, f"item {index + 1} must be a string, got {describe(item)}")
        return tuple(value)

    def string_map(self, key: str) -> dict[str, str]:
        table = self.table(key)
        for name, value in table.data.items():
            if not isinstance(value, str):
                table.error(name, f"must be a string, got {describe(value)}")
        return dict(table.data)

    def tables(self, key: str) -> Iterator[Table]:
        """An array of tables (``[[include]]``)."""
        if key not in self.data:
            return
        value = self.data[key]
        if not isinstance(value, list):
            self.error(key, f"must be an array of tables ([[{key}]]), got {describe(value)}")
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                self.error(key, f"entry {index + 1} must be a table, got {describe(item)}")
            yield Table(self.doc, (*self.path, key, index), item)


_VALUE_WORDS = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "table"),
)


def describe(value: Any) -> str:
    """``'string "x"'``, ``'integer 3'``, ``'array'``: what a wrong value was, for messages."""
    for kind, word in _VALUE_WORDS:  # bool before int: True is an int in Python
        if isinstance(value, kind):
            if kind in (list, dict):
                return word
            shown = repr(value) if not isinstance(value, bool) else str(value).lower()
            return f"{word} {shown[:37] + '...' if len(shown) > 40 else shown}"
    return type(value).__name__
