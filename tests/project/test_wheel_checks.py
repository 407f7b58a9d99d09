"""Copying a project's test sources for the test container: only what [test] sources lists, the
project's own package hidden (the tests must import the installed wheel), nothing from outside."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from wheelfactory.errors import ConfigError
from wheelfactory.plan.project_tests import ProjectTests
from wheelfactory.project.wheel_checks import WheelChecks, copy_test_sources
from wheelfactory.verify.project_suite import failure_excerpt


def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    for rel, text in {"mypkg/__init__.py": "", "mypkg/core.py": "", "tests/test_a.py": "import mypkg\n",
                      "tests/mypkg/__init__.py": "", "tests/data/mypkg.py": "", "conftest.py": "",
                      "setup.py": ""}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_only_the_sources_are_copied_and_the_package_is_hidden(tmp_path: Path) -> None:
    root = project(tmp_path)
    tests = ProjectTests("pytest {project}/tests", sources=("tests", "conftest.py", "mypkg"))
    dest = tmp_path / "copy"
    hidden = copy_test_sources(WheelChecks(root, "mypkg"), tests, dest)
    assert hidden == ["mypkg", "tests/data/mypkg.py", "tests/mypkg"]
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()) == ["conftest.py", "tests/test_a.py"]


def test_a_missing_source_or_a_link_out_of_the_project_is_refused(tmp_path: Path) -> None:
    root = project(tmp_path)
    checks = WheelChecks(root, "mypkg")
    with pytest.raises(ConfigError, match=r"test\.sources: 'nope' does not exist under"):
        copy_test_sources(checks, ProjectTests("x", sources=("nope",)), tmp_path / "c1")
    (tmp_path / "secret").write_text("key")
    os.symlink(tmp_path / "secret", root / "tests" / "leak")
    with pytest.raises(ConfigError, match=r"tests/leak is a symlink that leads outside the project .* \(to .*secret\)"):
        copy_test_sources(checks, ProjectTests("x", sources=("tests",)), tmp_path / "c2")
    os.symlink(tmp_path, root / "outside")
    with pytest.raises(ConfigError, match="'outside' leads outside the project"):
        copy_test_sources(checks, ProjectTests("x", sources=("outside",)), tmp_path / "c3")


def test_changing_a_test_source_changes_the_key(tmp_path: Path) -> None:
    root = project(tmp_path)
    checks = WheelChecks(root, "mypkg", tests=ProjectTests("pytest", sources=("tests",)))
    before = checks.key_material()
    (root / "tests" / "test_a.py").write_text("import mypkg\nassert True\n")
    assert checks.key_material() != before and WheelChecks(root, "mypkg").key_material() is None


def test_the_excerpt_is_pytests_summary_when_there_is_one() -> None:
    output = "collected 3 items\n..F\n=== FAILURES ===\nlong traceback\n" \
             "=========================== short test summary info ============================\n" \
             "FAILED tests/test_a.py::test_x - AssertionError: boom\n=== 1 failed, 2 passed in 0.1s ===\n"
    assert failure_excerpt(output).splitlines() == ["FAILED tests/test_a.py::test_x - AssertionError: boom",
                                                    "=== 1 failed, 2 passed in 0.1s ==="]
    assert failure_excerpt("\n".join(str(n) for n in range(100))).splitlines()[0] == "70"
