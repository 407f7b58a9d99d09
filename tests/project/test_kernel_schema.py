"""kernel.schema.json (shipped for editors) agrees with ``parse_kernel`` on documents generated
from kernel.toml's key declarations (tests/schema_documents.py): the schema rejects a document
exactly when the parser raises ConfigError. The repository's kernel.toml files and the one
``wheelfactory new`` writes validate.

What the schema cannot say is kept out of the generated documents: the paths a kernel.toml names
must exist under the project (the project below holds every declared example path), the version
must be PEP 440 and ``sample_inputs`` a module of the Python package (generated values are the
declared examples).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft7Validator
from tests.schema_documents import UNKNOWN, documents, full_document, mutations
from tests.testkit import REPO
from wheelfactory.errors import ConfigError
from wheelfactory.plan.toml_model import TextList
from wheelfactory.plan.tomlsource import TomlDocument
from wheelfactory.project.kernel_toml import KERNEL_FILE, parse_kernel
from wheelfactory.project.scaffold import plan_scaffold
from wheelfactory.project.schemas import schema_texts

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

VALIDATOR = Draft7Validator(json.loads(schema_texts()["kernel.schema.json"]))
RANDOM = settings(deadline=None, database=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])
# The keys naming paths the parser looks for: directories, and files.
DIRECTORIES = {("kernel", "python_package"), ("sources", "include_dirs"), ("test", "sources")}
FILES = {("sources", "cpu"), ("sources", "cuda"), ("sources", "device_check"), ("stable_abi", "cpu"),
         ("stable_abi", "cuda")}


def _examples(table: str, key: str) -> tuple[str, ...]:
    value = KERNEL_FILE.section(table).key(key).value
    text = value.item if isinstance(value, TextList) else value
    assert not isinstance(text, TextList) and hasattr(text, "examples")
    return tuple(text.examples)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project holding every path the declarations give as an example."""
    root = tmp_path_factory.mktemp("kernel")
    for table, key in DIRECTORIES:
        for example in _examples(table, key):
            (root / example).mkdir(parents=True, exist_ok=True)
    for table, key in FILES:
        for example in _examples(table, key):
            (root / example).parent.mkdir(parents=True, exist_ok=True)
            (root / example).write_text("// source\n")
    for package in _examples("kernel", "python_package"):
        # the reference ops (project/op_checks.py), defined for any op name an example lists
        (root / package / "_reference.py").write_text("def __getattr__(name):\n    return lambda *args: None\n")
        for sample in _examples("kernel", "sample_inputs"):
            (root / package / (sample.split(":")[0] + ".py")).write_text("def sample_inputs():\n    return {}\n")
    return root


def verdicts(text: str, root: Path) -> tuple[str | None, str | None]:
    """(the parser's message or None, the schema's errors or None) for kernel.toml ``text``."""
    try:
        parse_kernel(TomlDocument.from_text(text, "kernel.toml"), root)
        parser = None
    except ConfigError as exc:
        parser = str(exc)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in VALIDATOR.iter_errors(tomllib.loads(text))]
    return parser, "; ".join(errors) or None


def assert_same_verdict(doc: dict[str, Any], root: Path, what: str = "") -> bool:
    text = tomli_w.dumps(doc)
    parser, schema = verdicts(text, root)
    assert (parser is None) == (schema is None), (
        f"{what}: the parser says {parser or 'valid'}, the schema says {schema or 'valid'}, of:\n{text}")
    return parser is None


def test_the_document_with_every_key_is_valid_for_both(project: Path) -> None:
    doc = full_document(KERNEL_FILE)
    assert set(doc) == KERNEL_FILE.names()
    assert assert_same_verdict(doc, project, "every key")


def test_every_one_place_damage_is_refused_by_both(project: Path) -> None:
    found = list(mutations(KERNEL_FILE, full_document(KERNEL_FILE)))
    assert len(found) > 50
    for what, damaged in found:
        assert not assert_same_verdict(damaged, project, what), what


@RANDOM
@given(doc=documents(KERNEL_FILE))
def test_generated_documents_are_valid_for_both(project: Path, doc: dict[str, Any]) -> None:
    assert assert_same_verdict(doc, project, "generated")


@RANDOM
@given(doc=documents(KERNEL_FILE), data=st.data())
def test_generated_damage_gets_one_verdict(project: Path, doc: dict[str, Any], data: st.DataObject) -> None:
    what, damaged = data.draw(st.sampled_from(list(mutations(KERNEL_FILE, doc))), label="damage")
    assert_same_verdict(damaged, project, what)


KERNELS = [REPO / "kernels" / "fusedops", *sorted(p.parent for p in (REPO / "tests").rglob("fixtures/**/kernel.toml"))]


@pytest.mark.parametrize("root", KERNELS, ids=lambda p: p.name)
def test_real_kernel_files_validate(root: Path) -> None:
    assert verdicts((root / "kernel.toml").read_text(), root) == (None, None)


def test_a_planted_unknown_key_is_refused_by_both() -> None:
    root = REPO / "kernels" / "fusedops"
    text = (root / "kernel.toml").read_text().replace("[flags]\n", f'[flags]\n{UNKNOWN} = ["-O3"]\n')
    parser, schema = verdicts(text, root)
    assert parser is not None and UNKNOWN in parser
    assert schema is not None and "Additional properties are not allowed" in schema


def test_the_scaffolds_kernel_toml_validates(tmp_path: Path) -> None:
    files = plan_scaffold("mykernels").files
    for relative, text in files.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    assert verdicts(files["kernel.toml"], tmp_path) == (None, None)
