"""The public API docs/api.md shows: the example runs as written, the exports exist and are typed, and
the exit-code tables (README.md's and docs/commands.md's) are the one errors.py defines."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import wheelfactory
from tests.testkit import REPO, docs_text, markdown_section
from wheelfactory import errors

README = (REPO / "README.md").read_text()
API_PAGE = docs_text("api.md")
EXIT_CODE_TABLES = {"README.md": markdown_section(README, "## Exit codes"),
                    "docs/commands.md": markdown_section(docs_text("commands.md"), "## Exit codes")}


def test_readme_example_runs_from_outside_the_checkout(tmp_path: Path) -> None:
    (example,) = re.findall(r"```python\n(.*?)```", API_PAGE, re.S)
    (tmp_path / "matrix.toml").write_text((REPO / "matrix.toml").read_text().replace(
        'path = "kernels/fusedops"', f'path = "{REPO / "kernels" / "fusedops"}"'))
    result = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    plan = wheelfactory.load_plan(REPO / "matrix.toml")
    first = result.stdout.splitlines()
    assert first[0] == f"{len(plan.variants)} variants, {len(plan.pruned)} pruned"
    assert first[1] == f"{plan.variants[0].id} {plan.variants[0].local_version}"


def test_exports_exist_and_the_package_is_typed() -> None:
    for name in wheelfactory.__all__:
        if name != "BuildResult":  # a type for annotations, imported lazily with build()
            assert hasattr(wheelfactory, name), name
    assert (Path(wheelfactory.__file__).parent / "py.typed").is_file()
    from wheelfactory.runner.session import BuildResult
    assert BuildResult.__name__ in wheelfactory.__all__


def test_load_plan_takes_another_table_and_reports_bad_input_as_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "matrix.toml"
    bad.write_text("[matrix]\nbakends = ['cpu']\n")
    try:
        wheelfactory.load_plan(bad)
    except wheelfactory.ConfigError as exc:
        assert "backends" in str(exc) and exc.exit_code == 2
    else:
        raise AssertionError("a misspelt key planned")


@pytest.mark.parametrize("page", sorted(EXIT_CODE_TABLES))
def test_readme_exit_code_table_is_the_error_tree(page: str) -> None:
    rows = re.findall(r"^\| (\d+) \| ([^|]*) \|", EXIT_CODE_TABLES[page], re.M)
    documented = {name.strip("` "): int(code) for code, names in rows for name in names.split(",") if name.strip()}
    defined = {name: cls.exit_code for name, cls in vars(errors).items()
               if isinstance(cls, type) and issubclass(cls, errors.WheelfactoryError)
               and cls.__doc__ and name in documented}
    assert documented == defined
    # every code the tree uses is documented, and no two meanings share one
    codes = {cls.exit_code for cls in vars(errors).values()
             if isinstance(cls, type) and issubclass(cls, errors.WheelfactoryError)}
    assert codes <= {int(code) for code, _ in rows}


def test_the_readme_and_the_docs_show_one_exit_code_table() -> None:
    def rows(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith("|")]

    assert len(rows(EXIT_CODE_TABLES["README.md"])) >= 12
    assert rows(EXIT_CODE_TABLES["README.md"]) == rows(EXIT_CODE_TABLES["docs/commands.md"])



# Each command and the API function it calls: the CLI parses, calls, renders (issue 40, item 5).
COMMANDS = {
    "plan": (["plan", "-m", "m.toml"], "load_plan"),
    "index": (["index", "-o", "d"], "index_dist"),
    "report": (["report", "-o", "d"], "report_dist"),
    "export": (["export", "-o", "d", "--hf-layout", "hf"], "export_hf"),
    "publish": (["publish", "-o", "d", "--to", "site"], "publish_dist"),
    "serve": (["serve", "-o", "d"], "open_index"),
    "which": (["which", "--index", "d"], "which"),
    "merge": (["merge", "a", "-o", "d"], "merge"),
    "bake": (["bake", "-m", "m.toml"], "bake"),
    "ci github": (["ci", "github", "-m", "m.toml"], "github_workflow"),
    "compat refresh": (["compat", "refresh", "--index", "http://127.0.0.1:9/simple"], "refresh_compat"),
    "engine start": (["engine", "start", "--no-install"], "start_docker"),
    "base-image": (["base-image"], "make_base_image"),
    "gc": (["gc", "--wheelhouse", "w"], "collect_garbage"),
    "rocm-check": (["rocm-check", "-m", "m.toml"], "rocm_check"),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_command_is_its_api_function(command: str, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The command line calls the exported function, with the options as plain arguments: what
    the function raises is what the command says, and nothing else ran before it."""
    from tests.testkit import run_cli

    argv, name = COMMANDS[command]
    assert name in wheelfactory.__all__ and callable(getattr(wheelfactory, name))
    calls: list[tuple[tuple[object, ...], dict[str, object]]] = []

    def called(*args: object, **kwargs: object) -> None:
        calls.append((args, kwargs))
        raise wheelfactory.UsageError(f"{name} was called")

    monkeypatch.setattr(wheelfactory, name, called)
    assert run_cli(*argv) == 2
    assert capsys.readouterr().err == f"wheelfactory: error: {name} was called\n"
    assert len(calls) == 1


def test_a_command_function_takes_plain_arguments_and_says_what_is_missing(tmp_path: Path) -> None:
    """Called from Python as the command runs: a dist that lists nothing is the command's UsageError."""
    for call in (lambda: wheelfactory.index_dist(tmp_path), lambda: wheelfactory.report_dist(tmp_path),
                 lambda: wheelfactory.export_hf(tmp_path, tmp_path / "hf")):
        with pytest.raises(wheelfactory.UsageError, match="lists nothing: run `wheelfactory build"):
            call()
    with pytest.raises(wheelfactory.UsageError, match="give at least one build output directory"):
        wheelfactory.merge([], tmp_path)
