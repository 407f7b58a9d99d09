"""``python -m <pkg> report``: a ds_report-like table of versions, the decision, toolchain checks.

``collect_report`` gathers rows (here running compilers is fine); ``render_report`` is a pure
formatter; ``main`` is the one place that turns errors into exit codes.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ._cache import private_dir_problem
from ._decision import Decision
from ._env import detect_environment, with_gpus
from ._errors import RuntimeLoaderError
from ._jit import CACHE_SUBDIR
from ._probe import (
    cxx_command,
    find_cuda_home,
    find_rocm_home,
    nvcc_version,
    tool_version_line,
    which,
)
from ._record import BuildRecord, read_build_record
from ._spec import SOURCES_DIR, read_jit_spec
from ._toolkit import check_nvcc_version, read_toolkit_facts

if TYPE_CHECKING:
    from ._package import KernelPackage

__all__ = ["Row", "collect_report", "main", "render_report"]

OK, FAIL, WARN, NA = "[OKAY]", "[FAIL]", "[WARN]", "[ -- ]"
_WIDTH = 24


class Row(NamedTuple):
    """One line of the report: label, value, and an optional [OKAY]/[FAIL] status."""

    label: str
    value: str
    status: str = ""
    indent: int = 0


Section = tuple[str, tuple[Row, ...]]


def render_report(title: str, sections: Sequence[Section]) -> str:
    rule = "-" * 78
    lines = [rule, title, rule]
    for heading, rows in sections:
        if heading:
            lines.append(heading)
        for row in rows:
            label = "  " * row.indent + row.label
            dots = "." * max(2, _WIDTH - len(label))
            status = f"{row.status} " if row.status else ""
            lines.append(f"{label} {dots} {status}{row.value}")
        lines.append(rule)
    return "\n".join(lines)


def _dir_row(label: str, path: Path, env_var: str) -> Row:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return Row(label, f"{path} (not created yet)", NA, 1)
    problem = private_dir_problem(path, st.st_mode, st.st_uid, os.geteuid(), env_var)
    if problem is not None:
        return Row(label, problem, FAIL, 1)
    return Row(label, f"{path} (mode {stat.S_IMODE(st.st_mode):04o}, owned by you): safe", OK, 1)


def _package_version(pkg: KernelPackage, record: object) -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version(pkg.name)
    except importlib.metadata.PackageNotFoundError:
        pass
    if isinstance(record, BuildRecord) and record.version:
        return record.version
    try:
        return read_jit_spec(pkg.package_dir / SOURCES_DIR).version
    except RuntimeLoaderError:
        return "unknown"


def collect_report(pkg: KernelPackage) -> tuple[list[Section], int]:
    """The report's sections and the exit status (1 when the package cannot load as configured)."""
    settings = pkg.settings()
    env = with_gpus(detect_environment())
    record = read_build_record(pkg.package_dir)
    status = 0

    if env.backend == "cpu":
        gpus = "none (CPU-only torch)"
    elif env.gpu_capabilities or env.gpu_archs:
        gpus = ", ".join(
            [f"sm_{c.major}{c.minor} ({c})" for c in env.gpu_capabilities] + list(env.gpu_archs)
        )
    else:
        gpus = "no GPU visible"
    environment = (
        Row("package", f"{pkg.name} {_package_version(pkg, record)} at {pkg.package_dir}"),
        Row("torch", f"{env.torch_version} (git {env.torch_git_version[:12] or 'unknown'})"),
        Row("torch CUDA", str(env.cuda) if env.cuda else "none"),
        Row("torch HIP", str(env.hip) if env.hip else "none"),
        Row(
            "C++ ABI",
            "cxx11 (_GLIBCXX_USE_CXX11_ABI=1)"
            if env.cxx11_abi
            else "pre-cxx11 (_GLIBCXX_USE_CXX11_ABI=0)",
        ),
        Row("Python", f"{sys.version.split()[0]} ({env.python_abi})"),
        Row("machine", env.machine),
        Row("GPU capabilities", gpus),
        Row(
            "build record",
            f"{record.variant} ({record.library}, namespace {record.namespace})"
            if isinstance(record, BuildRecord)
            else record.reason,
        ),
        Row(settings.load_var, settings.load_mode),
    )

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the report prints the reason itself
        try:
            info = pkg.backend_info()
        except RuntimeLoaderError as exc:
            info = None
            status = 1
            load_rows: tuple[Row, ...] = (Row("mode", "cannot load", FAIL), Row("error", str(exc)))
    if info is not None:
        raw_decisions: list[dict[str, object]] = info["decisions"]  # type: ignore[assignment]
        decisions = [
            Decision(str(d["candidate"]), bool(d["accepted"]), str(d["reason"]))
            for d in raw_decisions
        ]
        ops: dict[str, str] = info["ops"]  # type: ignore[assignment]
        load_rows = (
            Row("mode", str(info["mode"]), OK if info["mode"] != "reference" else WARN),
            Row("variant", str(info["variant"] or "-")),
            Row("library", str(info["library"] or "-")),
            Row("namespace", str(info["namespace"] or "-")),
            *(
                Row(d.candidate, d.reason, "[ yes]" if d.accepted else "[ no ]", 1)
                for d in decisions
            ),
            Row("ops", ""),
            *(Row(op, mode, OK if mode != "reference" else WARN, 1) for op, mode in ops.items()),
        )

    cxx = cxx_command(settings)
    cxx_path = which((shlex.split(cxx) or ["c++"])[0], settings)
    cxx_version = tool_version_line([*shlex.split(cxx), "--version"]) if cxx_path else None
    ninja_path = which("ninja", settings)
    ninja_version = tool_version_line([ninja_path, "--version"]) if ninja_path else None
    tools = [
        Row(
            "c++ compiler",
            f"{cxx_path}: {cxx_version}"
            if cxx_path
            else f"{cxx!r} not found on PATH (set CXX or install g++)",
            OK if cxx_path else FAIL,
            1,
        ),
        Row(
            "ninja",
            f"{ninja_path}: {ninja_version}"
            if ninja_path
            else "not found on PATH (pip install ninja)",
            OK if ninja_path else FAIL,
            1,
        ),
    ]
    facts = read_toolkit_facts()  # the compatibility table shipped beside the runtime, if any
    cuda_home = find_cuda_home(settings)
    nvcc, detail = nvcc_version(cuda_home)
    if env.cuda is None:
        text = f"{nvcc} at {detail}" if nvcc else detail
        tools.append(Row("nvcc", f"{text}; not needed: this torch has no CUDA", NA, 1))
    elif nvcc is None:
        tools.append(
            Row("nvcc", f"{detail}; needed to JIT-compile for torch's CUDA {env.cuda}", FAIL, 1)
        )
    else:
        verdict = check_nvcc_version(nvcc, env.cuda, facts)
        tools.append(
            Row("nvcc", f"{nvcc} at {detail}: {verdict.reason}", OK if verdict.ok else FAIL, 1)
        )
    if env.hip is not None:
        rocm_home = find_rocm_home(settings)
        hipcc = Path(rocm_home) / "bin" / "hipcc" if rocm_home else None
        found = hipcc is not None and hipcc.exists()
        tools.append(
            Row(
                "hipcc",
                str(hipcc) if found else "not found (set ROCM_HOME)",
                OK if found else FAIL,
                1,
            )
        )
    tools.append(Row("toolkit table", facts.source, OK if facts.shipped else WARN, 1))
    if settings.torch_cuda_arch_list:
        tools.append(Row("TORCH_CUDA_ARCH_LIST", settings.torch_cuda_arch_list, "", 1))

    cache = (
        Row(
            "cache directory",
            str(settings.cache_dir)
            + (f" (from {settings.cache_var})" if settings.cache_dir_from_env else " (default)"),
        ),
        _dir_row("itself", settings.cache_dir, settings.cache_var),
        _dir_row(CACHE_SUBDIR, settings.cache_dir / CACHE_SUBDIR, settings.cache_var),
    )
    sections: list[Section] = [
        ("", environment),
        ("", load_rows),
        ("toolchain (for JIT builds)", tuple(tools)),
        ("", cache),
    ]
    return sections, status


def main(pkg: KernelPackage, argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog=f"python -m {pkg.name}", description=f"{pkg.name} kernel package tools"
    )
    sub = parser.add_subparsers(dest="command")
    report = sub.add_parser(
        "report", help="print versions, the loaded backend and why, toolchain checks"
    )
    report.add_argument("--json", action="store_true", help="print backend_info() as JSON instead")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.command != "report":
        parser.print_help()
        return 2
    try:
        if args.json:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                print(json.dumps(pkg.backend_info(), indent=2, default=str))
            return 0
        sections, status = collect_report(pkg)
        print(render_report(f"{pkg.name} report", sections))
        return status
    except RuntimeLoaderError as exc:
        print(f"{pkg.name}: error: {exc}", file=sys.stderr)
        return 1
