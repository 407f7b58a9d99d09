"""Random hostile trees where `publish` writes and `serve` reads (issue 36): hypothesis plants
links (out of the root, to a device, dangling, looping), FIFOs, sockets, device nodes, folders
where files belong and files where folders belong, odd names and unreadable modes at the paths a
publish writes and a server answers, then runs the real publish and the real server.

What must hold, for every tree: no traceback, no hang, nothing outside the root read or written
through a link, and an answer that is either the work done or one line naming a path."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import signal
import socket
import stat
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
from tests.publish.dist_fakes import make_dist
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.publish.test_index import index
from tests.publish.test_serve_hardening import get, stop
from tests.testkit import run_cli
from wheelfactory.errors import UsageError
from wheelfactory.publish.generations import INDEX_LINK
from wheelfactory.publish.serve import open_root

VARIANTS = ("torch213-cxx11-cpu-x86_64-linux", "torch26-cxx98-cpu-x86_64-linux")
SECRET = b"outside the root: never read, never written\n"
EXAMPLES = int(os.environ.get("WHEELFACTORY_HOSTILE_EXAMPLES", "40"))
KINDS = ("link to a file outside", "link to a folder outside", "link to /dev/zero", "dangling link",
         "link to itself", "link up and out", "fifo", "socket", "character device", "empty folder",
         "junk file", "unreadable folder", "unreadable file")
ODD_NAMES = st.sampled_from(["index.html", "simple", "tiny", "index.json", ".wheelfactory-publish.lock", "whl",
                             " ", "a\nb", "ü-名前", "x" * 255, "-rf", ".hidden", "..."])


class Hang(Exception):
    pass


@contextlib.contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Hang raised in this (the main) thread when the block runs past ``seconds``."""
    def ring(signum: int, frame: object) -> None:
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@dataclass(frozen=True)
class Plant:
    path: str  # relative to the root: a path the publish writes or the server answers, or an odd name in it
    kind: str


def plant(root: Path, outside: Path, planted: Plant) -> bool:
    """Put ``planted`` in ``root`` (replacing what is there); False when the file system refuses
    (a name too long for a socket's address, a parent that is itself planted)."""
    where = root / planted.path
    try:
        if where.is_symlink() or where.is_file() or where.is_socket() or where.is_fifo() or where.is_char_device():
            where.unlink()
        elif where.is_dir():
            shutil.rmtree(where)
        where.parent.mkdir(parents=True, exist_ok=True)
        kind = planted.kind
        if kind == "link to a file outside":
            os.symlink(outside / "secret.txt", where)
        elif kind == "link to a folder outside":
            os.symlink(outside, where)
        elif kind == "link to /dev/zero":
            os.symlink("/dev/zero", where)
        elif kind == "dangling link":
            os.symlink(outside / "no-such-file", where)
        elif kind == "link to itself":
            os.symlink(where.name, where)
        elif kind == "link up and out":
            os.symlink("../" * (len(Path(planted.path).parts) + 1) + "outside/secret.txt", where)
        elif kind == "fifo":
            os.mkfifo(where)
        elif kind == "socket":
            with socket.socket(socket.AF_UNIX) as listener:
                listener.bind(str(where))
        elif kind == "character device":
            if os.geteuid() != 0:
                return False
            os.mknod(where, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero's numbers
        elif kind == "empty folder":
            where.mkdir()
        elif kind == "junk file":
            where.write_bytes(b"\0junk\xff" * 10)
        elif kind == "unreadable folder":
            where.mkdir()
            where.chmod(0)
        else:
            where.write_bytes(b"junk")
            where.chmod(0)
    except OSError:
        return False
    return True


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir")
            for p in sorted(folder.rglob("*"))}


def make_outside(folder: Path) -> Path:
    outside = folder / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(SECRET)
    (outside / "inner").mkdir()
    return outside


@dataclass(frozen=True)
class Template:
    """A dist and the tree a publish of it writes (relative paths, files and folders)."""

    dist: Path
    paths: tuple[str, ...]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    folder = tmp_path_factory.mktemp("template")
    dist = folder / "dist"
    make_dist(dist, version="0.1.0", variants=VARIANTS)
    site = folder / "site"
    with contextlib.redirect_stdout(io.StringIO()):
        assert run_cli("publish", "-o", str(dist), "--to", str(site)) == 0
    return Template(dist, tuple(sorted(str(p.relative_to(site)) for p in site.rglob("*"))))


def plants(paths: tuple[str, ...]) -> st.SearchStrategy[list[Plant]]:
    """1-4 hostile things, each at a path the publish writes or at an odd name beside one."""
    at_written = st.sampled_from(paths)
    beside = st.tuples(st.sampled_from(paths), ODD_NAMES).map(lambda pair: str(Path(pair[0]).parent / pair[1]))
    return st.lists(st.builds(Plant, st.one_of(at_written, at_written, beside), st.sampled_from(KINDS)),
                    min_size=1, max_size=4)


def _unlock(folder: Path) -> None:
    """Undo the unreadable modes, so the temporary folder can be removed."""
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            with contextlib.suppress(OSError):
                path.chmod(0o755 if path.is_dir() else 0o644)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_publish_over_a_hostile_target_is_the_release_or_one_line(template: Template, data: st.DataObject) -> None:
    planted = data.draw(plants(template.paths))
    first_publish = data.draw(st.booleans(), label="published before the planting")
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        outside, site = make_outside(folder), folder / "site"
        if first_publish:
            with contextlib.redirect_stdout(io.StringIO()):
                assert run_cli("publish", "-o", str(template.dist), "--to", str(site)) == 0
        site.mkdir(exist_ok=True)
        planted = [p for p in planted if plant(site, outside, p)]
        before = snapshot(outside)
        out, err = io.StringIO(), io.StringIO()
        try:
            with deadline(60), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = run_cli("publish", "-o", str(template.dist), "--to", str(site))
        finally:
            _unlock(folder)
        said = err.getvalue()
        assert "Traceback" not in said + out.getvalue(), (planted, said)
        assert code in (0, 7), (planted, code, said)
        if code == 7:
            lines = said.strip().splitlines()
            assert len(lines) == 1 and str(site) in lines[0], (planted, lines)
        else:
            assert (site / "index.json").is_file() and not (site / "index.json").is_symlink(), planted
        assert snapshot(outside) == before, ("written through a link", planted)


@pytest.fixture(scope="module")
def generation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("served")
    make_dist(folder, variants=VARIANTS)
    index(folder)
    return (folder / INDEX_LINK).resolve()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_serve_over_a_hostile_root_answers_only_its_regular_files(generation: Path, data: st.DataObject) -> None:
    paths = tuple(sorted(str(p.relative_to(generation)) for p in generation.rglob("*")))
    planted = data.draw(plants(paths))
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        outside, root = make_outside(folder), folder / "site"
        shutil.copytree(generation, root)
        planted = [p for p in planted if plant(root, outside, p)]
        try:
            server = open_root(root, "127.0.0.1", 0, lambda _: None)
        except UsageError as exc:  # what `serve` says in one line (exit 2): no index.html to serve
            assert str(root) in str(exc) and "\n" not in str(exc), (planted, str(exc))
            _unlock(folder)
            return
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        try:
            asked = {"/" + quote(p.path) for p in planted} | {"/" + quote(p) for p in paths} | {"/"}
            for path in sorted(asked):
                with deadline(30):
                    status, body = get(server, path)
                assert status in (200, 301, 304, 400, 404), (path, status, planted)
                assert SECRET not in body, ("read through a link", path, planted)
                if status == 200 and not path.endswith("/"):
                    real = root / Path(*[part for part in path.split("/") if part])
                    if real.exists() and not real.is_dir():  # a negotiated page answers for its folder
                        parents = [real, *real.parents][: len(real.relative_to(root).parts)]
                        assert not any(p.is_symlink() for p in parents), ("answered through a link", path)
                        assert stat.S_ISREG(real.lstat().st_mode), ("answered a special file", path)
        finally:
            stop(server)
            _unlock(folder)
