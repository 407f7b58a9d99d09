"""kernel.toml's ops checked from the project's text before anything compiles (issue 37): an op
without a reference implementation, declared but registered in no source, or registered but not
declared is refused by `wheelfactory build` at once (exit 2), naming the file and line to edit;
nothing is compiled and no build directory is made. On a real `wheelfactory new` project."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from wheelfactory.errors import ConfigError
from wheelfactory.project.kernel_toml import load_kernel
from wheelfactory.project.scaffold import plan_scaffold, write_scaffold


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_scaffold(plan_scaffold("mykernels"), tmp_path / "mykernels")


def declare(project: Path, *ops: str) -> None:
    toml = project / "kernel.toml"
    toml.write_text(toml.read_text().replace('ops = ["scaled_add"]', f"ops = {list(ops)!r}".replace("'", '"')))


def register(project: Path, schema: str) -> None:
    source = project / "csrc" / "registration.cpp"
    text = source.read_text()
    marker = '  m.def("scaled_add('
    source.write_text(text.replace(marker, f'  m.def("{schema}");\n{marker}', 1))


def build_refusal(project: Path) -> str:
    """`wheelfactory build` in the project: exit 2, one line, nothing made."""
    done = subprocess.run([sys.executable, "-m", "wheelfactory", "build", "--engine", "host"], cwd=project,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert not (project / "dist").exists(), "the build started before the refusal"
    (line,) = done.stderr.strip().splitlines()
    return line


def test_the_scaffold_as_written_passes(project: Path) -> None:
    assert load_kernel(project).ops == ("scaled_add",)


def test_an_op_without_a_reference_names_the_reference_file(project: Path) -> None:
    declare(project, "scaled_add", "gelu_fast")
    register(project, "gelu_fast(Tensor(a!) out, Tensor x) -> ()")
    said = build_refusal(project)
    assert "kernel.toml:" in said and "op 'gelu_fast' has no reference implementation in " \
        "python/mykernels/_reference.py" in said and "def gelu_fast(...)" in said, said


def test_an_op_registered_in_no_source_names_the_sources(project: Path) -> None:
    declare(project, "scaled_add", "gelu_fast")
    with (project / "python" / "mykernels" / "_reference.py").open("a") as reference:
        reference.write("\n\ndef gelu_fast(out, x):\n    out.copy_(x)\n")
    said = build_refusal(project)
    assert "op 'gelu_fast' is registered in no source" in said and "csrc/registration.cpp" in said, said


def test_an_op_registered_but_not_declared_names_the_source_line(project: Path) -> None:
    register(project, "gelu_fast(Tensor(a!) out, Tensor x) -> ()")
    text = (project / "csrc" / "registration.cpp").read_text()
    line = text[: text.index('m.def("gelu_fast')].count("\n") + 1
    said = build_refusal(project)
    assert f"csrc/registration.cpp:{line}: registers op 'gelu_fast'" in said and "add 'gelu_fast' to ops" in said, said


def test_a_reference_that_does_not_parse_names_its_line(project: Path) -> None:
    with (project / "python" / "mykernels" / "_reference.py").open("a") as reference:
        reference.write("\n\ndef broken(:\n")
    with pytest.raises(ConfigError, match=r"python/mykernels/_reference\.py:\d+: cannot be parsed"):
        load_kernel(project)


def test_references_made_at_import_time_and_macro_registrations_are_taken_at_their_word(project: Path) -> None:
    """A module __getattr__ defines what it likes; sources with no .def at all register through
    the project's own macros: neither can be read from the text, so neither is refused."""
    declare(project, "scaled_add", "gelu_fast")
    reference = project / "python" / "mykernels" / "_reference.py"
    reference.write_text(reference.read_text() + "\n\ndef __getattr__(name):\n    raise AttributeError(name)\n")
    register(project, "gelu_fast(Tensor(a!) out, Tensor x) -> ()")
    assert load_kernel(project).ops == ("scaled_add", "gelu_fast")
    source = project / "csrc" / "registration.cpp"
    source.write_text(source.read_text().replace("m.def(", "MYKERNELS_DEF("))
    assert load_kernel(project).ops == ("scaled_add", "gelu_fast")


def test_an_op_neither_the_samples_nor_the_tests_name_is_a_warning_of_each_variant(
        project: Path, plan_of: object) -> None:
    """Declared, registered, with a reference, but no sample inputs and no test: each wheel would
    only find it registered. A warning (each variant's, so the manifest and the summary carry it),
    not a refusal; gone once the samples name it."""
    from wheelfactory.project.native import plan_stage

    declare(project, "scaled_add", "gelu_fast")
    register(project, "gelu_fast(Tensor(a!) out, Tensor x) -> ()")
    with (project / "python" / "mykernels" / "_reference.py").open("a") as reference:
        reference.write("\n\ndef gelu_fast(out, x):\n    out.copy_(x)\n")
    variant = plan_of('[matrix]\ntorch = "2.13"\n').variants[0]  # type: ignore[operator]
    (warning,) = plan_stage(load_kernel(project), variant).checks.coverage_warnings
    assert warning.startswith("op 'gelu_fast' has no sample inputs (python/mykernels/_samples.py) and no test that "
                              "names it (tests)"), warning
    samples = project / "python" / "mykernels" / "_samples.py"
    samples.write_text(samples.read_text().replace('return {"scaled_add": scaled_add}',
                                                   'return {"scaled_add": scaled_add, "gelu_fast": []}'))
    assert plan_stage(load_kernel(project), variant).checks.coverage_warnings == ()
