from __future__ import annotations

from pathlib import Path

import pytest
from tests.testkit import REPO
from wheelfactory.errors import ConfigError
from wheelfactory.project.kernel_toml import load_kernel

MINIMAL = """
[kernel]
name = "tiny"
version = "1.0.0"
python_package = "py/tiny"
ops = ["add_one"]
[sources]
include_dirs = ["csrc"]
cpu = ["csrc/tiny.cpp"]
"""


def make_project(root: Path, declaration: str = MINIMAL) -> Path:
    (root / "py" / "tiny").mkdir(parents=True)
    (root / "py" / "tiny" / "__init__.py").write_text("")
    # the reference ops (project/op_checks.py): any op name the declarations below list
    (root / "py" / "tiny" / "_reference.py").write_text("def __getattr__(name):\n    return lambda *args: None\n")
    (root / "csrc").mkdir()
    (root / "csrc" / "tiny.cpp").write_text("// tiny\n")
    (root / "kernel.toml").write_text(declaration)
    return root


def test_sample_kernel_declaration_loads() -> None:
    spec = load_kernel(REPO / "kernels" / "fusedops")
    assert spec.name == "fusedops" and spec.namespace_macro == "FUSEDOPS_NAMESPACE"
    assert set(spec.ops) == {"silu_and_mul", "gelu_and_mul", "rms_norm", "fused_add_rms_norm"}
    # the CUDA sources follow the CPU ones: host C++ for the torch side, one .cu for the device
    assert [p.suffix for p in spec.sources_for("cuda")[-2:]] == [".cpp", ".cu"]
    assert not any(p.suffix == ".cu" for p in spec.sources_for("cpu"))


def test_minimal_project(tmp_path: Path) -> None:
    spec = load_kernel(make_project(tmp_path))
    assert spec.namespace_macro == "TINY_NAMESPACE"
    assert Path("csrc/tiny.cpp") in spec.files_for("cpu") and Path("py/tiny/__init__.py") in spec.files_for("cpu")


@pytest.mark.parametrize("old, new, message", [
    ('name = "tiny"', 'name = "Tiny-Ops"', "must be a lower-case Python identifier"),
    ('version = "1.0.0"', 'version = "1.0.0+cu124"', "without a local label"),
    ('cpu = ["csrc/tiny.cpp"]', 'cpu = ["csrc/missing.cpp"]', "source 'csrc/missing.cpp' does not exist"),
    ('cpu = ["csrc/tiny.cpp"]', 'cpu = ["../outside.cpp"]', "must be a path inside the project"),
    ('ops = ["add_one"]', 'ops = []', "names no op"),
    ('[sources]', '[sources]\ncpuu = []', "did you mean 'cpu'?"),
])
def test_declaration_errors(tmp_path: Path, old: str, new: str, message: str) -> None:
    make_project(tmp_path, MINIMAL.replace(old, new))
    with pytest.raises(ConfigError) as info:
        load_kernel(tmp_path)
    assert message in str(info.value) and "kernel.toml" in str(info.value)


def test_device_check_unit_and_where_hipify_puts_it() -> None:
    from wheelfactory.verify.rocm_device_code import hipified_path

    spec = load_kernel(REPO / "kernels" / "fusedops")
    assert spec.device_check == Path("csrc/cuda/device_instances.cu")
    assert spec.device_check not in spec.sources_for("cuda")  # a check unit, not part of the wheel's library
    assert hipified_path(Path("csrc/cuda/device_instances.cu")) == Path("csrc/hip/device_instances.hip")
    assert hipified_path(Path("csrc/cuda/kernels.cuh")) == Path("csrc/hip/kernels.cuh")
