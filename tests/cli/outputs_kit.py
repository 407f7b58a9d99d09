"""A small repository for the output-target tests: a one-variant matrix over the sample kernels,
a dist/ with a manifest and a build log, and a snapshot of every file's bytes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.testkit import REPO
from wheelfactory.cli.main import main
from wheelfactory.runner import manifest

VID = "torch213-cxx11-cpu-x86_64-linux"
MATRIX = """\
[project]
path = "kernels/fusedops"

[matrix]
torch = ["2.13"]
backends = ["cpu"]
cxx11_abi = true
python = ["abi3"]
arch = ["x86_64"]

[build]
debian_base = "bookworm"
debian_mirror = "http://mirror.example.invalid/debian"
torch_index = "pypi"
"""


def make_repo(root: Path) -> Path:
    """``root`` as a repository: matrix.toml, kernels/ (a symlink to the sample kernels),
    compat.toml (the bundled table) and dist/ (manifest.json and one variant's build.log)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "matrix.toml").write_text(MATRIX)
    (root / "kernels").symlink_to(REPO / "kernels")
    (root / "compat.toml").write_bytes((REPO / "factory/wheelfactory/data/compat.toml").read_bytes())
    dist = root / "dist"
    (dist / VID).mkdir(parents=True)
    (dist / VID / "build.log").write_text("the build log\n")
    manifest.write(dist, {VID: manifest.Entry(
        status="failed", wheel=None, sha256=None, seconds=1.0, key="k", log=f"{VID}/build.log", error="boom",
        engine="docker", image=None, torch_version="2.13.0", toolkit=None)})
    return root


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry under ``root`` (symlinks not followed): a file's bytes, else its kind."""
    found: dict[str, bytes | str] = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory, name)
            rel = str(path.relative_to(root))
            if path.is_symlink():
                found[rel] = f"symlink -> {os.readlink(path)}"
            elif path.is_dir():
                found[rel] = "directory"
            elif path.is_file():
                found[rel] = path.read_bytes()
            else:
                found[rel] = "other"
    return found


def run(*args: str) -> int:
    """``wheelfactory <args>`` in-process; its exit code."""
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    return int(exited.value.code or 0)


def temp_files(root: Path) -> list[str]:
    """Temp files a writer left under ``root`` (os.walk: the kernels/ symlink is not followed)."""
    return sorted(str(Path(d, n).relative_to(root)) for d, _, names in os.walk(root) for n in names
                  if n.endswith(".tmp"))
