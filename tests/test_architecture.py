"""The shape of the code, checked: import contracts (import-linter), mypy --strict, and the import
name (`wheelfactory`, never `factory`, the import name of factory_boy)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.testkit import REPO

BIN = Path(sys.executable).parent


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "lint-imports"), "--config", str(REPO / "pyproject.toml"), "--no-cache"],
                          cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


def test_import_contracts_hold() -> None:
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " 0 broken" in result.stdout and "KEPT" in result.stdout


def test_the_contracts_catch_a_planted_violation(tmp_path: Path) -> None:
    """The same contracts over a copy where planning imports the Docker engine, the runtime
    imports the factory, an engine imports rich and a runtime module imports one above it (under
    both of the runtime's names: runtime/ and the copy of wheelfactory/_runtime): all five break
    (a contract that cannot break checks nothing)."""
    shutil.copytree(REPO / "factory" / "wheelfactory", tmp_path / "wheelfactory", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "runtime", tmp_path / "runtime", ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / "wheelfactory" / "plan" / "expand.py", "a") as planted:
        planted.write("\nimport wheelfactory.engines.docker  # planted\n")
    with open(tmp_path / "runtime" / "_env.py", "a") as planted:
        planted.write("\nfrom wheelfactory import errors  # planted\n")
    with open(tmp_path / "wheelfactory" / "engines" / "host.py", "a") as planted:
        planted.write("\nfrom rich.console import Console  # planted\n")
    for runtime in (tmp_path / "runtime", tmp_path / "wheelfactory" / "_runtime"):
        with open(runtime / "_decision.py", "a") as planted:  # a leaf importing the record, above it
            planted.write("\nfrom ._record import BuildRecord  # planted\n")
    result = lint_imports(tmp_path)  # the copy comes first on sys.path (the working directory)
    assert result.returncode != 0
    assert result.stdout.count("BROKEN") >= 5, result.stdout[-4000:]
    assert "wheelfactory.plan.expand -> wheelfactory.engines.docker" in result.stdout
    assert "runtime._decision -> runtime._record" in result.stdout
    assert "wheelfactory._runtime._decision -> wheelfactory._runtime._record" in result.stdout


@pytest.mark.slow
def test_mypy_strict_is_clean(tmp_path: Path) -> None:
    """mypy --strict over the package as it installs: factory/wheelfactory/, its source folder, holds
    the runtime as wheelfactory/_runtime (a link to the top-level runtime/, as an installed wheel has it)."""
    root = REPO / "factory" / "wheelfactory"
    assert (root / "_runtime" / "__init__.py").is_file()
    env = {**os.environ, "MYPYPATH": str(root.parent)}
    result = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--config-file", str(REPO / "pyproject.toml"),
                             "--cache-dir", str(tmp_path / "cache"), "-p", "wheelfactory"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-6000:]
    assert "Success: no issues found" in result.stdout


def test_the_import_name_is_wheelfactory_and_never_factory(tmp_path: Path) -> None:
    """Outside the checkout, the installed package answers to `wheelfactory` alone: `import factory`
    fails (a project with factory_boy keeps its `factory`), `python -m wheelfactory` works."""
    code = ("import importlib.util, wheelfactory; "
            "print(importlib.util.find_spec('factory') is None); print(wheelfactory.__name__)")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "wheelfactory"]
    plan = subprocess.run([sys.executable, "-m", "wheelfactory", "plan", "-m", str(REPO / "matrix.toml"),
                           "--format", "json"], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert plan.returncode == 0, plan.stderr
    assert '"variants"' in plan.stdout


def test_the_factory_and_runtime_know_nothing_of_the_sample_kernels() -> None:
    """The sample (kernels/fusedops) is one user among many: its name and op names, read from its
    kernel.toml, appear nowhere in factory/ or runtime/ (code, comments or data)."""
    from wheelfactory.project.kernel_toml import load_kernel

    sample = load_kernel(REPO / "kernels" / "fusedops")
    facts = {sample.name, *sample.ops, sample.namespace_macro}
    found = [f"{path.relative_to(REPO)}: {fact}"
             for folder in ("factory", "runtime") for path in sorted((REPO / folder).rglob("*"))
             if path.is_file() and not any(part.endswith(".egg-info") for part in path.parts)
             and path.suffix in (".py", ".toml", ".json", ".md", ".Dockerfile", ".sh", ".txt")
             for fact in facts if fact in path.read_text(encoding="utf-8", errors="replace")]
    assert not found, found
