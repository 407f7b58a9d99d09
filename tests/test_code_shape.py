"""The code's shape, measured as the review measured it (issue 40): the package and the runtime
formatted to the anchors' width (ruff format, 100 columns, as cibuildwheel and build are), no
module over 500 lines, at most 3 % of the code lines over 100 characters, an engine a protocol of
four members whose build returns its result; and the tests one package whose modules import their
helpers by package name, the Docker tier by its marker."""

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


def _code_lines(source: str) -> list[str]:
    """The lines of code: neither blank, nor a comment, nor part of a docstring (the review's
    measure, issue 40)."""
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                node.body and isinstance(node.body[0], ast.Expr) and \
                isinstance(node.body[0].value, ast.Constant) and isinstance(node.body[0].value.value, str):
            docstrings.update(range(node.body[0].lineno, (node.body[0].end_lineno or 0) + 1))
    return [line for number, line in enumerate(source.splitlines(), 1)
            if line.strip() and not line.strip().startswith("#") and number not in docstrings]


def _package_modules() -> list[Path]:
    """The package's and the runtime's modules (not the templates `new` fills in: package data)."""
    return [p for root in SOURCES for p in sorted((REPO / root).rglob("*.py"))
            if "templates" not in p.relative_to(REPO).parts and "__pycache__" not in p.parts]


def test_no_module_of_the_package_or_the_runtime_is_over_500_lines() -> None:
    long = {str(p.relative_to(REPO)): n for p in _package_modules()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500}
    assert long == {}


def test_at_most_3_percent_of_the_code_lines_are_over_100_characters() -> None:
    lines = [line for p in _package_modules() for line in _code_lines(p.read_text(encoding="utf-8"))]
    over = sum(len(line) > 100 for line in lines)
    assert over <= 0.03 * len(lines), f"{over} of {len(lines)} code lines over 100 characters"


def test_the_code_line_measure_leaves_out_docstrings_comments_and_blanks() -> None:
    source = '"""Module.\n\nMore."""\n\n# a comment\ndef f():\n    """Doc."""\n    return 1  # kept\n'
    assert _code_lines(source) == ["def f():", "    return 1  # kept"]


def test_an_engine_is_four_members_and_its_build_returns_one_result() -> None:
    """What a build made comes back as its result (issue 40, item 1): no side channel to ask."""
    import typing

    from wheelfactory.engines import BuildResult, Engine

    members = {name for name in vars(Engine) if not name.startswith("_")}
    assert len(members) <= 4, members
    assert typing.get_type_hints(Engine.build)["return"] is BuildResult
