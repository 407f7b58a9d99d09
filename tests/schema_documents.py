"""Config documents built from the key declarations (wheelfactory.plan.toml_model), for the tests
that hold a JSON Schema and its parser to the same verdict (tests/plan/test_schema.py,
tests/project/test_kernel_schema.py).

* ``full_document``: every declared key, each with its first allowed value;
* ``documents``: a hypothesis strategy of valid documents (random keys, allowed values);
* ``mutations``: every one-place damage of a document that the schema can see: an unknown key,
  a value of a type the key does not take, a value outside its choices or pattern, an empty
  array where one item is needed, an item listed twice, a required key left out, two keys
  that conflict, a table name a map does not allow.

A value the parser judges by more than the schema says (a torch version the compatibility table
must know, a path that must exist) is only ever one of its declared ``examples``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st
from wheelfactory.plan.toml_model import (
    AnyOf,
    Flag,
    Integer,
    Section,
    Sections,
    Text,
    TextList,
    TextMap,
    Value,
)

Doc = dict[str, Any]
UNKNOWN = "zz_not_a_key"
_PLAIN = st.text(alphabet="abcdefghij_XYZ-0123456789 ./", min_size=1, max_size=8)
_NAMES = st.text(alphabet="abcdefghijXYZ_", min_size=1, max_size=6)
_BY_TYPE: dict[str, Any] = {"string": "x", "integer": 7, "float": 1.5, "boolean": True, "array": [1],
                            "object": {"a": 1}}


# ------------------------------------------------------------------------------------------------
# Valid documents
# ------------------------------------------------------------------------------------------------


def _first_text(text: Text) -> str:
    if text.choices:
        return text.choices[0]
    if text.examples:
        return text.examples[0]
    assert text.pattern is None, f"declare examples for a Text with a pattern: {text}"
    return "value"


def first_value(value: Value) -> Any:
    """The first allowed value of ``value``'s shape: for a table, every key it declares."""
    if isinstance(value, Text):
        return _first_text(value)
    if isinstance(value, Flag):
        return False if value.only is None else value.only
    if isinstance(value, Integer):
        return value.minimum or 0
    if isinstance(value, TextList):
        return [_first_text(value.item)]
    if isinstance(value, TextMap):
        return {_first_text(value.names) if value.names != Text() else "KEY": _first_text(value.value)}
    if isinstance(value, AnyOf):
        return first_value(value.options[0])
    if isinstance(value, Sections):
        return [first_value(value.section)]
    dropped = {second for _, second in value.conflicts}
    return {key.name: first_value(key.value) for key in value.keys if key.name not in dropped}


def full_document(model: Section) -> Doc:
    return dict(first_value(model))


def _text(text: Text) -> st.SearchStrategy[str]:
    if text.choices:
        return st.sampled_from(text.choices)
    if text.examples:
        return st.sampled_from(text.examples)
    assert text.pattern is None, f"declare examples for a Text with a pattern: {text}"
    return _PLAIN  # a value the parser takes as it is


def values(value: Value) -> st.SearchStrategy[Any]:
    """Values of ``value``'s shape that the schema accepts and (by the examples rule) the parser too."""
    if isinstance(value, Text):
        return _text(value)
    if isinstance(value, Flag):
        return st.booleans() if value.only is None else st.just(value.only)
    if isinstance(value, Integer):
        return st.integers(min_value=value.minimum if value.minimum is not None else -8, max_value=64)
    if isinstance(value, TextList):
        # the parser's duplicate check ignores case and surrounding spaces
        arrays = st.lists(_text(value.item), min_size=1 if value.nonempty else 0, max_size=3,
                          unique_by=(lambda s: s.strip().lower()) if value.unique else None)
        lone = value.lone_text
        return arrays if lone is None else st.one_of(_text(lone), arrays)
    if isinstance(value, TextMap):
        names = _NAMES if value.names == Text() else _text(value.names)
        return st.dictionaries(names, _text(value.value), max_size=3)
    if isinstance(value, AnyOf):
        return st.one_of(*(values(option) for option in value.options))
    if isinstance(value, Sections):
        return st.lists(values(value.section), max_size=3)
    return _tables(value)


def _tables(section: Section) -> st.SearchStrategy[Doc]:
    required = {key.name: values(key.value) for key in section.keys if key.required}
    optional = {key.name: values(key.value) for key in section.keys if not key.required}

    def settle(table: Doc) -> Doc:
        for first, second in section.conflicts:
            if first in table and second in table:
                del table[second]
        return table

    tables = st.fixed_dictionaries(required, optional=optional).map(settle)
    if section.names_some_key:
        tables = tables.filter(bool)
    if section.may_be_empty and required:
        tables = st.one_of(st.just({}), tables)
    return tables


def documents(model: Section) -> st.SearchStrategy[Doc]:
    return _tables(model)


# ------------------------------------------------------------------------------------------------
# One-place damage
# ------------------------------------------------------------------------------------------------


def json_types(value: Value) -> set[str]:
    if isinstance(value, Text):
        return {"string"}
    if isinstance(value, Flag):
        return {"boolean"}
    if isinstance(value, Integer):
        return {"integer"}
    if isinstance(value, TextList):
        return {"array"} | ({"string"} if value.lone else set())
    if isinstance(value, (TextMap, Section)):
        return {"object"}
    if isinstance(value, Sections):
        return {"array"}
    return set().union(*(json_types(option) for option in value.options))


def _bad_texts(text: Text) -> list[str]:
    """Strings ``text`` refuses."""
    bad = []
    if text.choices:
        bad.append("not-one-of-them")
    if text.pattern is not None:
        bad.append("")  # every declared pattern needs at least one character
    bad.extend(text.excluded)
    return bad


def _damaged_values(value: Value) -> Iterator[tuple[str, Any]]:
    """(what, value) pairs that ``value``'s declaration refuses."""
    for kind, wrong in _BY_TYPE.items():
        if kind not in json_types(value):
            yield f"a {kind}", copy.deepcopy(wrong)
    if isinstance(value, Text):
        for bad in _bad_texts(value):
            yield f"{bad!r}", bad
    elif isinstance(value, Flag) and value.only is not None:
        yield f"{not value.only}", not value.only
    elif isinstance(value, Integer) and value.minimum is not None:
        yield f"{value.minimum - 1}", value.minimum - 1
    elif isinstance(value, TextList):
        yield "an array holding an integer", [1]
        for bad in _bad_texts(value.item):
            yield f"an array holding {bad!r}", [bad]
        if value.lone_text is not None:
            for bad in _bad_texts(value.lone_text):
                yield f"{bad!r}", bad
        if value.nonempty:
            yield "an empty array", []
        if value.unique:
            item = _first_text(value.item)
            yield "an item listed twice", [item, item]
    elif isinstance(value, TextMap):
        yield "a table holding an integer", {"a": 1} if value.names == Text() else {_first_text(value.names): 1}
        for bad in _bad_texts(value.names):
            yield f"a table with the key {bad!r}", {bad: _first_text(value.value)}
        for bad in _bad_texts(value.value):
            yield f"a table holding {bad!r}", {"a" if value.names == Text() else _first_text(value.names): bad}
    elif isinstance(value, AnyOf):
        strings = [option for option in value.options if "string" in json_types(option)]
        if len(strings) == 1 and isinstance(strings[0], Text):
            for bad in _bad_texts(strings[0]):
                yield f"{bad!r}", bad
        flags = [option for option in value.options if isinstance(option, Flag)]
        allowed = {b for flag in flags for b in ((True, False) if flag.only is None else (flag.only,))}
        for refused in sorted({True, False} - allowed) if flags else ():
            yield f"{refused}", refused
        for option in value.options:
            if isinstance(option, TextMap):
                for what, bad in _damaged_values(option):
                    if isinstance(bad, dict) and bad:  # the map's own damage; a wrong type may fit another option
                        yield what, bad
    elif isinstance(value, Sections):
        yield "an array holding a string", ["x"]


def mutations(model: Section, doc: Doc) -> Iterator[tuple[str, Doc]]:
    """Every one-place damage of ``doc`` (valid under ``model``): (what was done, the damaged copy)."""
    for where, section, table in _tables_in(model, doc, ()):
        def damaged(change: Any, where: tuple[Any, ...] = where) -> Doc:
            out = copy.deepcopy(doc)
            change(_at(out, where))
            return out

        here = "/".join(map(str, where)) or "top"
        yield f"{here}: unknown key", damaged(lambda t: t.__setitem__(UNKNOWN, "x"))
        for key in section.keys:
            for what, bad in _damaged_values(key.value):
                yield f"{here}.{key.name} = {what}", damaged(lambda t, k=key.name, b=bad: t.__setitem__(k, b))
            if key.required and key.name in table:
                yield f"{here}: {key.name} left out", damaged(lambda t, k=key.name: t.pop(k))
        if section.names_some_key:
            yield f"{here}: emptied", damaged(lambda t: t.clear())
        for first, second in section.conflicts:
            values_ = (first_value(section.key(first).value), first_value(section.key(second).value))
            yield f"{here}: {first} and {second}", damaged(
                lambda t, f=first, s=second, v=values_: t.update({f: v[0], s: v[1]}))


def _at(doc: Any, where: tuple[Any, ...]) -> Any:
    for part in where:
        doc = doc[part]
    return doc


def _tables_in(model: Section, table: Doc, where: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], Section, Doc]]:
    yield where, model, table
    for key in model.keys:
        if key.name not in table:
            continue
        if isinstance(key.value, Section):
            yield from _tables_in(key.value, table[key.name], (*where, key.name))
        elif isinstance(key.value, Sections):
            for index, entry in enumerate(table[key.name]):
                yield from _tables_in(key.value.section, entry, (*where, key.name, index))
