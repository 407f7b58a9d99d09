"""A Debian suite's minbase tree in the engine: the first layer of an offline base image
(images/base_image.py), made when its tag is missing.

``debootstrap --variant=minbase SUITE ROOTFS MIRROR`` into a temp dir under the cache dir, then
the tree streamed as a tar into the engine (``docker import``), tagged
``wheelfactory/rootfs:<suite>-<hash of suite and mirror>``; the temp dir is removed. For another
arch than the host's, ``debootstrap --arch`` runs its second stage through QEMU user emulation,
and the tree goes in by ``docker load`` of a one-layer image whose config names the arch:
``docker import`` marks an image with the engine's own arch whatever ``--platform`` says (Docker
20.10), and cibuildwheel pulls (and fails) when the image's arch is not the variant's.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import shlex
import shutil
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from wheelfactory.errors import ImageBuildFailed
from wheelfactory.images.dockerfiles import content_digest
from wheelfactory.images.emulation import DEBIAN_ARCH, OCI_ARCH, host_arch
from wheelfactory.support.proc import CommandFailed, run
from wheelfactory.support.progress import CommandRun, Listener, StepDone, StepStarted

if TYPE_CHECKING:
    from wheelfactory.images.containers import DockerClient

ROOTFS_REPOSITORY = "wheelfactory/rootfs"
DEBOOTSTRAP_TIMEOUT_S = 1800
IDLE_NICE = ["nice", "-n", "19"]  # the second stage's emulated children inherit it
_STREAM_CHUNK = 1 << 20

Timings = tuple[tuple[str, float], ...]  # (step, seconds) of the steps that ran


def arch_naming(arch: str) -> tuple[str, tuple[str, ...]]:
    """A rootfs or base tag's arch part and what else its digest covers. x86_64 images keep the
    tags they had before bases had an arch: existing engines and CI caches reuse them."""
    return ("", ()) if arch == "x86_64" else (f"{arch}-", (arch,))


@dataclass(frozen=True)
class Rootfs:
    suite: str  # "bookworm"
    mirror: str  # without a trailing /
    arch: str  # a planner arch (plan/identity.ARCHES)

    @property
    def tag(self) -> str:
        name, extra = arch_naming(self.arch)
        digest = content_digest(self.suite, self.mirror, *extra)[:12]
        return f"{ROOTFS_REPOSITORY}:{self.suite}-{name}{digest}"


@dataclass(frozen=True)
class Workshop:
    """Where a base image and its rootfs are made, and who hears about it. ``idle``: with only
    the CPU other work leaves (debootstrap at nice 19, the engine's lowest CPU weight)."""

    client: DockerClient
    cache_dir: Path
    log: Path
    progress: Listener
    idle: bool = False


def ensure_rootfs(rootfs: Rootfs, shop: Workshop) -> Timings:
    """The rootfs under its tag: reused when it exists, else made; the timings of what ran."""
    if _rootfs_exists(shop, rootfs.tag):
        return ()
    # One maker per rootfs too: a base for another arch makes this machine's (for its cross
    # compilers) while this machine's own base may be making it.
    with one_maker(content_digest(rootfs.tag), rootfs.tag, shop.progress):
        if _rootfs_exists(shop, rootfs.tag):
            return ()
        return _make_rootfs(rootfs, shop)


@contextlib.contextmanager
def one_maker(content: str, tag: str, progress: Listener) -> Iterator[None]:
    """One maker of an image on this machine at a time: a second run (another build, `base-image`
    started ahead of a build) waits for the first, then reuses what it made instead of running
    debootstrap and the apt layer again (minutes; for a foreign arch, emulated)."""
    lock_path = Path(tempfile.gettempdir()) / f"wheelfactory-base-{content[:16]}.lock"
    with lock_path.open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(StepStarted(f"waiting for another wheelfactory that is making {tag}"))
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@contextlib.contextmanager
def scratch(shop: Workshop, prefix: str) -> Iterator[Path]:
    """A temp dir under the cache dir (the trees are large: not /tmp's), removed afterwards."""
    work_root = shop.cache_dir / "tmp"
    work_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=prefix, dir=work_root))
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if work.exists():
            shop.progress(StepDone(f"warning: could not remove {work}"))


def seconds_since(start: float) -> float:
    return round(time.monotonic() - start, 3)


def _rootfs_exists(shop: Workshop, tag: str) -> bool:
    import docker

    try:
        image = shop.client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    shop.progress(StepStarted(f"rootfs {tag}"))
    shop.progress(StepDone(f"exists: reused ({image.id})"))
    return True


def _make_rootfs(rootfs: Rootfs, shop: Workshop) -> Timings:
    if shutil.which("debootstrap") is None:
        raise ImageBuildFailed("debootstrap is not installed: apt-get install -y debootstrap")
    if os.geteuid() != 0:
        raise ImageBuildFailed(
            "debootstrap needs root (it creates device nodes and chroots): "
            "run wheelfactory base-image as root"
        )
    foreign = rootfs.arch != host_arch()
    with scratch(shop, f"rootfs-{rootfs.suite}-") as work:
        tree = work / "rootfs"
        command = [
            *(IDLE_NICE if shop.idle else []),
            *debootstrap_command(rootfs, tree, foreign=foreign),
        ]
        shop.progress(StepStarted(f"debootstrap {rootfs.suite} (log: {shop.log})"))
        shop.progress(CommandRun(shlex.join(command)))
        start = time.monotonic()
        try:
            run(command, log=shop.log, timeout=DEBOOTSTRAP_TIMEOUT_S)
        except CommandFailed as exc:
            raise ImageBuildFailed(
                f"debootstrap of {rootfs.suite} from {rootfs.mirror} failed (log: {shop.log}): "
                f"check that the mirror answers ({rootfs.mirror}/dists/{rootfs.suite}/Release) "
                "or pass another with --mirror",
                tail=exc.tail,
            ) from exc
        made = seconds_since(start)
        shop.progress(StepDone(f"rootfs made in {made:.1f} s ({size_mb(tree)} MB)"))
        return (("debootstrap", made), ("import", _import_rootfs(rootfs, tree, shop, foreign)))


def _import_rootfs(rootfs: Rootfs, tree: Path, shop: Workshop, foreign: bool) -> float:
    """The tree into the engine under the rootfs tag; the seconds it took."""
    import docker

    tag = rootfs.tag
    shop.progress(StepStarted(f"import rootfs as {tag}"))
    start = time.monotonic()
    try:
        if foreign:
            shop.progress(
                CommandRun(
                    f"docker load  (a one-layer {OCI_ARCH[rootfs.arch]} image of "
                    f"{shlex.quote(str(tree))}, through the SDK)"
                )
            )
            archive = image_archive(tree, tag, rootfs.arch)
            for line in shop.client.api.load_image(archive):  # type: ignore[no-untyped-call]
                # a refusal after the upload began
                if isinstance(line, dict) and "error" in line:
                    raise docker.errors.DockerException(str(line["error"]).strip())
        else:
            # The SDK call is `docker import`'s request; the tar is streamed, never written to disk.
            shop.progress(
                CommandRun(
                    f"tar -C {shlex.quote(str(tree))} -c . | docker import - {tag}  "
                    "(through the SDK)"
                )
            )
            repository, name = tag.rsplit(":", 1)
            shop.client.api.import_image(
                src=tar_stream(tree), repository=repository, tag=name, stream_src=True
            )
        image = shop.client.images.get(tag)
    except docker.errors.DockerException as exc:
        raise ImageBuildFailed(
            f"importing the {rootfs.suite} rootfs into the engine failed: {exc}; "
            "check the engine's log (e.g. /tmp/dockerd.log) and its free disk"
        ) from exc
    if image.attrs.get("Architecture") != OCI_ARCH[rootfs.arch]:
        raise ImageBuildFailed(
            f"the engine made {tag} as {image.attrs.get('Architecture')}, not "
            f"{OCI_ARCH[rootfs.arch]}: remove it (docker image rm {tag}) and report this"
        )
    took = seconds_since(start)
    shop.progress(StepDone(f"imported {tag} ({image.id}) in {took:.1f} s"))
    return took


def debootstrap_command(rootfs: Rootfs, tree: Path, *, foreign: bool) -> list[str]:
    """debootstrap's command line; for a foreign arch it runs the second stage itself, through the
    arch's binfmt_misc handler (what qemu-debootstrap used to arrange)."""
    arch = [f"--arch={DEBIAN_ARCH[rootfs.arch]}"] if foreign else []
    return ["debootstrap", *arch, "--variant=minbase", rootfs.suite, str(tree), rootfs.mirror]


def image_archive(root: Path, tag: str, arch: str) -> Iterator[bytes]:
    """``docker save``'s format for a one-layer image of ``root`` whose config names ``arch``, as
    chunks. The layer's size and digest go before it: a first pass over the tree measures them
    (tar_stream is deterministic for an unchanged tree), the second streams it."""
    size, digest = 0, hashlib.sha256()
    for chunk in tar_stream(root):
        size += len(chunk)
        digest.update(chunk)
    config = json.dumps(
        {
            "architecture": OCI_ARCH[arch],
            "os": "linux",
            "config": {
                "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
            },
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{digest.hexdigest()}"]},
            "history": [{"created_by": f"debootstrap --arch={DEBIAN_ARCH[arch]} (wheelfactory)"}],
        },
        sort_keys=True,
    ).encode()
    config_name = f"{hashlib.sha256(config).hexdigest()}.json"
    manifest = json.dumps(
        [{"Config": config_name, "RepoTags": [tag], "Layers": ["layer.tar"]}]
    ).encode()
    yield _member_header("layer.tar", size)
    again = hashlib.sha256()
    for chunk in tar_stream(root):
        again.update(chunk)
        yield chunk
    # the tree changed in between: the engine refuses the layer
    if again.digest() != digest.digest():
        raise ImageBuildFailed(f"{root} changed while it was loaded into the engine: run again")
    yield _padding(size)
    for name, data in ((config_name, config), ("manifest.json", manifest)):
        yield _member_header(name, len(data)) + data + _padding(len(data))
    yield bytes(2 * tarfile.BLOCKSIZE)


def _member_header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mode = size, 0o644
    return info.tobuf(format=tarfile.PAX_FORMAT)


def _padding(size: int) -> bytes:
    return bytes(-size % tarfile.BLOCKSIZE)


class _Sink(io.RawIOBase):
    """A write-only file that keeps what is written until ``take``: lets tarfile produce chunks."""

    def __init__(self) -> None:
        super().__init__()
        self._parts: list[bytes] = []
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: object) -> int:
        chunk = bytes(data)  # type: ignore[call-overload]
        self._parts.append(chunk)
        self.size += len(chunk)
        return len(chunk)

    def take(self) -> bytes:
        data = b"".join(self._parts)
        self._parts.clear()
        self.size = 0
        return data


def _entries(root: Path) -> Iterator[Path]:
    """Every path under ``root``, parents first, sorted, symlinks not followed."""
    with os.scandir(root) as scan:
        children = sorted(scan, key=lambda e: e.name)
    for entry in children:
        yield Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            yield from _entries(Path(entry.path))


def tar_stream(root: Path) -> Iterator[bytes]:
    """``tar -C root -c .`` as chunks of about 1 MiB: owners, modes, links and device nodes kept."""
    sink = _Sink()
    with tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        tar.add(str(root), arcname=".", recursive=False)
        for path in _entries(root):
            info = tar.gettarinfo(str(path), arcname="./" + path.relative_to(root).as_posix())
            if info is None:  # a socket: nothing a rootfs needs
                continue
            if info.isreg():
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)
            if sink.size >= _STREAM_CHUNK:
                yield sink.take()
    yield sink.take()


def size_mb(root: Path) -> int:
    total = 0
    for path in _entries(root):
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
    return total >> 20
