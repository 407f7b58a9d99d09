"""A smoke test that fails says what the wheel's import died of, not which program ran: the
manifest's error and the summary hold the exception and where it was raised (the log keeps the
whole output). The program here really runs and really fails (a package whose __init__ imports a
module that is not installed, as a wheel missing a declared dependency does)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tests.verify.elf_fakes import HOST_ONLY
from tests.testkit import REPO, make_wheel
from wheelfactory.errors import VariantBuildError
from wheelfactory.images.emulation import host_arch
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.expand import expand
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.matrix import parse_matrix
from wheelfactory.plan.tomlsource import TomlDocument
from wheelfactory.project.bring_your_own import ByoProject, ByoStage
from wheelfactory.support.proc import run
from wheelfactory.support.timeline import Timeline
from wheelfactory.verify import checks, project_suite


def host_variant() -> Variant:
    table = load_table()
    text = f'[matrix]\ntorch = ["2.13"]\nbackends = ["cpu"]\npython = ["3.11"]\narch = ["{host_arch()}"]\n'
    return expand(parse_matrix(TomlDocument.from_text(text, "m.toml"), table, base_dir=REPO), table).variants[0]


def test_a_failed_import_is_reported_by_its_exception_and_frame(tmp_path: Path) -> None:
    package = tmp_path / "site" / "needy"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""A package with a run-time dependency."""\n\n'
                                         'from wheelfactory_missing_dependency import version  # noqa\n')
    variant = host_variant()
    stage = ByoStage(ByoProject(tmp_path, "needy", (), (), ()), variant)
    wheel = make_wheel(tmp_path / "w", "needy", f"0.1+{variant.local_version}",
                       tag=f"cp311-cp311-manylinux_2_28_{host_arch()}",
                       files={f"needy/_C.cpython-311-{host_arch()}-linux-gnu.so": HOST_ONLY})
    log = tmp_path / "build.log"

    def smoke(code: str, log: Path) -> str:  # the smoke program, run for real where the package is
        return run([sys.executable, "-c", code], cwd=tmp_path / "site", log=log)

    with pytest.raises(VariantBuildError) as failed:
        checks.verify_wheel(stage, wheel, log, smoke=smoke, timeline=Timeline(log))
    message = str(failed.value)
    assert message.startswith(f"{variant.id}: the smoke test failed: ModuleNotFoundError: "
                              "No module named 'wheelfactory_missing_dependency' (at ")
    assert f"{package / '__init__.py'}:3)" in message
    assert "\n" not in message and "exit code" not in message  # one line, and not the program that ran
    assert message.endswith(f"(the whole output: {log})")
    assert "Traceback" in log.read_text()


@pytest.mark.parametrize(("output", "said"), [
    # chained: the last traceback's exception is what the program died of
    ("Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n    x()\nKeyError: 'a'\n\n"
     "During handling of the above exception, another exception occurred:\n\n"
     "Traceback (most recent call last):\n  File \"b.py\", line 7, in f\n    raise ImportError('b')\n"
     "ImportError: b\n", "ImportError: b (at b.py:7)"),
    # Python 3.11's carets under the line are part of the frame
    ("Traceback (most recent call last):\n  File \"c.py\", line 2, in <module>\n    1/0\n    ~^~\n"
     "ZeroDivisionError: division by zero\n", "ZeroDivisionError: division by zero (at c.py:2)"),
    # the traceback's head cut off by the tail: the exception line alone
    ("    import torch\nOSError: libcudart.so.13: cannot open shared object file\n",
     "OSError: libcudart.so.13: cannot open shared object file"),
    # no Python exception at all (an installer's complaint): its last line
    ("Processing /dist/x.whl\nERROR: x.whl is not a supported wheel on this platform.\n",
     "ERROR: x.whl is not a supported wheel on this platform."),
    ("", "it printed nothing"),
])
def test_what_a_program_died_of(output: str, said: str) -> None:
    assert checks.died_of(output) == said


@pytest.mark.parametrize(("output", "counts"), [
    ("....\n4 passed, 1 warning in 0.92s\n", {"passed": 4, "warnings": 1}),
    ("\x1b[33m=========== \x1b[32m36 passed\x1b[0m, \x1b[33m17 skipped\x1b[0m, 21 warnings in 120.10s ====\x1b[0m\n",
     {"passed": 36, "skipped": 17, "warnings": 21}),
    ("FAILED t.py::test_x - assert 1\n1 failed, 2 passed, 1 error in 3.01s\nwheelfactory-tests-exit 1\n",
     {"failed": 1, "passed": 2, "errors": 1}),
    ("no tests ran in 0.01s\n", {}),
])
def test_the_tests_counts_come_from_pytests_summary(output: str, counts: dict[str, int]) -> None:
    assert project_suite.test_counts(output) == counts


def test_a_coloured_test_failure_is_said_plainly(tmp_path: Path) -> None:
    """DeepSpeed's tests print pytest's colours in the build container: the variant's error and the
    manifest's excerpt name the failed test without escape sequences."""
    from wheelfactory.errors import HostEngineError
    from wheelfactory.plan.project_tests import ProjectTests

    output = ("\x1b[1m\x1b[31mE       RuntimeError: unable to allocate shared memory(shm)\x1b[0m\n"
              "\x1b[36m\x1b[1m=========================== short test summary info ============================\x1b[0m\n"
              "\x1b[31mFAILED\x1b[0m tests/unit/ops/adam/test_cpu_adam.py::\x1b[1mtest_zenflow_adam_cross_process\x1b[0m"
              " - RuntimeError: unable to allocate shared memory(shm)\n"
              "\x1b[31m=== \x1b[31m\x1b[1m1 failed\x1b[0m, \x1b[32m35 passed\x1b[0m in 69.67s ===\x1b[0m\n")
    timeline = Timeline(tmp_path / "log")
    with pytest.raises(HostEngineError) as failed:
        project_suite.run_project_tests(ByoStage(ByoProject(tmp_path, "x", (), (), ()), host_variant()), ProjectTests("pytest"), tmp_path / "x.whl", tmp_path / "log",
                                        lambda tests, wheel: (False, output), timeline, HostEngineError)
    assert str(failed.value).endswith("(pytest): FAILED tests/unit/ops/adam/test_cpu_adam.py::"
                                      "test_zenflow_adam_cross_process - RuntimeError: unable to allocate shared "
                                      "memory(shm)")
    recorded = failed.value.found.tests
    assert recorded is not None
    assert "\x1b" not in str(recorded["excerpt"]) and recorded["counts"] == {"failed": 1, "passed": 35}
