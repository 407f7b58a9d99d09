"""project/vcs_version.py: the version a git checkout gives, computed by the project's own tool on
the host, and handed to the build of the copy (which has no .git) the tool's documented way."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from wheelfactory.errors import ConfigError
from wheelfactory.project.build_system import read_build_system
from wheelfactory.project.vcs_version import VcsVersion, VersionProbe, plan_version_probe, vcs_version

SCM = """[build-system]
requires = ["setuptools>=64", "setuptools_scm>=8"]
build-backend = "setuptools.build_meta"

[tool.setuptools_scm]
version_file = "pkg/_version.py"
local_scheme = "node-and-date"
tag_regex = "^v(?P<version>.+)$"
"""


def root_with(tmp_path: Path, pyproject: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(pyproject)
    return tmp_path


def test_setuptools_scm_settings_pass_through_but_nothing_is_written(tmp_path: Path) -> None:
    root = root_with(tmp_path, SCM)
    probe = plan_version_probe(root, read_build_system(root))
    assert probe is not None and probe.tool == "setuptools-scm" and probe.requirement == "setuptools_scm>=8"
    options = json.loads(probe.args[0])
    assert options == {"root": ".", "relative_to": str(root / "pyproject.toml"), "local_scheme": "node-and-date",
                       "tag_regex": "^v(?P<version>.+)$"}  # no version_file: the build in the copy writes it


def test_hatch_vcs_reads_its_raw_options_and_its_own_two_keys(tmp_path: Path) -> None:
    root = root_with(tmp_path, """[build-system]
requires = ["hatchling", "hatch-vcs"]
build-backend = "hatchling.build"
[tool.hatch.version]
source = "vcs"
fallback-version = "0.0.1"
raw-options = { local_scheme = "no-local-version", root = ".." }
""")
    probe = plan_version_probe(root, read_build_system(root))
    assert probe is not None and probe.requirement == "hatch-vcs"
    assert json.loads(probe.args[0]) == {"root": "..", "relative_to": str(root / "pyproject.toml"),
                                         "local_scheme": "no-local-version", "fallback_version": "0.0.1"}


def test_versioningit_is_told_by_the_pkg_info_an_sdist_would_carry(tmp_path: Path) -> None:
    root = root_with(tmp_path, '[build-system]\nrequires = ["setuptools", "versioningit~=3.0"]\n')
    probe = plan_version_probe(root, read_build_system(root))
    assert probe is not None and probe.args == (str(root),) and "versioningit.get_version" in probe.program
    found = VcsVersion("versioningit", "1.4.0.post3+g1234567")
    assert found.build_env() == {}
    assert "Version: 1.4.0.post3+g1234567\n" in found.staged_files("mylib")["PKG-INFO"]


def test_setuptools_scm_is_told_by_its_pretend_variable() -> None:
    found = VcsVersion("setuptools-scm", "0.9.3.dev12+g9e9fa53")
    assert found.build_env() == {"SETUPTOOLS_SCM_PRETEND_VERSION": "0.9.3.dev12+g9e9fa53"}
    assert found.staged_files("x") == {}


def test_dunamai_tools_are_refused_naming_their_bypass_variable(tmp_path: Path) -> None:
    root = root_with(tmp_path, '[build-system]\nrequires = ["poetry-core", "poetry-dynamic-versioning"]\n')
    with pytest.raises(ConfigError) as info:
        plan_version_probe(root, read_build_system(root))
    assert "\n" not in str(info.value) and "POETRY_DYNAMIC_VERSIONING_BYPASS" in str(info.value)


def test_a_project_without_a_version_tool_needs_no_probe(tmp_path: Path) -> None:
    root = root_with(tmp_path, '[build-system]\nrequires = ["setuptools"]\n')
    assert vcs_version(root, read_build_system(root), lambda _: pytest.fail("no probe expected")) is None


def test_what_the_tool_prints_must_be_a_version(tmp_path: Path) -> None:
    root = root_with(tmp_path, SCM)
    found = vcs_version(root, read_build_system(root), lambda _: "some warning\n1.2.3.dev4+gabcdef0\n")
    assert found == VcsVersion("setuptools-scm", "1.2.3.dev4+gabcdef0")
    with pytest.raises(ConfigError, match="not a PEP 440 version"):
        vcs_version(root, read_build_system(root), lambda _: "oops\n")


@pytest.mark.skipif(shutil.which("git") is None, reason="git is needed to make a history")
def test_the_real_setuptools_scm_on_a_real_history(tmp_path: Path) -> None:
    """The probe's program, run by the real setuptools-scm (this interpreter's, installed with the
    test dependencies) on a repository two commits past v0.3.1: what `git describe` implies."""
    pytest.importorskip("setuptools_scm")
    root = root_with(tmp_path, SCM.replace('tag_regex = "^v(?P<version>.+)$"\n', ""))
    git = ["git", "-C", str(root), "-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    for message in ("first", "second", "third"):
        (root / "notes.txt").write_text(message)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", message], check=True)
        if message == "first":
            subprocess.run([*git, "tag", "v0.3.1"], check=True)
    short = subprocess.run([*git, "rev-parse", "--short=7", "HEAD"], check=True, capture_output=True,
                           text=True).stdout.strip()

    def run(probe: VersionProbe) -> str:
        return subprocess.run([sys.executable, "-c", probe.program, *probe.args], check=True, capture_output=True,
                              text=True).stdout

    found = vcs_version(root, read_build_system(root), run)
    assert found is not None and found.version.startswith(f"0.3.2.dev2+g{short}")
    assert not (root / "pkg" / "_version.py").exists()  # the probe writes nothing into the checkout
