"""`[build] cpu_baseline`: the CPU level of each arch's wheels where a build asks for -march=native
(engines/cpu_baseline.py), per arch; a level of another arch is one line naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from wheelfactory.errors import ConfigError
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.matrix import Matrix, parse_matrix
from wheelfactory.plan.tomlsource import TomlDocument


def matrix(tmp_path: Path, text: str) -> Matrix:
    return parse_matrix(TomlDocument.from_text(text, str(tmp_path / "matrix.toml")), load_table(), base_dir=tmp_path)


def test_cpu_baseline_is_per_arch_and_a_wrong_level_is_one_line(tmp_path: Path) -> None:
    parsed = matrix(tmp_path, '[build]\ncpu_baseline = { x86_64 = "x86-64-v3" }\n')
    assert parsed.build.cpu_baselines == (("x86_64", "x86-64-v3"),)
    with pytest.raises(ConfigError) as refused:
        matrix(tmp_path, '[build]\ncpu_baseline = { x86_64 = "armv8-a" }\n')
    assert "'armv8-a' is not a CPU level of x86_64" in str(refused.value) and "\n" not in str(refused.value)
