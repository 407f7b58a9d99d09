"""JSON Schemas (draft-07, the draft Taplo / Even Better TOML reads best) of the config files,
written from the key declarations the parsers read (plan/toml_model.py), never by hand.

The package ships them as wheelfactory/data/schema/{matrix,kernel}.schema.json;
``python -m wheelfactory.project.schemas`` writes them again after a declaration changes
(tests/plan/test_schema.py fails until it has).
"""

from __future__ import annotations

import json
from typing import Any

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

DRAFT = "http://json-schema.org/draft-07/schema#"

Schema = dict[str, Any]


def document_schema(model: Section, *, title: str) -> Schema:
    """The schema of a whole file whose top-level table is ``model``."""
    return {"$schema": DRAFT, "title": title, **value_schema(model)}


def render(schema: Schema) -> str:
    """The text shipped: stable key order as declared, two-space indents, a final newline."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def value_schema(value: Value) -> Schema:
    if isinstance(value, Text):
        return _text(value)
    if isinstance(value, Flag):
        return {"type": "boolean"} if value.only is None else {"const": value.only}
    if isinstance(value, Integer):
        return (
            {"type": "integer"}
            if value.minimum is None
            else {"type": "integer", "minimum": value.minimum}
        )
    if isinstance(value, TextList):
        array: Schema = {"type": "array", "items": _text(value.item)}
        if value.nonempty:
            array["minItems"] = 1
        if value.unique:
            array["uniqueItems"] = True
        lone = value.lone_text
        return array if lone is None else {"anyOf": [_text(lone), array]}
    if isinstance(value, TextMap):
        table: Schema = {"type": "object"}
        if value.names != Text():
            table["propertyNames"] = _text(value.names)
        table["additionalProperties"] = _text(value.value)
        return table
    if isinstance(value, AnyOf):
        return {"anyOf": [value_schema(option) for option in value.options]}
    if isinstance(value, Sections):
        return {"type": "array", "items": value_schema(value.section)}
    return _section(value)


def _text(text: Text) -> Schema:
    out: Schema = {"type": "string"}
    if text.choices:
        out["enum"] = list(text.choices)
    if text.pattern is not None:
        out["pattern"] = text.pattern
    if text.excluded:
        out["not"] = {"enum": list(text.excluded)}
    if text.examples:
        out["examples"] = list(text.examples)
    return out


def _section(section: Section) -> Schema:
    out: Schema = {"type": "object"}
    if section.description:
        out["description"] = section.description
    properties: Schema = {}
    for key in section.keys:
        described: Schema = {"description": key.description}
        if key.default is not None:
            described["default"] = key.default
        # the key's description, not its table's: a table's own is for the document's top
        properties[key.name] = {
            **described,
            **{
                name: part
                for name, part in value_schema(key.value).items()
                if name != "description"
            },
        }
    out["properties"] = properties
    out["additionalProperties"] = False
    required = [key.name for key in section.keys if key.required]
    if required and section.may_be_empty:
        out["anyOf"] = [{"maxProperties": 0}, {"required": required}]
    elif required:
        out["required"] = required
    if section.names_some_key:
        out["minProperties"] = 1
    if section.conflicts:
        out["allOf"] = [{"not": {"required": list(pair)}} for pair in section.conflicts]
    return out
