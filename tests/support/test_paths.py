"""support/paths.py: a path read from dist input never leads outside its root."""

from __future__ import annotations

import tempfile
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st
from wheelfactory.errors import ConfigError
from wheelfactory.support.paths import inside, safe_member


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """dist/ with a wheel, a symlink inside it and one that leads out."""
    (tmp_path / "elsewhere").mkdir()
    dist = tmp_path / "dist"
    (dist / "v").mkdir(parents=True)
    (dist / "v" / "x.whl").write_bytes(b"wheel")
    (dist / "in").symlink_to(dist / "v")
    (dist / "out").symlink_to(tmp_path / "elsewhere")
    return dist


@pytest.mark.parametrize("relative", ["v/x.whl", "v/./x.whl", "in/x.whl", "v/not-yet.whl", "v//x.whl"])
def test_paths_inside_the_root_are_returned_under_it(root: Path, relative: str) -> None:
    path = inside(root, relative, what="the wheel", file="dist/manifest.json")
    assert path.is_relative_to(root) and path.resolve().is_relative_to(root.resolve())


@pytest.mark.parametrize("relative", ["../../elsewhere/x.whl", "v/../../x", "/etc/passwd", "//x", "", ".", "v\\x.whl",
                                      "..\\x", "v/x\x00.whl", "out/x.whl", "out"])
def test_paths_that_leave_the_root_are_one_line_naming_file_and_value(root: Path, relative: str) -> None:
    with pytest.raises(ConfigError) as caught:
        inside(root, relative, what="torch213-cxx11-cpu-x86_64-linux names the wheel", file="dist/manifest.json")
    message = str(caught.value)
    assert caught.value.exit_code == 2 and "\n" not in message
    assert message.startswith("dist/manifest.json: torch213-cxx11-cpu-x86_64-linux names the wheel ")
    assert repr(relative) in message


def test_a_value_that_is_not_a_string_is_refused(root: Path) -> None:
    with pytest.raises(ConfigError):
        inside(root, 5, what="the wheel")  # type: ignore[arg-type]  # a manifest is JSON: anything


@pytest.mark.parametrize(("name", "expected"), [
    ("pkg/__init__.py", PurePosixPath("pkg/__init__.py")), ("pkg/", PurePosixPath("pkg")),
    ("pkg/./a.py", PurePosixPath("pkg/a.py")),
    ("pkg/../../../x", None), ("/abs/x", None), ("..", None), ("", None), ("pkg\\..\\x", None), ("pkg/\x00", None),
])
def test_safe_member(name: str, expected: PurePosixPath | None) -> None:
    assert safe_member(name) == expected


PIECES = st.sampled_from(["..", ".", "a", "in", "out", "", "/", "\\", "\x00", "b/c", "~", "x.whl"])


@given(st.one_of(st.text(), st.lists(PIECES, max_size=6).map("/".join), st.lists(PIECES, max_size=6).map("".join)))
def test_inside_raises_or_returns_a_path_under_root(relative: str) -> None:
    with tempfile.TemporaryDirectory() as temp:
        base = Path(temp)
        root = base / "dist"
        (root / "a").mkdir(parents=True)
        (base / "elsewhere").mkdir()
        (root / "in").symlink_to(root / "a")
        (root / "out").symlink_to(base / "elsewhere")
        try:
            path = inside(root, relative, what="the wheel", file="dist/manifest.json")
        except ConfigError as exc:
            assert "\n" not in str(exc) and str(exc).startswith("dist/manifest.json: ")
            return
        assert path.is_relative_to(root) and path.resolve().is_relative_to(root.resolve())
        member = safe_member(relative)
        assert member is not None and root.joinpath(*member.parts) == path
