"""``wheelfactory new``: the planned files, NAME validation, and writing that never overwrites and
never leaves a half-made project. (README's claims about it: tests/test_readme_kernel_library.py;
the scaffold built and tested for real: tests/integration/test_scaffold_build.py and
tests/docker/test_scaffold_docker.py.)"""

from __future__ import annotations

import ast
import builtins
import errno
import importlib.util
import os
import re
import types
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.testkit import run_cli
from wheelfactory import load_plan
from wheelfactory.errors import UsageError, WriteFailed
from wheelfactory.project import scaffold as scaffold_module
from wheelfactory.project.kernel_toml import load_kernel
from wheelfactory.plan.compat import CompatTable
from wheelfactory.plan.expand import expand, select
from wheelfactory.plan.matrix import load_matrix
from wheelfactory.project.scaffold import (
    DOCKER_FIRST_BUILD,
    OP,
    InvalidName,
    first_build_command,
    plan_scaffold,
    write_scaffold,
)

EXPECTED_FILES = {
    "README.md", ".gitignore", "kernel.toml", "matrix.toml", "csrc/demo.h", "csrc/registration.cpp",
    "csrc/cpu/scaled_add.cpp", "csrc/cuda/scaled_add.cu", "python/demo/__init__.py", "python/demo/__main__.py",
    "python/demo/_reference.py", "python/demo/_samples.py", "tests/test_scaled_add.py",
}
SAMPLE_OPS = ("silu_and_mul", "gelu_and_mul", "rms_norm", "fused_add_rms_norm")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_scaffold(plan_scaffold("demo"), tmp_path / "demo")


def load_module(path: Path, name: str) -> types.ModuleType:
    """A file of the scaffold's Python package on its own (the package needs the vendored runtime)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_plan_is_the_files_of_one_kernel_library() -> None:
    planned = plan_scaffold("demo")
    assert planned.name == "demo" and set(planned.files) == EXPECTED_FILES
    for path, text in planned.files.items():
        assert not re.search(r"@[a-z_]+@", text), f"{path}: a placeholder was left unfilled"
        assert text.endswith("\n") and "\r" not in text, path


def test_plan_depends_on_the_name_only() -> None:
    assert plan_scaffold("demo") == plan_scaffold("demo")
    other = plan_scaffold("my_kernels2")
    assert "python/my_kernels2/__init__.py" in other.files and "csrc/my_kernels2.h" in other.files
    assert "MY_KERNELS2_NAMESPACE" in other.files["kernel.toml"]
    assert not any("demo" in path or "demo" in text for path, text in other.files.items())


def test_scaffold_is_generic() -> None:
    """Nothing of the sample kernels: no op of fusedops, not its name."""
    for path, text in plan_scaffold("demo").files.items():
        for word in (*SAMPLE_OPS, "fusedops", "FUSEDOPS"):
            assert word not in text and word not in path, f"{word} in {path}"


def test_python_files_are_valid_python_for_the_oldest_abi3_python() -> None:
    for path, text in plan_scaffold("demo").files.items():
        if path.endswith(".py"):
            ast.parse(text, filename=path, feature_version=(3, 9))


@pytest.mark.parametrize("name", ["demo", "my_kernels", "k2", "a", "attention_v2"])
def test_good_names(name: str) -> None:
    assert plan_scaffold(name).name == name


@pytest.mark.parametrize("name, message", [
    ("Demo", "not a lower-case Python identifier"),
    ("my-kernels", "not a lower-case Python identifier"),
    ("2fast", "not a lower-case Python identifier"),
    ("", "not a lower-case Python identifier"),
    ("démo", "not a lower-case Python identifier"),
    ("_private", "start and end with a letter or digit"),
    ("trailing_", "start and end with a letter or digit"),
    ("class", "is a Python keyword"),
    ("json", "would shadow a module"),
    ("torch", "would shadow a module"),
])
def test_bad_names_are_refused_in_one_line(name: str, message: str) -> None:
    with pytest.raises(InvalidName) as info:
        plan_scaffold(name)
    text = str(info.value)
    assert message in text and repr(name) in text and "\n" not in text
    assert info.value.exit_code == 2


def test_written_tree_is_the_plan(project: Path) -> None:
    written = {p.relative_to(project).as_posix(): p.read_text() for p in project.rglob("*") if p.is_file()}
    assert written == dict(plan_scaffold("demo").files)
    assert not [p for p in project.parent.iterdir() if p.name.startswith(".")]  # no temp dir left
    umask = os.umask(0)
    os.umask(umask)
    assert project.stat().st_mode & 0o777 == 0o777 & ~umask  # as mkdir would make it, not mkdtemp's 0700


def test_kernel_toml_parses(project: Path) -> None:
    kernel = load_kernel(project)
    assert kernel.name == "demo" and kernel.ops == (OP,) and kernel.namespace_macro == "DEMO_NAMESPACE"
    assert kernel.sample_inputs == ("_samples", "sample_inputs")
    assert kernel.test is not None and kernel.test.requires == ("pytest",) and kernel.test.sources == ("tests",)
    assert [p.as_posix() for p in kernel.sources_for("cpu")] == ["csrc/registration.cpp", "csrc/cpu/scaled_add.cpp"]
    assert kernel.sources_for("cuda")[-1].as_posix() == "csrc/cuda/scaled_add.cu"


def test_matrix_toml_plans(project: Path) -> None:
    plan = load_plan(project / "matrix.toml")
    ids = {v.id for v in plan.variants}
    assert "torch213-cxx11-cpu-x86_64-linux" in ids and "torch26-cxx98-cpu-x86_64-linux" in ids
    assert {v.key.backend.kind for v in plan.variants} == {"cpu", "cuda"}


def test_every_op_is_declared_registered_implemented_and_wrapped(project: Path) -> None:
    """The one op in every place an op lives: schema, CPU and CUDA registrations, reference,
    samples, public wrapper, tests."""
    kernel = load_kernel(project)
    registration = (project / "csrc" / "registration.cpp").read_text()
    cuda = (project / "csrc" / "cuda" / "scaled_add.cu").read_text()
    init = (project / "python" / "demo" / "__init__.py").read_text()
    for op in kernel.ops:
        assert re.search(rf'm\.def\("{op}\(', registration)
        assert f'm.impl("{op}"' in registration and f'm.impl("{op}"' in cuda
        assert f'_package.op("{op}")' in init and f'"{op}"' in init.split("__all__")[1].split("]")[0]
    assert "DEMO_LIBRARY(m)" in registration and "DEMO_LIBRARY_IMPL(CPU, m)" in registration
    assert "DEMO_LIBRARY_IMPL(CUDA, m)" in cuda
    assert "ops=" not in init  # the op names come from kernel.toml, through the build record


def test_samples_are_small_cpu_inputs_the_reference_runs_on(project: Path) -> None:
    package = project / "python" / "demo"
    samples = load_module(package / "_samples.py", "demo_samples_under_test").sample_inputs()
    reference = load_module(package / "_reference.py", "demo_reference_under_test")
    assert set(samples) == set(load_kernel(project).ops)
    again = load_module(package / "_samples.py", "demo_samples_again").sample_inputs()
    for op, calls in samples.items():
        assert calls and all(isinstance(args, tuple) for args in calls)
        for args, same in zip(calls, again[op]):
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            assert tensors and all(t.device.type == "cpu" and t.numel() <= 4096 for t in tensors)
            for a, b in zip(args, same):  # the same on every call
                assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
            getattr(reference, op)(*args)  # the reference takes them in schema order
    out, x, y, alpha = samples[OP][0]
    torch.testing.assert_close(out, x + alpha * y)


def test_refuses_a_directory_with_files_and_keeps_them(tmp_path: Path) -> None:
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("my notes")
    with pytest.raises(UsageError, match="is not empty"):
        write_scaffold(plan_scaffold("demo"), target)
    assert [p.name for p in target.iterdir()] == ["notes.txt"] and (target / "notes.txt").read_text() == "my notes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]


def test_refuses_a_file_or_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "demo").write_text("x")
    with pytest.raises(UsageError, match="is a file, not a directory"):
        write_scaffold(plan_scaffold("demo"), tmp_path / "demo")
    (tmp_path / "empty").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "empty")
    with pytest.raises(UsageError, match="is a symlink, not a directory"):
        write_scaffold(plan_scaffold("demo"), tmp_path / "link")
    assert list((tmp_path / "empty").iterdir()) == [] and (tmp_path / "demo").read_text() == "x"


def test_fills_an_empty_directory_and_makes_missing_parents(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert (write_scaffold(plan_scaffold("demo"), tmp_path / "empty") / "kernel.toml").is_file()
    assert (write_scaffold(plan_scaffold("demo"), tmp_path / "a" / "b") / "kernel.toml").is_file()


def test_a_failed_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_open = builtins.open
    count = {"files": 0}

    def failing_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if "w" in mode and str(file).endswith(".py"):
            count["files"] += 1
            if count["files"] == 3:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", failing_open)
    with pytest.raises(WriteFailed) as info:
        write_scaffold(plan_scaffold("demo"), tmp_path / "demo")
    assert "No space left on device" in str(info.value) and info.value.exit_code == 9
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(scaffold_module.os, "rename", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_scaffold(plan_scaffold("demo"), tmp_path / "demo")
    assert list(tmp_path.iterdir()) == []


def test_files_appearing_before_the_rename_are_not_overwritten(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The directory did not exist when checked; the author makes it, with a file, before the rename."""
    target = tmp_path / "demo"
    real_rename = os.rename

    def rename_after_a_save(source: Path, destination: Path) -> None:
        target.mkdir()
        (target / "mine.cpp").write_text("// mine")
        real_rename(source, destination)

    monkeypatch.setattr(scaffold_module.os, "rename", rename_after_a_save)
    with pytest.raises(UsageError, match="is not empty"):
        write_scaffold(plan_scaffold("demo"), target)
    assert [p.name for p in target.iterdir()] == ["mine.cpp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]


def test_an_existing_empty_directory_is_kept_and_filled(tmp_path: Path) -> None:
    """Not replaced: a shell may be in it (`mkdir x && cd x && wheelfactory new x --path .`)."""
    target = tmp_path / "demo"
    target.mkdir(mode=0o750)
    target.chmod(0o750)
    before = target.stat().st_ino
    write_scaffold(plan_scaffold("demo"), target)
    assert target.stat().st_ino == before and target.stat().st_mode & 0o777 == 0o750
    written = {p.relative_to(target).as_posix(): p.read_text() for p in target.rglob("*") if p.is_file()}
    assert written == dict(plan_scaffold("demo").files)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]


def test_a_file_saved_into_the_empty_directory_meanwhile_is_kept(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "demo"
    target.mkdir()
    real_link = os.link

    def link_after_a_save(source: Path, destination: Path) -> None:
        if Path(destination).name == "matrix.toml":
            Path(destination).write_text("# mine")
        real_link(source, destination)

    monkeypatch.setattr(scaffold_module.os, "link", link_after_a_save)
    with pytest.raises(UsageError, match="is not empty"):
        write_scaffold(plan_scaffold("demo"), target)
    assert [p.name for p in target.iterdir()] == ["matrix.toml"] and (target / "matrix.toml").read_text() == "# mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]


@pytest.mark.parametrize("at", [1, 3, 4])
def test_an_interrupted_move_into_an_empty_directory_leaves_it_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     at: int) -> None:
    """Ctrl-C after some entries moved in (hard links for files, renames for directories)."""
    target = tmp_path / "demo"
    target.mkdir()
    real_link = os.link
    calls = {"n": 0}

    def link(source: Path, destination: Path) -> None:
        calls["n"] += 1
        real_link(source, destination)
        if calls["n"] == at:
            raise KeyboardInterrupt  # linked, the temp name not yet removed

    monkeypatch.setattr(scaffold_module.os, "link", link)
    with pytest.raises(KeyboardInterrupt):
        write_scaffold(plan_scaffold("demo"), target)
    assert list(target.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["demo"]


def test_an_unreadable_directory_is_one_line_not_a_traceback(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "locked"
    target.mkdir()
    planned = plan_scaffold("demo")  # (the templates are read before listing is denied)

    def denied(self: Path) -> Any:
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "iterdir", denied)  # as root, chmod 000 would not stop the listing
    with pytest.raises(WriteFailed, match="Permission denied"):
        write_scaffold(planned, target)


def test_cli_new(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_cli("new", "demo") == 0
    assert (tmp_path / "demo" / "kernel.toml").is_file()  # default: ./NAME
    out = capsys.readouterr().out
    assert "13 files" in out and "wheelfactory build" in out
    assert run_cli("new", "other", "--path", str(tmp_path / "elsewhere")) == 0
    assert (tmp_path / "elsewhere" / "python" / "other" / "__init__.py").is_file()


@pytest.mark.parametrize("args, message", [
    (("new", "Bad-Name"), "NAME 'Bad-Name' is not a lower-case Python identifier"),
    (("new", "demo", "--path", "taken"), "is not empty"),
])
def test_cli_new_errors_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...],
                                            message: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("")
    assert run_cli(*args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_readme_of_the_scaffold_names_its_files(project: Path) -> None:
    readme = (project / "README.md").read_text()
    for path in ("kernel.toml", "matrix.toml", "csrc/demo.h", "csrc/registration.cpp", "python/demo/",
                 "_reference.py", "_samples.py", "tests/"):
        assert path in readme, path
    assert "DEMO_LOAD" in readme and "DEMO_CACHE_DIR" in readme and "_runtime" in readme


# --- opt-in (--run-cuda-compile): the scaffold's CUDA source compiles with nvcc ---------------


@pytest.mark.cuda_compile
def test_cuda_source_compiles(project: Path, tmp_path: Path) -> None:
    """As the factory's CUDA build compiles it: kernel.toml's include dirs and nvcc flags, the
    namespace macro and what torch.utils.cpp_extension passes to nvcc (headers of this CPU torch;
    its missing generated CUDA config header only holds Windows DLL settings)."""
    import subprocess

    from torch.utils import cpp_extension

    kernel = load_kernel(project)
    source = project / kernel.sources_for("cuda")[-1]
    includes = [*cpp_extension.include_paths(), *(str(project / p) for p in kernel.include_dirs)]
    command = [os.environ.get("NVCC", "nvcc"), "-c", str(source), "-o", str(tmp_path / "op.o"),
               *(f"-I{p}" for p in includes), f"-D{kernel.namespace_macro}=_demo_cuda_compile_test",
               "-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE", "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
               "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__", "-std=c++20",
               *kernel.nvcc_flags, "-Xcompiler", "-fPIC", "-gencode=arch=compute_80,code=sm_80"]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "warning" not in result.stderr.lower(), result.stderr[-4000:]
    assert (tmp_path / "op.o").stat().st_size > 0



KNOWN = ("2.6", "2.13", "2.14", "2.15")


@pytest.mark.parametrize(("torch", "compiler", "line"), [
    ("2.13.0+cpu", True, "wheelfactory build --engine host"),
    # a release new's matrix.toml does not list: the host builds the variant its torch is
    ("2.15.0+cpu", True, "wheelfactory build --engine host"),
    # PyPI's default build is a CUDA one: the host would need nvcc and its toolkit
    ("2.14.1", True, "wheelfactory build --setup --only 'torch213-cxx11-cpu-*'  # in Docker"),
    ("2.14.1+cu130", True, "wheelfactory build --setup --only 'torch213-cxx11-cpu-*'  # in Docker"),
    ("2.99.0+cpu", True, "wheelfactory build --setup --only 'torch213-cxx11-cpu-*'  # in Docker"),
    ("2.13.0+cpu", False, "wheelfactory build --setup --only 'torch213-cxx11-cpu-*'  # in Docker"),
    (None, True, "wheelfactory build --setup --only 'torch213-cxx11-cpu-*'  # in Docker"),
])
def test_new_names_a_first_build_that_this_machine_can_run(torch: str | None, compiler: bool,
                                                          line: str) -> None:
    assert first_build_command(torch, KNOWN, compiler) == line


def test_the_docker_first_build_is_a_variant_news_matrix_plans(tmp_path: Path, table: CompatTable) -> None:
    write_scaffold(plan_scaffold("mykernels"), tmp_path / "mykernels")
    matrix = load_matrix(tmp_path / "mykernels" / "matrix.toml", table)
    assert select(expand(matrix, table), (DOCKER_FIRST_BUILD,)), DOCKER_FIRST_BUILD
