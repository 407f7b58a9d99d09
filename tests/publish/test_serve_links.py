"""wheelfactory serve answers only regular files inside its root: a link in the root to a file or a
folder outside it, a wheel-named link, select.py as a link, a FIFO and a device are all 404, both
for `serve` over dist/index (itself a link to the current generation, which is followed) and for
`serve --root DIR`. Real server on 127.0.0.1, real links and special files."""

from __future__ import annotations

import os
import shutil
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.publish.dist_fakes import make_dist
from tests.publish.test_index import index
from tests.publish.test_serve_hardening import get, stop
from wheelfactory.publish.generations import INDEX_LINK
from wheelfactory.publish.serve import IndexServer, open_root, open_server

SECRET = b"outside the root: never served\n"
VARIANT_SIMPLE = "torch213-cxx11-cpu-x86_64-linux/simple"


def plant(root: Path, outside: Path) -> dict[str, Path]:
    """Links and special files planted in ``root``, by the URL path each would be asked for."""
    outside.mkdir()
    (outside / "secret.txt").write_bytes(SECRET)
    (outside / "x-1.0-py3-none-any.whl").write_bytes(SECRET)
    planted = {"/leak.txt": root / "leak.txt", "/linked/secret.txt": root / "linked",
               f"/{VARIANT_SIMPLE}/evil-1.0-py3-none-any.whl": root / VARIANT_SIMPLE / "evil-1.0-py3-none-any.whl",
               "/zero": root / "zero", "/pipe": root / "pipe"}
    os.symlink(outside / "secret.txt", planted["/leak.txt"])
    os.symlink(outside, planted["/linked/secret.txt"])
    os.symlink(outside / "x-1.0-py3-none-any.whl", planted[f"/{VARIANT_SIMPLE}/evil-1.0-py3-none-any.whl"])
    os.symlink("/dev/zero", planted["/zero"])
    os.mkfifo(planted["/pipe"])
    if os.geteuid() == 0:  # a device node itself, not a link to one
        os.mknod(root / "null-device", stat.S_IFCHR | 0o600, os.makedev(1, 3))
        planted["/null-device"] = root / "null-device"
    return planted


def serving(server: IndexServer) -> IndexServer:
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


@pytest.fixture(params=["dist/index", "--root"])
def hostile(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[IndexServer, dict[str, Path], Path]]:
    make_dist(tmp_path)
    index(tmp_path)
    if request.param == "dist/index":
        root = (tmp_path / INDEX_LINK).resolve()  # the generation dist/index names: links planted in it
        server = open_server(tmp_path, "127.0.0.1", 0, lambda _: None)
    else:
        root = tmp_path / "site"
        shutil.copytree(tmp_path / INDEX_LINK, root)
        server = open_root(root, "127.0.0.1", 0, lambda _: None)
    planted = plant(root, tmp_path / "outside")
    yield serving(server), planted, root
    stop(server)


def test_nothing_but_regular_files_inside_the_root_is_answered(
        hostile: tuple[IndexServer, dict[str, Path], Path]) -> None:
    server, planted, root = hostile
    for path in planted:
        status, body = get(server, path)  # a FIFO or /dev/zero would hang or stream forever
        assert status == 404 and SECRET not in body, (path, status, body[:200])
    status, body = get(server, f"/{VARIANT_SIMPLE}/")  # what the root really holds is still served
    assert status == 200 and body == (root / VARIANT_SIMPLE / "index.html").read_bytes()


def test_select_py_as_a_link_out_of_the_root_is_not_served(
        hostile: tuple[IndexServer, dict[str, Path], Path]) -> None:
    server, planted, root = hostile
    (root / "select.py").unlink()
    os.symlink(planted["/leak.txt"].resolve(), root / "select.py")
    status, body = get(server, "/select.py")
    assert status == 404 and SECRET not in body
