"""images/base_image.py and images/rootfs.py for another arch than the host's: tags, the
debootstrap command, the refusal without emulation, and the image archive `docker load` gets (read
back with tarfile)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any, cast

import pytest
from wheelfactory.errors import ImageBuildFailed, UsageError
from wheelfactory.images.base_image import BaseImageSpec, ensure_base_image, parse_suite, render_base
from wheelfactory.images.rootfs import debootstrap_command, image_archive
from wheelfactory.images.emulation import host_arch

MIRROR = "http://mirror.example/debian"


def spec(arch: str = "x86_64", suite: str = "bookworm") -> BaseImageSpec:
    return BaseImageSpec(parse_suite(suite), MIRROR, arch=arch)


def test_x86_64_bases_keep_the_tags_they_had_before_bases_had_an_arch() -> None:
    # the tags main made for this mirror: engines and CI caches that hold them reuse them
    assert (spec().rootfs_tag, render_base(spec()).tag) == (
        "wheelfactory/rootfs:bookworm-2293ca1dced2", "wheelfactory/base:bookworm-b93e8d229704")
    assert render_base(spec("x86_64", "bullseye")).tag == "wheelfactory/base:bullseye-ebe5de5f9ce5"


def test_an_aarch64_base_has_tags_of_its_own_that_say_its_arch() -> None:
    arm = spec("aarch64")
    assert arm.rootfs_tag.startswith("wheelfactory/rootfs:bookworm-aarch64-")
    assert render_base(arm).tag.startswith("wheelfactory/base:bookworm-aarch64-")
    assert arm.rootfs_tag != spec().rootfs_tag and render_base(arm).tag != render_base(spec()).tag
    assert f"FROM {arm.rootfs_tag}\n" in render_base(arm).dockerfile


def test_an_arch_debian_has_no_port_for_is_one_line() -> None:
    with pytest.raises(UsageError, match=r"no Debian base for arch 'riscv64': use one of x86_64, aarch64"):
        spec("riscv64")


def test_debootstrap_names_the_debian_arch_only_for_a_foreign_one(tmp_path: Path) -> None:
    assert debootstrap_command(spec().rootfs, tmp_path, foreign=False) == [
        "debootstrap", "--variant=minbase", "bookworm", str(tmp_path), MIRROR]
    assert debootstrap_command(spec("aarch64").rootfs, tmp_path, foreign=True)[:3] == [
        "debootstrap", "--arch=arm64", "--variant=minbase"]


def test_a_foreign_base_without_emulation_is_refused_with_the_fix_before_the_engine_is_asked(
        tmp_path: Path) -> None:
    foreign = "aarch64" if host_arch() == "x86_64" else "x86_64"
    unmounted = tmp_path / "binfmt_misc"  # no status file: not mounted
    unmounted.mkdir()
    engine = cast(Any, object())  # any call on it would fail: the refusal comes first
    with pytest.raises(ImageBuildFailed) as caught:
        ensure_base_image(engine, spec(foreign), cache_dir=tmp_path, binfmt=unmounted)
    message = str(caught.value)
    assert message.startswith(f"the {foreign} base cannot be made here: ")
    assert "binfmt_misc is not mounted" in message and "fix: mount -t binfmt_misc" in message
    assert "\n" not in message


def test_the_image_archive_is_a_docker_save_of_one_layer_naming_the_arch(tmp_path: Path) -> None:
    root = tmp_path / "rootfs"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "true").write_bytes(b"\x7fELF" + bytes(100))
    (root / "bin" / "sh").symlink_to("true")
    data = b"".join(image_archive(root, "wheelfactory/rootfs:bookworm-aarch64-0123456789ab", "aarch64"))
    assert len(data) % tarfile.BLOCKSIZE == 0
    with tarfile.open(fileobj=io.BytesIO(data)) as outer:
        members = {m.name: outer.extractfile(m).read() for m in outer.getmembers()}  # type: ignore[union-attr]
    (manifest,) = json.loads(members["manifest.json"])
    assert manifest["RepoTags"] == ["wheelfactory/rootfs:bookworm-aarch64-0123456789ab"]
    config_bytes = members[manifest["Config"]]
    assert manifest["Config"] == hashlib.sha256(config_bytes).hexdigest() + ".json"
    config = json.loads(config_bytes)
    assert (config["architecture"], config["os"]) == ("arm64", "linux")
    layer = members[manifest["Layers"][0]]
    assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(layer).hexdigest()]
    with tarfile.open(fileobj=io.BytesIO(layer)) as inner:
        names = {m.name: m for m in inner.getmembers()}
    assert names["./bin/sh"].issym() and names["./bin/sh"].linkname == "true"
    assert names["./bin/true"].size == 104


def test_a_base_for_another_arch_gets_cross_compilers_that_run_on_this_machine() -> None:
    """base_spec is what `build` and `base-image` make: for a foreign arch, the suite's own gcc for
    this machine targeting that arch (docker/cross-toolchain.Dockerfile), under CROSS_PREFIX, with
    a file saying where they run; for the machine's own arch the base renders as it always did."""
    from wheelfactory.images.base_image import (
        CROSS_PREFIX,
        NATIVE_CONTEXT,
        base_spec,
        cross_fetch_script,
        cross_toolchain_step,
    )

    bookworm = parse_suite("bookworm")
    arm = base_spec(bookworm, MIRROR, "aarch64", host="x86_64")
    assert arm.compilers_from == "x86_64" and arm.rootfs_tag == spec("aarch64").rootfs_tag  # one rootfs
    dockerfile = render_base(arm).dockerfile
    assert "dpkg --add-architecture amd64" in dockerfile and "dpkg -i /tmp/cross-same/*.deb" in dockerfile
    assert f"echo x86_64 > {CROSS_PREFIX}/runs-on" in dockerfile
    assert f"ln -s aarch64-linux-gnu-g++ {CROSS_PREFIX}/bin/c++" in dockerfile
    assert dockerfile.index("build-essential") < dockerfile.index("--add-architecture")  # after the native gcc
    # apt and dpkg-deb run natively beforehand (an amd64 container of the suite): the build COPYs
    # their result, and the venv made there, from its context; nothing of that runs emulated
    fetch = cross_fetch_script(arm)
    assert '"g++-aarch64-linux-gnu"' in fetch and "Multi-Arch" in fetch  # the suite's default gcc
    assert "python3 -m venv /opt/python/cp311-cp311" in fetch and "python3 -m venv" not in dockerfile
    assert f"COPY {NATIVE_CONTEXT}/cross/ {CROSS_PREFIX}/" in dockerfile
    assert f"COPY {NATIVE_CONTEXT}/venv/ /opt/python/cp311-cp311/" in dockerfile
    assert "apt-get update" not in dockerfile.split(f"COPY {NATIVE_CONTEXT}/cross/")[1]
    # the script is part of what the tag names: another script, another base
    assert render_base(arm).content != render_base(spec("aarch64")).content
    assert cross_fetch_script(spec()) == "" and "python3 -m venv /opt/python/cp311-cp311" in render_base(spec()).dockerfile
    assert 'wheelfactory.cross-compilers-run-on="x86_64"' in dockerfile
    assert render_base(arm).tag != render_base(spec("aarch64")).tag
    # made on an arm64 machine, or this machine's own arch: no cross compilers, nothing changes
    assert base_spec(bookworm, MIRROR, "aarch64", host="aarch64") == spec("aarch64")
    assert render_base(base_spec(bookworm, MIRROR, "x86_64", host="x86_64")) == render_base(spec())
    assert cross_toolchain_step(spec()) == "" and "{{" not in dockerfile
    with pytest.raises(UsageError, match="no Debian base for arch 'riscv64'"):
        base_spec(bookworm, MIRROR, "aarch64", host="riscv64")


def test_a_second_maker_of_the_same_base_waits_for_the_first_and_reuses_its_image(tmp_path: Path) -> None:
    """`base-image` started ahead of a build (as .ci/run does for the arm64 base), or two builds on
    one engine: the second waits on the first's lock, then finds the image and makes nothing."""
    import fcntl
    import tempfile
    import threading
    import time as clock

    import docker
    from wheelfactory.images.dockerfiles import CONTENT_LABEL

    rendered = render_base(spec())

    class Images:
        made = False

        def get(self, tag: str) -> object:
            if not self.made:
                raise docker.errors.ImageNotFound(tag)
            return type("Image", (), {"id": "sha256:made", "labels": {CONTENT_LABEL: rendered.content}})()

    client = type("Client", (), {"images": Images()})()
    said: list[str] = []
    lock_path = Path(tempfile.gettempdir()) / f"wheelfactory-base-{rendered.content[:16]}.lock"
    with lock_path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the first maker, still at work
        result: list[object] = []
        waiter = threading.Thread(target=lambda: result.append(ensure_base_image(
            client, spec(), cache_dir=tmp_path, progress=lambda event: said.append(str(event)))))  # type: ignore[arg-type]
        waiter.start()
        deadline = clock.monotonic() + 30
        while not any("waiting for another wheelfactory" in line for line in said) and clock.monotonic() < deadline:
            clock.sleep(0.05)
        assert waiter.is_alive() and any("waiting for another wheelfactory" in line for line in said)
        client.images.made = True  # the first maker finishes
        fcntl.flock(lock, fcntl.LOCK_UN)
    waiter.join(timeout=10)
    (base,) = result
    assert base.reused and base.id == "sha256:made" and not (tmp_path / "tmp").exists()  # type: ignore[attr-defined]


def test_an_idle_priority_base_runs_debootstrap_at_nice_19_and_its_steps_at_the_lowest_cpu_weight(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`base-image --idle-priority` (.ci/run's arm64 base, made beside the tests): debootstrap and
    the emulated second stage it starts at nice 19, the Dockerfile's RUN steps in containers of the
    engine's lowest CPU weight; without the flag, neither."""
    import docker
    from wheelfactory.images import base_image, rootfs
    from wheelfactory.images.dockerfiles import CONTENT_LABEL, IDLE_CPU_SHARES

    rendered = render_base(spec())
    commands: list[list[str]] = []
    builds: list[dict[str, Any]] = []

    def debootstrap(command: list[str], **_: object) -> str:
        commands.append(command)
        (Path(command[-2]) / "etc").mkdir(parents=True)
        return ""

    class Images:
        def get(self, tag: str) -> object:
            if tag == rendered.tag and not builds:
                raise docker.errors.ImageNotFound(tag)
            if tag != rendered.tag and not commands:
                raise docker.errors.ImageNotFound(tag)
            return type("Image", (), {"id": "sha256:x", "labels": {CONTENT_LABEL: rendered.content} if builds else {},
                                      "attrs": {"Architecture": "amd64"}})()

    class Api:
        def import_image(self, **_: object) -> None:
            pass

        def build(self, **kwargs: Any) -> list[dict[str, str]]:
            builds.append(kwargs)
            return [{"stream": "Step 1/1\n"}]

    monkeypatch.setattr(rootfs, "run", debootstrap)
    monkeypatch.setattr(rootfs.shutil, "which", lambda name: f"/usr/sbin/{name}")
    monkeypatch.setattr(rootfs.os, "geteuid", lambda: 0)
    for module in (base_image, rootfs):
        monkeypatch.setattr(module, "host_arch", lambda: "x86_64")
    for idle in (True, False):
        commands.clear()
        builds.clear()
        client = type("Client", (), {"images": Images(), "api": Api()})()
        made = ensure_base_image(client, spec(), cache_dir=tmp_path / str(idle), idle=idle)  # type: ignore[arg-type]
        assert not made.reused
        (command,) = commands
        (build,) = builds
        if idle:
            assert command[:4] == ["nice", "-n", "19", "debootstrap"]
            assert build["container_limits"] == {"cpushares": IDLE_CPU_SHARES}
        else:
            assert command[0] == "debootstrap" and build["container_limits"] is None
