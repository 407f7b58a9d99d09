"""verify/diagnose.py: what a failed build's output says, said in terms of the project and the plan."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from wheelfactory.plan.expand import Plan
from wheelfactory.verify.diagnose import diagnosis

TORCH_CUDA_HOME = """Traceback (most recent call last):
  File "/project/setup.py", line 9, in <module>
    CUDAExtension(
OSError: CUDA_HOME environment variable is not set. Please set it to your CUDA install root.
ERROR Backend subprocess exited when trying to invoke get_requires_for_build_wheel
"""
BUILD_MISSING = """* Getting build dependencies for wheel...
ERROR Missing dependencies:
\tnumpy>=2
\tpybind11
"""


def test_a_cuda_only_project_on_a_cpu_variant(plan_of: Callable[[str], Plan]) -> None:
    cpu = plan_of('[matrix]\ntorch = "2.13"\n').variants[0]
    message = diagnosis(cpu, TORCH_CUDA_HOME, declared_in="p/pyproject.toml [build-system]")
    assert message is not None and "\n" not in message and cpu.id in message
    assert "builds no CPU wheel" in message and 'drop "cpu" from [matrix] backends' in message
    cuda = plan_of('[matrix]\ntorch = "2.15"\nbackends = ["cu132"]\n').variants[0]
    assert diagnosis(cuda, TORCH_CUDA_HOME, declared_in="x") is None  # a CUDA variant's toolkit is ours to give


def test_a_build_requirement_the_project_did_not_declare(plan_of: Callable[[str], Plan]) -> None:
    variant = plan_of('[matrix]\ntorch = "2.13"\n').variants[0]
    message = diagnosis(variant, BUILD_MISSING, declared_in="p/pyproject.toml [build-system]")
    assert message is not None and "numpy>=2, pybind11" in message and "p/pyproject.toml [build-system]" in message
    backend = diagnosis(variant, "ERROR Backend 'flit_core.buildapi' is not available.\n", declared_in="d")
    assert backend is not None and "'flit_core.buildapi'" in backend
    assert diagnosis(variant, "error: command 'g++' failed\n", declared_in="d") is None


def test_a_recognised_failure_becomes_the_engines_error_and_others_pass_through(
        tmp_path: Path, plan_of: Callable[[str], Plan]) -> None:
    from wheelfactory.errors import HostEngineError
    from wheelfactory.project.bring_your_own import ByoProject, ByoStage
    from wheelfactory.support.proc import CommandFailed
    from wheelfactory.verify.diagnose import diagnosed

    stage = ByoStage(ByoProject(tmp_path, "x", (), (), ()), plan_of('[matrix]\ntorch = "2.13"\n').variants[0])
    log = tmp_path / "build.log"
    log.write_text(TORCH_CUDA_HOME)
    with pytest.raises(HostEngineError, match="builds no CPU wheel"):
        with diagnosed(stage, log, HostEngineError):
            raise CommandFailed(["python", "-m", "build"], 1, "", log)
    log.write_text("error: something else\n")
    with pytest.raises(CommandFailed):
        with diagnosed(stage, log, HostEngineError):
            raise CommandFailed(["python", "-m", "build"], 1, "", log)


def test_tests_that_ask_for_a_gpu_are_told_how_to_leave_them_out(tmp_path: Path,
                                                                  plan_of: Callable[[str], Plan]) -> None:
    """kernels-community activation's tests run on cuda:0 only: on a build machine every one fails
    with torch's "not compiled with CUDA"; the variant's error says what to set."""
    from wheelfactory.errors import HostEngineError
    from wheelfactory.plan.project_tests import ProjectTests
    from wheelfactory.project.bring_your_own import ByoProject, ByoStage
    from wheelfactory.support.timeline import Timeline
    from wheelfactory.verify.project_suite import run_project_tests

    stage = ByoStage(ByoProject(tmp_path, "x", (), (), ()), plan_of('[matrix]\ntorch = "2.13"\n').variants[0])
    output = ("E   AssertionError: Torch not compiled with CUDA enabled\n=== short test summary info ===\n"
              "FAILED tests/test_activation.py::test_silu[cuda:0] - AssertionError: Torch not compiled with CUDA\n")
    with pytest.raises(HostEngineError) as info:
        run_project_tests(stage, ProjectTests("pytest"), tmp_path / "x.whl", tmp_path / "log",
                          lambda tests, wheel: (False, output), Timeline(tmp_path / "log"), HostEngineError)
    message = str(info.value)
    assert "FAILED tests/test_activation.py::test_silu[cuda:0]" in message and "[test] skip" in message


def test_find_package_torch_against_a_cuda_torch_on_a_cpu_variant(plan_of: Callable[[str], Plan]) -> None:
    cpu = plan_of('[matrix]\ntorch = "2.13"\n').variants[0]
    output = ("CMake Error at /opt/wheelfactory/torch/torch/share/cmake/Caffe2/Caffe2Config.cmake:90 (message):\n"
              "  Your installed Caffe2 version uses CUDA but I cannot find the CUDA\n  libraries.  Please set the proper\n")
    message = diagnosis(cpu, output, declared_in="p/pyproject.toml [build-system]")
    assert message is not None and "find_package(Torch)" in message and 'torch_index = "pytorch"' in message


# ColossalAI 0.5.0's BUILD_EXT=1 on a CUDA variant: its nvcc flags come from the build machine's GPU.
ASKS_THE_GPU = """Traceback (most recent call last):
  File "/opt/wheelfactory/build/pyproject_hooks/_in_process/_in_process.py", line 389, in <module>
    main()
  File "/opt/wheelfactory/build/setuptools/build_meta.py", line 317, in run_setup
    exec(code, locals())  # noqa: S102 # exec is intentional here
  File "<string>", line 86, in <module>
  File "/project/extensions/cuda_extension.py", line 116, in build_aot
    "nvcc": self.strip_empty_entries(self.nvcc_flags()),
  File "/project/extensions/pybind/layernorm/layernorm_cuda.py", line 24, in nvcc_flags
    extra_cuda_flags.extend(get_cuda_cc_flag())
  File "/project/extensions/utils.py", line 207, in get_cuda_cc_flag
    max_arch = "".join(str(i) for i in torch.cuda.get_device_capability())
  File "/opt/wheelfactory/torch/torch/cuda/__init__.py", line 616, in _lazy_init
    torch._C._cuda_init()
RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver
"""


def test_a_build_that_asks_for_the_gpu_is_told_where_and_what_to_read(plan_of: Callable[[str], Plan]) -> None:
    cuda = plan_of('[matrix]\ntorch = "2.15"\nbackends = ["cu132"]\n\n[cuda]\narch_list = "9.0"\n').variants[0]
    message = diagnosis(cuda, ASKS_THE_GPU, declared_in="p/pyproject.toml [build-system]")
    assert message == (f"{cuda.id}: the project's build asks torch about the machine's GPU (at "
                       "extensions/utils.py:207 (get_cuda_cc_flag): 'Found no NVIDIA driver on your system'), and "
                       "build machines have none: the project must take its GPU architectures from "
                       "TORCH_CUDA_ARCH_LIST, which the factory sets to the variant's ([cuda] arch_list: 9.0), or be "
                       "built on a machine with a GPU")
    cpu = plan_of('[matrix]\ntorch = "2.13"\n').variants[0]
    assert diagnosis(cpu, ASKS_THE_GPU, declared_in="d") is None  # a CPU variant asks for no GPU code


# What `python -m build` printed for a planted error in a native kernel's source, on the host
# engine (the staged copy under dist/.work) and in cibuildwheel's container (/project): each
# diagnostic twice (ninja's line and the summary), a traceback, build's tip.
HOST_COMPILE = """[1/2] c++ -MMD -MF /w/dist/.work/torch213-cxx11-cpu-x86_64-linux/build/x.o.d -c \
/w/dist/.work/torch213-cxx11-cpu-x86_64-linux/src/mykernels/_sources/csrc/cpu/scaled_add.cpp -o x.o
FAILED: x.o
/w/dist/.work/torch213-cxx11-cpu-x86_64-linux/src/mykernels/_sources/csrc/cpu/scaled_add.cpp: In function 'void f()':
/w/dist/.work/torch213-cxx11-cpu-x86_64-linux/src/mykernels/_sources/csrc/cpu/scaled_add.cpp:15:3: error: expected ',' or ';' before 'undeclared_name'
/w/dist/.work/torch213-cxx11-cpu-x86_64-linux/src/mykernels/_sources/csrc/cpu/scaled_add.cpp:21:5: error: 'y' was not declared in this scope
ninja: build stopped: subcommand failed.
/w/dist/.work/torch213-cxx11-cpu-x86_64-linux/src/mykernels/_sources/csrc/cpu/scaled_add.cpp:15:3: error: expected ',' or ';' before 'undeclared_name'
Traceback (most recent call last):
  File "/opt/torch/utils/cpp_extension.py", line 2910, in _run_ninja_build
RuntimeError: Error compiling objects for extension
TIP pass --env-dir and --sdist-extract-dir to keep the build environment and sources
ERROR Backend subprocess exited when trying to invoke build_wheel
"""
DOCKER_COMPILE = """/project/csrc/ops.cpp:3:10: fatal error: missing.h: No such file or directory
/project/csrc/kernels.cu(42): error: identifier "blockDim2" is undefined
"""


def test_compiler_errors_are_shown_once_on_the_authors_own_paths(plan_of: Callable[[str], Plan]) -> None:
    variant = plan_of('[matrix]\ntorch = "2.13"\n').variants[0]
    message = diagnosis(variant, HOST_COMPILE, declared_in="d")
    assert message is not None
    assert message.splitlines() == [
        f"{variant.id}: the compiler failed in csrc/cpu/scaled_add.cpp (2 error(s)):",
        "  csrc/cpu/scaled_add.cpp:15:3: error: expected ',' or ';' before 'undeclared_name'",
        "  csrc/cpu/scaled_add.cpp:21:5: error: 'y' was not declared in this scope"]
    docker = diagnosis(variant, DOCKER_COMPILE, declared_in="d")
    assert docker is not None and docker.splitlines()[1:] == [
        "  csrc/ops.cpp:3:10: fatal error: missing.h: No such file or directory",
        "  csrc/kernels.cu:42: error: identifier \"blockDim2\" is undefined"]
