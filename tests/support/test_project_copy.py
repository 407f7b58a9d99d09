"""support/project_copy.py: what a build copies from a project never comes from outside it.

Every kind of outward symlink, special files and unportable names are refused (one line naming
the file and a link's target, nothing copied); inside links are copied as what they point to.
"""

from __future__ import annotations

import os
import socket
import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wheelfactory.errors import ConfigError
from wheelfactory.support.project_copy import (
    checked_file,
    copy_project_file,
    copy_project_tree,
    project_files,
)

SECRET = b"SECRET-7f3a9c-never-in-a-stage"


def _project(tmp_path: Path) -> tuple[Path, Path]:
    """(project root, outside secret file): a project with a package and a header."""
    root = tmp_path / "proj"
    (root / "csrc" / "cpu").mkdir(parents=True)
    (root / "csrc" / "kernel.h").write_text("#pragma once\n")
    (root / "csrc" / "cpu" / "op.cpp").write_text("int op() { return 1; }\n")
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("X = 1\n")
    (tmp_path / "outside").mkdir()
    secret = tmp_path / "outside" / "secret.txt"
    secret.write_bytes(SECRET)
    return root, secret


def _refusal(root: Path, dest: Path) -> str:
    with pytest.raises(ConfigError) as raised:
        copy_project_tree(root, ".", dest, declared_in=str(root / "kernel.toml"))
    message = str(raised.value)
    assert "\n" not in message and raised.value.file == str(root / "kernel.toml")
    assert not dest.exists()  # checked before the first file is copied: nothing half-written
    return message


def _no_secret_under(directory: Path) -> None:
    for path in directory.rglob("*"):
        assert not path.is_symlink()
        if path.is_file():
            assert SECRET not in path.read_bytes(), path


@pytest.mark.parametrize("plant", ["file", "dir", "relative", "absolute", "chain", "dev_zero", "broken"])
def test_every_outward_symlink_is_refused_naming_the_link_and_its_target(tmp_path: Path, plant: str) -> None:
    root, secret = _project(tmp_path)
    link = root / "csrc" / "leak.h"
    if plant == "file":
        link.symlink_to(secret)
    elif plant == "dir":
        link = root / "csrc" / "vendored"
        link.symlink_to(secret.parent, target_is_directory=True)
    elif plant == "relative":
        link.symlink_to(Path("..", "..", "outside", "secret.txt"))
    elif plant == "absolute":
        link.symlink_to(secret.resolve())
    elif plant == "chain":  # inside -> inside -> out
        (root / "pkg" / "hop").symlink_to(secret)
        (root / "csrc" / "hop2").symlink_to(root / "pkg" / "hop")
        link.symlink_to(Path("hop2"))
        link = root / "csrc" / "hop2"  # the walk meets hop2 first (sorted): it is the first that leads out
    elif plant == "dev_zero":
        link.symlink_to("/dev/zero")
    else:
        link.symlink_to(root / "nowhere.h")
    message = _refusal(root, tmp_path / "dest")
    if plant == "broken":
        assert f"{link} is a symlink that cannot be followed" in message
        return
    target = "/dev/zero" if plant == "dev_zero" else str(secret.resolve() if plant != "dir" else secret.parent.resolve())
    assert f"{link} is a symlink that leads outside the project {root} (to {target})" in message
    assert "copy the file into the project instead of linking to it" in message


def test_a_single_file_behind_an_outward_directory_link_names_that_link(tmp_path: Path) -> None:
    root, secret = _project(tmp_path)
    (root / "third_party").symlink_to(secret.parent, target_is_directory=True)
    with pytest.raises(ConfigError, match=r"/third_party is a symlink that leads outside the project"):
        copy_project_file(root, "third_party/secret.txt", tmp_path / "dest" / "x")
    assert not (tmp_path / "dest").exists()


def test_a_fifo_is_refused_without_being_opened(tmp_path: Path) -> None:
    root, _ = _project(tmp_path)
    os.mkfifo(root / "csrc" / "pipe.h")
    assert "csrc/pipe.h is a FIFO" in _refusal(root, tmp_path / "dest")
    with pytest.raises(ConfigError, match="pipe.h is a FIFO"):
        checked_file(root, "csrc/pipe.h")


def test_a_socket_and_a_device_are_refused(tmp_path: Path) -> None:
    root, _ = _project(tmp_path)
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(root / "csrc" / "s"))
        assert "csrc/s is a socket" in _refusal(root, tmp_path / "dest")
    finally:
        server.close()
    (root / "csrc" / "s").unlink()
    try:
        os.mknod(root / "pkg" / "zero", stat.S_IFCHR | 0o600, os.makedev(1, 5))
    except PermissionError:
        pytest.skip("this machine may not make device nodes")
    assert "pkg/zero is a character device" in _refusal(root, tmp_path / "dest")


@pytest.mark.parametrize("name", ["bad\nname.h", "tab\there.h", "esc\x1b.h", "del\x7f.h"])
def test_a_name_with_a_control_character_is_refused_shown_escaped(tmp_path: Path, name: str) -> None:
    root, _ = _project(tmp_path)
    (root / "csrc" / name).write_text("x\n")
    message = _refusal(root, tmp_path / "dest")
    assert repr(str(root / "csrc" / name)) in message and "control character" in message


def test_a_symlink_loop_is_refused(tmp_path: Path) -> None:
    root, _ = _project(tmp_path)
    (root / "csrc" / "cpu" / "again").symlink_to(root / "csrc", target_is_directory=True)
    assert "again is a symlink loop" in _refusal(root, tmp_path / "dest")


def test_inside_links_are_copied_as_what_they_point_to(tmp_path: Path) -> None:
    root, _ = _project(tmp_path)
    (root / "csrc" / "alias.h").symlink_to("kernel.h")
    (root / "pkg" / "headers").symlink_to(root / "csrc", target_is_directory=True)
    (root / "empty").mkdir()
    dest = tmp_path / "dest"
    files = copy_project_tree(root, ".", dest)
    assert Path("csrc/alias.h") in files and Path("pkg/headers/cpu/op.cpp") in files
    assert (dest / "csrc" / "alias.h").read_text() == "#pragma once\n" and not (dest / "csrc" / "alias.h").is_symlink()
    assert (dest / "pkg" / "headers" / "cpu" / "op.cpp").read_text() == "int op() { return 1; }\n"
    assert not (dest / "pkg" / "headers").is_symlink() and (dest / "empty").is_dir()


def test_ignored_names_are_never_inspected(tmp_path: Path) -> None:
    root, secret = _project(tmp_path)
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "leak").symlink_to(secret)
    files = project_files(root, ignore=lambda directory, names: [n for n in names if n == "__pycache__"])
    assert all("__pycache__" not in p.parts for p in files) and Path("csrc/kernel.h") in files


# --------------------------------------------------------------------------------------------
# Random project trees: the copy refuses iff something leads out or is special, and a copy that
# succeeds holds no byte of the outside secret.
# --------------------------------------------------------------------------------------------

GOOD = ("file", "inside_file_link", "inside_dir_link", "subdir")
BAD = ("outside_file_link", "outside_dir_link", "relative_out", "chain_out", "dev_zero", "fifo", "control_name",
       "broken")
ENTRIES = st.lists(st.tuples(st.sampled_from(("", "a", "a/b", "c")), st.sampled_from(GOOD + BAD)), max_size=8)


def _plant(root: Path, secret: Path, where: str, kind: str, index: int) -> None:
    directory = root / where
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"e{index}"
    depth = len(path.relative_to(root).parts) - 1
    if kind == "file":
        path.write_bytes(f"regular {index}\n".encode())
    elif kind == "subdir":
        path.mkdir()
        (path / "inner.txt").write_text("inner\n")
    elif kind == "inside_file_link":
        path.symlink_to(Path(*[".."] * depth, "shared", "base.txt"))
    elif kind == "inside_dir_link":
        path.symlink_to(root / "shared", target_is_directory=True)
    elif kind == "outside_file_link":
        path.symlink_to(secret)
    elif kind == "outside_dir_link":
        path.symlink_to(secret.parent, target_is_directory=True)
    elif kind == "relative_out":
        path.symlink_to(Path(*[".."] * (depth + 1), "outside", "secret.txt"))
    elif kind == "chain_out":
        (root / "shared" / f"hop{index}").symlink_to(secret)
        path.symlink_to(root / "shared" / f"hop{index}")
    elif kind == "dev_zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "control_name":
        (directory / f"e{index}\n").write_text("x\n")
    else:
        path.symlink_to(root / f"missing{index}")


@settings(max_examples=80, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=ENTRIES)
def test_random_trees_refused_iff_something_leaves_or_is_special(entries: list[tuple[str, str]]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        root = base / "proj"
        (root / "shared").mkdir(parents=True)
        (root / "shared" / "base.txt").write_text("shared\n")
        (base / "outside").mkdir()
        secret = base / "outside" / "secret.txt"
        secret.write_bytes(SECRET)
        for index, (where, kind) in enumerate(entries):
            _plant(root, secret, where, kind, index)
        dest = base / "dest"
        bad = any(kind in BAD for _, kind in entries)
        try:
            files = copy_project_tree(root, ".", dest)
        except ConfigError as exc:
            assert bad, f"refused a clean tree: {exc}"
            assert "\n" not in str(exc) and not dest.exists()
            return
        assert not bad, f"copied a tree holding {entries}"
        _no_secret_under(dest)
        assert sorted(files) == sorted(p.relative_to(dest) for p in dest.rglob("*") if p.is_file())
