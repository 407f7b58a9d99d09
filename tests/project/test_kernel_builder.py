"""kernel-builder projects (build.toml), planned: the stage a variant builds from, what build.toml
does to the plan, and the one-line errors of `wheelfactory plan` on malformed documents.

The real builds (host and Docker) are tests/integration/test_host_kernel_builder.py and
tests/docker/test_docker_kernel_builder.py; this module compiles nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.project.test_build_toml import BASES, FUZZ, mutated
from tests.testkit import REPO
from wheelfactory.cli.main import main
from wheelfactory.errors import ConfigError
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.matrix import ProjectConfig, parse_matrix
from wheelfactory.plan.tomlsource import TomlDocument
from wheelfactory.project.build_toml import KernelBuilderSpec
from wheelfactory.project.build_toml_reader import load_build_toml
from wheelfactory.project.kernel_builder import buildable, gencode_flags, plan_kernel_builder_stage, project_files
from wheelfactory.project.kernel_builder_setup import registration_h
from wheelfactory.project.kinds import project_plan, resolve_kind

FIXTURE = REPO / "tests" / "fixtures" / "kb_relu"
TABLE = load_table()


def load_kernel_builder(root: Path) -> KernelBuilderSpec:
    """build.toml as a build reads it: parsed, then what the factory cannot build refused."""
    return buildable(load_build_toml(root))


def plan_for(text: str, project: Path = FIXTURE) -> tuple[dict[str, Variant], list[str]]:
    matrix = parse_matrix(TomlDocument.from_text(f'[project]\npath = "{project}"\n{text}', "matrix.toml"), TABLE,
                          base_dir=REPO)
    plan = project_plan(matrix, TABLE)
    return {v.id: v for v in plan.variants}, [p.reason for p in plan.pruned]


@pytest.fixture(scope="module")
def planned() -> dict[str, Variant]:
    variants, _ = plan_for('[matrix]\ntorch = ["2.6", "2.14"]\nbackends = ["cpu", "cu130"]\npython = ["abi3"]\n'
                           '[cuda]\narch_list = "12.0"\n')
    return variants


def test_auto_finds_build_toml_after_kernel_toml(tmp_path: Path) -> None:
    assert resolve_kind(ProjectConfig(FIXTURE)).name == "kernel-builder"
    assert resolve_kind(ProjectConfig(REPO / "kernels" / "fusedops")).name == "native"
    assert resolve_kind(ProjectConfig(REPO / "tests" / "fixtures" / "byo_ext")).name == "bring-your-own"
    assert resolve_kind(ProjectConfig(tmp_path, kind="kernel-builder")).name == "kernel-builder"
    assert resolve_kind(ProjectConfig(REPO / "tests" / "fixtures" / "kb_noarch")).name == "kernel-builder-noarch"
    assert resolve_kind(ProjectConfig(REPO / "tests" / "fixtures" / "kb_noarch", kind="kernel-builder")).name \
        == "kernel-builder-noarch"
    # "setuptools": the old spelling of bring-your-own, still accepted in matrix.toml
    assert resolve_kind(ProjectConfig(REPO / "kernels" / "fusedops", kind="setuptools")).name == "bring-your-own"


@pytest.mark.parametrize("fixture", ["kb_relu", "kb_noarch"])
def test_a_run_parses_build_toml_once(fixture: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deciding the kind, the plan's constraints and the build's load read one parse (issue 40)."""
    from wheelfactory.project import build_toml_reader
    from wheelfactory.project.kinds import LoadContext

    parses: list[Path] = []
    real = build_toml_reader.parse_build_toml

    def counted(doc: TomlDocument, root: Path) -> KernelBuilderSpec:
        parses.append(root)
        return real(doc, root)

    monkeypatch.setattr(build_toml_reader, "parse_build_toml", counted)
    root = REPO / "tests" / "fixtures" / fixture
    matrix = parse_matrix(TomlDocument.from_text(f'[project]\npath = "{root}"\n[matrix]\ntorch = ["2.14"]\n',
                                                 "matrix.toml"), TABLE, base_dir=REPO)
    resolved = resolve_kind(matrix.project)
    resolved.constraints()
    resolved.load(LoadContext(matrix=matrix, table=TABLE, matrix_file="matrix.toml", run_probe=str))
    assert parses == [root]
    parses.clear()
    project_plan(matrix, TABLE)
    assert parses == [root]


def test_build_toml_prunes_backends_and_bounds_with_reasons() -> None:
    variants, reasons = plan_for('[matrix]\ntorch = ["2.4", "2.6"]\nbackends = ["cpu", "cu124", "rocm6.2"]\n'
                                 'python = ["abi3"]\n')
    assert sorted(variants) == ["torch26-cxx11-cpu-x86_64-linux", "torch26-cxx98-cpu-x86_64-linux"]
    declared = str(FIXTURE / "build.toml")
    assert f"{declared} [torch] minver/maxver allow torch >=2.5" in reasons
    assert f"{declared} allows CUDA >=12.6" in reasons  # cu124 < [general.cuda] minver
    assert any(r.startswith(f"{declared} builds no rocm kernel") for r in reasons), reasons
    assert f"{declared} declares metal: wheelfactory builds cpu, cuda, rocm only" in reasons


def test_cpu_stage_compiles_the_cpu_unit_with_its_flags(planned: dict[str, Variant]) -> None:
    spec = load_kernel_builder(FIXTURE)
    stage = plan_kernel_builder_stage(spec, planned["torch26-cxx98-cpu-x86_64-linux"], table=TABLE)
    assert stage.package == "kb_relu" and stage.version == "1+cputorch2.6cxx98"
    assert stage.namespace.startswith("_kb_relu_") and len(stage.namespace) == len("_kb_relu_") + 8
    assert [(u.name, u.sources, u.cxx_flags) for u in stage.units] == [
        ("relu_cpu", ("relu_cpu/relu_cpu.cpp",), ("-DKB_RELU_UNIT_FLAGS",))]
    assert stage.variant.arch_list == ()
    compile(stage.setup_py, "setup.py", "exec")  # valid Python
    assert f"name='kb_relu.{stage.namespace}'" in stage.setup_py
    assert "sources=['torch-ext/torch_binding.cpp']" in stage.setup_py  # headers are not compiled
    assert "('CPU_KERNEL', None)" in stage.setup_py and "('Py_LIMITED_API', '0x03090000')" in stage.setup_py
    assert stage.requires == ("torch>=2.6,<2.7",)  # [build] torch_requirement = "pinned"
    assert stage.checks.tests is not None and stage.checks.tests.sources == ("tests",)  # its tests/ run


def test_cuda_stage_uses_the_units_capabilities(planned: dict[str, Variant]) -> None:
    spec = load_kernel_builder(FIXTURE)
    variant = planned["torch214-cxx11-cu130-x86_64-linux"]
    assert variant.arch_list == ("12.0",)
    stage = plan_kernel_builder_stage(spec, variant, table=TABLE)
    (unit,) = stage.units
    assert unit.name == "relu_cuda" and unit.sources == ("relu_cuda/relu_cuda.cu",)
    assert unit.archs == ("8.0", "9.0")
    # CUDA 13: fat binaries compressed for size first, the unit's own flags after (they win)
    assert unit.device_flags == ("--compress-mode=size", "-DKB_RELU_UNIT_FLAGS", "-gencode=arch=compute_80,code=sm_80",
                                 "-gencode=arch=compute_90,code=sm_90")
    # what cuobjdump must find: the units' archs (the bindings have no device code of their own)
    assert stage.variant.arch_list == ("8.0", "9.0")
    assert "('CUDA_KERNEL', None)" in stage.setup_py and "CUDAExtension(" in stage.setup_py
    assert stage.record.arch_list == ("8.0", "9.0")
    other = plan_kernel_builder_stage(spec, planned["torch214-cxx11-cpu-x86_64-linux"], table=TABLE)
    assert other.namespace != stage.namespace


def test_gencode_flags() -> None:
    assert gencode_flags(("9.0a", "12.0+PTX")) == ["-gencode=arch=compute_90a,code=sm_90a",
                                                   "-gencode=arch=compute_120,code=sm_120",
                                                   "-gencode=arch=compute_120,code=compute_120"]


def copy_fixture(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    shutil.copytree(FIXTURE, root)
    return root


def test_capabilities_no_toolkit_compiles_are_refused(tmp_path: Path, planned: dict[str, Variant]) -> None:
    root = copy_fixture(tmp_path)
    text = (root / "build.toml").read_text().replace('cuda-capabilities = ["8.0", "9.0"]',
                                                     'cuda-capabilities = ["5.0", "6.1"]')
    (root / "build.toml").write_text(text)
    with pytest.raises(ConfigError, match=r"CUDA 13.0 compiles none of \[kernel.relu_cuda\]'s capabilities"):
        plan_kernel_builder_stage(load_kernel_builder(root), planned["torch214-cxx11-cu130-x86_64-linux"],
                                  table=TABLE)


def test_python_depends_become_requires_dist(tmp_path: Path, planned: dict[str, Variant]) -> None:
    root = copy_fixture(tmp_path)
    text = (root / "build.toml").read_text().replace('backends = ["cpu", "cuda", "metal"]',
                                                     'backends = ["cpu", "cuda", "metal"]\n'
                                                     'python-depends = ["einops"]')
    (root / "build.toml").write_text(text)
    stage = plan_kernel_builder_stage(load_kernel_builder(root), planned["torch26-cxx98-cpu-x86_64-linux"],
                                      table=TABLE)
    assert stage.requires == ("torch>=2.6,<2.7", "einops")
    assert "install_requires=['torch>=2.6,<2.7', 'einops']" in stage.setup_py
    # The tests get einops as the wheel's dependency (installed for the smoke test and the tests
    # with every Requires-Dist), not as a requirement of their own.
    assert stage.checks.tests is not None and stage.checks.tests.requires == ("pytest",)


def test_a_dependency_from_nix_is_refused_in_one_line(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path)
    text = (root / "build.toml").read_text().replace('src = ["relu_cuda/relu_cuda.cu", "relu_cuda/relu_common.cuh"]\n'
                                                     'depends = ["torch"]',
                                                     'src = ["relu_cuda/relu_cuda.cu", "relu_cuda/relu_common.cuh"]\n'
                                                     'depends = ["torch", "cutlass_3_8"]')
    (root / "build.toml").write_text(text)
    with pytest.raises(ConfigError) as info:
        load_kernel_builder(root)
    message = str(info.value)
    assert "\n" not in message and "kernel.relu_cuda.depends" in message and "cutlass_3_8" in message


def test_a_symlink_out_of_the_project_is_refused(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path)
    (tmp_path / "secret.h").write_text("// outside\n")
    (root / "relu_cpu" / "leak.h").symlink_to(tmp_path / "secret.h")
    with pytest.raises(ConfigError, match="leak.h is a symlink that leads outside the project"):
        project_files(root)


def test_write_lays_out_ops_registration_and_setup(tmp_path: Path, planned: dict[str, Variant]) -> None:
    stage = plan_kernel_builder_stage(load_kernel_builder(FIXTURE), planned["torch26-cxx98-cpu-x86_64-linux"],
                                      table=TABLE)
    dest = tmp_path / "stage"
    stage.write(dest)
    ops = (dest / "torch-ext" / "kb_relu" / "_ops.py").read_text()
    assert f"from . import {stage.namespace}\n" in ops and f"ops = torch.ops.{stage.namespace}\n" in ops
    assert f'return f"{stage.namespace}::{{op_name}}"' in ops
    assert (dest / "_wheelfactory" / "registration.h").read_text() == registration_h()
    assert (dest / "setup.py").read_text() == stage.setup_py
    assert (dest / "relu_cpu" / "relu_cpu.cpp").read_bytes() == (FIXTURE / "relu_cpu" / "relu_cpu.cpp").read_bytes()
    assert not (FIXTURE / "torch-ext" / "kb_relu" / "_ops.py").exists()  # the project is never edited


# --------------------------------------------------------------------------------------------
# `wheelfactory plan` over malformed build.toml documents: exit 0 or 2, one line naming the file
# --------------------------------------------------------------------------------------------

KB_FILES = ("torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h", "torch-ext/activation/__init__.py",
            "activation/activation_kernels.cu", "activation_cpu/activation_cpu.cpp")


@settings(FUZZ, max_examples=40)
@given(base=st.sampled_from(["v2", "v3", "v4", "v5"]), data=st.data())
def test_cli_plan_on_a_mutated_build_toml_exits_cleanly(base: str, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path_factory.mktemp("kb")
    for name in KB_FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"// {name}\n")
    document = mutated(BASES[base], data, 2)
    try:
        (root / "build.toml").write_text(tomli_w.dumps(document))
    except (TypeError, ValueError):
        return
    (root / "matrix.toml").write_text('[matrix]\ntorch = ["2.9", "2.14"]\nbackends = ["cpu", "cu130"]\n')
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", "-m", str(root / "matrix.toml"), "--explain"])
    out, err = capsys.readouterr()
    assert exit_info.value.code in (0, 2), err
    assert "Traceback" not in out + err
    if exit_info.value.code == 2:
        assert err.startswith("wheelfactory: ") and err.count("\n") == 1, repr(err)
        assert "build.toml" in err, err


STABLE = REPO / "tests" / "fixtures" / "kb_stable"


def test_stable_abi_becomes_the_plans_stable_target() -> None:
    variants, reasons = plan_for('[matrix]\ntorch = ["2.13", "2.14"]\nbackends = ["cpu"]\npython = ["abi3"]\n', STABLE)
    assert list(variants) == ["torch-stable-abi210-cpu-x86_64-linux"]
    assert sum("served by the stable-ABI variant" in r for r in reasons) == 2
    stage = plan_kernel_builder_stage(load_kernel_builder(STABLE), variants["torch-stable-abi210-cpu-x86_64-linux"],
                                      table=TABLE)
    assert "('TORCH_TARGET_VERSION', '0x020a000000000000')" in stage.setup_py
    assert stage.record.stable_abi and str(stage.record.torch) == "2.10"


def test_a_different_stable_target_in_the_matrix_is_one_line() -> None:
    with pytest.raises(ConfigError) as info:
        plan_for('[matrix]\ntorch = ["2.13"]\nbackends = ["cpu"]\nstable_abi = "2.11"\n', STABLE)
    message = str(info.value)
    assert "\n" not in message and "matrix.stable_abi" in message and "stable-abi targets 2.10" in message


def stable_with_cuda(tmp_path: Path, stable_abi: str) -> Path:
    """kb_stable as an edition-5 project with a CUDA unit too, its stable-abi line replaced."""
    root = tmp_path / "kb"
    shutil.copytree(STABLE, root)
    text = (root / "build.toml").read_text().replace('backends = ["cpu"]', 'edition = 5\nbackends = ["cpu", "cuda"]')
    text = text.replace('stable-abi = "2.10"\n', stable_abi)
    text += '\n[kernel.scale_cuda]\nbackend = "cuda"\nsrc = ["scale_cpu/scale.cpp"]\ndepends = ["torch"]\n'
    (root / "build.toml").write_text(text)
    return root


def test_per_backend_stable_targets_must_agree(tmp_path: Path) -> None:
    root = stable_with_cuda(tmp_path, 'stable-abi = { cpu = "2.10", cuda = "2.11" }\n')
    with pytest.raises(ConfigError) as info:
        load_kernel_builder(root)
    assert "torch.stable-abi" in str(info.value) and "2.10, 2.11" in str(info.value)


def test_a_per_backend_stable_abi_leaves_the_other_backends_per_release(tmp_path: Path) -> None:
    """kernels-community activation: [torch.stable-abi] names cuda and rocm only; its CPU units
    (<ATen/cpu/vec/vec.h>, <torch/all.h>) cannot build with TORCH_TARGET_VERSION, so the CPU
    variants are planned per torch release and only CUDA collapses into one stable-ABI variant."""
    root = stable_with_cuda(tmp_path, '\n[torch.stable-abi]\ncuda = "2.10"\nrocm = "2.10"\n')
    variants, reasons = plan_for('[matrix]\ntorch = ["2.12", "2.13"]\nbackends = ["cpu", "cu130"]\n', root)
    assert sorted(variants) == ["torch-stable-abi210-cu130-x86_64-linux", "torch212-cxx11-cpu-x86_64-linux",
                                "torch213-cxx11-cpu-x86_64-linux"]
    assert sum("served by the stable-ABI variant torch-stable-abi210-cu130" in r for r in reasons) == 2
    cpu = plan_kernel_builder_stage(load_kernel_builder(root), variants["torch213-cxx11-cpu-x86_64-linux"],
                                    table=TABLE)
    assert "TORCH_TARGET_VERSION" not in cpu.setup_py and not cpu.record.stable_abi


def test_the_tests_loader_plugin_knows_which_repositories_are_this_build(tmp_path: Path,
                                                                        planned: dict[str, Variant]) -> None:
    import json

    from wheelfactory.project.kernel_builder_checks import HUB_PLUGIN, hub_repo_ids

    root = copy_fixture(tmp_path)
    (root / "tests" / "test_hub.py").write_text(
        'import kernels\nrelu = kernels.get_kernel("kernels-community/kb-relu", version=1)\n'
        'other = kernels.get_kernel( "kernels-community/activation", version=1)\n')
    (root / "build.toml").write_text((root / "build.toml").read_text().replace(
        "[general.cuda]", '[general.hub]\nrepo-id = "my-org/kb-relu"\n\n[general.cuda]'))
    spec = load_kernel_builder(root)
    assert hub_repo_ids(spec) == ("kernels-community/kb-relu", "my-org/kb-relu")
    stage = plan_kernel_builder_stage(spec, planned["torch26-cxx98-cpu-x86_64-linux"], table=TABLE)
    checks = stage.checks
    assert checks.tests is not None and f"-p {HUB_PLUGIN}" in checks.tests.command
    assert checks.tests.requires == ("pytest", "kernels")
    files = dict(checks.support_files)
    settings = json.loads(files[f"{HUB_PLUGIN}.json"])
    assert settings["variant"] == "torch26-cxx98-cpu-x86_64-linux" and settings["package"] == "kb_relu"
    assert settings["metadata"]["id"] == stage.namespace and settings["metadata"]["backend"] == {"type": "cpu"}
    assert "def pytest_configure" in files[f"{HUB_PLUGIN}.py"]
    # tests that import the package directly get neither the loader nor its plugin
    plain = plan_kernel_builder_stage(load_kernel_builder(FIXTURE), planned["torch26-cxx98-cpu-x86_64-linux"],
                                      table=TABLE).checks
    assert plain.tests is not None and "-p" not in plain.tests.command.replace("-p no:cacheprovider", "")
    assert plain.support_files == ()


def test_bullseye_serves_torch_up_to_2_8() -> None:
    """docs/reference/build-toml.md: bullseye's Python (3.9) takes torch up to 2.8; newer torch needs another base."""
    from wheelfactory.images.base_image import SUITES

    python = SUITES["bullseye"].python
    supported = [r.minor for r in TABLE.releases if python in r.python]
    assert python == "3.9" and supported[-1] == "2.8", supported


def test_a_rocm_stage_offloads_to_the_units_targets(tmp_path: Path) -> None:
    root = copy_fixture(tmp_path)
    text = (root / "build.toml").read_text().replace('backends = ["cpu", "cuda", "metal"]',
                                                     'backends = ["cpu", "cuda", "rocm", "metal"]')
    text += ('\n[kernel.relu_rocm]\nbackend = "rocm"\nrocm-archs = ["gfx942", "gfx90a"]\n'
             'src = ["relu_cuda/relu_cuda.cu"]\ndepends = ["torch"]\nhip-flags = ["-DKB_RELU_UNIT_FLAGS"]\n')
    (root / "build.toml").write_text(text)
    variants, _ = plan_for('[matrix]\ntorch = ["2.9"]\nbackends = ["rocm6.4"]\npython = ["abi3"]\n', root)
    (variant,) = variants.values()
    stage = plan_kernel_builder_stage(load_kernel_builder(root), variant, table=TABLE)
    (unit,) = stage.units
    assert unit.device_flags == ("-DKB_RELU_UNIT_FLAGS", "--offload-arch=gfx942", "--offload-arch=gfx90a")
    assert "('ROCM_KERNEL', None)" in stage.setup_py
    assert stage.variant.arch_list == ("gfx90a", "gfx942")


def test_device_code_in_the_bindings_adds_the_matrixs_archs(tmp_path: Path, planned: dict[str, Variant]) -> None:
    root = copy_fixture(tmp_path)
    (root / "torch-ext" / "launch.cu").write_text("// device code beside the bindings\n")
    text = (root / "build.toml").read_text().replace('src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]',
                                                     'src = ["torch-ext/torch_binding.cpp", "torch-ext/launch.cu"]')
    (root / "build.toml").write_text(text)
    stage = plan_kernel_builder_stage(load_kernel_builder(root), planned["torch214-cxx11-cu130-x86_64-linux"],
                                      table=TABLE)
    assert stage.variant.arch_list == ("8.0", "9.0", "12.0")


def test_subpackages_of_the_python_package_ship_in_the_wheel(planned: dict[str, Variant]) -> None:
    """kernels-community relu (and Hugging Face's example kernel) keep ``layers`` as a subpackage
    that its ``__init__`` imports: a wheel without it fails its smoke test on a circular import."""
    spec = load_kernel_builder(REPO / "tests" / "fixtures" / "kb_rms_norm")
    variants, _ = plan_for('[matrix]\ntorch = ["2.13"]\nbackends = ["cpu"]\n', spec.root)
    stage = plan_kernel_builder_stage(spec, variants["torch213-cxx11-cpu-x86_64-linux"], table=TABLE)
    assert "packages=['kb_rms_norm', 'kb_rms_norm.layers']," in stage.setup_py
