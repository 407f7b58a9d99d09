"""The JIT spec ``_sources/jit.json``: which shipped sources and flags make the library."""

from __future__ import annotations

import json
import posixpath
from pathlib import Path
from typing import NamedTuple

from ._errors import RecordError
from ._record import str_list
from ._versions import Backend

__all__ = ["JIT_SPEC_FILE", "SOURCES_DIR", "JitSpec", "parse_jit_spec", "read_jit_spec"]

SOURCES_DIR = "_sources"
JIT_SPEC_FILE = "jit.json"
SPEC_SCHEMA = 1


def _is_identifier(text: str) -> bool:
    return text.isascii() and text.isidentifier()


class JitSpec(NamedTuple):
    """What ``jit.json`` says: sources per backend, include dirs, flags, the namespace macro."""

    name: str
    version: str
    namespace_macro: str
    cpu_sources: tuple[str, ...]
    cuda_sources: tuple[str, ...]
    include_dirs: tuple[str, ...]
    cxx_flags: tuple[str, ...]
    nvcc_flags: tuple[str, ...]
    hip_flags: tuple[str, ...] | None
    ops: tuple[str, ...]

    def sources_for(self, backend: Backend) -> tuple[str, ...]:
        # A GPU build compiles the CPU sources too, so CPU tensors keep working
        # (ROCm: torch.utils.cpp_extension hipifies the .cu files).
        return self.cpu_sources if backend == "cpu" else self.cpu_sources + self.cuda_sources

    def device_flags(self, backend: Backend) -> tuple[str, ...]:
        if backend == "rocm":
            if self.hip_flags is not None:
                return self.hip_flags
            # hipcc does not know nvcc's long options (--use_fast_math, ...): keep the rest.
            return tuple(f for f in self.nvcc_flags if not f.startswith("--"))
        return self.nvcc_flags


def _relative_paths(value: object, key: str, source: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RecordError(f"{source}: {key!r} must be a list of strings, got {value!r}")
    for path in value:
        normal = posixpath.normpath(path)
        if path.startswith("/") or normal == ".." or normal.startswith("../"):
            raise RecordError(f"{source}: {key!r} entry {path!r} must stay inside {SOURCES_DIR}/")
    return tuple(value)


def parse_jit_spec(data: object, source: str = JIT_SPEC_FILE) -> JitSpec:
    if not isinstance(data, dict):
        raise RecordError(f"{source}: expected a JSON object, got {type(data).__name__}")
    if data.get("schema") != SPEC_SCHEMA:
        raise RecordError(
            f"{source}: schema {data.get('schema')!r} is not the one this runtime reads ({SPEC_SCHEMA})"
        )
    for key in ("name", "version", "namespace_macro"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise RecordError(f"{source}: missing required string {key!r}")
    if not _is_identifier(data["namespace_macro"]):
        raise RecordError(
            f"{source}: namespace_macro {data['namespace_macro']!r} is not an identifier"
        )
    sources = data.get("sources")
    if not isinstance(sources, dict) or not sources.get("cpu"):
        raise RecordError(
            f"{source}: 'sources' must map 'cpu' (and optionally 'cuda') to file lists"
        )
    ops = str_list(data.get("ops"), "ops", source)
    if not ops or not all(_is_identifier(op) for op in ops):
        raise RecordError(f"{source}: 'ops' must list op names, got {list(ops)!r}")
    hip_flags = data.get("hip_flags")
    return JitSpec(
        name=data["name"],
        version=data["version"],
        namespace_macro=data["namespace_macro"],
        cpu_sources=_relative_paths(sources["cpu"], "sources.cpu", source),
        cuda_sources=_relative_paths(sources.get("cuda", []), "sources.cuda", source),
        include_dirs=_relative_paths(data.get("include_dirs", []), "include_dirs", source),
        cxx_flags=str_list(data.get("cxx_flags", []), "cxx_flags", source),
        nvcc_flags=str_list(data.get("nvcc_flags", []), "nvcc_flags", source),
        hip_flags=None if hip_flags is None else str_list(hip_flags, "hip_flags", source),
        ops=ops,
    )


def read_jit_spec(sources_dir: Path) -> JitSpec:
    path = sources_dir / JIT_SPEC_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise RecordError(f"no JIT spec at {path}: the sources were not shipped") from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise RecordError(f"JIT spec {path} is unreadable or corrupt: {exc}") from exc
    return parse_jit_spec(data, str(path))
