"""The benchmarks run with the runtime extras only: wheelfactory (with its dependencies), torch,
ninja and numpy; no pytest, hypothesis or any other test extra.

A benchmark may use the tests' helpers (rt_assemble, fusedops_build), so the check follows its
imports through every module of the checkout it reaches (benchmarks/ and tests/, where the
benchmarks put themselves on sys.path) and reads each one's imports, those inside functions too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from testkit import REPO

BENCHMARKS = sorted((REPO / "benchmarks").glob("*.py"))
# What a benchmark's environment has besides the standard library (wheelfactory's own
# dependencies are reached only through wheelfactory, which is not scanned).
AVAILABLE = {"wheelfactory", "torch", "numpy"}


def _local_modules() -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for folder in (REPO / "benchmarks", REPO / "tests"):
        for path in folder.rglob("*.py"):
            if "fixtures" not in path.relative_to(REPO).parts:
                found.setdefault(path.stem, []).append(path)
    return found


LOCAL = _local_modules()


def imported_names(path: Path) -> set[str]:
    """The top-level names of every module ``path`` imports, wherever the import statement is."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def unavailable_imports(start: Path) -> list[str]:
    """``"a.py -> b.py imports pytest"`` for each import the benchmark's environment lacks."""
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
            elif name not in AVAILABLE and name not in sys.stdlib_module_names and name != "__future__":
                problems.append(f"{chain} imports {name}")
    return problems


def test_the_scan_sees_a_test_helper_that_needs_pytest(tmp_path: Path) -> None:
    bench = tmp_path / "bench.py"
    bench.write_text("import json\n\ndef main():\n    from testkit import run_cli\n")
    assert any(p.endswith("imports pytest") and "testkit.py" in p for p in unavailable_imports(bench))


@pytest.mark.parametrize("benchmark", BENCHMARKS, ids=lambda p: p.name)
def test_a_benchmark_needs_no_test_extras(benchmark: Path) -> None:
    assert unavailable_imports(benchmark) == [], (
        "benchmarks run with wheelfactory, torch, ninja and numpy only: move what they need out of "
        "pytest-importing helpers (tests/repo_paths.py holds REPO and TEST_CACHE)")
