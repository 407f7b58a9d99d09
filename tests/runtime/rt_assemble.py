"""Assemble installed-layout kernel packages for the runtime tests and the load benchmark.

A package is laid out the way the factory installs it::

    <parent>/<pkg>/__init__.py, __main__.py, _reference.py   (the kernel's python package)
    <parent>/<pkg>/_runtime/                                (a copy of runtime/)
    <parent>/<pkg>/_sources/ + _sources/jit.json            (sources for JIT)
    <parent>/<pkg>/_C.abi3.so + _build.json                 (only with a prebuilt library)
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # the project supports 3.10, where tomli (a dependency there) is the same parser
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
RUNTIME_DIR = REPO / "runtime"
FIXTURE_KERNEL = Path(__file__).resolve().parent / "fixtures" / "tinyops"
FUSEDOPS_KERNEL = REPO / "kernels" / "fusedops"
PYTHON = sys.executable
LIBRARY_NAME = "_C.abi3.so"
PREBUILT_NAMESPACE = "_tinyops_cpu_1a2b3c4d"
RACE_PROCESSES = 8  # interpreters started at once on an empty cache


def torch_major_minor() -> tuple[int, int]:
    import torch

    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


@dataclass(frozen=True)
class Kernel:
    root: Path
    name: str
    version: str
    python_package: Path
    namespace_macro: str
    ops: tuple[str, ...]
    include_dirs: tuple[str, ...]
    cpu_sources: tuple[str, ...]
    cuda_sources: tuple[str, ...]
    cxx_flags: tuple[str, ...]
    nvcc_flags: tuple[str, ...]

    @property
    def env_prefix(self) -> str:
        return self.name.upper()


def read_kernel(root: Path) -> Kernel:
    data = tomllib.loads((root / "kernel.toml").read_text(encoding="utf-8"))
    kernel, sources, flags = data["kernel"], data["sources"], data.get("flags", {})
    return Kernel(
        root=root,
        name=kernel["name"],
        version=kernel["version"],
        python_package=root / kernel["python_package"],
        namespace_macro=kernel["namespace_macro"],
        ops=tuple(kernel["ops"]),
        include_dirs=tuple(sources.get("include_dirs", [])),
        cpu_sources=tuple(sources["cpu"]),
        cuda_sources=tuple(sources.get("cuda", [])),
        cxx_flags=tuple(flags.get("cxx", [])),
        nvcc_flags=tuple(flags.get("nvcc", [])),
    )


def jit_spec(kernel: Kernel) -> dict[str, object]:
    return {
        "schema": 1,
        "name": kernel.name,
        "version": kernel.version,
        "namespace_macro": kernel.namespace_macro,
        "sources": {"cpu": list(kernel.cpu_sources), "cuda": list(kernel.cuda_sources)},
        "include_dirs": list(kernel.include_dirs),
        "cxx_flags": list(kernel.cxx_flags),
        "nvcc_flags": list(kernel.nvcc_flags),
        "ops": list(kernel.ops),
    }


def current_record(kernel: Kernel, namespace: str, **overrides: object) -> dict[str, object]:
    """A build record describing a CPU library built for the running torch (then overridden)."""
    import torch

    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    abi = torch.compiled_with_cxx11_abi()
    record: dict[str, object] = {
        "schema": 1,
        "name": kernel.name,
        "version": f"{kernel.version}+cputorch{major}.{minor}",
        "variant": f"torch{major}{minor}-{'cxx11' if abi else 'cxx98'}-cpu-{platform.machine()}-linux",
        "torch": f"{major}.{minor}.0",
        "backend": "cpu",
        "toolkit": None,
        "cxx11_abi": abi,
        "python": "abi3",
        "arch": platform.machine(),
        "arch_list": [],
        "namespace": namespace,
        "ops": list(kernel.ops),
        "library": LIBRARY_NAME,
        "stable_abi": False,
    }
    record.update(overrides)
    return record


def _copy_sources(kernel: Kernel, dest: Path) -> None:
    dest.mkdir(parents=True)
    for include in kernel.include_dirs:
        shutil.copytree(
            kernel.root / include,
            dest / include,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    for source in (*kernel.cpu_sources, *kernel.cuda_sources):
        target = dest / source
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(kernel.root / source, target)
    (dest / "jit.json").write_text(json.dumps(jit_spec(kernel), indent=1), encoding="utf-8")


def assemble(
    kernel: Kernel,
    parent: Path,
    *,
    record: Mapping[str, object] | None = None,
    library: Path | bytes | None = None,
) -> Path:
    """Lay out ``<parent>/<kernel.name>`` as an installed package; returns the package dir."""
    package = parent / kernel.name
    shutil.copytree(kernel.python_package, package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(RUNTIME_DIR, package / "_runtime", ignore=shutil.ignore_patterns("__pycache__"))
    _copy_sources(kernel, package / "_sources")
    if library is not None:
        target = package / str((record or {}).get("library", LIBRARY_NAME))
        if isinstance(library, bytes):
            target.write_bytes(library)
        else:
            shutil.copy2(library, target)
    if record is not None:
        (package / "_build.json").write_text(json.dumps(record, indent=1), encoding="utf-8")
    return package


def compile_library(kernel: Kernel, namespace: str, out: Path, workdir: Path) -> Path:
    """Build the kernel's CPU library with op namespace ``namespace`` (what the factory ships)."""
    workdir.mkdir(parents=True, exist_ok=True)
    name = f"{kernel.name}_prebuilt_{namespace.strip('_')}"
    define = f"-D{kernel.namespace_macro}={namespace}"
    request = {
        "name": name,
        "sources": [str(kernel.root / s) for s in kernel.cpu_sources],
        "include_dirs": [str(kernel.root / d) for d in kernel.include_dirs],
        "cxx_flags": [*kernel.cxx_flags, define],
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
    kernel: Kernel,
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
    env = {k: v for k, v in os.environ.items() if not k.startswith(f"{kernel.env_prefix}_")}
    env["PYTHONPATH"] = str(package_parent)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if cache_dir is not None:
        env[f"{kernel.env_prefix}_CACHE_DIR"] = str(cache_dir)
    if load is not None:
        env[f"{kernel.env_prefix}_LOAD"] = load
    if no_compiler is not None:
        no_compiler.mkdir(parents=True, exist_ok=True)
        env["PATH"] = str(no_compiler)
        env.pop("CXX", None)
    env.update(extra or {})
    return env


def run_python(
    code: str, env: Mapping[str, str], *, timeout: float = 600, args: Sequence[str] = ()
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-c", code, *args],
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
    proc = run_python(PROBE, env, timeout=timeout)
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


def run_module(
    module: str, args: Sequence[str], env: Mapping[str, str], *, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``python -m <module> <args>`` in a fresh interpreter."""
    return subprocess.run(
        [PYTHON, "-m", module, *args],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
