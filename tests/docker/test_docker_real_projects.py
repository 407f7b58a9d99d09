"""Project shapes as they are found in the wild, built unedited in Docker (each fixture's header says
which real projects it was shaped after):

- tests/fixtures/kb_rms_norm, a Hub kernel: <torch/torch.h> and <torch/all.h>, ops registered for
  CompositeExplicitAutograd, three CPU units with their own ISA and OpenMP flags; its own tests load
  it with ``kernels.get_kernel("<org>/<name>")`` and run offline against each variant, and the one
  that needs another Hub kernel is reported as not run;
- tests/fixtures/skb_dsp, scikit-build-core + CMake (no setup.py), OpenMP, abi3, and a package that
  imports its declared dependencies numpy, packaging and ninja (the last two also build tools of
  every variant, which the smoke environment must hold all the same) in its ``__init__``;
- tests/fixtures/scm_ext, setuptools-scm with several extension modules, versioned from a git
  history this module makes: the wheel's version is what ``git describe`` implies, the variant's
  label merged into the local one;
- tests/fixtures/byo_cuda_only, an unedited setup.py calling CUDAExtension with its own -gencode
  flags: its CUDA 13 variant builds (cuobjdump lists the planned archs) and its CPU variant fails in
  seconds saying that the project builds no CPU code.

Torch 2.6 (PyPI's pre-cxx11 build) and 2.13 (CPU), the torches the other Docker modules share.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from tests.docker.docker_helpers import build, make_shared, manifest
from tests.shared_builds import SharedBuild
from tests.testkit import REPO, TEST_CACHE

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.lane("docker-projects")]
# torch 2.15 (CUDA 13.2, ~9 GB of wheels and environment): the CUDA, kernel-builder and newest-torch
# modules before this one in its lane build with it too, and no module after it (nor the other lane)
MODULE_TORCHES = frozenset({("2.15", "3.11")})

CACHE = TEST_CACHE
FIXTURES = REPO / "tests" / "fixtures"
BOTH = ("torch26-cxx98-cpu-x86_64-linux", "torch213-cxx11-cpu-x86_64-linux")


def matrix(*, import_name: str | None = None, python: str = '["abi3"]', torch: str = '["2.6", "2.13"]',
           backends: str = '["cpu"]', extra: str = "") -> str:
    """What follows [project] path in these projects' matrix.toml (the offline tables come after)."""
    name = f'import_name = "{import_name}"\n' if import_name else ""
    return f"""{name}
[matrix]
torch = {torch}
backends = {backends}
python = {python}
{extra}"""


TESTS = '[test]\ncommand = "python -m pytest -q {project}/tests"\nrequires = ["pytest"]\nsources = ["tests"]\n'
HUB_KERNEL = SharedBuild("docker-kb-rms-norm", FIXTURES / "kb_rms_norm", matrix())
CMAKE = SharedBuild("docker-skb-dsp", FIXTURES / "skb_dsp", matrix(import_name="tinydsp", extra=TESTS))
SCM_CHECKOUT = CACHE / "scm-checkout"  # the scm fixture in a git repository (scm_checkout below)
SCM = SharedBuild("docker-scm", SCM_CHECKOUT, matrix(import_name="sphops", python='["3.11"]', extra=TESTS))
CUDA_ONLY = SharedBuild("docker-byo-cuda", FIXTURES / "byo_cuda_only",
                       matrix(import_name="fused_ssim_lite", python='["3.11"]', torch='["2.15"]',
                              backends='["cu132"]', extra='[cuda]\narch_list = "8.0;9.0"\n'))


def prepared_env(log: str, role: str) -> dict[str, object]:
    """The record (env.json) of the prepared environment of ``role`` the build made or reused."""
    line = [line for line in log.splitlines() if f"prepared environment {role}-" in line][-1]
    path = Path(line.split("(", 1)[1].split(",")[0].rstrip(")"))
    return json.loads((path / "env.json").read_text())  # type: ignore[no-any-return]


def built(workdir: Path, variant: str) -> tuple[Path, dict[str, object], str]:
    """(wheel, manifest entry, build log) of a variant that built."""
    entry = manifest(workdir / "dist")[variant]
    assert entry["status"] in ("built", "cached"), entry
    return workdir / "dist" / str(entry["wheel"]), entry, (workdir / "dist" / str(entry["log"])).read_text()


@pytest.fixture(scope="module")
def hub_kernel(offline_build_tables: str) -> Path:
    return make_shared(HUB_KERNEL, offline_build_tables)


@pytest.mark.parametrize("variant", BOTH)
def test_a_hub_kernel_builds_and_its_own_tests_run_offline(hub_kernel: Path, variant: str) -> None:
    wheel, entry, log = built(hub_kernel, variant)
    assert wheel.name.startswith("kb_rms_norm-1+cputorch2.") and "-cp39-abi3-manylinux_" in wheel.name
    namespace = json.loads(zipfile.ZipFile(wheel).read("kb_rms_norm/_build.json"))["namespace"]
    assert (f"smoke: 3 op(s) serving CPU under {namespace}: apply_rms_norm (CompositeExplicitAutograd), "
            "apply_rms_norm_backward (CompositeExplicitAutograd), rms_norm_isa_level (CompositeImplicitAutograd)") in log
    tests = entry["tests"]
    assert isinstance(tests, dict) and tests["passed"] is True, tests
    # the tests loaded the kernel by its repository id, offline: get_kernel ran in every test module
    assert "11 passed, 1 skipped" in log
    (not_run,) = tests["not_run"]  # type: ignore[misc]
    assert "kernels-community/activation" in not_run and "asked for in tests/test_with_activation.py" in not_run


@pytest.fixture(scope="module")
def cmake_project(offline_build_tables: str) -> Path:
    return make_shared(CMAKE, offline_build_tables)


@pytest.mark.parametrize("variant", BOTH)
def test_a_scikit_build_core_project_builds_with_its_own_build_system(cmake_project: Path, variant: str) -> None:
    wheel, entry, log = built(cmake_project, variant)
    assert wheel.name.startswith("tinydsp_torch-0.4.1+cputorch2.") and "-cp39-abi3-manylinux_" in wheel.name
    # its [build-system] requires and what scikit-build-core asks for, in an environment of their own
    assert prepared_env(log, "build")["requirements"] == ["scikit-build-core>=0.10", "cmake>=3.26", "ninja>=1.5"]
    assert "*** Configuring CMake..." in log
    # __init__ imports numpy, packaging and ninja: the wheel's dependencies were installed for the
    # smoke test and the tests, build tools of the variant's wheel set (packaging, ninja) included
    deps = prepared_env(log, "deps")["requirements"]
    for name in ("numpy", "packaging", "ninja"):
        assert any(f"/{name}-" in wheel for wheel in deps), (name, deps)  # type: ignore[union-attr]
    assert '"extensions": {"tinydsp._C": "imported"}' in log
    assert entry["tests"]["passed"] is True  # type: ignore[index]
    with zipfile.ZipFile(wheel) as archive:
        assert [n for n in archive.namelist() if n.endswith(".so")] == ["tinydsp/_C.abi3.so"]
        metadata = archive.read("tinydsp_torch-" + wheel.name.split("-")[1] + ".dist-info/METADATA").decode()
    assert "Requires-Dist: numpy" in metadata


@pytest.fixture(scope="module")
def scm_checkout(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The scm fixture in a git repository: tagged v0.3.1, then two commits; (checkout, short hash)."""
    root = SCM_CHECKOUT
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(FIXTURES / "scm_ext", root)
    git = ["git", "-C", str(root), "-c", "user.email=ci@example.invalid", "-c", "user.name=ci"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "release"], check=True)
    subprocess.run([*git, "tag", "v0.3.1"], check=True)
    for note in ("one", "two"):
        (root / "CHANGES.txt").write_text(note)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", note], check=True)
    described = subprocess.run([*git, "describe", "--tags", "--long"], check=True, capture_output=True,
                               text=True).stdout.strip()
    assert described.startswith("v0.3.1-2-g"), described
    return root, described.rsplit("-g", 1)[1]


@pytest.fixture(scope="module")
def scm_project(scm_checkout: tuple[Path, str], offline_build_tables: str) -> Path:
    assert scm_checkout[0] == SCM.project
    return make_shared(SCM, offline_build_tables)


@pytest.mark.parametrize("variant", [f"{v}-cp311" for v in BOTH])
def test_a_setuptools_scm_project_gets_the_version_of_its_git_history(
        scm_project: Path, scm_checkout: tuple[Path, str], variant: str) -> None:
    wheel, entry, log = built(scm_project, variant)
    label = "cputorch2.6cxx98" if "torch26" in variant else "cputorch2.13"
    # v0.3.1 plus two commits: setuptools-scm's next version, the node, then the variant's label
    version = wheel.name.split("-")[1]
    assert version.startswith(f"0.3.2.dev2+g{scm_checkout[1]}") and version.endswith(f".{label}"), version
    assert "SETUPTOOLS_SCM_PRETEND_VERSION=0.3.2.dev2+g" in log
    assert json.loads([line for line in log.splitlines() if line.startswith('{"mode": "imported"')][-1])[
        "extensions"] == {"sphops._legendre": "imported", "sphops._quadrature": "imported",
                          "sphops_helpers": "imported"}
    assert entry["tests"]["passed"] is True  # type: ignore[index]


def test_an_abi3_matrix_for_a_project_without_abi3_fails_before_any_build(
        scm_checkout: tuple[Path, str], offline_build_tables: str, tmp_path: Path) -> None:
    (tmp_path / "matrix.toml").write_text(f'[project]\npath = "{scm_checkout[0]}"\n'
                                          + matrix(import_name="sphops", torch='["2.13"]') + offline_build_tables)
    result = build(tmp_path)
    assert result.returncode == 1, result.stdout[-3000:]
    (entry,) = manifest(tmp_path / "dist").values()
    assert entry["status"] == "failed" and entry["log"] is None  # nothing ran: no log was started
    assert "does not build abi3 wheels" in str(entry["error"]) and "py_limited_api=True" in str(entry["error"])


@pytest.fixture(scope="module")
def cuda_only(offline_build_tables: str) -> Path:
    return make_shared(CUDA_ONLY, offline_build_tables)


def test_an_unedited_cuda_extension_builds_its_cuda_13_variant(cuda_only: Path) -> None:
    wheel, _, log = built(cuda_only, "torch215-cxx11-cu132-x86_64-linux-cp311")
    # the toolkit from NVIDIA's wheels, as CUDA_HOME, from the first hook `build` called
    assert "CUDA_HOME=/opt/wheelfactory/torch/nvidia/cu13" in log
    assert "# cuobjdump fused_ssim_lite_cuda.cpython-311-x86_64-linux-gnu.so: sm_80, sm_90 (asked: sm_80, sm_90)" in log
    assert '"extensions": {"fused_ssim_lite_cuda": "imported"}' in log


def test_the_cpu_variant_of_a_cuda_only_project_says_so(offline_build_tables: str, tmp_path: Path) -> None:
    (tmp_path / "matrix.toml").write_text(f'[project]\npath = "{FIXTURES / "byo_cuda_only"}"\n'
                                          + matrix(import_name="fused_ssim_lite", python='["3.11"]', torch='["2.13"]')
                                          + offline_build_tables)
    result = build(tmp_path)
    assert result.returncode == 1
    (entry,) = manifest(tmp_path / "dist").values()
    error = str(entry["error"])
    assert "builds no CPU wheel" in error and 'drop "cpu" from [matrix] backends' in error, error
    assert "CUDA_HOME environment variable" not in error
