"""The CLI as a user runs it: the installed console script, real files, exit codes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.testkit import REPO


def wheelfactory(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("wheelfactory")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "wheelfactory"]
    return subprocess.run([*command, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})


def test_console_script_is_installed() -> None:
    assert Path(sys.executable).with_name("wheelfactory").exists() or shutil.which("wheelfactory")


def test_plan_table_on_the_repo_matrix() -> None:
    result = wheelfactory("plan")
    assert result.returncode == 0, result.stderr
    assert "torch213-cxx11-cpu-x86_64-linux" in result.stdout
    assert "variant(s)" in result.stdout


def test_plan_json_follows_the_contract() -> None:
    result = wheelfactory("plan", "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["variants"] and isinstance(data["pruned"], list)
    for variant in data["variants"]:
        for key in ("id", "torch", "backend", "toolkit", "cxx11_abi", "python", "arch", "local_version"):
            assert key in variant


def test_plan_github_is_a_strategy_matrix(tmp_path: Path) -> None:
    matrix = tmp_path / "matrix.toml"
    matrix.write_text('[matrix]\ntorch = [">=2.5,<2.8"]\nbackends = ["cpu", "cuda"]\n')
    result = wheelfactory("plan", "-m", str(matrix), "--format", "github")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert list(data) == ["include"] and len(data["include"]) == 14
    # strategy.matrix values must be scalars (strings, numbers, booleans, null).
    assert all(isinstance(v, (str, int, float, bool, type(None))) for job in data["include"] for v in job.values())
    assert len({job["id"] for job in data["include"]}) == 14


def test_shards_from_the_cli(tmp_path: Path) -> None:
    matrix = tmp_path / "matrix.toml"
    matrix.write_text('[matrix]\ntorch = [">=2.5,<2.8"]\nbackends = ["cpu", "cuda"]\n')
    full = {v["id"] for v in json.loads(wheelfactory("plan", "-m", str(matrix), "--format", "json").stdout)["variants"]}
    parts = [{v["id"] for v in json.loads(
        wheelfactory("plan", "-m", str(matrix), "--format", "json", "--shard", f"{i}/3").stdout)["variants"]}
        for i in (1, 2, 3)]
    assert parts[0] | parts[1] | parts[2] == full
    assert not (parts[0] & parts[1] or parts[1] & parts[2] or parts[0] & parts[2])


def test_explain_lists_reasons(tmp_path: Path) -> None:
    matrix = tmp_path / "matrix.toml"
    matrix.write_text('[matrix]\ntorch = ["2.7"]\ncxx11_abi = "both"\n')
    result = wheelfactory("plan", "-m", str(matrix), "--explain")
    assert result.returncode == 0
    assert "torch 2.7 ships no pre-cxx11 wheels" in result.stdout


@pytest.mark.parametrize("content, args, fragment", [
    ("[matrix]\nbakends = ['cpu']\n", (), "did you mean 'backends'?"),
    ("[matrix]\ntorch = ['9.9']\n", (), "unknown torch version '9.9'"),
    ("[matrix]\nbackends = 'cuda'\n[[exclude]\n", (), "not valid TOML"),
    ("[matrix]\n", ("--shard", "3/2"), "shard 3 of 2 does not exist"),
    (None, (), "file not found"),
])
def test_bad_input_is_one_line_exit_2(tmp_path: Path, content: str | None, args: tuple[str, ...],
                                      fragment: str) -> None:
    matrix = tmp_path / "matrix.toml"
    if content is not None:
        matrix.write_text(content)
    result = wheelfactory("plan", "-m", str(matrix), *args)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("wheelfactory: ")
    assert fragment in lines[0] and "Traceback" not in result.stderr
    if not args:
        assert str(matrix) in lines[0]


def test_unknown_option_is_a_usage_error() -> None:
    result = wheelfactory("plan", "--formt", "json")
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_planning_does_not_import_torch(tmp_path: Path) -> None:
    code = ("import sys\nfrom wheelfactory.cli.main import main\n"
            "try:\n    main(['plan', '--format', 'json'])\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
            "assert 'torch' not in sys.modules, 'planning imported torch'\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_build_with_docker_but_no_engine_is_one_line_exit_3(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "wheelfactory", "build", "--engine", "docker", "-o", str(tmp_path / "dist")],
        cwd=REPO, capture_output=True, text=True, timeout=120,
        env={**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
    assert result.returncode == 3, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no Docker engine answers" in lines[0] and "Traceback" not in result.stderr
    assert not (tmp_path / "dist" / "manifest.json").exists()


def test_an_unknown_torch_release_points_at_a_route_the_user_can_take(tmp_path: Path) -> None:
    """Not at the package's own compat.toml (its source, which a user does not edit): at `compat
    refresh --write FILE` and `--compat FILE`, each an option the CLI has."""
    matrix = tmp_path / "matrix.toml"
    matrix.write_text("[matrix]\ntorch = ['2.99']\n")
    said = wheelfactory("plan", "-m", str(matrix)).stderr
    assert "wheelfactory compat refresh --write new-compat.toml" in said and "--compat new-compat.toml" in said, said
    assert "factory/wheelfactory/data" not in said
    assert "--write" in wheelfactory("compat", "refresh", "--help").stdout
    assert "--compat" in wheelfactory("build", "--help").stdout
