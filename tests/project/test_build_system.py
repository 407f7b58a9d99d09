"""project/build_system.py: a bring-your-own project's [build-system] as its files declare it, and
what follows from it before anything builds (requirements, abi3, the version tool)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from wheelfactory.errors import ConfigError
from wheelfactory.plan.expand import Plan
from wheelfactory.project.bring_your_own import ByoProject, plan_byo_stage
from wheelfactory.project.build_system import LEGACY_BACKEND, read_build_system

SKBUILD = """
[build-system]
requires = ["scikit-build-core>=0.10", "torch>=2.4", "pybind11"]
build-backend = "scikit_build_core.build"
"""


def project(tmp_path: Path, pyproject: str | None = None, **files: str) -> Path:
    if pyproject is not None:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    for name, text in files.items():
        (tmp_path / name.replace("_", ".", 1) if name in ("setup_py", "setup_cfg") else tmp_path / name).write_text(text)
    return tmp_path


def test_no_build_system_table_is_setuptools_legacy_default(tmp_path: Path) -> None:
    system = read_build_system(project(tmp_path, setup_py="from setuptools import setup\nsetup()\n"))
    assert system.backend == LEGACY_BACKEND and system.family == "setuptools"
    assert system.environment_requirements() == ("setuptools>=40.8.0", "wheel")
    assert "no [build-system]" in system.declared_in


def test_the_declared_requirements_less_torch_plus_what_the_backend_asks_for(tmp_path: Path) -> None:
    system = read_build_system(project(tmp_path, SKBUILD + '[tool.scikit-build]\ncmake.version = ">=3.26"\n'))
    assert system.family == "scikit-build-core"
    # a container has no cmake or ninja: scikit-build-core would ask for them at build time
    assert system.environment_requirements() == ("scikit-build-core>=0.10", "pybind11", "cmake>=3.26", "ninja>=1.5")
    assert system.torch_specifier == ">=2.4"


def test_a_requirement_the_project_pins_is_not_asked_for_twice(tmp_path: Path) -> None:
    system = read_build_system(project(tmp_path, SKBUILD.replace('"pybind11"', '"pybind11", "cmake==3.31.6"')))
    assert [r for r in system.environment_requirements() if r.startswith("cmake")] == ["cmake==3.31.6"]


@pytest.mark.parametrize(("pyproject", "files", "abi3"), [
    (SKBUILD + '[tool.scikit-build]\nwheel.py-api = "cp39"\n', {}, "yes"),
    (SKBUILD + '[tool.scikit-build.wheel]\npy-api = "cp312"\n', {}, "yes"),
    (SKBUILD + '[tool.scikit-build]\nwheel.py-api = "py3"\n', {}, "no"),  # pure-Python tag, not abi3
    (SKBUILD, {}, "no"),
    (SKBUILD + '[[tool.scikit-build.overrides]]\nif.platform-system = "linux"\nwheel.py-api = "cp39"\n', {}, "unknown"),
    ('[build-system]\nrequires = ["meson-python"]\nbuild-backend = "mesonpy"\n[tool.meson-python]\nlimited-api = true\n',
     {}, "yes"),
    ('[build-system]\nrequires = ["meson-python"]\nbuild-backend = "mesonpy"\n', {}, "no"),
    ('[build-system]\nrequires = ["setuptools"]\n', {"setup_py": "setup(ext_modules=[])\n"}, "no"),
    ('[build-system]\nrequires = ["setuptools"]\n', {"setup_cfg": "[bdist_wheel]\npy_limited_api = cp39\n"}, "yes"),
    ('[build-system]\nrequires = ["setuptools"]\n', {"setup_py": "Extension('x', [], py_limited_api=True)\n"}, "unknown"),
    ('[build-system]\nrequires = ["setuptools"]\n[tool.distutils.bdist_wheel]\npy-limited-api = "cp39"\n', {}, "yes"),
    ('[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n', {}, "unknown"),
])
def test_whether_the_project_builds_abi3_is_read_from_its_backends_setting(
        tmp_path: Path, pyproject: str, files: dict[str, str], abi3: str) -> None:
    assert read_build_system(project(tmp_path, pyproject, **files)).abi3 == abi3


@pytest.mark.parametrize(("requires", "tool"), [
    ('["setuptools>=64", "setuptools_scm>=8"]', "setuptools-scm"),
    ('["hatchling", "hatch-vcs"]', "hatch-vcs"),
    ('["setuptools", "versioningit"]', "versioningit"),
    ('["poetry-core", "poetry-dynamic-versioning"]', "poetry-dynamic-versioning"),
    ('["setuptools"]', None),
])
def test_the_tool_that_versions_from_git_is_found(tmp_path: Path, requires: str, tool: str | None) -> None:
    assert read_build_system(project(tmp_path, f"[build-system]\nrequires = {requires}\n")).vcs_tool == tool


@pytest.mark.parametrize(("pyproject", "key"), [
    ("[build-system\nrequires = []\n", None),  # not TOML
    ("build-system = 3\n", "build-system"),
    ('[build-system]\nrequires = "setuptools"\n', "build-system.requires"),
    ('[build-system]\nrequires = ["setuptools >= ="]\n', "build-system.requires"),
    ('[build-system]\nrequires = ["mylib @ git+https://example.invalid/mylib"]\n', "build-system.requires"),
    ('[build-system]\nrequires = ["setuptools"]\nbuild-backend = ""\n', "build-system.build-backend"),
])
def test_a_malformed_build_system_is_one_line_naming_the_file_and_key(
        tmp_path: Path, pyproject: str, key: str | None) -> None:
    with pytest.raises(ConfigError) as info:
        read_build_system(project(tmp_path, pyproject))
    message = str(info.value)
    assert "\n" not in message and "pyproject.toml" in message and (key is None or key in message)


def test_an_abi3_plan_for_a_project_that_cannot_build_abi3_fails_before_any_build(
        tmp_path: Path, plan_of: Callable[[str], Plan]) -> None:
    root = project(tmp_path, SKBUILD)
    variant = plan_of('[matrix]\ntorch = "2.13"\npython = ["abi3"]\n').variants[0]
    byo = ByoProject(root, "mylib", (), (), (), read_build_system(root))
    with pytest.raises(ConfigError) as info:
        plan_byo_stage(byo, variant)
    message = str(info.value)
    # scikit-build-core's own setting is named, not setuptools'
    assert "\n" not in message and 'wheel.py-api = "cp39"' in message and "py_limited_api" not in message
    assert variant.id in message and 'python = ["3.11"]' in message
    per_python = plan_of('[matrix]\ntorch = "2.13"\npython = ["3.11"]\n').variants[0]
    assert plan_byo_stage(byo, per_python).variant == per_python


def test_torch_bounds_in_the_build_requirements_prune_the_plan(tmp_path: Path) -> None:
    from wheelfactory.plan.compat import load_table
    from wheelfactory.plan.matrix import parse_matrix
    from wheelfactory.plan.tomlsource import TomlDocument
    from wheelfactory.project.kinds import project_plan

    root = project(tmp_path, SKBUILD.replace("torch>=2.4", "torch>=2.7"), setup_py="")
    text = f'[project]\npath = "{root}"\nimport_name = "mylib"\n[matrix]\ntorch = ["2.6", "2.13"]\n'
    table = load_table()
    matrix = parse_matrix(TomlDocument.from_text(text, "matrix.toml"), table, base_dir=tmp_path)
    plan = project_plan(matrix, table)
    assert {v.key.torch for v in plan.variants} == {"2.13"}
    assert any("requires allow torch >=2.7" in p.reason and "pyproject.toml" in p.reason for p in plan.pruned)
