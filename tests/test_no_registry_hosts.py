"""No registry host name in the tracked files: package indexes and Debian mirrors come from the
user's configuration, by alias (factory/wheelfactory/plan/indexes.py), never from names written into the code,
data, docs or tests. The patterns are built from parts, so that this file does not name a host."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest
from tests.testkit import REPO

DOT = r"\."
HOSTS = (("pypi", "org"), ("python" + "hosted", "org"), ("download", "pytorch", "org"),
         ("deb", "debian", "org"), ("security", "debian", "org"))
MIRRORS = ("ftp", "[a-z0-9-]+", "debian", "org")  # the per-country mirrors
PATTERN = re.compile("|".join(DOT.join(parts) for parts in (*HOSTS, MIRRORS)), re.IGNORECASE)


def findings(root: Path, names: Iterable[str]) -> list[str]:
    """``file:line: text`` for every line of the named files (relative to root) naming a registry host."""
    out = []
    for name in names:
        path = root / name
        if not path.is_file() or path.is_symlink():  # deleted in the working tree, or a link
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if PATTERN.search(line):
                out.append(f"{name}:{number}: {line.strip()[:160]}")
    return out


def tracked(root: Path) -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    return [name for name in listed.decode().split("\0") if name and not name.startswith(".git/")]


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="not a git checkout")
def test_tracked_files_name_no_registry_host() -> None:
    names = tracked(REPO)
    assert "factory/wheelfactory/data/compat.toml" in names and "README.md" in names  # the list is the real one
    # the docs site and the contributors' guide are scanned too
    assert {"CONTRIBUTING.md", "mkdocs.yml", "docs/reference/matrix.md"} <= set(names)
    found = findings(REPO, names)
    assert not found, ("registry host names (configure them instead, see factory/wheelfactory/plan/indexes.py):\n"
                       + "\n".join(found))


def test_this_file_is_checked_and_clean() -> None:
    assert findings(REPO, ["tests/test_no_registry_hosts.py"]) == []


@pytest.mark.parametrize("host", [".".join(parts) for parts in (*HOSTS, ("ftp", "de", *HOSTS[3][1:]))])
def test_a_planted_host_name_fails_naming_file_and_line(tmp_path: Path, host: str) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "planted.md").write_text(f"# notes\n\nsee https://{host.upper()}/simple for more\n")
    (tmp_path / "clean.toml").write_text('torch_index = "pypi"\nmirror = "http://127.0.0.1:3142/debian"\n')
    assert findings(tmp_path, ["clean.toml", "docs/planted.md", "gone.txt"]) == [
        f"docs/planted.md:3: see https://{host.upper()}/simple for more"]


def test_a_planted_host_in_a_git_checkout_is_found(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("no git")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "a.py").write_text('MIRROR = "http://' + ".".join(HOSTS[3]) + '/debian"\n')
    (tmp_path / "untracked.py").write_text('URL = "https://' + ".".join(HOSTS[0]) + '/simple"\n')
    subprocess.run(["git", "add", "a.py"], cwd=tmp_path, check=True)
    assert [f.split(": ")[0] for f in findings(tmp_path, tracked(tmp_path))] == ["a.py:1"]
