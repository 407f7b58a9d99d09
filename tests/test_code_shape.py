"""The code's shape, measured as the review measured it (issue 40): the package and the runtime are
formatted to the anchors' width (ruff format, 100 columns, as cibuildwheel and build are)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.testkit import REPO

RUFF = Path(sys.executable).parent / "ruff"
SOURCES = ("factory/wheelfactory", "runtime")


def test_the_package_and_the_runtime_are_formatted_to_100_columns() -> None:
    result = subprocess.run([str(RUFF), "format", "--check", "--config", str(REPO / "pyproject.toml"),
                             *SOURCES], cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_the_format_check_fails_on_a_line_past_the_width(tmp_path: Path) -> None:
    """A check that cannot fail checks nothing: a planted 120-column call is reported."""
    planted = tmp_path / "planted.py"
    planted.write_text("call_with_a_long_name(" + ", ".join(f"argument_{n}" for n in range(12)) + ")\n")
    result = subprocess.run([str(RUFF), "format", "--check", "--config", str(REPO / "pyproject.toml"),
                             str(planted)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 1 and "planted.py" in result.stdout, result.stdout + result.stderr


def _test_modules() -> list[Path]:
    return [p for p in sorted((REPO / "tests").rglob("*.py"))
            if "fixtures" not in p.relative_to(REPO).parts and "__pycache__" not in p.parts]


def _layout_problems(path: Path, source: str, helpers: set[str]) -> list[str]:
    """A test module that reaches its helpers around the package: a ``sys.path`` insert or append
    (in code, not in the text of a script it runs), or a bare import of a tests/ helper module."""
    problems: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("insert", "append") and ast.unparse(node.func.value) == "sys.path":
            problems.append((node.lineno, f"sys.path.{node.func.attr}"))
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
        problems += [(node.lineno, f"import {name}") for name in names
                     if name.split(".")[0] in helpers]
    return [f"{path}:{line}: {what}" for line, what in sorted(problems)]


def test_the_tests_are_one_package_and_import_their_helpers_by_package_name() -> None:
    modules = _test_modules()
    helpers = {p.stem for p in modules if p.name not in ("__init__.py", "conftest.py")}
    folders = {p.parent for p in modules}
    assert [f for f in folders if not (f / "__init__.py").is_file()] == []
    problems = [problem for p in modules for problem in _layout_problems(
        p.relative_to(REPO), p.read_text(encoding="utf-8"), helpers)]
    assert problems == []


def test_the_layout_check_finds_a_path_insert_and_a_bare_helper_import() -> None:
    planted = "import sys\nsys.path.insert(0, 'x')\nfrom testkit import REPO\nimport dist_fakes\n" \
              "SCRIPT = 'sys.path.insert(0, here)'  # a script's text is not an insert\n"
    assert _layout_problems(Path("t.py"), planted, {"testkit", "dist_fakes"}) == [
        "t.py:2: sys.path.insert", "t.py:3: import testkit", "t.py:4: import dist_fakes"]


def test_every_module_under_tests_docker_is_in_the_docker_tier() -> None:
    """The tier is the marker (tests/lanes.py): a module of tests/docker/ without it would run in
    the fast tier without an engine."""
    unmarked = [p.name for p in (REPO / "tests" / "docker").glob("test_*.py")
                if "pytest.mark.docker" not in p.read_text(encoding="utf-8")]
    assert unmarked == []
