"""SOURCE_DATE_EPOCH, the time every file of a wheel gets: the caller's, else the last commit
that touched the project (the same in every clone, wherever it lies), else the zip epoch."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from wheelfactory.project import keys
from wheelfactory.project.keys import DEFAULT_SOURCE_DATE_EPOCH, source_date_epoch

GIT = shutil.which("git")


@pytest.fixture(autouse=True)
def no_epoch_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    keys._git_epoch.cache_clear()


def _commit(repo: Path, path: str, when: int) -> None:
    env = {**os.environ, "GIT_AUTHOR_DATE": f"@{when} +0000", "GIT_COMMITTER_DATE": f"@{when} +0000",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(f"{path} {when}\n")
    subprocess.run(["git", "add", path], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", path], cwd=repo, check=True, env=env)


@pytest.mark.skipif(GIT is None, reason="git is not installed")
def test_the_last_commit_of_the_project_not_of_the_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    _commit(repo, "kernels/mine/op.cpp", 1_700_000_000)
    _commit(repo, "docs/readme.md", 1_700_000_500)  # elsewhere: the kernel's wheels stay the same
    assert source_date_epoch(repo / "kernels" / "mine") == 1_700_000_000
    clone = tmp_path / "elsewhere" / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    keys._git_epoch.cache_clear()
    assert source_date_epoch(clone / "kernels" / "mine") == 1_700_000_000  # any clone, any path


def test_the_callers_epoch_wins_and_a_project_without_history_gets_the_zip_epoch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert source_date_epoch(tmp_path) == DEFAULT_SOURCE_DATE_EPOCH
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1234567890")
    assert source_date_epoch(tmp_path) == 1234567890
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")  # not a number: ignored, as bdist_wheel would fail on it
    assert source_date_epoch(tmp_path) == DEFAULT_SOURCE_DATE_EPOCH


def test_the_git_epoch_is_read_through_the_runner_it_is_given(tmp_path: Path) -> None:
    """A fake runner stands for git: its last line is the commit time; a failure gives the zip epoch."""
    from wheelfactory.support.proc import CommandFailed

    seen: list[list[str]] = []

    def git(command: Sequence[str], **_: object) -> str:
        seen.append(list(command))
        return "warning: unable to access a config file\n1700000123\n"

    def no_history(command: Sequence[str], **_: object) -> str:
        raise CommandFailed(command, 128, "fatal: not a git repository", None)

    assert source_date_epoch(tmp_path, runner=git) == 1_700_000_123
    assert seen == [["git", "-C", str(tmp_path.resolve()), "log", "-1", "--format=%ct", "--", "."]]
    assert source_date_epoch(tmp_path / "other", runner=no_history) == DEFAULT_SOURCE_DATE_EPOCH
