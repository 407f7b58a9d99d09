"""`--compat FILE` with wrong values in the bundled table: each is one line naming the file, the
line and the key, exit 2 (never a traceback from a version parser)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.testkit import REPO, run_cli

BUNDLED = REPO / "factory" / "wheelfactory" / "data" / "compat.toml"
FIRST = '[torch."2.4"]'


def edited(tmp_path: Path, old: str, new: str, *, in_torch: bool = True) -> Path:
    """The bundled table with the first ``old`` (in the first [torch."X.Y"] entry, or anywhere)
    replaced by ``new``."""
    text = BUNDLED.read_text()
    start = text.index(FIRST) if in_torch else 0
    assert old in text[start:], old
    path = tmp_path / "compat.toml"
    path.write_text(text[:start] + text[start:].replace(old, new, 1))
    return path


@pytest.mark.parametrize(("old", "new", "key", "message"), [
    ('build_version = "2.4.1"', 'build_version = "banana"', 'torch."2.4".build_version',
     "'banana' is not a version; e.g. build_version = \"2.4.0\""),
    ('build_version = "2.4.1"', 'build_version = ""', 'torch."2.4".build_version', "'' is not a version"),
    ('build_version = "2.4.1"', 'build_version = "2.4.x"', 'torch."2.4".build_version', "'2.4.x' is not a version"),
    ('build_version = "2.4.1"', 'build_version = "2.5.0"', 'torch."2.4".build_version',
     "must be a 2.4.x release, not '2.5.0'"),
    ('build_version = "2.4.1"', "build_version = 2.4", 'torch."2.4".build_version', "must be a string"),
    ('build_version = "2.4.1"', 'build_version = ["2.4.1"]', 'torch."2.4".build_version', "must be a string"),
    ('build_version = "2.4.1"', "# no build_version", 'torch."2.4".build_version', "is required"),
    ('python = ["3.8",', 'python = ["banana",', 'torch."2.4".python', "'banana' is not a version"),
    ('python = ["3.8",', 'python = [3.8,', 'torch."2.4".python', "item 1 must be a string"),
    ('cuda = ["11.8",', 'cuda = ["eleven",', 'torch."2.4".cuda', "'eleven' is not a version"),
    ('cuda = ["11.8", "12.1", "12.4"]', 'cuda = "11.8"', 'torch."2.4".cuda', "must be an array of strings"),
    ('rocm = ["6.0",', 'rocm = ["6.x",', 'torch."2.4".rocm', "'6.x' is not a version"),
    ('pypi_default = "cu121"', "pypi_default = true", 'torch."2.4".pypi_default', "must be a string"),
    ('pypi_default = "cu121"', 'pypi_default = "banana"', 'torch."2.4".pypi_default',
     "'banana' is not one of its builds"),
    ('wheel_platform = "manylinux1"', "wheel_platform = 1", 'torch."2.4".wheel_platform', "must be a string"),
    ('aarch64 = ["cpu"]', 'aarch64 = ["banana"]', 'torch."2.4".aarch64', "unknown backend 'banana'"),
    ('aarch64 = ["cpu"]', "aarch64 = [1]", 'torch."2.4".aarch64', "item 1 must be a string"),
    ('abi.cxx98 = { builds = "all" }', 'abi.cxx98 = "all"', 'torch."2.4".abi.cxx98', "must be a table"),
    ('abi.cxx98 = { builds = "all" }', "abi.cxx98 = { builds = 3 }", 'torch."2.4".abi.cxx98.builds',
     "must be an array of strings"),
    ('index_paths = { cpu = "cpu-cxx11-abi" }', "index_paths = { cpu = 3 }",
     'torch."2.4".abi.cxx11.index_paths.cpu', "must be a string"),
    ("source = ", "source = 3 #", 'torch."2.4".source', "must be a string"),
    (FIRST, '[torch."banana"]', "torch.banana", "is not a torch major.minor version"),
    (FIRST, '[torch."2"]', "torch.2", "is not a torch major.minor version"),
])
def test_a_wrong_value_in_a_torch_entry_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str,
                                                    new: str, key: str, message: str) -> None:
    path = edited(tmp_path, old, new)
    assert run_cli("plan", "-m", str(REPO / "matrix.toml"), "--compat", str(path)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"wheelfactory: config error: {path}:") and f": {key}: " in err and message in err, err


@pytest.mark.parametrize(("old", "new", "key", "message"), [
    ('min_arch = "3.5"', 'min_arch = "banana"', 'cuda."11.8".min_arch', "'banana' is not a version"),
    ('max_arch = "9.0"', 'max_arch = "x"', 'cuda."11.8".max_arch', "'x' is not a version"),
    ('max_arch = "9.0"', "max_arch = 9.0", 'cuda."11.8".max_arch', "must be a string"),
    ('arch_list = "5.0;6.0;7.0;7.5;8.0;8.6;9.0"', 'arch_list = "5.0;sm_90"', 'cuda."11.8".arch_list',
     "'sm_90' is not a CUDA arch"),
    ('[cuda."11.8"]', '[cuda."banana"]', "cuda.banana", "is not a CUDA major.minor version"),
    ('[rocm."6.0"]', '[rocm."six"]', "rocm.six", "is not a ROCm major.minor version"),
])
def test_a_wrong_value_in_a_toolkit_entry_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str,
                                                      new: str, key: str, message: str) -> None:
    path = edited(tmp_path, old, new, in_torch=False)
    assert run_cli("plan", "-m", str(REPO / "matrix.toml"), "--compat", str(path)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"wheelfactory: config error: {path}:") and f": {key}: " in err and message in err, err
