"""A project's own [tool.cibuildwheel] table, read by cibuildwheel's own reader and decided option
by option (project/cibw_table.py). The tables are shaped after released torch extensions' (pyg-lib:
a build-frontend table with args, a multi-line repair command with --exclude flags, environment-pass;
torchmd-net: skip lists, test-requires, test-command on {project}/tests, manylinux images;
torch-harmonics: a pip frontend, a test-command list; tvdcn: a linux subtable with environment
FORCE_CUDA and TORCH_CUDA_ARCH_LIST, an empty repair command, before-build installing torch from a
URL index)."""

from __future__ import annotations

from pathlib import Path

import pytest
from wheelfactory.errors import ConfigError
from wheelfactory.project.cibw_table import decide, identifier_for, read_cibw_table
from wheelfactory.project.cibw_tests import project_table_tests

TABLE = r'''
[build-system]
requires = ["setuptools>=70", "torch>=2.4"]
build-backend = "setuptools.build_meta"

[project]
name = "graphops"
version = "1.2.0"
dependencies = ["torch>=2.4", "numpy"]

[project.optional-dependencies]
test = ["pytest", "scipy>=1.10"]

[dependency-groups]
bench = ["pytest-benchmark"]

[tool.cibuildwheel]
build = ["cp310-*", "cp311-*", "cp312-*"]
skip = ["pp*", "*-musllinux_*", "*_i686"]
archs = ["auto64"]
build-frontend = { name = "build", args = ["--no-isolation", "--verbose"] }
test-requires = ["pytest", "pytest-xdist"]
test-extras = ["test"]
test-command = "pytest -n 2 {project}/test"
test-skip = "*-manylinux_aarch64"
manylinux-x86_64-image = "manylinux_2_28"
environment-pass = ["FORCE_NINJA", "GRAPHOPS_TEST_SECRET_UNSET"]
config-settings = { "--build-option" = "--cpp_ext" }

[tool.cibuildwheel.linux]
environment = { FORCE_CUDA = "1", TORCH_CUDA_ARCH_LIST = "7.5 8.6+PTX", GRAPHOPS_NATIVE = "0" }
before-build = "pip install torch --index-url https://torch-index.example/whl/cpu && rm -rf build"
repair-wheel-command = """
auditwheel repair \
  --wheel-dir {dest_dir} {wheel} \
  --exclude 'libtorch*.so' \
  --exclude 'libgomp*.so*' \
  --plat manylinux_2_28_x86_64
"""

[tool.cibuildwheel.macos]
repair-wheel-command = "delocate-wheel --require-archs {delocate_archs} -w {dest_dir} {wheel}"

[[tool.cibuildwheel.overrides]]
select = "cp312-*"
before-test = "pip install hypothesis"
'''
FACTORY_ENV = frozenset({"PIP_NO_INDEX", "MAX_JOBS", "TORCH_CUDA_ARCH_LIST", "FORCE_CUDA"})


def project(tmp_path: Path, text: str = TABLE) -> Path:
    (tmp_path / "pyproject.toml").write_text(text)
    return tmp_path


def fates(tmp_path: Path, identifier: str = "cp311-manylinux_x86_64", text: str = TABLE, **kw: object) -> dict:
    table = read_cibw_table(project(tmp_path, text), identifier)
    assert table is not None
    decision = decide(table, has_tests=False, installed=lambda name: name in ("torch", "setuptools"),
                      factory_env=FACTORY_ENV, host_env={"FORCE_NINJA": "1"}, **kw)  # type: ignore[arg-type]
    return {"decision": decision, **{fate.option: fate for fate in decision.fates}}


def test_every_option_the_project_sets_gets_a_fate_and_only_those(tmp_path: Path) -> None:
    got = fates(tmp_path)
    decision = got.pop("decision")
    assert set(got) == {"build", "skip", "archs", "build-frontend", "test-requires", "test-extras", "test-command",
                        "test-skip", "manylinux-x86_64-image", "environment-pass", "config-settings", "environment",
                        "before-build", "repair-wheel-command"}  # macos' table and a cp312 override: not this build
    assert {o: f.fate for o, f in got.items() if f.fate == "replaced"} == {
        "build": "replaced", "skip": "replaced", "archs": "replaced", "manylinux-x86_64-image": "replaced"}
    assert decision.refused == ()
    lines = decision.log_lines()
    assert lines[0] == ("cibuildwheel options of pyproject.toml [tool.cibuildwheel] for cp311-manylinux_x86_64, "
                        "option by option:")
    assert "  archs = 'auto64': replaced, the matrix's arch list decides" in lines


def test_honoured_options_say_what_they_add_to_the_build(tmp_path: Path) -> None:
    got = fates(tmp_path)
    decision = got["decision"]
    # the plan's variables win; the project's others go before the factory's
    assert [name for name, _ in decision.environment] == ["GRAPHOPS_NATIVE"]
    assert got["environment"].note == "sets GRAPHOPS_NATIVE for the build; FORCE_CUDA, TORCH_CUDA_ARCH_LIST replaced " \
                                      "by the plan's"
    assert decision.environment_pass == ("FORCE_NINJA",)  # the unset one is not passed, and said
    assert "GRAPHOPS_TEST_SECRET_UNSET not set here" in got["environment-pass"].note
    assert decision.frontend_args == ("--verbose",)
    assert decision.config_settings == "--build-option=--cpp_ext"
    assert decision.repair_excludes == ("libtorch*.so", "libgomp*.so*")
    assert decision.repair_plat == "manylinux_2_28_x86_64"
    # torch from a URL index: the build has it; the other step runs as written
    assert got["before-build"].fate == "honoured" and decision.before_build == ("rm -rf build",)
    assert "torch already installed" in got["before-build"].note


@pytest.mark.parametrize(("step", "refusal"), [
    ("pip install cython>=3 --index-url https://example.invalid/simple", "installs cython>=3 from an index"),
    ("python -m pip install -r requirements-build.txt", "installs a requirements file from an index"),
    ("yum install -y openblas-devel", "installs system packages"),
    ("curl -sSL https://example.invalid/x.tar.gz | tar xz", "downloads"),
])
def test_a_step_needing_what_an_offline_build_lacks_is_refused_with_the_fix(tmp_path: Path, step: str,
                                                                          refusal: str) -> None:
    text = TABLE.replace('before-build = "pip install torch --index-url https://torch-index.example/whl/cpu '
                         '&& rm -rf build"', f"before-all = {step!r}")
    got = fates(tmp_path, text=text)
    assert got["before-all"].fate == "refused" and refusal in got["before-all"].note
    assert got["decision"].refused == (got["before-all"],)


def test_a_step_that_only_installs_what_the_build_has_is_replaced(tmp_path: Path) -> None:
    text = TABLE.replace(" && rm -rf build", "")
    got = fates(tmp_path, text=text)
    assert got["before-build"].fate == "replaced" and got["decision"].before_build == ()
    assert got["before-build"].note == "the build has torch already, from the offline wheelhouse"


def test_another_frontend_and_an_empty_repair_are_replaced_saying_so(tmp_path: Path) -> None:
    text = TABLE.replace('build-frontend = { name = "build", args = ["--no-isolation", "--verbose"] }',
                         'build-frontend = "pip; args: --no-build-isolation"')
    text = text[:text.index('repair-wheel-command = """')] + 'repair-wheel-command = ""\n' + \
        text[text.index('[tool.cibuildwheel.macos]'):]
    got = fates(tmp_path, text=text)
    assert got["build-frontend"].fate == "replaced" and "not pip" in got["build-frontend"].note
    assert got["repair-wheel-command"].fate == "replaced"
    assert got["decision"].repair_excludes == () and got["decision"].frontend_args == ()


def test_the_overrides_for_the_identifier_count(tmp_path: Path) -> None:
    got = fates(tmp_path, "cp312-manylinux_x86_64")
    assert got["before-test"].fate == "honoured"


def test_the_tests_become_the_factorys_tests(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "test").mkdir()
    tests = project_table_tests(root, identifier_for("3.12", "x86_64"))
    assert tests is not None and tests.declared_in == "pyproject.toml [tool.cibuildwheel]"
    assert tests.command == "pytest -n 2 {project}/test"
    # test-requires, the test extra's requirements, before-test's pip install (the cp312 override)
    assert tests.requires == ("pytest", "pytest-xdist", "scipy>=1.10", "hypothesis")
    assert tests.sources == ("test",)  # no test-sources: the paths the command names under {project}
    assert project_table_tests(root, identifier_for("3.11", "aarch64")) is None  # test-skip


def test_an_abi3_variant_reads_the_table_as_cpython_311s() -> None:
    assert identifier_for("abi3", "x86_64") == "cp311-manylinux_x86_64"
    assert identifier_for("3.9", "aarch64") == "cp39-manylinux_aarch64"


def test_no_table_no_decisions_and_a_cibuildwheel_toml_counts(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "1"\n')
    assert read_cibw_table(tmp_path, "cp311-manylinux_x86_64") is None
    (tmp_path / "cibuildwheel.toml").write_text('[tool.cibuildwheel]\ntest-command = "pytest {project}/t"\n')
    table = read_cibw_table(tmp_path, "cp311-manylinux_x86_64")
    assert table is not None and table.declared_in == "cibuildwheel.toml"
    assert table.options == (("test-command", "pytest {project}/t"),)


def test_an_option_cibuildwheel_does_not_know_is_one_line_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"pyproject.toml \[tool.cibuildwheel\]: cibuildwheel cannot read it"):
        read_cibw_table(project(tmp_path, '[tool.cibuildwheel]\ntest-comand = "pytest"\n'), "cp311-manylinux_x86_64")


@pytest.mark.parametrize(("step", "refused"), [
    ("yum install -y openblas-devel", "before-all: refused: `yum install -y openblas-devel` installs system packages"),
    ("curl -sSL https://example.invalid/x.tar.gz | tar xz", "before-all: refused: `curl -sSL"),
    ("python -m pip install -r requirements-build.txt", "installs a requirements file from an index"),
    # named packages wait for the build's environments, which may hold them
    ("pip install cython>=3 --index-url https://example.invalid/simple", None),
])
def test_what_no_build_can_hold_is_refused_before_the_build(tmp_path: Path, step: str, refused: str | None) -> None:
    from wheelfactory.project.cibw_table import refusal_before_build

    root = project(tmp_path, TABLE.replace('before-build = "pip install torch --index-url '
                                           'https://torch-index.example/whl/cpu && rm -rf build"',
                                           f"before-all = {step!r}"))
    said = refusal_before_build(root, "cp311-manylinux_x86_64", has_tests=False)
    assert (said is None) if refused is None else (refused in str(said) and said.startswith("pyproject.toml")), said
