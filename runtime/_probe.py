"""Side effects that feed the pure toolkit checks: PATH look-ups, toolkit homes, tool versions.

Finding a toolkit home never runs a program (it is part of the JIT hash, computed on every cache
hit); running ``nvcc --version`` / ``c++ --version`` happens only on a cache miss or in the report.
Every subprocess goes through ``run_tool``.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from ._errors import InvalidVersion
from ._settings import Settings
from ._toolkit import parse_nvcc_version
from ._versions import MajorMinor

__all__ = [
    "ToolRun",
    "cxx_command",
    "find_cuda_home",
    "find_rocm_home",
    "nvcc_version",
    "run_tool",
    "tool_version_line",
    "which",
]

logger = logging.getLogger(__name__)


class ToolRun(NamedTuple):
    """A finished command: its argv, exit status and combined output."""

    argv: tuple[str, ...]
    returncode: int
    output: str  # stdout and stderr together

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def run_tool(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float | None = 60,
    log_path: Path | None = None,
) -> ToolRun:
    """Run a command, echoing it to the log; output is captured (or written to ``log_path``)."""
    logger.debug("running: %s", shlex.join(argv))
    try:
        if log_path is not None:
            with open(log_path, "wb") as log:
                proc = subprocess.run(
                    list(argv),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=None if env is None else dict(env),
                    timeout=timeout,
                    check=False,
                )
            output = log_path.read_text(encoding="utf-8", errors="replace")
        else:
            proc = subprocess.run(
                list(argv),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=None if env is None else dict(env),
                timeout=timeout,
                check=False,
            )
            output = proc.stdout.decode("utf-8", errors="replace")
    except (OSError, subprocess.SubprocessError) as exc:
        return ToolRun(tuple(argv), -1, f"{type(exc).__name__}: {exc}")
    if proc.returncode != 0:
        logger.debug("%s exited with %d:\n%s", shlex.join(argv), proc.returncode, output[-4000:])
    return ToolRun(tuple(argv), proc.returncode, output)


def which(name: str, settings: Settings) -> str | None:
    return shutil.which(name, path=settings.path)


def cxx_command(settings: Settings) -> str:
    """The compiler torch.utils.cpp_extension will use: $CXX, else ``c++``."""
    return settings.cxx or "c++"


def _home_from_tool(tool: str | None) -> str | None:
    return str(Path(tool).resolve().parent.parent) if tool else None


def _find_home(explicit: str | None, tool: str, default: str, settings: Settings) -> str | None:
    """Same order as torch.utils.cpp_extension: the variable, the tool on PATH, the usual place."""
    return (
        explicit
        or _home_from_tool(which(tool, settings))
        or (default if os.path.isdir(default) else None)
    )


def find_cuda_home(settings: Settings) -> str | None:
    return _find_home(settings.cuda_home, "nvcc", "/usr/local/cuda", settings)


def find_rocm_home(settings: Settings) -> str | None:
    return _find_home(settings.rocm_home, "hipcc", "/opt/rocm", settings)


def nvcc_version(cuda_home: str | None) -> tuple[MajorMinor | None, str]:
    """(release, detail): run ``<cuda_home>/bin/nvcc --version``."""
    if cuda_home is None:
        return None, "no CUDA toolkit found (set CUDA_HOME, or put nvcc on PATH)"
    nvcc = Path(cuda_home) / "bin" / "nvcc"
    if not nvcc.exists():
        return None, f"no nvcc at {nvcc}"
    run = run_tool([str(nvcc), "--version"], timeout=30)
    if not run.ok:
        return None, f"`{nvcc} --version` failed: {run.output.strip()[-300:]}"
    try:
        return parse_nvcc_version(run.output), str(nvcc)
    except InvalidVersion as exc:
        return None, str(exc)


def tool_version_line(argv: Sequence[str]) -> str | None:
    """First line of ``<tool> --version``, or None when it does not run."""
    run = run_tool(argv, timeout=30)
    if not run.ok:
        return None
    lines = [line.strip() for line in run.output.splitlines() if line.strip()]
    return lines[0] if lines else ""
