"""What a failed build's output says, in our words: a message from a tool below us (torch, the
build front end) that reaches the user is our error too. Pure: reads the log's text.

Each diagnosis names the cause in terms of the project and the plan, and the setting to change;
a failure it does not recognise is left as it was (None), with the log's excerpt.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from wheelfactory.errors import VariantBuildError
from wheelfactory.plan.identity import Variant
from wheelfactory.project.stage import Stage
from wheelfactory.support.proc import CommandFailed

_MISSING = re.compile(r"Missing dependencies:\s*\n((?:\s+\S.*\n?)+)")
_BACKEND = re.compile(r"Backend '([^']+)' is not available")
# torch's words when code asks it about a GPU on a machine without one
NO_GPU = (
    "Found no NVIDIA driver on your system",
    "No CUDA GPUs are available",
    "Torch not compiled with CUDA enabled",
)
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
# A compiler's diagnostic: gcc and clang `path:line:col: error: text`, nvcc `path(line): error: text`
_DIAGNOSTIC = re.compile(
    r"^(?P<path>[^\s:(][^:(]*?)(?::(?P<line>\d+)(?::(?P<col>\d+))?:|\((?P<nvline>\d+)\):) "
    r"(?P<kind>fatal error|error): (?P<text>.+)$",
    re.M,
)
# Where a build sees the author's files: the host engine's staging copy, cibuildwheel's /project,
# and a native kernel's sources inside its package (project/stage.py)
_STAGED = re.compile(r"^(?:.*/\.work/[^/]+/src/|/project/)(?:[^/]+/_sources/)?")
MAX_DIAGNOSTICS = 8
# frames of the tools under the project's build, not its own code
_TOOL_FRAMES = (
    "/torch/",
    "site-packages",
    "/opt/wheelfactory/",
    "/setuptools/",
    "<string>",
    "/pyproject_hooks/",
    "/lib/python3",
)


def _asking_frame(output: str, marker: str) -> str | None:
    """``path:line (function)`` of the project's own frame nearest to the traceback that ends in
    ``marker``: the code that asked."""
    ending = output.find(marker)
    frames = [
        m
        for m in _FRAME.finditer(output, 0, ending)
        if not any(t in m.group(1) for t in _TOOL_FRAMES)
    ]
    if not frames:
        return None
    path, line, function = frames[-1].groups()
    return f"{path.removeprefix('/project/')}:{line} ({function})"


def diagnosis(variant: Variant, output: str, *, declared_in: str) -> str | None:
    """One line for a failed build of ``variant`` whose output was ``output``; ``declared_in``:
    where the project's build system is declared (pyproject.toml [build-system])."""
    if variant.key.backend.kind == "cpu" and "CUDA_HOME environment variable is not set" in output:
        return (
            f"{variant.id}: this project compiles CUDA code whatever the variant (its build asked torch for a "
            'CUDA extension, and a CPU build has no CUDA toolkit): it builds no CPU wheel; drop "cpu" from '
            '[matrix] backends, or exclude it ([[exclude]] backend = "cpu")'
        )
    # CMake wraps its messages: compare with the whitespace folded
    if (
        variant.key.backend.kind == "cpu"
        and "Caffe2 version uses CUDA but I cannot find the CUDA" in " ".join(output.split())
    ):
        return (
            f"{variant.id}: the torch this CPU variant builds against is a CUDA build (the one its index "
            "serves), and CMake's find_package(Torch) asks for that build's CUDA toolkit even for CPU code: "
            'take CPU torch builds for CPU variants ([build] torch_index = "pytorch", whose cpu index has '
            "them), or have the project find torch's headers and libraries without torch's CMake config"
        )
    if variant.key.backend.kind in ("cuda", "rocm"):
        marker = next((m for m in NO_GPU if m in output), None)
        where = _asking_frame(output, marker) if marker else None
        if marker and where:
            return (
                f"{variant.id}: the project's build asks torch about the machine's GPU (at {where}: "
                f"{marker!r}), and build machines have none: the project must take its GPU architectures from "
                f"TORCH_CUDA_ARCH_LIST, which the factory sets to the variant's ([cuda] arch_list: "
                f"{';'.join(variant.arch_list) or 'none'}), or be built on a machine with a GPU"
            )
    missing = _MISSING.search(output)
    if missing:
        names = ", ".join(line.strip() for line in missing.group(1).splitlines() if line.strip())
        return (
            f"{variant.id}: the build asked for {names} at build time, which is neither in {declared_in} "
            "nor a known need of its build backend: add it to [build-system] requires"
        )
    backend = _BACKEND.search(output)
    if backend:
        return (
            f"{variant.id}: the build backend {backend.group(1)!r} could not be imported from the build "
            f"environment made from {declared_in}: list the package that provides it in [build-system] requires"
        )
    return compiler_errors(variant, output)


def author_path(path: str) -> str:
    """A compiled file's path as the project's author wrote it: the staged copy's prefix removed."""
    return _STAGED.sub("", path, count=1)


def compiler_errors(variant: Variant, output: str) -> str | None:
    """The compiler's errors, each once (a build front end prints them again and again), on the
    author's own paths: a headline naming the variant and the first file, then the others. The
    command lines, the front end's traceback and its tips stay in the log."""
    seen: dict[str, None] = {}
    for match in _DIAGNOSTIC.finditer(output):
        line = match.group("line") or match.group("nvline")
        column = f":{match.group('col')}" if match.group("col") else ""
        seen.setdefault(
            f"{author_path(match.group('path'))}:{line}{column}: {match.group('kind')}: "
            f"{match.group('text').strip()}",
            None,
        )
    if not seen:
        return None
    errors = list(seen)
    where = errors[0].split(": ", 1)[0]
    more = [f"  {e}" for e in errors[:MAX_DIAGNOSTICS]]
    if len(errors) > MAX_DIAGNOSTICS:
        more.append(f"  ... and {len(errors) - MAX_DIAGNOSTICS} more")
    return "\n".join(
        [
            f"{variant.id}: the compiler failed in {where.rsplit(':', 2)[0]} ({len(errors)} error(s)):",
            *more,
        ]
    )


@contextmanager
def diagnosed(stage: Stage, log: Path, error: type[VariantBuildError]) -> Iterator[None]:
    """Around a build command: a failure this module recognises in the log becomes ``error`` with
    its one line; any other failure goes on as it was."""
    try:
        yield
    except CommandFailed as exc:
        explained = diagnosis(
            stage.variant,
            log.read_text(errors="replace"),
            declared_in=stage.build_system.declared_in,
        )
        if explained is None:
            raise
        raise error(
            f"{explained}\n  (the whole output: {log})" if "\n" in explained else explained,
            explained=True,
        ) from exc
