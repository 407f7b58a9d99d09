"""factory/wheelfactory/images/base_image.py and `wheelfactory base-image`: rendering (pure), the rootfs tar stream,
the suite table against auditwheel, and the real bookworm image (made once, then reused)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from importlib import resources
from pathlib import Path

import docker
import pytest
from tests.testkit import REPO
from wheelfactory.errors import UsageError
from wheelfactory.images.base_image import (
    BASE_REPOSITORY,
    SUITES,
    BaseImage,
    BaseImageSpec,
    parse_suite,
    render_base,
)
from wheelfactory.images.containers import Container
from wheelfactory.images.rootfs import tar_stream
from wheelfactory.plan.indexes import debian_mirror
from wheelfactory.support.proc import run

FIXTURES = Path(__file__).parent / "fixtures"
# Rendering is pure: any mirror URL does (no host name: the real one is the host's, conftest.py).
MIRROR = "http://127.0.0.1:3142/debian"
BOOKWORM = BaseImageSpec(parse_suite("bookworm"), MIRROR)


# --- rendering (pure) ---

def test_tag_is_stable_and_names_the_suite() -> None:
    rendered = render_base(BOOKWORM)
    assert rendered == render_base(BaseImageSpec(parse_suite("bookworm"), MIRROR))
    assert re.fullmatch(rf"{BASE_REPOSITORY}:bookworm-[0-9a-f]{{12}}", rendered.tag)
    assert rendered.content.startswith(rendered.tag.rsplit("-", 1)[1])


def test_tag_changes_with_suite_and_mirror() -> None:
    tags = {render_base(BaseImageSpec(suite, MIRROR)).tag for suite in SUITES.values()}
    tags.add(render_base(BaseImageSpec(parse_suite("bookworm"), "http://mirror.example/debian")).tag)
    assert len(tags) == len(SUITES) + 1


def test_mirror_spelling_does_not_matter() -> None:
    assert render_base(BaseImageSpec(parse_suite("bookworm"), MIRROR + "/")) == render_base(BOOKWORM)


def test_explicit_tag_keeps_the_content_check() -> None:
    rendered = render_base(BaseImageSpec(parse_suite("bookworm"), MIRROR, tag="mybase:1"))
    assert rendered.tag == "mybase:1"
    assert rendered.content == render_base(BOOKWORM).content


@pytest.mark.parametrize("name", sorted(SUITES))
def test_template_makes_the_manylinux_layout(name: str) -> None:
    suite = SUITES[name]
    spec = BaseImageSpec(suite, MIRROR)
    dockerfile = render_base(spec).dockerfile
    assert f"FROM {spec.rootfs_tag}\n" in dockerfile
    assert f"python3 -m venv /opt/python/{suite.abi}-{suite.abi}" in dockerfile
    assert "/opt/python/cp39-cp39" in dockerfile  # cibuildwheel's helper interpreter
    assert f'= "{suite.glibc}"' in dockerfile  # the build checks ldd's version
    for package in ("build-essential", "g++", "python3-venv", "python3-dev", "ninja-build", "git"):
        assert f" {package} " in dockerfile
    assert f'wheelfactory.manylinux-cxx="{suite.manylinux_cxx}"' in dockerfile
    assert "{{" not in dockerfile
    assert render_base(spec).network == "host"  # apt


def test_unknown_suite() -> None:
    with pytest.raises(UsageError, match="'buster'.*bookworm"):
        parse_suite("buster")


def test_suite_table_matches_auditwheel_policies() -> None:
    policies = json.loads((resources.files("auditwheel.policy") / "manylinux-policy.json").read_text())
    names = {p["name"] for p in policies}
    for suite in SUITES.values():
        major, minor = suite.glibc.split(".")
        assert suite.manylinux_max == f"manylinux_{major}_{minor}" and suite.manylinux_max in names
        assert suite.manylinux_cxx in names
        cxx_minor = int(suite.manylinux_cxx.rsplit("_", 1)[1])
        assert cxx_minor <= int(minor)


# --- the rootfs tar stream ---

def test_tar_stream_keeps_links_and_modes(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "tool").write_bytes(b"#!/bin/sh\n" + b"x" * (3 << 20))
    (root / "usr" / "bin" / "tool").chmod(0o755)
    os.link(root / "usr" / "bin" / "tool", root / "usr" / "bin" / "tool-again")
    (root / "bin").symlink_to("usr/bin")
    (root / "etc").mkdir()
    (root / "etc" / "conf").write_text("a=1\n")
    archive = tmp_path / "root.tar"
    chunks = list(tar_stream(root))
    assert len(chunks) > 1  # streamed, not one blob
    archive.write_bytes(b"".join(chunks))
    with tarfile.open(archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert members["."].isdir()
        assert members["./bin"].issym() and members["./bin"].linkname == "usr/bin"
        assert members["./usr/bin/tool"].isreg() and members["./usr/bin/tool"].mode & 0o777 == 0o755
        assert members["./usr/bin/tool-again"].islnk()
        assert members["./usr/bin/tool-again"].linkname == "./usr/bin/tool"
        extracted = tar.extractfile("./etc/conf")
        assert extracted is not None and extracted.read() == b"a=1\n"
        assert list(members) == sorted(members, key=lambda n: n.split("/"))  # parents before children


# --- the CLI without an engine ---

def test_no_engine_is_one_line_and_exit_code_3(tmp_path: Path) -> None:
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/absent.sock"}
    result = subprocess.run([sys.executable, "-m", "wheelfactory", "base-image", "--cache-dir", str(tmp_path)],
                            check=False, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 3, result.stderr
    expected = (f"wheelfactory: error: no Docker engine answers at unix://{tmp_path}/absent.sock: "
                "start one (e.g. .ci/start-docker)")
    assert result.stderr.strip().splitlines() == [expected]
    assert result.stdout == ""


# --- the real image ---

@pytest.mark.docker
@pytest.mark.slow
def test_bookworm_base_runs_offline(docker_client: docker.DockerClient, bookworm_base: BaseImage) -> None:
    # the fixture's image is the host mirror's bookworm base, tagged as rendering says it is
    assert bookworm_base.tag == render_base(BaseImageSpec(parse_suite("bookworm"), debian_mirror(None))).tag
    labels = docker_client.images.get(bookworm_base.tag).labels
    assert labels["wheelfactory.suite"] == "bookworm"
    assert labels["wheelfactory.glibc"] == "2.36"
    assert labels["wheelfactory.python-abi"] == "cp311"
    with Container(docker_client, bookworm_base.tag, network="none") as box:
        version = box.run(["/opt/python/cp39-cp39/bin/python", "-c", "import sys; print(sys.version)"])
        assert version.startswith("3.11.")
        assert box.run(["readlink", "/opt/python/cp39-cp39"]).strip() == "/opt/python/cp311-cp311"
        assert box.run(["/opt/python/cp311-cp311/bin/python", "-c", "import sys; print(sys.prefix)"]).strip() \
            == "/opt/python/cp311-cp311"  # a venv, not the system prefix
        assert "g++ (Debian 12" in box.run(["g++", "--version"])
        assert box.run(["ldd", "--version"]).splitlines()[0].endswith(" 2.36")
        assert box.run(["ninja", "--version"]).strip()
        # No network at all: only the loopback interface exists.
        assert box.run(["ls", "/sys/class/net"]).split() == ["lo"]
        name = box.name
    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(name)


@pytest.mark.docker
@pytest.mark.slow
def test_container_is_removed_when_the_block_fails(docker_client: docker.DockerClient,
                                                   bookworm_base: BaseImage) -> None:
    from wheelfactory.support.proc import CommandFailed

    name = ""
    with pytest.raises(CommandFailed, match="exit code 3"), Container(docker_client, bookworm_base.tag) as box:
        name = box.name
        box.run(["sh", "-c", "echo failing; exit 3"])
    assert name
    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(name)


def _wheel_of(library: Path, out: Path) -> Path:
    files = {"probe/__init__.py": b"", "probe/_probe.so": library.read_bytes(),
             "probe-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: probe\nVersion: 0.1\n",
             "probe-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: false\n"
                                           b"Tag: cp311-cp311-linux_x86_64\n"}
    wheel = out / "probe-0.1-cp311-cp311-linux_x86_64.whl"
    record = []
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(data)}")
        record.append("probe-0.1.dist-info/RECORD,,")
        archive.writestr("probe-0.1.dist-info/RECORD", "\n".join(record) + "\n")
    return wheel


@pytest.mark.docker
@pytest.mark.slow
def test_cxx_library_gets_the_tabled_manylinux_tag(docker_client: docker.DockerClient, bookworm_base: BaseImage,
                                                   tmp_path: Path) -> None:
    """The suite table's manylinux_cxx is what auditwheel reports for C++ built in the image."""
    (tmp_path / "probe.cpp").write_bytes((FIXTURES / "probe.cpp").read_bytes())
    with Container(docker_client, bookworm_base.tag, volumes={tmp_path: "/src"}, workdir="/src") as box:
        box.run(["g++", "-O2", "-shared", "-fPIC", "-pthread", "-o", "libprobe.so", "probe.cpp"])
    wheel = _wheel_of(tmp_path / "libprobe.so", tmp_path)
    report = run([sys.executable, "-m", "auditwheel", "show", str(wheel)])
    tag = re.search(r'platform tag:\s+"(manylinux_\d+_\d+)_x86_64"', report)
    assert tag is not None, report
    assert tag.group(1) == bookworm_base.suite.manylinux_cxx == "manylinux_2_34"


@pytest.mark.docker
@pytest.mark.slow
def test_cli_reuses_the_image(bookworm_base: BaseImage, tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "wheelfactory", "base-image", "--suite", "bookworm",
                             "--cache-dir", str(tmp_path)], check=False, capture_output=True, text=True,
                            timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [bookworm_base.tag, bookworm_base.id]
    assert "exists: reused" in result.stderr
    assert not (tmp_path / "tmp").exists()  # no rootfs was made


@pytest.mark.docker
@pytest.mark.slow
def test_a_container_that_runs_a_wheel_has_shared_memory_for_torchs_processes(
        docker_client: docker.DockerClient, bookworm_base: BaseImage) -> None:
    """torch.multiprocessing and DataLoader workers share tensors through /dev/shm: Docker's 64 MB
    failed DeepSpeed's cross-process optimizer test ("unable to allocate shared memory")."""
    with Container(docker_client, bookworm_base.tag, network="none") as box:
        size_kb = int(box.run(["df", "-k", "--output=size", "/dev/shm"]).split()[-1])
    assert size_kb >= 2 * 1024 * 1024, size_kb
