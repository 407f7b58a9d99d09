"""[test] in matrix.toml and kernel.toml: cibuildwheel's keys, checked where they are written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from wheelfactory.errors import ConfigError
from wheelfactory.plan.matrix import Matrix
from wheelfactory.project.kernel_toml import load_kernel


def test_the_table_and_its_placeholders(parse: Callable[[str], Matrix]) -> None:
    matrix = parse('[test]\ncommand = "pytest -q {project}/tests && echo ${HOME} {package}"\n'
                   'requires = ["pytest>=7", "numpy"]\nsources = ["tests", "conftest.py"]\nskip = ["*-cu*"]\n')
    spec = matrix.test
    assert spec is not None and spec.requires == ("pytest>=7", "numpy") and spec.sources == ("tests", "conftest.py")
    assert spec.render("/work") == "pytest -q /work/tests && echo ${HOME} /work"
    assert not spec.runs_for("torch26-cxx98-cu124-x86_64-linux") and spec.runs_for("torch213-cxx11-cpu-x86_64-linux")
    assert parse("").test is None


@pytest.mark.parametrize(("text", "message"), [
    ('[test]\nrequires = ["pytest"]', "test.command: is missing or empty"),
    ('[test]\ncommand = 3', "test.command: must be a string"),
    ('[test]\ncommand = "x"\nsources = ["../outside"]', "test.sources: '../outside' is not a relative path"),
    ('[test]\ncommand = "x"\nsources = ["/etc"]', "test.sources: '/etc' is not a relative path"),
    ('[test]\ncommand = "x"\nrequires = ["not a requirement"]', "test.requires: 'not a requirement' is not a"),
    ('[test]\ncommand = "x"\nrequires = ["pkg @ https://example.invalid/p.whl"]', "is a URL requirement"),
    ('[test]\ncommand = "x"\ncomand = "y"', "test.comand: unknown key; did you mean 'command'?"),
])
def test_bad_tables_name_the_key(parse: Callable[[str], Matrix], text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(text)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_kernel_toml_declares_its_tests_and_their_sources_must_exist(tmp_path: Path) -> None:
    root = tmp_path / "k"
    (root / "python" / "k").mkdir(parents=True)
    (root / "python" / "k" / "_reference.py").write_text("def op(out):\n    pass\n")
    (root / "csrc").mkdir()
    (root / "csrc" / "a.cpp").write_text("")
    base = ('[kernel]\nname = "k"\nversion = "1.0"\npython_package = "python/k"\nops = ["op"]\n'
            '[sources]\ncpu = ["csrc/a.cpp"]\n')
    (root / "kernel.toml").write_text(base + '[test]\ncommand = "pytest {project}/tests"\nsources = ["tests"]\n')
    with pytest.raises(ConfigError, match=r"test\.sources: 'tests' does not exist"):
        load_kernel(root)
    (root / "tests").mkdir()
    spec = load_kernel(root).test
    assert spec is not None and spec.sources == ("tests",) and spec.declared_in.endswith("kernel.toml")
