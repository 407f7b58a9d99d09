"""The JSON Schemas shipped for editors agree with the parsers.

* the files in wheelfactory/data/schema/ are what the key declarations generate (and valid draft-07);
* on documents generated from matrix.toml's declarations (tests/schema_documents.py), the schema
  rejects a document exactly when ``parse_matrix`` raises ConfigError: the document with every
  key, each of its one-place damages (unknown key, wrong type, value outside the choices or the
  pattern, empty or duplicated array, missing required key, conflicting keys), and random valid
  documents with random damage;
* the repository's matrix.toml and the one ``wheelfactory new`` writes validate.

What the schema cannot say is kept out of the generated documents, and the parser alone checks it:
torch versions and toolkit builds the compatibility table must know (generated values are the
declared examples), ``compile_cache_redis`` needing ``compile_cache = "sccache"``, and the
``compile_cache_*`` keys that the parser does not read at all under ``compile_cache = false``
(left out of such documents; the schema still checks their types).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft7Validator
from tests.schema_documents import UNKNOWN, documents, full_document, mutations
from tests.testkit import REPO
from wheelfactory.errors import ConfigError
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.matrix import parse_matrix
from wheelfactory.plan.matrix_schema import MATRIX_FILE
from wheelfactory.plan.schema import DRAFT
from wheelfactory.plan.tomlsource import TomlDocument
from wheelfactory.project.scaffold import plan_scaffold
from wheelfactory.project.schemas import REGENERATE, SCHEMA_DIR, schema_texts

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TABLE = load_table()
SCHEMA = json.loads(schema_texts()["matrix.schema.json"])
VALIDATOR = Draft7Validator(SCHEMA)
RANDOM = settings(deadline=None, database=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])


def test_shipped_schemas_are_the_generated_ones() -> None:
    for name, text in schema_texts().items():
        shipped = SCHEMA_DIR / name
        assert shipped.is_file() and shipped.read_text(encoding="utf-8") == text, \
            f"{shipped} is not what the key declarations generate: run `{REGENERATE}`"
    assert sorted(p.name for p in SCHEMA_DIR.iterdir()) == sorted(schema_texts())


def test_schemas_are_draft_7_documents() -> None:
    for text in schema_texts().values():
        schema = json.loads(text)
        assert schema["$schema"] == DRAFT
        Draft7Validator.check_schema(schema)


def parser_verdict(text: str) -> str | None:
    """None when matrix.toml ``text`` parses, else the parser's message."""
    try:
        parse_matrix(TomlDocument.from_text(text, "matrix.toml"), TABLE, base_dir=REPO)
    except ConfigError as exc:
        return str(exc)
    return None


def schema_verdict(text: str) -> str | None:
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in VALIDATOR.iter_errors(tomllib.loads(text))]
    return "; ".join(errors) or None


def assert_same_verdict(doc: dict[str, Any], what: str = "") -> bool:
    """Both accept or both reject ``doc``; returns whether they accepted it."""
    text = tomli_w.dumps(doc)
    parser, schema = parser_verdict(text), schema_verdict(text)
    assert (parser is None) == (schema is None), (
        f"{what}: the parser says {parser or 'valid'}, the schema says {schema or 'valid'}, of:\n{text}")
    return parser is None


def settle(doc: dict[str, Any]) -> dict[str, Any]:
    """The cross-key rules the schema leaves to the parser (see the module's docstring)."""
    build = doc.get("build")
    if isinstance(build, dict):
        if build.get("compile_cache") is False:
            build.pop("compile_cache_dir", None)
            build.pop("compile_cache_redis", None)
        if build.get("compile_cache") == "ccache":
            build.pop("compile_cache_redis", None)
    return doc


def damages(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    build = doc.get("build")
    cache_off = isinstance(build, dict) and build.get("compile_cache") is False
    return [(what, damaged) for what, damaged in mutations(MATRIX_FILE, doc)
            if not (cache_off and what.startswith("build.compile_cache_"))]


def test_the_document_with_every_key_is_valid_for_both() -> None:
    doc = settle(full_document(MATRIX_FILE))
    assert set(doc) == MATRIX_FILE.names()
    assert assert_same_verdict(doc, "every key")


def test_every_one_place_damage_is_refused_by_both() -> None:
    found = damages(settle(full_document(MATRIX_FILE)))
    assert len(found) > 100  # every key, at every level
    for what, damaged in found:
        assert not assert_same_verdict(damaged, what), what


@RANDOM
@given(documents(MATRIX_FILE).map(settle))
def test_generated_documents_are_valid_for_both(doc: dict[str, Any]) -> None:
    assert assert_same_verdict(doc, "generated")


@RANDOM
@given(documents(MATRIX_FILE).map(settle), st.data())
def test_generated_damage_gets_one_verdict(doc: dict[str, Any], data: st.DataObject) -> None:
    what, damaged = data.draw(st.sampled_from(damages(doc)), label="damage")
    assert_same_verdict(damaged, what)


def test_a_planted_unknown_key_is_refused_by_both() -> None:
    text = (REPO / "matrix.toml").read_text() + f'\n[cuda]\n{UNKNOWN} = "x"\n'
    assert UNKNOWN in (parser_verdict(text) or "")
    assert "Additional properties are not allowed" in (schema_verdict(text) or "")


# the repository's, the one `wheelfactory new` writes, and any a fixture project carries
REAL_MATRICES = [
    pytest.param((REPO / "matrix.toml").read_text(), id="repo"),
    pytest.param(plan_scaffold("mykernels").files["matrix.toml"], id="wheelfactory-new"),
    *(pytest.param(path.read_text(), id=str(path.relative_to(REPO)))
      for path in sorted((REPO / "tests" / "fixtures").rglob("matrix.toml"))),
]


@pytest.mark.parametrize("text", REAL_MATRICES)
def test_real_matrix_files_validate(text: str) -> None:
    assert parser_verdict(text) is None
    assert schema_verdict(text) is None


def test_schema_carries_the_parsers_choices_and_descriptions() -> None:
    build = SCHEMA["properties"]["build"]["properties"]
    assert build["engine"]["enum"] == ["auto", "docker", "host"] and build["engine"]["default"] == "auto"
    assert all(prop.get("description") for prop in build.values())
    assert SCHEMA["properties"]["build"]["additionalProperties"] is False
    # a key the parser reads is a key the schema declares, at every level
    assert set(SCHEMA["properties"]) == MATRIX_FILE.names()
