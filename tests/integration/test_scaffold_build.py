"""`wheelfactory new` for real: the scaffold builds with the host engine as written, its wheel
passes the scaffold's own tests (run by the build, and here against the installed wheel) and
loads `prebuilt`.

Slow tier: one C++ build. Its dist/ is kept under WHEELFACTORY_TEST_CACHE, so a rerun with an
unchanged scaffold finds the variant cached (the factory's key is over the project's content).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from tests.testkit import TEST_CACHE, pip_install

pytestmark = pytest.mark.slow

OWN = "torch213-cxx11-cpu-x86_64-linux"  # the variant of this interpreter's torch (2.13 CPU)
CACHE = TEST_CACHE


def run(command: list[str], **kwargs: object) -> None:
    result = subprocess.run(command, check=False, capture_output=True, text=True,  # type: ignore[call-overload]
                            **kwargs)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout[-4000:]}\n{result.stderr[-3000:]}"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the scaffold, its dist/): `wheelfactory new demo`, then its matrix built for OWN on the host."""
    project = tmp_path_factory.mktemp("scaffold") / "demo"
    made = subprocess.run([sys.executable, "-m", "wheelfactory", "new", "demo", "--path", str(project)],
                          capture_output=True, text=True, timeout=120, check=True).stdout
    # the build `new` says to run next, as typed (in the project, as its `cd` says), into the test cache
    typed = shlex.split(made.split("next: ", 1)[1].split(" && ")[-1], comments=True)
    assert typed[:4] == ["wheelfactory", "build", "--engine", "host"], made  # this interpreter's torch is a CPU build
    out = CACHE / "dist-scaffold"
    run([sys.executable, "-m", *typed, "-o", str(out)], cwd=project, timeout=1800)
    return project, out


@pytest.fixture(scope="module")
def site(built: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel installed into a directory of its own (put on PYTHONPATH beside this venv's torch)."""
    _, out = built
    entry = json.loads((out / "manifest.json").read_text())["variants"][OWN]
    target = tmp_path_factory.mktemp("site")
    pip_install(sys.executable, "-q", "--no-deps", "--target", str(target), str(out / entry["wheel"]), timeout=300)
    return target


def in_site(site: Path, command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site), "DEMO_CACHE_DIR": str(site.parent / "cache")}
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=600, env=env, cwd=cwd)


def test_manifest_says_the_tests_ran_and_passed(built: tuple[Path, Path]) -> None:
    _, out = built
    entry = json.loads((out / "manifest.json").read_text())["variants"][OWN]
    assert entry["status"] in ("built", "cached"), entry.get("error")
    tests = entry["tests"]
    assert set(tests) >= {"command", "passed", "seconds", "excerpt"}
    assert tests["passed"] is True and tests["excerpt"] is None
    assert tests["command"] == "python -m pytest -q -p no:cacheprovider {project}/tests"
    log = (out / entry["log"]).read_text()
    samples = re.search(r"(\d+) sample input\(s\) matched", log)  # verification ran the sample inputs
    assert samples and int(samples.group(1)) == 5, log[-3000:]
    assert re.search(r"^\d+ passed, \d+ skipped", log, re.MULTILINE), log[-3000:]  # CUDA cases skip here


def test_the_scaffold_tests_pass_against_the_installed_wheel(built: tuple[Path, Path], site: Path) -> None:
    project, _ = built
    result = in_site(site, [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(project / "tests")],
                     cwd=project)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert re.search(r"\b7 passed, 5 skipped\b", result.stdout), result.stdout[-2000:]


def test_the_wheel_loads_prebuilt(built: tuple[Path, Path], site: Path) -> None:
    code = "import json, demo; print(json.dumps(demo.backend_info(), default=str))"
    result = in_site(site, [sys.executable, "-c", code], cwd=site.parent)
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout.splitlines()[-1])
    assert info["mode"] == "prebuilt" and info["variant"] == OWN, info
    assert str(info["library"]).startswith(str(site / "demo"))


def test_a_cpp_error_is_shown_on_the_authors_file_once(tmp_path: Path) -> None:
    """A planted error in the scaffold's CPU source: the build's output names csrc/... as the
    author wrote it, once per diagnostic, with no staged (.work) path, no traceback and no tip of
    another tool; the manifest's error says the same (issue 37)."""
    project = tmp_path / "demo"
    run([sys.executable, "-m", "wheelfactory", "new", "demo", "--path", str(project)], timeout=120)
    source = project / "csrc" / "cpu" / "scaled_add.cpp"
    text = source.read_text()
    source.write_text(text.replace("  const at::Tensor b = other.contiguous();",
                                   "  const at::Tensor b = other.contiguous()\n  undeclared_name += 1;", 1))
    line = source.read_text().splitlines().index("  undeclared_name += 1;") + 1
    done = subprocess.run([sys.executable, "-m", "wheelfactory", "build", "--engine", "host", "--only", OWN,
                           "-o", str(tmp_path / "dist")], cwd=project, capture_output=True, text=True, timeout=1800)
    said = done.stdout + done.stderr
    assert done.returncode == 1, said[-3000:]
    assert "the compiler failed in csrc/cpu/scaled_add.cpp" in said and f"csrc/cpu/scaled_add.cpp:{line}:" in said
    assert ".work" not in said and "Traceback" not in said and "--env-dir" not in said, said[-3000:]
    entry = json.loads((tmp_path / "dist" / "manifest.json").read_text())["variants"][OWN]
    assert entry["error"].count(f"csrc/cpu/scaled_add.cpp:{line}:") == 1 and ".work" not in entry["error"].split(
        "(the whole output")[0]
