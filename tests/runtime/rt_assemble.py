"""Assemble installed-layout kernel packages for the runtime tests and the load benchmark.

The layout is the factory's own: the package directory of the build stage that
``wheelfactory.project.native.write_stage`` lays out for the running torch's CPU variant (the kernel's python
package, the vendored runtime as ``_runtime``, ``_sources/`` with ``jit.json``, ``_build.json``),
with the build record and compiled library (``_C.abi3.so``) that a test chooses. The record a test
starts from is the one the factory wrote there, and the prebuilt library is compiled from the staged
``_sources/`` by the recipe in the staged ``jit.json`` (read with the runtime's own parser), as the
runtime's JIT would build it. Only the choices (namespace, record overrides, library) are the tests'.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.repo_paths import REPO  # not testkit: the benchmarks import this module without pytest
from wheelfactory._runtime._prebuilt import env_prefix
from wheelfactory._runtime._spec import read_jit_spec
from wheelfactory.engines.host_probe import host_variant, probe
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.matrix import parse_matrix
from wheelfactory.plan.tomlsource import TomlDocument
from wheelfactory.project.kernel_toml import KernelSpec
from wheelfactory.project.native import (
    LIBRARY_MODULE,
    RECORD_FILE,
    SOURCES_DIR,
    StagePlan,
    plan_stage,
    write_stage,
)

RUNTIME_DIR = REPO / "runtime"
FIXTURE_KERNEL = Path(__file__).resolve().parent / "fixtures" / "tinyops"
FUSEDOPS_KERNEL = REPO / "kernels" / "fusedops"
PYTHON = sys.executable
LIBRARY_NAME = f"{LIBRARY_MODULE}.abi3.so"
PREBUILT_NAMESPACE = "_tinyops_cpu_1a2b3c4d"
RACE_PROCESSES = 8  # interpreters started at once on an empty cache


def torch_major_minor() -> tuple[int, int]:
    import torch

    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


@functools.cache
def cpu_variant() -> Variant:
    """The factory's CPU variant of this interpreter's torch, planned the way ``wheelfactory
    build`` plans the host's (CPU even under a CUDA torch: the tests build CPU libraries)."""
    table = load_table()
    matrix = parse_matrix(TomlDocument.from_text("", "matrix.toml"), table, base_dir=REPO)
    return host_variant(matrix, table, dataclasses.replace(probe(PYTHON), cuda=None, hip=None))


def stage_plan(kernel: KernelSpec) -> StagePlan:
    return plan_stage(kernel, cpu_variant())


def stage_package(kernel: KernelSpec, parent: Path) -> Path:
    """The package the factory stages for the CPU variant, as ``<parent>/<kernel.name>`` (the
    stage's setup.py and pyproject.toml stay out: they are not installed); returns its path."""
    stage = parent / f".{kernel.name}-stage"
    write_stage(stage_plan(kernel), stage)
    package = (stage / kernel.name).rename(parent / kernel.name)
    shutil.rmtree(stage)
    return package


@functools.cache
def _staged_record(kernel: KernelSpec) -> str:
    with tempfile.TemporaryDirectory() as temp:
        return (stage_package(kernel, Path(temp)) / RECORD_FILE).read_text(encoding="utf-8")


def current_record(kernel: KernelSpec, namespace: str, **overrides: object) -> dict[str, object]:
    """The build record the factory writes for the CPU variant (as the staged ``_build.json``
    holds it), with the op namespace the library was built with (``compile_library``), then
    ``overrides``."""
    return {**json.loads(_staged_record(kernel)), "namespace": namespace, **overrides}


def assemble(
    kernel: KernelSpec,
    parent: Path,
    *,
    record: Mapping[str, object] | None = None,
    library: Path | bytes | None = None,
) -> Path:
    """Lay out ``<parent>/<kernel.name>`` as an installed package; returns the package dir.

    ``record`` replaces the staged build record (None: no record, a source-only install);
    ``library`` is the compiled library, as a file or its bytes."""
    package = stage_package(kernel, parent)
    staged = json.loads((package / RECORD_FILE).read_text(encoding="utf-8"))
    if record is None:
        (package / RECORD_FILE).unlink()
    else:
        (package / RECORD_FILE).write_text(json.dumps(record, indent=1), encoding="utf-8")
    if library is not None:
        target = package / str((record or staged)["library"])
        if isinstance(library, bytes):
            target.write_bytes(library)
        else:
            shutil.copy2(library, target)
    return package


def compile_library(kernel: KernelSpec, namespace: str, out: Path, workdir: Path) -> Path:
    """Build the kernel's CPU library with op namespace ``namespace``: from the sources and the
    ``jit.json`` the factory stages, by the runtime's build worker, as its JIT compiles them."""
    workdir.mkdir(parents=True, exist_ok=True)
    sources = stage_package(kernel, workdir / "staged") / SOURCES_DIR
    spec = read_jit_spec(sources)
    name = f"{kernel.name}_prebuilt_{namespace.strip('_')}"
    define = f"-D{spec.namespace_macro}={namespace}"
    request = {
        "name": name,
        "sources": [str(sources / s) for s in spec.sources_for("cpu")],
        "include_dirs": [str(sources / d) for d in spec.include_dirs],
        "cxx_flags": [*spec.cxx_flags, define],
        "cuda_flags": [],
        "build_directory": str(workdir),
        "with_cuda": False,
    }
    request_path = workdir / "request.json"
    request_path.write_text(json.dumps(request), encoding="utf-8")
    proc = subprocess.run(
        [PYTHON, str(RUNTIME_DIR / "_build_worker.py"), str(request_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"compiling {kernel.name} failed:\n{proc.stdout}\n{proc.stderr}")
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(workdir / f"{name}.so", out)
    return out


def child_env(
    kernel: KernelSpec,
    package_parent: Path,
    *,
    cache_dir: Path | None = None,
    load: str | None = None,
    no_compiler: Path | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Environment for a fresh interpreter that imports the assembled package.

    ``no_compiler``: an empty directory to use as the whole PATH (and CXX unset), so no compiler
    or ninja can be found; the interpreter is started by absolute path and needs no PATH.
    """
    prefix = env_prefix(kernel.name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(f"{prefix}_")}
    env["PYTHONPATH"] = str(package_parent)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if cache_dir is not None:
        env[f"{prefix}_CACHE_DIR"] = str(cache_dir)
    if load is not None:
        env[f"{prefix}_LOAD"] = load
    if no_compiler is not None:
        no_compiler.mkdir(parents=True, exist_ok=True)
        env["PATH"] = str(no_compiler)
        env.pop("CXX", None)
    env.update(extra or {})
    return env


def run_python(
    args: Sequence[str], env: Mapping[str, str], *, timeout: float | None = 600
) -> subprocess.CompletedProcess[str]:
    """``python <args>`` in a fresh interpreter: ``["-c", code, ...]`` or ``["-m", module, ...]``."""
    return subprocess.run(
        [PYTHON, *args],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# Imports the fixture package in a fresh interpreter, calls both ops three times, checks them
# against plain torch, and prints one JSON line: backend_info(), correctness, every warning.
PROBE = r"""
import json, sys, warnings
result = {"ok": None, "info": None, "error": None}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import torch
    import tinyops
    result["loaded_at_import"] = tinyops._package._loaded is not None
    try:
        x = torch.randn(4, 8)
        ref = torch.nn.functional.silu(x[:, :4]) * x[:, 4:]
        a, b = torch.randn(5), torch.randn(5)
        ok = all(torch.allclose(tinyops.silu_and_mul(x), ref, atol=1e-5) for _ in range(2))
        ok = ok and torch.allclose(tinyops.scale_add(a, b, 2.0), a + 2.0 * b, atol=1e-6)
        result["ok"] = bool(ok)
        result["info"] = tinyops.backend_info()
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
result["warnings"] = [{"category": w.category.__name__, "message": str(w.message)} for w in caught]
print("RESULT " + json.dumps(result))
"""


def run_probe(env: Mapping[str, str], *, timeout: float = 600) -> dict[str, object]:
    proc = run_python(["-c", PROBE], env, timeout=timeout)
    return parse_probe(proc)


def parse_probe(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, object] = json.loads(line[len("RESULT ") :])
            result["stderr"] = proc.stderr[-3000:]
            return result
    raise AssertionError(f"probe printed no result (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")


def fallback_warnings(result: Mapping[str, object]) -> list[str]:
    caught: list[dict[str, str]] = result["warnings"]  # type: ignore[assignment]
    return [w["message"] for w in caught if w["category"] == "ReferenceFallbackWarning"]

