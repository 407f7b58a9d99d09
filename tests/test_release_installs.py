"""Every pip or uv the tests run to install or resolve packages goes through the test kit
(``testkit.pip_install``, ``testkit.uv_pip``), which gives it the product's treatment of wheel sets:
the host's indexes, certificates and timeouts, never the host's constraint or requirement files
(or, for a test of our own index alone, none of the host's sources at all).

Why: our machines' pip configuration caps torch (``torch<=2.14.1``). A test venv that read it
could not hold torch 2.15 (ResolutionImpossible), and a cap at the very release a test pins would
make that test unable to fail. A green run on a machine without the cap hid this once."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.testkit import REPO, make_wheel, pip_install, uv_pip

TESTS = REPO / "tests"
# the kit itself, and this module, whose contrast runs pip with the host's cap on purpose
EXEMPT = frozenset({TESTS / "testkit.py", Path(__file__)})
RESOLVING = frozenset({"install", "download", "compile", "wheel", "sync"})


def _words(node: ast.AST) -> list[str]:
    """The string constants of one element of a command list, in order (``str(venv / "bin" / "pip")``
    gives ``["bin", "pip"]``)."""
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _in_a_container(call: ast.Call) -> bool:
    """``box.run([...])``, ``container.exec_run([...])``: a method of anything but ``subprocess``,
    taking a command to run elsewhere, where the host's pip configuration does not apply."""
    func = call.func
    return isinstance(func, ast.Attribute) and not (isinstance(func.value, ast.Name) and func.value.id == "subprocess")


def _pip_subcommand(command: ast.List | ast.Tuple) -> str | None:
    """The subcommand of a ``pip`` (or ``uv pip``) command list: the first word after ``pip`` that
    is not an option (``pip --isolated install`` -> ``install``)."""
    after_pip = False
    for element in command.elts:
        words = _words(element)
        if after_pip:
            plain = [word for word in words if not word.startswith("-")]
            if plain:
                return plain[0]
        after_pip = after_pip or any(word == "pip" or word.endswith("/pip") for word in words)
    return None


def spelled_out_installs(source: str) -> Iterator[int]:
    """Line numbers of pip or uv commands that install or resolve packages, written out as a
    command list to run here (a call's argument or a variable's value) instead of through the kit."""
    tree = ast.parse(source)
    elsewhere = {id(arg) for node in ast.walk(tree) if isinstance(node, ast.Call) and _in_a_container(node)
                 for arg in node.args}
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple)) and id(node) not in elsewhere and \
                _pip_subcommand(node) in RESOLVING:
            yield node.lineno


def test_no_test_module_runs_pip_or_uv_to_install_outside_the_kit() -> None:
    found = [f"{path.relative_to(REPO)}:{line}"
             for path in sorted(TESTS.rglob("*.py")) if path not in EXEMPT and "fixtures" not in path.parts
             for line in spelled_out_installs(path.read_text())]
    assert not found, ("these run pip or uv to install or resolve packages with the host's own configuration "
                       f"(its constraints too); use testkit.pip_install or testkit.uv_pip: {found}")


@pytest.mark.parametrize("source", [
    'subprocess.run([sys.executable, "-m", "pip", "install", "torch==2.15.0"])',
    'subprocess.check_output([str(venv / "bin" / "pip"), "install", "-q", "torch"])',
    'run([python, "-m", "pip", "download", "--dest", d, "torch"])',
    'subprocess.run([find_uv_bin(), "pip", "compile", "-", "--python", python], input="torch")',
    'subprocess.Popen((UV, "pip", "install", "--no-config", "torch"))',
    'command = [sys.executable, "-m", "pip", "--isolated", "install", "--target", t, "tiny"]',
])
def test_the_rule_sees_each_way_a_test_spells_out_an_install(source: str) -> None:
    assert list(spelled_out_installs(source)) == [1]


@pytest.mark.parametrize("source", [
    'box.run([python, "-m", "pip", "install", "--no-index", "/dist/x.whl"])',  # inside a container
    'container.exec_run(["pip", "install", "torch"])',
    'subprocess.run([sys.executable, "-m", "pip", "config", "list"])',
    'subprocess.run([sys.executable, "-m", "pip", "show", "install"])',
    'pip_install(python, "torch==2.15.0")',
])
def test_the_rule_leaves_what_is_not_a_host_install_alone(source: str) -> None:
    assert not list(spelled_out_installs(source))


@pytest.fixture
def torch_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A pip configuration like our machines': a constraints file capping torch at 2.14.1, and
    find-links to a folder holding torch 2.13.0 and 2.15.0 (small stand-ins)."""
    from wheelfactory.engines.pip_config import download_environment

    wheels = tmp_path / "wheels"
    for version in ("2.13.0", "2.15.0"):
        make_wheel(wheels, "torch", version)
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("torch<=2.14.1\n")
    config = tmp_path / "pip.conf"
    config.write_text(f"[global]\nconstraint = {constraints}\nfind-links = {wheels}\nno-index = true\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    for name in [name for name in os.environ if name.startswith("PIP_") and name != "PIP_CONFIG_FILE"]:
        monkeypatch.delenv(name)  # this process's own settings would win over the file's
    download_environment.cache_clear()
    yield wheels
    download_environment.cache_clear()


def resolved(report: Path) -> dict[str, str]:
    return {item["metadata"]["name"]: item["metadata"]["version"] for item in json.loads(report.read_text())["install"]}


def test_the_kits_pip_takes_the_hosts_sources_and_not_its_torch_cap(torch_cap: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    asked = ("--dry-run", "--ignore-installed", "--quiet", "--report", str(report), "torch==2.15.0")
    capped = subprocess.run([sys.executable, "-m", "pip", "install", *asked], capture_output=True, text=True,
                            timeout=300, check=False)
    assert capped.returncode != 0 and "torch" in capped.stderr, "the host's cap did not apply: the test proves nothing"
    pip_install(sys.executable, *asked, timeout=300)  # the find-links of the host's file, its cap left out
    assert resolved(report) == {"torch": "2.15.0"}


def test_the_kits_uv_takes_the_hosts_sources_and_not_its_torch_cap(torch_cap: Path, tmp_path: Path) -> None:
    done = uv_pip("compile", "-", "--no-header", "--python", sys.executable, input="torch\n",
                  cache=tmp_path / "uv-cache", timeout=300)
    assert "torch==2.15.0" in done.stdout.split(), done.stdout
