"""An aarch64 variant on an x86-64 machine where aarch64 code cannot run (no QEMU user emulation
registered): `build` lists it as not built, with the reason and the command that fixes it, exit 5,
and writes nothing named for it. Not the emulation tier: the engine answers, QEMU is not needed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tests.testkit import REPO

pytestmark = [pytest.mark.docker]


UNREGISTERED = """
import functools, sys
from pathlib import Path
from wheelfactory.engines import choose
from wheelfactory.images import emulation
# this machine as it is before `engine start --emulate aarch64`: no binfmt_misc table
choose.arch_support = functools.partial(emulation.arch_support, binfmt=Path(sys.argv[1]))
from wheelfactory.cli.main import main
main(sys.argv[2:])
"""


def test_without_emulation_the_aarch64_variant_is_not_built_and_nothing_aarch64_is_written(tmp_path: Path) -> None:
    (tmp_path / "matrix.toml").write_text(f"""
[project]
path = "{REPO / 'kernels' / 'fusedops'}"
[matrix]
torch = ["2.13"]
backends = ["cpu"]
arch = ["aarch64"]
[build]
engine = "docker"
debian_base = "bookworm"
torch_index = "pypi"
""")
    done = subprocess.run([sys.executable, "-c", UNREGISTERED, str(tmp_path / "no-binfmt"), "build", "-m",
                           "matrix.toml", "-o", "dist"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 5, done.stdout[-3000:] + done.stderr[-3000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("wheelfactory: error: 1 of 1 selected variant(s) not built here (torch213-cxx11-cpu-aarch64-linux: "
                           "aarch64 code needs QEMU user emulation and binfmt_misc is not mounted"), line
    assert "apt-get install -y qemu-user-static binfmt-support" in line and "Traceback" not in done.stderr
    assert not [p for p in tmp_path.rglob("*aarch64*")]  # no base image dir, no wheel, no log named for it
