"""The link store: equal files share an inode, different modes or bytes never do, and pruning
frees only what no tree uses."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wheelfactory.support.linkstore import prune, share_identical_files, unshared_bytes


def write(path: Path, content: bytes, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    path.chmod(mode)
    return path


def test_equal_bytes_share_but_a_different_mode_does_not(tmp_path: Path) -> None:
    data = os.urandom(50_000)
    a = write(tmp_path / "a" / "lib.so", data)
    b = write(tmp_path / "b" / "sub" / "lib.so", data)
    c = write(tmp_path / "c" / "tool", data, 0o755)
    store = tmp_path / "store"
    assert share_identical_files(tmp_path / "a", store).files == 0  # the first of its kind becomes the blob
    shared = share_identical_files(tmp_path / "b", store)
    assert (shared.files, shared.bytes) == (1, len(data))
    assert share_identical_files(tmp_path / "c", store).files == 0
    assert a.stat().st_ino == b.stat().st_ino != c.stat().st_ino
    assert c.stat().st_mode & 0o777 == 0o755 and b.stat().st_mode & 0o777 == 0o644
    assert not list((tmp_path / "b" / "sub").glob(".*"))  # no staging link left behind


def test_prune_keeps_what_a_tree_still_links(tmp_path: Path) -> None:
    data = os.urandom(40_000)
    for tree in ("a", "b"):
        write(tmp_path / tree / "lib.so", data)
        share_identical_files(tmp_path / tree, tmp_path / "store")
    assert unshared_bytes(tmp_path / "a") == 0  # b still holds the library
    (tmp_path / "a" / "lib.so").unlink()
    assert prune(tmp_path / "store") == 0
    assert unshared_bytes(tmp_path / "b") == len(data)
    (tmp_path / "b" / "lib.so").unlink()
    assert prune(tmp_path / "store") == len(data)


def test_a_store_on_another_filesystem_leaves_the_tree_as_it_was(tmp_path: Path) -> None:
    target = write(tmp_path / "t" / "lib.so", os.urandom(40_000))
    before = target.read_bytes()
    # /dev/shm is a tmpfs: links across filesystems fail, and sharing must then change nothing.
    store = Path("/dev/shm") / f"linkstore-test-{os.getpid()}"
    if os.stat("/dev/shm").st_dev == tmp_path.stat().st_dev:
        pytest.skip("/dev/shm is on the same filesystem as the test's tmp dir here")
    try:
        assert share_identical_files(tmp_path / "t", store).files == 0
        assert target.read_bytes() == before and target.stat().st_nlink == 1
    finally:
        shutil.rmtree(store, ignore_errors=True)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from([b"x" * 40_000, b"y" * 40_000, b"z" * 10]), min_size=1, max_size=6))
def test_every_tree_reads_back_what_was_written(tmp_path_factory: object, contents: list[bytes]) -> None:
    root = tmp_path_factory.mktemp("trees")  # type: ignore[attr-defined]
    for index, content in enumerate(contents):
        write(root / f"t{index}" / "f", content)
        share_identical_files(root / f"t{index}", root / "store")
    for index, content in enumerate(contents):
        assert (root / f"t{index}" / "f").read_bytes() == content
    distinct = {c for c in contents if len(c) >= 32 * 1024}
    assert len([p for p in (root / "store").rglob("*") if p.is_file()]) == len(distinct)
