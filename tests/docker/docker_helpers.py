"""Helpers the docker tests share: the two-ABI matrix, the build command, the manifest reader, and
venvs with one torch to install the built wheels into. (Fixtures live in conftest.py; plain helpers
here, since test modules cannot import conftest.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.repo_paths import cache_lock
from tests.shared_builds import SharedBuild
from tests.testkit import LEAN as LEAN
from tests.testkit import REPO, TEST_CACHE, run_build, uv_pip, wheelhouse_venv

# Where CI=true (or WHEELFACTORY_REQUIRE_DOCKER=1, which .ci/run exports) what the Docker tier
# needs (the engine, redis-server, chromium) must be there: a test fails instead of skipping.
REQUIRED = os.environ.get("CI") == "true" or os.environ.get("WHEELFACTORY_REQUIRE_DOCKER") == "1"
VARIANTS = {"torch26-cxx98-cpu-x86_64-linux", "torch213-cxx11-cpu-x86_64-linux"}


def prepared_torch_env(wheelhouse: Path, torch: str, python: str) -> Path | None:
    """A prepared torch environment the Docker builds made for ``torch`` (e.g. "2.6.0") and
    ``python`` (e.g. "cp311-cp311"), if one is there: a `pip --target` tree for PYTHONPATH."""
    from wheelfactory.engines.prepared_env import COMPLETE

    for marker in sorted(wheelhouse.glob(f"envs/torch-*/{COMPLETE}")):
        record = json.loads(marker.read_text())
        if record["python"] == python and record["requirements"] == [f"torch=={torch}"]:
            return marker.parent
    return None


def free_torches(wheelhouse: Path, torches: frozenset[tuple[str, str]]) -> list[Path]:
    """Collect, with the factory's own gc, the wheel sets and prepared environments holding one of
    ``torches`` ((torch, Python) pairs, e.g. ("2.5", "3.9"): a release or a minor, which is what a
    matrix names and stands for the patch release the planner resolves, 2.5.1), marked unused, then
    collected as `wheelfactory gc` does. What it removed. Only torches no later module needs: the
    other lane may be building with any other torch right now."""
    from wheelfactory.engines.prepared_env import COMPLETE as ENV_COMPLETE
    from wheelfactory.engines.prepared_env import collect_garbage
    from wheelfactory.engines.wheelhouse import COMPLETE as SET_COMPLETE
    from wheelfactory.engines.wheelhouse import Wheelhouse

    def torch_of(record: dict[str, object]) -> str | None:
        return next((str(r).split("==", 1)[1] for r in record.get("requirements", ())  # type: ignore[attr-defined]
                     if str(r).startswith("torch==")), None)

    for marker in [*wheelhouse.glob(f"sets/*/{SET_COMPLETE}"), *wheelhouse.glob(f"envs/*/{ENV_COMPLETE}")]:
        record = json.loads(marker.read_text())
        request = record.get("request", record)  # a set's record holds its request; an env's is one
        python = request["python"]  # a set's: {"version": "3.11", ...}; an env's: "cp311-cp311"
        version = python["version"] if isinstance(python, dict) else f"{python[2]}.{python[3:].split('-')[0]}"
        torch = torch_of(request)
        if torch is not None and any(version == interpreter and (torch == release or torch.startswith(f"{release}."))
                                     for release, interpreter in torches):
            os.utime(marker, (0, 0))  # unused since 1970: what gc collects
    week = 7 * 86400
    removed = [*collect_garbage(wheelhouse / "envs", unused_for_s=week),
               *Wheelhouse(wheelhouse).collect_garbage(unused_for_s=week)]
    return [item.path for item in removed]


SAMPLE_TABLES = '[matrix]\ntorch = ["2.6", "2.13"]\nbackends = ["cpu"]\n'
# The sample kernels for torch 2.6 (pre-cxx11) and 2.13 (cxx11): what most Docker modules read
# (the session's docker_build), and what the tests that change something copy.
SAMPLE = SharedBuild("docker-build", REPO / "kernels" / "fusedops", SAMPLE_TABLES)


def matrix_text(offline_build_tables: str, extra: str = "", project: Path = REPO / "kernels" / "fusedops") -> str:
    """The sample's matrix (SAMPLE's) for another project directory or with ``extra`` tables."""
    return f"""
[project]
path = "{project}"

{SAMPLE_TABLES}{offline_build_tables}{extra}"""


def build_matrix(workdir: Path, matrix_toml: str, *args: str) -> Path:
    """Write ``matrix.toml`` into ``workdir``, build (with ``args``), require success. Another
    worker building the same directory is waited for (then its build is found cached). For a
    persistent build in the test cache, declare a SharedBuild (tests/shared_builds.py) instead."""
    with cache_lock(workdir):
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "matrix.toml").write_text(matrix_toml)
        result = _build(workdir, *args)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-3000:]
    return workdir


def make_shared(build: SharedBuild, offline_tables: str = "") -> Path:
    """A declared shared build, made (or found made) in ``TEST_CACHE/<name>``: its work directory."""
    assert build.build_table is not None or offline_tables, f"{build.name} needs the offline tables"
    return build_matrix(TEST_CACHE / build.name, build.matrix_toml(offline_tables),
                        *(arg for pattern in build.only for arg in ("--only", pattern)))


def build(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    with cache_lock(workdir):
        return _build(workdir, *args)


def _build(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_build(list(args), cwd=workdir)


def manifest(dist: Path) -> dict[str, dict[str, object]]:
    return json.loads((dist / "manifest.json").read_text())["variants"]  # type: ignore[no-any-return]


# ----------------------------------------------------------------------------------------------
# Venvs with one torch, for installing the built wheels (the distribution and publish modules).
# Made once per cache from the wheelhouse the docker builds filled; each install goes into a
# hard-linked copy of one.
# ----------------------------------------------------------------------------------------------

TORCHES = {"torch26-cxx98-cpu-x86_64-linux": "2.6.0", "torch213-cxx11-cpu-x86_64-linux": "2.13.0"}

# Loads fusedops in a venv, checks two ops against the reference, prints what the runtime chose.
CHECK = r"""
import json, warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import torch, fusedops
    from fusedops import _reference as ref
    x = torch.randn(9, 2 * 129)
    out = fusedops.silu_and_mul(x)
    expected = torch.empty_like(out); ref.silu_and_mul(expected, x)
    torch.testing.assert_close(out, expected)
    y, w = torch.randn(9, 129), torch.randn(129)
    torch.testing.assert_close(fusedops.rms_norm(y, w, 1e-6), torch.nn.functional.rms_norm(y, (129,), w, 1e-6),
                               rtol=1e-5, atol=1e-5)
    info = fusedops.backend_info()
ours = [str(w.message) for w in caught if "fusedops" in str(w.message)]
print(json.dumps({"mode": info["mode"], "variant": info["variant"], "torch": torch.__version__, "warnings": ours}))
"""


def run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False, **kwargs)  # type: ignore[call-overload]
    assert result.returncode == 0, f"{command}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result  # type: ignore[no-any-return]


def torch_wheels(version: str) -> Path:
    """The docker tests' wheelhouse set holding this torch (with its dependencies) for this
    interpreter: the one a build of it made; where there is none (the build was found cached,
    and LEAN freed its set in an earlier run), one the factory's wheelhouse makes now, from the
    host's pip configuration, as that build would have."""
    import platform

    from wheelfactory.engines.wheelhouse import ContainerPython, Wheelhouse, WheelhouseRequest

    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"  # the venvs made from it are this interpreter's
    # (and this machine's arch: an aarch64 build's set holds the same torch release for another)
    found = sorted((TEST_CACHE / "wheelhouse" / "sets").glob(f"*/torch-{version}*-{tag}-*_{platform.machine()}.whl"))
    if found:
        return found[0].parent
    python = ContainerPython(f"{sys.version_info[0]}.{sys.version_info[1]}", platform.machine(),
                             ".".join(platform.libc_ver()[1].split(".")[:2]))
    return Wheelhouse(TEST_CACHE / "wheelhouse").ensure(WheelhouseRequest((f"torch=={version}",), (), python)).path


def pristine_venv(version: str) -> Path:
    path = TEST_CACHE / "venvs" / f"e2e-torch-{version}"
    with cache_lock(path):
        if not (path / ".complete").exists():
            shutil.rmtree(path, ignore_errors=True)
            wheelhouse_venv(path, (f"torch=={version}", "ninja"), torch_wheels(version))
            (path / ".complete").write_text(version)
    return path


COPIES: list[Path] = []  # the tests' venv copies: their hard links keep the pristine venvs' GBs alive


def fresh_venv(version: str, dest: Path) -> Path:
    """A copy of the pristine venv (hard links: seconds, and installing into it leaves the original alone)."""
    run(["cp", "-al", str(pristine_venv(version)), str(dest)])
    COPIES.append(dest)
    return dest


def torch_pins(venv: Path, version: str) -> list[str]:
    """``name==version --hash=sha256:...`` of each distribution in ``venv`` that came from the
    wheelhouse set of torch ``version`` (torch and what it requires), with the set record's hashes.
    uv's hash-checking mode wants a hash for every requirement, installed ones too: with these, the
    resolver sees torch installed and resolves against it, and no index is asked for it."""
    from packaging.utils import parse_wheel_filename
    from wheelfactory.engines.prepared_env import installed_releases
    from wheelfactory.engines.wheelhouse import COMPLETE

    present = {release for site in venv.glob("lib/python*/site-packages") for release in installed_releases(site)}
    record = json.loads((torch_wheels(version) / COMPLETE).read_text())
    pins = []
    for filename, sha256 in record["wheels"]:
        name, release, _, _ = parse_wheel_filename(filename)
        if (name, release) in present:
            pins.append(f"{name}=={release} --hash=sha256:{sha256}")
    assert any(pin.startswith("torch==") for pin in pins), (venv, pins)
    return pins


def check(venv: Path, env: dict[str, str] | None = None) -> dict[str, object]:
    result = run([str(venv / "bin" / "python"), "-c", CHECK], env={**os.environ, **(env or {})}, cwd=venv)
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def free_venvs() -> None:
    """The pristine venvs and every copy made of them (LEAN: the torch 2.6 venv alone is ~5 GB, a
    CUDA build with its nvidia-* wheels)."""
    for venv in [*TEST_CACHE.glob("venvs/e2e-torch-*"), *COPIES]:
        shutil.rmtree(venv, ignore_errors=True)
    COPIES.clear()


def uv_install(venv: Path, cache: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """uv, the second real installer, into ``venv``: no user or project configuration, its own cache,
    only the sources ``args`` name."""
    return uv_pip("install", "--python", str(venv / "bin" / "python"), *args, cache=cache, host_sources=False,
                  check=check)


def installed(venv: Path) -> str:
    """The wheel pip or uv put in the venv: fusedops' version (its local label names the variant)."""
    return run([str(venv / "bin" / "python"), "-c", "import importlib.metadata as m; print(m.version('fusedops'))"],
               cwd=venv).stdout.strip()


def check_cuda_variant(workdir: Path, variant: str, *, version: str, toolkit: str, archs: list[str],
                       cuobjdump: str) -> dict[str, object]:
    """Built, nothing grafted, the record's toolkit and archs, cuobjdump's listing, the size, and the
    smoke test's verdict (CUDA torch, no GPU: prebuilt, CPU ops); returns the record."""
    entry = manifest(workdir / "dist")[variant]
    assert entry["status"] in ("built", "cached"), entry
    wheel = workdir / "dist" / str(entry["wheel"])
    assert wheel.name.startswith(f"fusedops-{version}-cp39-abi3-manylinux_")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        record: dict[str, object] = json.loads(archive.read("fusedops/_build.json"))
    grafted = [n for n in names if any(lib in n for lib in ("libcudart", "libcuda.", "libnvrtc", "libtorch", "libc10"))]
    assert not grafted, grafted
    assert record["backend"] == "cuda" and record["toolkit"] == toolkit and record["arch_list"] == archs
    log = (workdir / "dist" / str(entry["log"])).read_text()
    assert f"# cuobjdump fusedops/_C.abi3.so: {cuobjdump}" in log
    assert "# wheel size:" in log
    assert f'{{"mode": "prebuilt", "variant": "{variant}", ' in log
    return record
