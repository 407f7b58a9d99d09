"""What has one home in the code: every subprocess of the factory runs through support/proc.py
(the runtime, vendored into kernel packages, keeps its own), and the build record's file name is
written once, at the runtime's BUILD_RECORD_FILE."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator
from pathlib import Path

from tests.testkit import REPO

PACKAGE = REPO / "factory" / "wheelfactory"
PROC = PACKAGE / "support" / "proc.py"
RECORD_PATH = re.compile(r"(^|/)_build\.json$")
SUBPROCESS = re.compile(r"\bsubprocess\.|^\s*import subprocess\b|^\s*from subprocess import\b")


def python_files(root: Path) -> Iterator[Path]:
    """The modules under ``root``: the .py files of its packages, not through links (_runtime and
    _docker link other folders in), nor in folders that are no package (the templates of
    `wheelfactory new`, package data whose .py files have placeholders)."""
    for folder, folders, files in os.walk(root, followlinks=False):
        folders[:] = [name for name in folders if (Path(folder) / name / "__init__.py").is_file()]
        yield from sorted(Path(folder) / name for name in files if name.endswith(".py"))


def test_every_subprocess_of_the_factory_goes_through_support_proc() -> None:
    found = [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
             for path in python_files(PACKAGE) if path != PROC
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if SUBPROCESS.search(line)]
    assert not found, "run these through wheelfactory.support.proc:\n" + "\n".join(found)


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def test_the_build_record_file_name_is_written_once() -> None:
    """As a path in code (a string literal or f-string part that is or ends with it), not in prose:
    docstrings and the scaffold's templates may name it."""
    found = []
    for path in [*python_files(PACKAGE), *python_files(REPO / "runtime")]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        prose = _docstrings(tree)
        found += [f"{path.relative_to(REPO)}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and RECORD_PATH.search(node.value)
                  and id(node) not in prose]
    assert found == ["runtime/__init__.py:22"], "use the runtime's BUILD_RECORD_FILE (or record_member):\n" + \
        "\n".join(found)
