"""The keys a config file may hold, declared once as typed values.

matrix.toml's parser (plan/matrix.py) and kernel.toml's (project/kernel_toml.py) take their key
lists, allowed values and value patterns from these declarations, and plan/schema.py turns the same
declarations into the JSON Schema that editors check the files with: a key the parser learns is in
the schema, since the parser refuses every key it has not been told of here.

What a declaration says is only what a JSON Schema can say (types, choices, patterns, required
keys, unknown keys refused). What the parser checks beyond that (a torch version the compatibility
table knows, a source file that exists, one key that needs another) stays in the parser; the
``examples`` of such a value are values the parser accepts.
"""

from __future__ import annotations

from dataclasses import dataclass

# Patterns are written so that Python's ``re`` and JSON Schema's ECMA-262 regexes read them alike
# (no \\A, \\Z, named groups or flags); anchored with ^ and $ where the whole value must match.
NONBLANK = r"\S"  # some character that is not white space (the parser's ``value.strip()``)


@dataclass(frozen=True)
class Text:
    """A string."""

    choices: tuple[str, ...] = ()  # the only values allowed; empty: any string
    pattern: str | None = None  # a regex some part of the value matches (anchor it for all of it)
    excluded: tuple[str, ...] = ()  # values refused although the pattern admits them
    examples: tuple[str, ...] = ()  # shown by editors; each one the parser accepts


@dataclass(frozen=True)
class Flag:
    """true or false; ``only``: the one of them allowed (``compile_cache = false``)."""

    only: bool | None = None


@dataclass(frozen=True)
class Integer:
    minimum: int | None = None


@dataclass(frozen=True)
class TextList:
    """An array of strings. Where ``lone``, a single string in its place is taken as a one-item
    array: it must be what an item must be, or ``lone_form`` where that differs."""

    item: Text = Text()
    lone: bool = True
    lone_form: Text | None = None
    nonempty: bool = False
    unique: bool = False  # an item listed twice is an error

    @property
    def lone_text(self) -> Text | None:
        """What a single string in the array's place must be; None where it is refused."""
        return (self.lone_form or self.item) if self.lone else None


@dataclass(frozen=True)
class TextMap:
    """A table of strings: ``names`` is what each key must be, ``value`` each value."""

    names: Text = Text()
    value: Text = Text()


@dataclass(frozen=True)
class AnyOf:
    """A value of any one of these shapes (``cxx11_abi = true | false | "both"``)."""

    options: tuple[Value, ...]


@dataclass(frozen=True)
class Key:
    name: str
    value: Value
    description: str  # one line, for people: editors show it on hover
    default: str | int | bool | None = None  # what a missing key means, where it is one value
    required: bool = False


@dataclass(frozen=True)
class Section:
    """A table whose keys are declared: any other key is an error."""

    keys: tuple[Key, ...]
    description: str = ""
    # [test]: an empty table is allowed (and means none); the required keys are required once it has any.
    may_be_empty: bool = False
    # pairs of keys that may not both be set
    conflicts: tuple[tuple[str, str], ...] = ()
    names_some_key: bool = False  # an empty table is an error ([[exclude]] must name an axis)

    def names(self) -> set[str]:
        return {key.name for key in self.keys}

    def key(self, name: str) -> Key:
        for key in self.keys:
            if key.name == name:
                return key
        raise KeyError(name)

    def section(self, name: str) -> Section:
        """The table declared under ``name`` (for ``[[name]]``: one entry's table)."""
        value = self.key(name).value
        if isinstance(value, Sections):
            return value.section
        if not isinstance(value, Section):
            raise TypeError(f"{name} is not a table")
        return value


@dataclass(frozen=True)
class Sections:
    """An array of tables, ``[[name]]``."""

    section: Section


Value = Text | Flag | Integer | TextList | TextMap | AnyOf | Section | Sections
