"""wheelfactory rocm-check for real: fusedops' CUDA sources hipified with torch.utils.hipify and
the device unit compiled by Debian's hipcc (HIP 5.2, clang 15) for gfx90a and gfx940, the newest
Instinct target that compiler knows; a target it does not know fails, naming the compiler's error."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests.testkit import REPO
from wheelfactory.images.base_image import BaseImage

pytestmark = [pytest.mark.docker, pytest.mark.slow]



def rocm_check(tmp_path: Path, base: BaseImage, *gfx: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "matrix.toml").write_text(f'[project]\npath = "{REPO / "kernels" / "fusedops"}"\n'
                                          f'[build]\nbase_image = "{base.tag}"\n')
    args = [a for target in gfx for a in ("--gfx", target)]
    return subprocess.run([sys.executable, "-m", "wheelfactory", "rocm-check", "-o", str(tmp_path / "dist"), *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=1800, check=False,
                          env={**os.environ, "COLUMNS": "300"})


def test_hipified_device_code_compiles_for_gfx90a_and_gfx940(bookworm_base: BaseImage, tmp_path: Path) -> None:
    result = rocm_check(tmp_path, bookworm_base, "gfx90a", "gfx940")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    counts = dict(re.findall(r"(gfx\w+): (\d+) kernels", result.stdout))
    assert counts == {"gfx90a": "30", "gfx940": "30"}  # 10 kernels x float, half, bfloat16
    assert "Not verified here: linking against a ROCm torch" in result.stdout
    hipified = tmp_path / "dist" / ".work" / "rocm-check" / "src" / "csrc" / "hip" / "device_instances.hip"
    assert hipified.is_file()


def test_a_target_the_compiler_does_not_know_fails_with_its_error(bookworm_base: BaseImage, tmp_path: Path) -> None:
    result = rocm_check(tmp_path, bookworm_base, "gfx942")
    assert result.returncode == 1
    assert "gfx942: FAILED" in result.stdout and "invalid target ID 'gfx942'" in result.stdout
