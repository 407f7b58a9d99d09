"""The ROCm device-code check: hipify a kernel's CUDA sources (torch.utils.hipify needs no ROCm)
and compile its device unit with hipcc for the gfx targets, in a container made from the base
plus Debian's hipcc (docker/rocm-check.Dockerfile).

What it verifies: the hipified kernels compile to code objects for each target (counted in the
fat binary). What it does not: linking against a ROCm torch (none is reachable from our
machines), loading or running. The device unit (kernel.toml ``[sources] device_check``)
instantiates every kernel with no torch beyond c10's element types, so it compiles without a
ROCm torch's headers.
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from wheelfactory.errors import ConfigError
from wheelfactory.images.containers import Container
from wheelfactory.images.dockerfiles import (
    RenderedImage,
    content_digest,
    ensure_image,
    label_block,
    load_template,
)
from wheelfactory.project.kernel_toml import DECLARATION, KernelSpec
from wheelfactory.support.proc import CommandFailed, run
from wheelfactory.support.project_copy import copy_project_file, copy_project_tree
from wheelfactory.support.timeline import note

if TYPE_CHECKING:
    from wheelfactory.images.containers import DockerClient

TEMPLATE = "rocm-check.Dockerfile"
REPOSITORY = "wheelfactory/rocm-check"
LLVM_BIN = "/usr/lib/llvm-15/bin"  # Debian bookworm's hipcc is built on LLVM 15
_TARGET = re.compile(r"^gfx[0-9a-f]+$")

HIPIFY = """
import sys
from torch.utils.hipify import hipify_python
root = sys.argv[1]
hipify_python.hipify(project_directory=root, output_directory=root, includes=[root + "/*"],
                     show_detailed=False, show_progress=False, is_pytorch_extension=True)
"""


@dataclass(frozen=True)
class TargetResult:
    target: str
    ok: bool
    kernels: int  # kernel symbols in the target's code object
    message: str = ""  # the compiler's first error when not ok


@dataclass(frozen=True)
class RocmCheck:
    compiler: str
    results: tuple[TargetResult, ...]

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    def describe(self) -> str:
        parts = [
            f"{r.target}: {r.kernels} kernels" if r.ok else f"{r.target}: FAILED ({r.message})"
            for r in self.results
        ]
        return f"{self.compiler}; " + "; ".join(parts)


def render_check_image(base: str) -> RenderedImage:
    template = load_template(TEMPLATE)
    labels = {"wheelfactory.kind": "rocm-check", "wheelfactory.base": base}
    dockerfile = template.fill({"base": base, "labels": label_block(labels)})
    content = content_digest(dockerfile)
    return RenderedImage(
        dockerfile,
        f"{REPOSITORY}:{content[:12]}",
        template.network,
        TEMPLATE,
        content,
        tuple(sorted(labels.items())),
    )


def hipify_tree(
    kernel: KernelSpec, dest: Path, *, python: str = sys.executable, log: Path | None = None
) -> Path:
    """Copy the kernel's include dirs and CUDA sources to ``dest`` and hipify them in place;
    returns ``dest``. Runs torch.utils.hipify with ``python`` (an interpreter with torch)."""
    if dest.exists():
        shutil.rmtree(dest)
    declared_in = str(kernel.root / DECLARATION)
    for rel in sorted({*kernel.include_dirs, *(p.parent for p in kernel.sources_for("cuda"))}):
        copy_project_tree(
            kernel.root,
            rel,
            dest / rel,
            ignore=shutil.ignore_patterns("__pycache__"),
            declared_in=declared_in,
        )
    if kernel.device_check is not None:
        copy_project_file(
            kernel.root, kernel.device_check, dest / kernel.device_check, declared_in=declared_in
        )
    run([python, "-c", HIPIFY, str(dest)], log=log)
    return dest


def hipified_path(relative: Path) -> Path:
    """Where hipify puts a source: csrc/cuda/x.cu -> csrc/hip/x.hip."""
    parts = ["hip" if p == "cuda" else p for p in relative.parent.parts]
    return Path(*parts) / (
        relative.stem + (".hip" if relative.suffix == ".cu" else relative.suffix)
    )


def check_device_code(
    client: DockerClient,
    base: str,
    kernel: KernelSpec,
    targets: Sequence[str],
    *,
    work: Path,
    log: Path,
    torch_include: Path | None = None,
) -> RocmCheck:
    """hipify the kernel and compile its device unit for each target; ``torch_include``: torch's
    headers (default: this interpreter's torch), for c10's element types."""
    if kernel.device_check is None:
        raise ConfigError(
            f"{kernel.root / 'kernel.toml'} names no device unit to check",
            key="sources.device_check",
            hint="a .cu that instantiates every kernel, with no torch",
        )
    bad = [t for t in targets if not _TARGET.match(t)]
    if bad:
        raise ConfigError(f"not gfx targets: {', '.join(bad)}", hint="e.g. gfx90a, gfx940")
    if torch_include is None:
        import torch

        torch_include = Path(torch.__file__).parent / "include"
    tree = hipify_tree(kernel, work / "src", log=log)
    unit = hipified_path(kernel.device_check)
    image = ensure_image(client, render_check_image(base), log=log)
    results = []
    with Container(
        client, image.id, volumes={tree: "/src:ro", torch_include: "/torch-include:ro"}
    ) as box:
        compiler = " / ".join(
            line.strip()
            for line in box.run(["hipcc", "--version"], check=False).splitlines()
            if line.startswith(("HIP version", "Debian clang", "clang version"))
        )
        for target in targets:
            obj = f"/tmp/{target}.o"
            try:
                box.run(
                    [
                        "hipcc",
                        "-std=c++17",
                        "-DUSE_ROCM",
                        "-O2",
                        "-I/torch-include",
                        f"--offload-arch={target}",
                        "-c",
                        f"/src/{unit}",
                        "-o",
                        obj,
                    ],
                    log=log,
                    workdir=f"/src/{unit.parent}",
                )
            except CommandFailed as exc:
                first = next(
                    (line for line in exc.tail.splitlines() if "error" in line),
                    exc.tail.splitlines()[-1:],
                )
                results.append(TargetResult(target, False, 0, str(first).strip()))
                continue
            results.append(TargetResult(target, True, _count_kernels(box, obj, target, log)))
    return RocmCheck(compiler or "hipcc", tuple(results))


def _count_kernels(box: Container, obj: str, target: str, log: Path) -> int:
    """Kernel symbols in the target's code object (unbundled from the object's .hip_fatbin)."""
    script = (
        f"{LLVM_BIN}/llvm-objcopy --dump-section=.hip_fatbin=/tmp/fat.bin {obj} && "
        f"{LLVM_BIN}/clang-offload-bundler --unbundle --type=o --input=/tmp/fat.bin "
        f"--targets=hipv4-amdgcn-amd-amdhsa--{target} --output=/tmp/{target}.co && "
        f"{LLVM_BIN}/llvm-readelf --symbols /tmp/{target}.co"
    )
    listing = box.run(["sh", "-c", script], log=None)
    names = {
        line.split()[-1] for line in listing.splitlines() if " FUNC " in line and "_kernel" in line
    }
    note(log, f"{target}: {len(names)} kernels in the code object")
    return len(names)
