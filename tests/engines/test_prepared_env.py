"""Prepared environments: made once per content, reused, replaced when the wheelhouse changes,
never seen half-made, and collected when unused."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from wheelfactory.engines.prepared_env import COMPLETE, EnvRequest, PreparedEnvs, collect_garbage

WHEELS = (("torch-2.13.0-cp311-none-manylinux_2_28_x86_64.whl", "a" * 64),)


def request(wheels: tuple[tuple[str, str], ...] = WHEELS, role: str = "torch") -> EnvRequest:
    return EnvRequest(role, "sha256:image", "cp311-cp311", ("torch==2.13.0",), wheels)  # type: ignore[arg-type]


def test_made_once_then_reused(tmp_path: Path) -> None:
    calls: list[Path] = []

    def install(req: EnvRequest, target: Path) -> None:
        calls.append(target)
        (target / "torch").mkdir()

    envs = PreparedEnvs(tmp_path)
    first = envs.ensure(request(), install)
    second = envs.ensure(request(), install)
    assert first.created and not second.created and first.path == second.path
    assert len(calls) == 1 and (first.path / "torch").is_dir() and (first.path / COMPLETE).is_file()
    assert first.mount == "/opt/wheelfactory/torch"


def test_changed_wheelhouse_content_makes_a_new_one(tmp_path: Path) -> None:
    envs = PreparedEnvs(tmp_path)
    made = envs.ensure(request(), lambda r, t: None)
    changed = envs.ensure(request(((WHEELS[0][0], "b" * 64),)), lambda r, t: None)
    assert changed.created and changed.key != made.key
    assert request().key != request(role="tools").key


def test_a_failed_install_leaves_nothing_that_looks_complete(tmp_path: Path) -> None:
    def broken(req: EnvRequest, target: Path) -> None:
        (target / "half").write_text("x")
        raise OSError("disk full")

    envs = PreparedEnvs(tmp_path)
    with pytest.raises(OSError):
        envs.ensure(request(), broken)
    assert not (tmp_path / request().key).exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]
    assert envs.ensure(request(), lambda r, t: None).created  # the next try makes it


def test_gc_removes_unused_and_stale_partial_environments(tmp_path: Path) -> None:
    envs = PreparedEnvs(tmp_path)
    old = envs.ensure(request(), lambda r, t: (t / "f").write_bytes(b"x" * 100))
    fresh = envs.ensure(request(role="tools"), lambda r, t: None)
    week_ago = time.time() - 8 * 86400
    os.utime(old.path / COMPLETE, (week_ago, week_ago))
    partial = tmp_path / ".torch-x.1.partial"
    partial.mkdir()
    os.utime(partial, (week_ago, week_ago))
    (tmp_path / "someone-elses").mkdir()  # no env.json: not ours, kept
    dry = collect_garbage(tmp_path, unused_for_s=7 * 86400, dry_run=True)
    assert {r.path for r in dry} == {old.path, partial} and old.path.exists()
    removed = collect_garbage(tmp_path, unused_for_s=7 * 86400)
    assert {r.path for r in removed} == {old.path, partial}
    assert next(r.bytes for r in removed if r.path == old.path) >= 100
    assert not old.path.exists() and fresh.path.exists() and (tmp_path / "someone-elses").exists()
    # a use counts as use: reusing refreshes the marker
    assert not envs.ensure(request(role="tools"), lambda r, t: None).created


def test_gc_command_lists_then_removes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.testkit import run_cli

    envs = PreparedEnvs(tmp_path / "wh" / "envs")
    made = envs.ensure(request(), lambda r, t: (t / "f").write_bytes(b"x" * 2_000_000))
    wh = ["--wheelhouse", str(tmp_path / "wh"), "-m", str(tmp_path / "absent.toml")]
    assert run_cli("gc", *wh, "--unused-days", "0", "--dry-run") == 0
    assert f"would remove {made.path} (2 MB)" in capsys.readouterr().out and made.path.exists()
    assert run_cli("gc", *wh) == 0  # used just now: kept
    assert "0 prepared environment(s), 0 wheel set(s)" in capsys.readouterr().out and made.path.exists()
    assert run_cli("gc", *wh, "--unused-days", "0") == 0
    assert f"removed {made.path}" in capsys.readouterr().out and not made.path.exists()


def fill(content: bytes) -> Callable[[EnvRequest, Path], None]:
    def install(req: EnvRequest, target: Path) -> None:
        (target / "lib").mkdir()
        (target / "lib" / "libbig.so").write_bytes(content)
        (target / "small.py").write_text("x = 1\n")
    return install


def test_environments_share_identical_large_files_and_gc_frees_them_with_the_last_user(tmp_path: Path) -> None:
    big = os.urandom(200_000)
    envs = PreparedEnvs(tmp_path)
    first = envs.ensure(request(), fill(big))
    second = envs.ensure(request(role="tools"), fill(big))
    other = envs.ensure(request(((WHEELS[0][0], "c" * 64),)), fill(os.urandom(200_000)))
    assert first.shared_bytes == 0 and second.shared_bytes == len(big) and other.shared_bytes == 0
    lib1, lib2 = (env.path / "lib" / "libbig.so" for env in (first, second))
    assert lib1.read_bytes() == lib2.read_bytes() == big
    assert lib1.stat().st_ino == lib2.stat().st_ino  # one copy on disk
    assert (first.path / "small.py").stat().st_nlink == 1  # small files are not worth a link
    old = time.time() - 8 * 86400
    os.utime(first.path / COMPLETE, (old, old))
    removed = collect_garbage(tmp_path, unused_for_s=7 * 86400)
    # the library is still the second environment's: removing the first frees only its small file
    assert [r.path for r in removed] == [first.path] and removed[0].bytes < 1000
    assert lib2.read_bytes() == big
    for env in (second, other):
        os.utime(env.path / COMPLETE, (old, old))
    removed = collect_garbage(tmp_path, unused_for_s=7 * 86400)
    assert sum(r.bytes for r in removed) >= 2 * len(big)
    assert not [p for p in (tmp_path / ".blobs").rglob("*") if p.is_file()]  # the store is empty again
