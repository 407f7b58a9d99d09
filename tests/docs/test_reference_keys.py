"""The docs' file references name every key the parsers read: the keys come from the declarations
the parsers check against (plan/toml_model.py), the text from the pages people read."""

from __future__ import annotations

import pytest
from tests.testkit import docs_text, markdown_section
from wheelfactory.plan.matrix_schema import MATRIX_FILE
from wheelfactory.plan.toml_model import Section, Sections
from wheelfactory.project.kernel_toml import KERNEL_FILE


def tables(section: Section) -> dict[str, Section]:
    """Each declared table of a file, by its TOML header (``[build]``, ``[[exclude]]``)."""
    found: dict[str, Section] = {}
    for key in section.keys:
        if isinstance(key.value, Sections):
            found[f"[[{key.name}]]"] = key.value.section
        elif isinstance(key.value, Section):
            found[f"[{key.name}]"] = key.value
    return found


MATRIX_TABLES = tables(MATRIX_FILE)


@pytest.mark.parametrize("header", sorted(MATRIX_TABLES))
def test_every_matrix_toml_key_is_in_its_tables_section(header: str) -> None:
    section = markdown_section(docs_text("reference/matrix.md"), f"## {header}")
    missing = sorted(name for name in MATRIX_TABLES[header].names() if f"`{name}`" not in section)
    assert not missing, f"docs/reference/matrix.md, ## {header}: document {missing}"


def test_every_matrix_toml_table_has_a_section() -> None:
    page = docs_text("reference/matrix.md")
    headings = {line[3:] for line in page.splitlines() if line.startswith("## [")}
    assert set(MATRIX_TABLES) <= headings, sorted(set(MATRIX_TABLES) - headings)
    assert len(MATRIX_TABLES) >= 8  # the declarations were read, not an empty model


def test_every_kernel_toml_key_is_on_its_page() -> None:
    page = docs_text("reference/kernel-toml.md")
    missing = [f"{header} {name}" for header, table in tables(KERNEL_FILE).items()
               for name in table.names() if f"`{header} {name}`" not in page and f"`{name}`" not in page]
    assert not missing, f"docs/reference/kernel-toml.md: document {missing}"


def test_a_key_missing_from_the_page_is_found() -> None:
    """The check reads the section: a key the page does not name is reported."""
    section = markdown_section(docs_text("reference/matrix.md"), "## [build]")
    planted = section.replace("`jobs`", "jobs")
    assert "`jobs`" in section and not all(f"`{n}`" in planted for n in MATRIX_TABLES["[build]"].names())
