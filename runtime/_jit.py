"""JIT builds into a hashed, locked, atomically published cache.

``_plan`` gathers everything a build depends on into ``JitInputs``; its sha256 names
the cache entry ``torch{maj}.{min}_{device}-{version}-{hash}`` and the op namespace
``_<pkg>_jit_<hash>`` (so a JIT build can coexist with a prebuilt one in one process).
``ensure_jit_library`` then returns a verified library path: a cache hit costs a hash of the
sources plus a sha256 of the library, with no compiler, ninja or toolkit probe; a miss checks the
toolchain, takes the key's flock, and builds into a temp dir that is renamed into place.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import NamedTuple

from ._cache import (
    CompletionRecord,
    FileLock,
    clean_stale_entries,
    discard_entry,
    ensure_private_dir,
    new_temp_dir,
    publish_entry,
    sha256_file,
    verify_entry,
)
from ._decision import Decision
from ._env import Environment, with_gpus
from ._errors import InvalidArch, JitUnavailable, RecordError
from ._settings import Settings
from ._spec import SOURCES_DIR, JitSpec, read_jit_spec
from ._versions import MajorMinor

# _probe and _toolkit (tool look-ups, nvcc tables) are imported inside the functions that need
# them: a CPU cache hit never does, and the whole runtime is imported within the first op call.

__all__ = [
    "CACHE_SUBDIR",
    "JitInputs",
    "JitResult",
    "digest_tree",
    "ensure_jit_library",
    "jit_cache_key",
    "jit_hash",
    "jit_namespace",
]

logger = logging.getLogger(__name__)

CACHE_SUBDIR = "torch_extensions"
# Bump when the layout of a cache entry or the meaning of JitInputs changes.
_CACHE_FORMAT = 1
_HASH_CHARS = 16


class JitInputs(NamedTuple):
    """Everything that changes the library a JIT build produces; its sha256 is the cache key's hash."""

    package: str
    version: str
    install_path: str
    backend: str
    device_tag: str
    torch_version: str
    torch_git_version: str
    cuda: str | None
    hip: str | None
    cxx11_abi: bool
    python_abi: str
    machine: str
    toolkit_home: str | None  # CUDA_HOME / ROCM_HOME of a GPU build
    cxx: str | None  # $CXX as given (the default `c++` is not resolved: that would be a probe)
    gpu_archs: str  # CUDA archs targeted, or ROCm archs
    sources: tuple[str, ...]
    include_dirs: tuple[str, ...]
    namespace_macro: str
    cxx_flags: tuple[str, ...]
    device_flags: tuple[str, ...]
    file_digests: tuple[tuple[str, str], ...]  # every file shipped under _sources/, with its sha256


def digest_tree(root: Path) -> tuple[tuple[str, str], ...]:
    """(relative path, sha256) of every file under ``root``: headers count, so any edit invalidates.

    Runs on every cache hit, so it stays on plain strings and os.scandir.
    """
    digests: list[tuple[str, str]] = []
    pending = [("", str(root))]
    while pending:
        prefix, directory = pending.pop()
        with os.scandir(directory) as scan:
            for item in scan:
                relative = prefix + item.name
                if item.is_dir():
                    if item.name != "__pycache__":
                        pending.append((relative + "/", item.path))
                else:
                    with open(item.path, "rb") as handle:
                        digests.append((relative, hashlib.sha256(handle.read()).hexdigest()))
    return tuple(sorted(digests))


def jit_hash(inputs: JitInputs) -> str:
    payload = json.dumps({"format": _CACHE_FORMAT, **inputs._asdict()}, sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:_HASH_CHARS]


def jit_cache_key(inputs: JitInputs, digest: str) -> str:
    version = re.sub(r"[^0-9A-Za-z._]", "_", inputs.version)
    return f"torch{MajorMinor.parse(inputs.torch_version)}_{inputs.device_tag}-{version}-{digest}"


def jit_namespace(package: str, digest: str) -> str:
    return f"_{re.sub(r'[^0-9A-Za-z_]', '_', package)}_jit_{digest}"


class JitResult(NamedTuple):
    """A verified JIT library and how it was obtained."""

    library: Path
    namespace: str
    key: str
    entry: Path
    cache: str  # "hit" | "built" | "rebuilt"
    decision: Decision
    version: str = ""
    lock_wait_seconds: float = 0.0
    build_seconds: float = 0.0


class _Planned(NamedTuple):
    inputs: JitInputs
    spec: JitSpec
    sources_dir: Path
    digest: str
    key: str
    namespace: str
    name: str
    note: str = ""


CPU_ONLY_NOTE = "no GPU visible and TORCH_CUDA_ARCH_LIST unset: built the CPU ops only"
CPU_SOURCES_NOTE = (
    "this package ships CPU sources only (a CPU variant's wheel): built the CPU ops only"
)


def _plan(
    package: str,
    package_dir: Path,
    env: Environment,
    settings: Settings,
    record_archs: tuple[str, ...],
) -> tuple[_Planned, Environment]:
    sources_dir = package_dir / SOURCES_DIR
    try:
        spec = read_jit_spec(sources_dir)
    except RecordError as exc:
        raise JitUnavailable(str(exc), "reinstall the package with its sources") from exc
    if env.backend != "cpu" and not spec.cuda_sources:
        # A CPU variant's wheel on a GPU torch: its device sources were never shipped.
        cpu_env = dataclasses.replace(env, cuda=None, hip=None)
        planned, _ = _plan(package, package_dir, cpu_env, settings, record_archs)
        return planned._replace(note=CPU_SOURCES_NOTE), cpu_env
    toolkit_home: str | None = None
    gpu_archs = ""
    device_flags: tuple[str, ...] = ()
    if env.backend == "cuda":
        from ._probe import find_cuda_home
        from ._toolkit import gencode_flags, read_toolkit_facts, select_cuda_archs

        torch_cuda = env.cuda
        assert torch_cuda is not None
        if (
            not settings.torch_cuda_arch_list
            or settings.torch_cuda_arch_list.strip().lower() == "native"
        ):
            env = with_gpus(env)  # only now: targeting the present GPU needs its capability
            if not env.gpu_capabilities:
                # No GPU to run device code on and no archs asked for: build the CPU ops only
                # (seconds, not minutes of nvcc). TORCH_CUDA_ARCH_LIST forces a CUDA build,
                # e.g. on a login node that compiles for the compute nodes.
                cpu_env = dataclasses.replace(env, cuda=None)
                planned, _ = _plan(package, package_dir, cpu_env, settings, record_archs)
                return planned._replace(note=CPU_ONLY_NOTE), cpu_env
        try:
            selection = select_cuda_archs(
                arch_list_env=settings.torch_cuda_arch_list,
                gpu_capabilities=env.gpu_capabilities,
                record_archs=record_archs,
                torch_cuda=torch_cuda,
                facts=read_toolkit_facts(),
            )
        except InvalidArch as exc:
            if (
                settings.torch_cuda_arch_list
                and settings.torch_cuda_arch_list.strip().lower() != "native"
            ):
                raise JitUnavailable(
                    f"TORCH_CUDA_ARCH_LIST is invalid: {exc}", "fix or unset TORCH_CUDA_ARCH_LIST"
                ) from exc
            raise JitUnavailable(
                str(exc), "set TORCH_CUDA_ARCH_LIST to the archs to build for"
            ) from exc
        toolkit_home = find_cuda_home(settings)
        gpu_archs = str(selection)
        device_flags = spec.device_flags("cuda") + tuple(gencode_flags(selection.archs))
    elif env.backend == "rocm":
        from ._probe import find_rocm_home

        if not settings.pytorch_rocm_arch:
            env = with_gpus(env)
        toolkit_home = find_rocm_home(settings)
        # torch.utils.cpp_extension picks the offload archs from PYTORCH_ROCM_ARCH or the GPUs.
        gpu_archs = settings.pytorch_rocm_arch or ";".join(env.gpu_archs)
        device_flags = spec.device_flags("rocm")
    inputs = JitInputs(
        package=package,
        version=spec.version,
        install_path=str(package_dir.resolve()),
        backend=env.backend,
        device_tag=env.device_tag,
        torch_version=env.torch_version,
        torch_git_version=env.torch_git_version,
        cuda=None if env.cuda is None else str(env.cuda),
        hip=None if env.hip is None else str(env.hip),
        cxx11_abi=env.cxx11_abi,
        python_abi=env.python_abi,
        machine=env.machine,
        toolkit_home=toolkit_home,
        cxx=settings.cxx,
        gpu_archs=gpu_archs,
        sources=spec.sources_for(env.backend),
        include_dirs=spec.include_dirs,
        namespace_macro=spec.namespace_macro,
        cxx_flags=spec.cxx_flags,
        device_flags=device_flags,
        file_digests=digest_tree(sources_dir),
    )
    digest = jit_hash(inputs)
    planned = _Planned(
        inputs=inputs,
        spec=spec,
        sources_dir=sources_dir,
        digest=digest,
        key=jit_cache_key(inputs, digest),
        namespace=jit_namespace(package, digest),
        name=f"{re.sub(r'[^0-9A-Za-z_]', '_', package)}_jit_{digest}",
    )
    return planned, env


def _check_toolchain(env: Environment, settings: Settings) -> None:
    """Only on a cache miss: is there a compiler, ninja and (for GPUs) a matching toolkit?"""
    import shlex

    from ._probe import cxx_command, find_cuda_home, find_rocm_home, nvcc_version, which
    from ._toolkit import check_build_tools, check_nvcc_version, read_toolkit_facts

    cxx = cxx_command(settings)
    cxx_words = shlex.split(cxx) or ["c++"]
    tools = check_build_tools(cxx, which(cxx_words[0], settings), which("ninja", settings))
    if not tools.ok:
        raise JitUnavailable(tools.reason, tools.fix)
    if env.backend == "cuda":
        assert env.cuda is not None
        home = find_cuda_home(settings)
        version, detail = nvcc_version(home)
        if version is None:
            raise JitUnavailable(
                f"no usable CUDA toolkit for torch's CUDA {env.cuda}: {detail}",
                f"install the CUDA {env.cuda} toolkit (nvcc) and set CUDA_HOME to it",
            )
        verdict = check_nvcc_version(version, env.cuda, read_toolkit_facts())
        if not verdict.ok:
            raise JitUnavailable(f"{verdict.reason} (nvcc at {detail})", verdict.fix)
    elif env.backend == "rocm":
        home = find_rocm_home(settings)
        if home is None or not (Path(home) / "bin" / "hipcc").exists():
            raise JitUnavailable(
                f"no ROCm toolkit (hipcc) for torch's ROCm {env.hip}",
                f"install ROCm {env.hip} and set ROCM_HOME to it",
            )


def _error_lines(output: str, limit: int = 6) -> str:
    """The compiler's error lines (what a user needs in a one-line reason), else the last lines."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return " | ".join(errors[:limit] if errors else lines[-limit:])


def _compile(planned: _Planned, env: Environment, temp: Path, root: Path) -> CompletionRecord:
    from ._probe import run_tool

    started = time.monotonic()
    # Build from a snapshot of the sources: ROCm's hipify writes next to them, and the
    # installed package may be read-only or edited while we compile.
    source_copy = temp / "src"
    shutil.copytree(planned.sources_dir, source_copy)
    build_dir = temp / "build"
    build_dir.mkdir()
    define = f"-D{planned.spec.namespace_macro}={planned.namespace}"
    request = {
        "name": planned.name,
        "sources": [str(source_copy / s) for s in planned.inputs.sources],
        "include_dirs": [str(source_copy / d) for d in planned.inputs.include_dirs],
        "cxx_flags": [*planned.inputs.cxx_flags, define],
        "cuda_flags": [*planned.inputs.device_flags, define],
        "build_directory": str(build_dir),
        "with_cuda": env.backend != "cpu",
    }
    request_path = temp / "request.json"
    request_path.write_text(json.dumps(request, indent=1), encoding="utf-8")
    worker = Path(__file__).with_name("_build_worker.py")
    log_path = temp / "build.log"
    logger.info("compiling %s (log: %s)", planned.key, log_path)
    run = run_tool(
        [sys.executable, str(worker), str(request_path)], timeout=None, log_path=log_path
    )
    built = build_dir / f"{planned.name}.so"
    if not run.ok or not built.is_file():
        error_log = root / f"{planned.key}.error.log"
        shutil.copyfile(log_path, error_log)
        raise JitUnavailable(
            f"compiling {planned.key} failed (exit {run.returncode}): {_error_lines(run.output)} "
            f"(full log: {error_log})",
            "fix the toolchain problem shown in the log",
        )
    library = temp / built.name
    os.replace(built, library)
    shutil.rmtree(build_dir, ignore_errors=True)
    shutil.rmtree(source_copy, ignore_errors=True)
    record = CompletionRecord(
        library=library.name,
        sha256=sha256_file(library),
        size=library.stat().st_size,
        namespace=planned.namespace,
        key=planned.key,
        seconds=round(time.monotonic() - started, 3),
    )
    record.write(temp)
    return record


def ensure_jit_library(
    package: str,
    package_dir: Path,
    env: Environment,
    settings: Settings,
    record_archs: tuple[str, ...] = (),
) -> JitResult:
    """A verified JIT library for this environment: from the cache, or built now. Raises JitUnavailable."""
    planned, env = _plan(package, package_dir, env, settings, record_archs)
    if settings.cache_problem is not None:
        raise JitUnavailable(settings.cache_problem)
    root = settings.cache_dir / CACHE_SUBDIR
    try:
        ensure_private_dir(settings.cache_dir, settings.cache_var)
        ensure_private_dir(root, settings.cache_var)
    except PermissionError as exc:  # UnsafeCacheDirError included
        raise JitUnavailable(str(exc)) from exc
    entry = root / planned.key

    def result(record: CompletionRecord, cache: str, reason: str, waited: float) -> JitResult:
        return JitResult(
            library=entry / record.library,
            namespace=planned.namespace,
            key=planned.key,
            entry=entry,
            cache=cache,
            decision=Decision(
                "jit", True, f"{reason} ({planned.note})" if planned.note else reason
            ),
            version=planned.spec.version,
            lock_wait_seconds=round(waited, 3),
            build_seconds=record.seconds if cache != "hit" else 0.0,
        )

    rejected = ""
    if os.path.lexists(entry):
        record, rejected = verify_entry(entry, planned.key, planned.namespace)
        if record is not None:
            return result(record, "hit", f"cache hit {planned.key} in {root}", 0.0)
        logger.info("cached JIT build %s rejected: %s; rebuilding", entry, rejected)

    _check_toolchain(env, settings)
    lock = FileLock(root / f"{planned.key}.lock")
    started = time.monotonic()
    try:
        if not lock.acquire(blocking=False):
            logger.info("waiting for another process building %s (lock %s)", planned.key, lock.path)
            lock.acquire()
    except PermissionError as exc:  # UnsafeCacheDirError: the lock path is not a plain file
        raise JitUnavailable(str(exc)) from exc
    waited = time.monotonic() - started
    try:
        if os.path.lexists(entry):  # re-check under the lock: another process may have finished it
            record, problem = verify_entry(entry, planned.key, planned.namespace)
            if record is not None:
                return result(
                    record,
                    "hit",
                    f"cache hit {planned.key} in {root} (built by another process)",
                    waited,
                )
            rejected = rejected or problem
            discard_entry(entry)
        clean_stale_entries(root, planned.key)
        temp = new_temp_dir(root, planned.key)
        try:
            record = _compile(planned, env, temp, root)
            publish_entry(temp, entry)
            # an earlier failure is history
            (root / f"{planned.key}.error.log").unlink(missing_ok=True)
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            raise
    finally:
        lock.release()
    if rejected:
        return result(
            record,
            "rebuilt",
            f"rebuilt {planned.key} in {record.seconds:.1f} s: the cached copy was rejected ({rejected})",
            waited,
        )
    return result(
        record, "built", f"compiled {planned.key} in {record.seconds:.1f} s into {root}", waited
    )
