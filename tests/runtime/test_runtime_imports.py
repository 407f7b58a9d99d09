"""One import name for the runtime in the tests, and a package ``__init__`` below its modules.

The factory imports the runtime as ``wheelfactory._runtime`` (its link to runtime/); a test that
imported it as ``runtime`` too would hold two module objects of each file, whose classes differ
(an ``except RecordError`` of one misses the other's). The layers contract (pyproject.toml) sees
the modules but not their package: the ``__init__``, which they read the build record's schema
from, must import none of them (its names resolve lazily, through importlib).
"""

from __future__ import annotations

import ast

from tests.testkit import REPO

TESTS = REPO / "tests"


def _imported(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def test_the_tests_import_the_runtime_as_the_factory_does() -> None:
    paths = [p for p in sorted(TESTS.rglob("*.py")) if "fixtures" not in p.relative_to(TESTS).parts]
    assert len(paths) > 100
    found = [
        f"{path.relative_to(REPO)}:{line}: {name}"
        for path in paths
        for line, name in _imported(ast.parse(path.read_text(encoding="utf-8")))
        if name == "runtime" or name.startswith("runtime.")
    ]
    assert not found, "import it as wheelfactory._runtime:\n" + "\n".join(found)


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"


def test_the_runtime_package_imports_none_of_its_modules() -> None:
    tree = ast.parse((REPO / "runtime" / "__init__.py").read_text(encoding="utf-8"))
    skipped = {id(n) for block in ast.walk(tree) if _type_checking(block) for n in ast.walk(block)}
    relative = [
        f"line {node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level > 0 and id(node) not in skipped
    ]
    assert not relative, relative
    assert {name for _, name in _imported(tree)} <= {"__future__", "importlib", "typing"}


def test_no_runtime_module_imports_the_checkout_s_name() -> None:
    """Relative imports only: the same files are ``runtime``, ``wheelfactory._runtime`` and every
    kernel package's ``<pkg>._runtime``."""
    found = [
        f"{path.name}:{line}: {name}"
        for path in sorted((REPO / "runtime").glob("*.py"))
        for line, name in _imported(ast.parse(path.read_text(encoding="utf-8")))
        if name.split(".")[0] in ("runtime", "wheelfactory")
    ]
    assert not found, found

