"""The benchmarks run with the runtime extras only: wheelfactory (with its dependencies), torch,
ninja and numpy; no pytest, hypothesis or any other test extra.

A benchmark may use the tests' helpers (rt_assemble, fusedops_build), so the check follows its
imports through every module of the checkout it reaches (benchmarks/ and tests/, where the
benchmarks put themselves on sys.path) and reads each one's imports, those inside functions too.

A benchmark that needs more (benchmarks/publish.py: twine, boto3, the index servers) declares it:
a module-level ``REQUIRES = ("boto3", ...)`` of import names, each named in its docstring too;
those names it may import, and run without one of them it says so in one line and exits 2.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from tests.testkit import REPO

BENCHMARKS = sorted((REPO / "benchmarks").glob("*.py"))
# What a benchmark's environment has besides the standard library (wheelfactory's own
# dependencies are reached only through wheelfactory, which is not scanned).
AVAILABLE = {"wheelfactory", "torch", "numpy"}


def _local_modules() -> dict[str, list[Path]]:
    """Import name -> file, for every module of the checkout a benchmark may reach: benchmarks/
    by bare name (they sit beside each other), the tests package by its dotted name."""
    found: dict[str, list[Path]] = {path.stem: [path] for path in (REPO / "benchmarks").glob("*.py")}
    for path in (REPO / "tests").rglob("*.py"):
        if "fixtures" not in path.relative_to(REPO).parts:
            parts = path.relative_to(REPO).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = [path]
    return found


LOCAL = _local_modules()


def imported_names(path: Path) -> set[str]:
    """The modules ``path`` imports, wherever the import statement is: the top-level name of each,
    and the whole dotted name (and each ``from X import name`` as X.name) of the checkout's own."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            dotted = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            dotted = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        for name in dotted:
            names.add(name if name in LOCAL else name.split(".")[0])
    return {name for name in names if name in LOCAL or "." not in name}


def declared_requirements(path: Path) -> tuple[str, ...]:
    """The import names of ``path``'s module-level ``REQUIRES`` tuple (none without one)."""
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "REQUIRES" for t in node.targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, tuple) and all(isinstance(v, str) for v in value), f"{path}: REQUIRES {value!r}"
            return value
    return ()


def unavailable_imports(start: Path) -> list[str]:
    """``"a.py -> b.py imports pytest"`` for each import the benchmark's environment lacks (what
    it declares in REQUIRES aside)."""
    available = AVAILABLE | set(declared_requirements(start))
    problems: list[str] = []
    seen: set[Path] = set()
    todo: list[tuple[Path, str]] = [(start, start.name)]
    while todo:
        path, chain = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in sorted(imported_names(path)):
            if name in LOCAL:
                todo.extend((local, f"{chain} -> {local.relative_to(REPO)}") for local in LOCAL[name])
            elif name not in available and name not in sys.stdlib_module_names and name != "__future__":
                problems.append(f"{chain} imports {name}")
    return problems


def test_the_scan_sees_a_test_helper_that_needs_pytest(tmp_path: Path) -> None:
    bench = tmp_path / "bench.py"
    bench.write_text("import json\n\ndef main():\n    from tests.testkit import run_cli\n")
    assert any(p.endswith("imports pytest") and "testkit.py" in p for p in unavailable_imports(bench))


def test_a_declared_requirement_may_be_imported_and_nothing_else(tmp_path: Path) -> None:
    bench = tmp_path / "bench.py"
    bench.write_text('"""Needs boto3."""\nREQUIRES = ("boto3",)\n\ndef main():\n    import boto3, twine\n')
    assert unavailable_imports(bench) == ["bench.py imports twine"]


DECLARING = [path for path in BENCHMARKS if declared_requirements(path)]


@pytest.mark.parametrize("benchmark", DECLARING, ids=lambda p: p.name)
def test_a_benchmarks_requirements_are_named_in_its_docstring(benchmark: Path) -> None:
    docstring = ast.get_docstring(ast.parse(benchmark.read_text())) or ""
    unnamed = [name for name in declared_requirements(benchmark)
               if name not in docstring and name.replace("_", "-") not in docstring]
    assert unnamed == [], f"{benchmark.name}'s docstring does not say it needs {unnamed}"


@pytest.mark.parametrize("benchmark", DECLARING, ids=lambda p: p.name)
def test_a_benchmark_without_a_requirement_says_which_and_exits_2(benchmark: Path) -> None:
    """Run with each declared module hidden (None in sys.modules: find_spec and import both fail)."""
    for name in declared_requirements(benchmark):
        hide = (f"import runpy, sys; sys.modules[{name!r}] = None; sys.argv = [{str(benchmark)!r}]; "
                f"runpy.run_path({str(benchmark)!r}, run_name='__main__')")
        done = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 2, (name, done.stdout, done.stderr)
        assert len(done.stderr.splitlines()) == 1 and name in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("benchmark", BENCHMARKS, ids=lambda p: p.name)
def test_a_benchmark_needs_no_test_extras(benchmark: Path) -> None:
    assert unavailable_imports(benchmark) == [], (
        "benchmarks run with wheelfactory, torch, ninja and numpy only (and what their REQUIRES names): move "
        "what they need out of pytest-importing helpers (tests/repo_paths.py holds REPO and TEST_CACHE, "
        "tests/fake_wheels.py make_wheel)")
