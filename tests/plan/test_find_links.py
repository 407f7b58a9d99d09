"""`[build] find_links` and `[test] find_links`: directories of wheels beside the host's pip index,
relative to the file that names them, refused in one line when not a directory; a wheel set asked
with them is keyed by what they hold, and one asked without keeps the key it always had; pip
download is given each."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest
from tests.testkit import make_wheel
from wheelfactory.engines import wheelhouse
from wheelfactory.engines.wheelhouse import ContainerPython, Wheelhouse, WheelhouseRequest, local_wheels
from wheelfactory.errors import ConfigError
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.matrix import parse_matrix
from wheelfactory.plan.tomlsource import TomlDocument
from wheelfactory.project.keys import json_digest


def matrix(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    return parse_matrix(TomlDocument.from_text(text, str(tmp_path / "matrix.toml")), load_table(), base_dir=tmp_path)


def test_directories_are_relative_to_matrix_toml(tmp_path: Path) -> None:
    (tmp_path / "wheels").mkdir()
    (tmp_path / "test-wheels").mkdir()
    parsed = matrix(tmp_path, '[build]\nfind_links = ["wheels"]\n\n[test]\ncommand = "pytest"\n'
                              'find_links = ["test-wheels", "wheels"]\n')
    assert parsed.build.find_links == (str(tmp_path / "wheels"),)
    assert parsed.test is not None and parsed.test.find_links == (str(tmp_path / "test-wheels"),
                                                                  str(tmp_path / "wheels"))


@pytest.mark.parametrize("table", ["[build]", "[test]\ncommand = \"pytest\""])
def test_a_missing_directory_is_one_line_naming_the_key(tmp_path: Path, table: str) -> None:
    with pytest.raises(ConfigError) as refused:
        matrix(tmp_path, f'{table}\nfind_links = ["no-such-wheels"]\n')
    message = str(refused.value)
    assert "find_links: 'no-such-wheels' is not a directory" in message and "\n" not in message


def test_a_set_is_keyed_by_what_the_directories_hold_and_unchanged_without_them(tmp_path: Path) -> None:
    python = ContainerPython("3.11", "x86_64")
    plain = WheelhouseRequest(("pytest",), (), python)
    assert plain.key == json_digest({**{k: v for k, v in asdict(plain).items() if k != "find_links"},
                                     "format": wheelhouse.SET_FORMAT})[:16]  # the key sets had before
    before = WheelhouseRequest(("pytest",), (), python, find_links=local_wheels((str(tmp_path),)))
    make_wheel(tmp_path, "wf_local_only", "0.3", tag="py3-none-any")
    after = WheelhouseRequest(("pytest",), (), python, find_links=local_wheels((str(tmp_path),)))
    assert len({plain.key, before.key, after.key}) == 3


def test_pip_download_is_given_each_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def fake_run(command: list[str], **_: object) -> str:
        seen.append(command)
        dest = Path(command[command.index("--dest") + 1])
        make_wheel(dest, "wf_local_only", "0.3", tag="py3-none-any")
        return ""

    monkeypatch.setattr(wheelhouse, "run", fake_run)
    monkeypatch.setattr(wheelhouse, "download_environment", lambda python: {})
    (tmp_path / "local").mkdir()
    request = WheelhouseRequest(("wf-local-only",), (), ContainerPython("3.11", "x86_64"),
                                find_links=local_wheels((str(tmp_path / "local"),)))
    made = Wheelhouse(tmp_path / "house").ensure(request)
    assert [name for name, _ in made.wheels] == ["wf_local_only-0.3-py3-none-any.whl"]
    command = seen[0]
    assert command[command.index("--find-links") + 1] == str(tmp_path / "local")

