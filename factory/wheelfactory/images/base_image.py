"""An offline manylinux-layout base image made from Debian packages, for engines that reach no
container registry (``wheelfactory base-image``).

Three steps, each skipped when its result exists:
1. ``debootstrap --variant=minbase SUITE ROOTFS MIRROR`` into a temp dir under the cache dir;
2. the rootfs streamed as a tar into the engine (``docker import``), tagged
   ``wheelfactory/rootfs:<suite>-<hash of suite and mirror>``; the temp dir is removed;
3. ``docker/debian-manylinux.Dockerfile`` built on it (apt: compiler, Python, ninja, git; the
   ``/opt/python/cpXY-cpXY`` layout), tagged ``wheelfactory/base:<suite>-<12 hex>`` by the sha256 of
   the rendered Dockerfile, the suite and the mirror. An existing tag is reused: nothing runs.

A base for another arch than the host's (``BaseImageSpec.arch``; needs QEMU user emulation,
images/emulation.py) is made the same way with ``debootstrap --arch``, except step 2: ``docker
import`` marks an image with the engine's own arch whatever ``--platform`` says (Docker 20.10), and
cibuildwheel pulls (and fails) when the image's arch is not the variant's. So the rootfs goes in
by ``docker load`` of a one-layer image whose config names the arch. Such a base also gets the
suite's cross compilers for this machine (``BaseImageSpec.compilers_from``,
docker/cross-toolchain.Dockerfile): emulated, a compile is ~10x slower than native. What apt
fetches and unpacks for them, and the Python layout's venv, are made natively first, in a
container of the suite's rootfs for this machine (docker/cross-toolchain-fetch.sh), and reach the
build as its context: emulated, those steps took ~80 of the base's ~390 s.

Rendering (``render_base``) is pure; ``ensure_base_image`` has the side effects.
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

from wheelfactory.errors import ImageBuildFailed, UsageError
from wheelfactory.images.dockerfiles import (
    RenderedImage,
    content_digest,
    ensure_image,
    find_image,
    label_block,
    load_template,
)
from wheelfactory.images.containers import Container
from wheelfactory.images.emulation import DEBIAN_ARCH, OCI_ARCH, arch_support, host_arch
from wheelfactory.support.proc import CommandFailed, run
from wheelfactory.support.progress import CommandRun, Listener, StepDone, StepStarted, ignore

if TYPE_CHECKING:
    from wheelfactory.images.containers import DockerClient

BASE_REPOSITORY = "wheelfactory/base"
ROOTFS_REPOSITORY = "wheelfactory/rootfs"
TEMPLATE = "debian-manylinux.Dockerfile"
CROSS_TEMPLATE = "cross-toolchain.Dockerfile"
CROSS_FETCH_TEMPLATE = "cross-toolchain-fetch.sh"
NATIVE_CONTEXT = "wheelfactory-native"  # the build context's directory of what was made natively
NATIVE_OUT = "/wheelfactory-out"  # where the native container writes it
# bin/ holds cc, c++, gcc, g++; runs-on names their machine
CROSS_PREFIX = "/opt/wheelfactory/cross"
DEBOOTSTRAP_TIMEOUT_S = 1800
_STREAM_CHUNK = 1 << 20


@dataclass(frozen=True)
class Suite:
    """A Debian release the base can be made from, with what a build on it gives.

    ``manylinux_max`` is auditwheel's policy for the suite's glibc: the highest tag a wheel built on
    it can need. ``manylinux_cxx`` is what auditwheel 6.8 reports for a C++ shared library built
    there with the distro g++ (threads, iostreams, exceptions; tests/docker checks it): the floor a
    torch extension gets unless it calls newer glibc functions itself. Bookworm and trixie give
    manylinux_2_34 (their libstdc++ needs GLIBC_2.32, and auditwheel has no 2_32/2_33 policy);
    bullseye's g++ 10 gives manylinux_2_24."""

    name: str
    python: str  # the distro's python3, "3.11"
    glibc: str  # "2.36"
    manylinux_max: str  # "manylinux_2_36"
    manylinux_cxx: str  # "manylinux_2_34"

    @property
    def abi(self) -> str:
        """The CPython tag of the distro Python, "cp311": the /opt/python/<abi>-<abi> directory."""
        return "cp" + self.python.replace(".", "")


SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite(
            "bullseye",
            "3.9",
            "2.31",
            manylinux_max="manylinux_2_31",
            manylinux_cxx="manylinux_2_24",
        ),
        Suite(
            "bookworm",
            "3.11",
            "2.36",
            manylinux_max="manylinux_2_36",
            manylinux_cxx="manylinux_2_34",
        ),
        Suite(
            "trixie", "3.13", "2.41", manylinux_max="manylinux_2_41", manylinux_cxx="manylinux_2_34"
        ),
    )
}


def parse_suite(name: str) -> Suite:
    try:
        return SUITES[name]
    except KeyError:
        raise UsageError(f"unknown Debian suite {name!r}: use one of {', '.join(SUITES)}") from None


@dataclass(frozen=True)
class BaseImageSpec:
    suite: Suite
    # [build] debian_mirror / --mirror, else the host's apt mirror (plan/indexes.debian_mirror)
    mirror: str
    tag: str | None = None  # None: the content tag
    arch: str = "x86_64"  # a planner arch (plan/identity.ARCHES)
    # The arch of the machine that builds in it, when that is not ``arch``: the image gets the
    # suite's cross compilers that run there (CROSS_PREFIX). None: compilers of ``arch`` only.
    compilers_from: str | None = None

    def __post_init__(self) -> None:
        # ".../debian/" and ".../debian" are one mirror: one rootfs, one tag.
        object.__setattr__(self, "mirror", self.mirror.rstrip("/"))
        for arch in (self.arch, self.compilers_from or self.arch):
            if arch not in DEBIAN_ARCH:
                raise UsageError(
                    f"no Debian base for arch {arch!r}: use one of {', '.join(DEBIAN_ARCH)}"
                )
        if self.compilers_from == self.arch:
            object.__setattr__(self, "compilers_from", None)

    @property
    def _named(self) -> tuple[str, tuple[str, ...]]:
        """The tag's arch part and what else the digests cover. x86_64 bases keep the tags they had
        before bases had an arch: existing engines and CI caches reuse them."""
        return ("", ()) if self.arch == "x86_64" else (f"{self.arch}-", (self.arch,))

    @property
    def rootfs_tag(self) -> str:
        name, extra = self._named
        return f"{ROOTFS_REPOSITORY}:{self.suite.name}-{name}{content_digest(self.suite.name, self.mirror, *extra)[:12]}"


@dataclass(frozen=True)
class BaseImage:
    tag: str
    id: str
    suite: Suite
    reused: bool  # the tag existed: nothing ran
    log: Path
    timings: tuple[tuple[str, float], ...] = ()  # (step, seconds) of the steps that ran


def base_spec(
    suite: Suite, mirror: str, arch: str, *, tag: str | None = None, host: str | None = None
) -> BaseImageSpec:
    """The base a build on this machine (``host``, default: its arch) uses for ``arch``: with the
    cross compilers that run here when ``arch`` is another one."""
    return BaseImageSpec(suite, mirror, tag, arch=arch, compilers_from=host or host_arch())


def triplet(arch: str) -> str:
    """The GNU triplet Debian names an arch's compilers and library directories by."""
    return f"{arch}-linux-gnu"


def _cross_values(spec: BaseImageSpec, host: str) -> dict[str, str]:
    return {
        "host": host,
        "host_debian": DEBIAN_ARCH[host],
        "host_triplet": triplet(host),
        "target": triplet(spec.arch),
        "prefix": CROSS_PREFIX,
        "abi": spec.suite.abi,
        "native": NATIVE_CONTEXT,
        "out": NATIVE_OUT,
    }


def cross_toolchain_step(spec: BaseImageSpec) -> str:
    """The Dockerfile steps that add the cross compilers (docker/cross-toolchain.Dockerfile) on
    lines of its own after the apt step, or "" (a base without them renders as it always did)."""
    if spec.compilers_from is None:
        return ""
    return "\n" + load_template(CROSS_TEMPLATE).fill(
        _cross_values(spec, spec.compilers_from)
    ).rstrip("\n")


def cross_fetch_script(spec: BaseImageSpec) -> str:
    """The shell script (docker/cross-toolchain-fetch.sh) a container of the suite's rootfs for
    ``spec.compilers_from`` runs natively to make what the cross steps COPY; "" without them."""
    if spec.compilers_from is None:
        return ""
    return load_template(CROSS_FETCH_TEMPLATE).fill(_cross_values(spec, spec.compilers_from))


def _venv_command(spec: BaseImageSpec) -> str:
    """The Python layout's venv: made here, or (cross compilers) copied in by the cross steps."""
    venv = f"/opt/python/{spec.suite.abi}-{spec.suite.abi}"
    return f"test -x {venv}/bin/python" if spec.compilers_from else f"python3 -m venv {venv}"


def base_labels(spec: BaseImageSpec) -> dict[str, str]:
    suite = spec.suite
    return {
        "org.opencontainers.image.title": f"wheelfactory base: Debian {suite.name}, manylinux layout",
        "org.opencontainers.image.base.name": spec.rootfs_tag,
        "wheelfactory.kind": "base",
        "wheelfactory.suite": suite.name,
        "wheelfactory.mirror": spec.mirror,
        "wheelfactory.glibc": suite.glibc,
        "wheelfactory.manylinux-max": suite.manylinux_max,
        "wheelfactory.manylinux-cxx": suite.manylinux_cxx,
        "wheelfactory.python": suite.python,
        "wheelfactory.python-abi": suite.abi,
        **(
            {"wheelfactory.cross-compilers-run-on": spec.compilers_from}
            if spec.compilers_from
            else {}
        ),
    }


def render_base(spec: BaseImageSpec) -> RenderedImage:
    """The base image's Dockerfile and its tag (pure: no engine, no network)."""
    template = load_template(TEMPLATE)
    labels = base_labels(spec)
    dockerfile = template.fill(
        {
            "rootfs": spec.rootfs_tag,
            "abi": spec.suite.abi,
            "glibc": spec.suite.glibc,
            "cross_toolchain": cross_toolchain_step(spec),
            "make_venv": _venv_command(spec),
            "labels": label_block(labels),
        }
    )
    name, extra = spec._named
    fetch = cross_fetch_script(spec)
    content = content_digest(
        dockerfile, spec.suite.name, spec.mirror, *extra, *((fetch,) if fetch else ())
    )
    tag = spec.tag or f"{BASE_REPOSITORY}:{spec.suite.name}-{name}{content[:12]}"
    return RenderedImage(
        dockerfile, tag, template.network, template.name, content, tuple(sorted(labels.items()))
    )


def ensure_base_image(
    client: DockerClient,
    spec: BaseImageSpec,
    *,
    cache_dir: Path,
    progress: Listener = ignore,
    binfmt: Path | None = None,
    idle: bool = False,
) -> BaseImage:
    """The base image for ``spec``: reused when its tag exists, else made (see the module doc).
    ``binfmt``: the binfmt_misc table a foreign arch's emulation is read from (tests). ``idle``:
    made with only the CPU other work leaves (debootstrap at nice 19, the apt layer's RUN steps at
    the engine's lowest CPU weight): a warm-up started beside builds or tests (.ci/run's arm64
    base, ~10 CPU-minutes under emulation) must not slow them down."""
    # First: a base this machine cannot run is of no use, made or found.
    foreign = spec.arch != host_arch()
    if foreign:
        support = arch_support(spec.arch, binfmt=binfmt) if binfmt else arch_support(spec.arch)
        if not support.runs:
            raise ImageBuildFailed(
                f"the {spec.arch} base cannot be made here: {support.how}; fix: {support.fix}"
            )
    rendered = render_base(spec)
    log = cache_dir / "logs" / f"base-{rendered.tag.rsplit(':', 1)[-1]}.log"
    progress(
        StepStarted(
            f"base image {rendered.tag} (Debian {spec.suite.name} {spec.arch} from {spec.mirror})"
        )
    )
    found = find_image(client, rendered)
    if found is None:
        with _one_maker(rendered.content, rendered.tag, progress):
            found = find_image(client, rendered)  # made meanwhile by the run we waited for
            if found is None:
                timings: list[tuple[str, float]] = []
                _ensure_rootfs(
                    client,
                    spec,
                    cache_dir=cache_dir,
                    log=log,
                    progress=progress,
                    timings=timings,
                    foreign=foreign,
                    idle=idle,
                )
                with _natively_made(
                    client,
                    spec,
                    cache_dir=cache_dir,
                    log=log,
                    progress=progress,
                    timings=timings,
                    idle=idle,
                ) as context:
                    progress(
                        StepStarted(f"apt layer and manylinux layout (docker/{rendered.template})")
                    )
                    ref = ensure_image(
                        client,
                        rendered,
                        log=log,
                        progress=progress,
                        arch=spec.arch,
                        idle=idle,
                        context=context,
                    )
                timings.append(("build", ref.seconds))
                return BaseImage(ref.tag, ref.id, spec.suite, False, log, tuple(timings))
    progress(StepDone(f"exists: reused ({found.id})"))
    return BaseImage(found.tag, found.id, spec.suite, True, log)


@contextlib.contextmanager
def _natively_made(
    client: DockerClient,
    spec: BaseImageSpec,
    *,
    cache_dir: Path,
    log: Path,
    progress: Listener,
    timings: list[tuple[str, float]],
    idle: bool,
) -> Iterator[Path | None]:
    """The directory (NATIVE_CONTEXT) of what the cross steps COPY, made by cross_fetch_script in
    a container of the suite's rootfs for the machine the compilers run on; None for a base
    without cross compilers. Removed when the build is done."""
    if spec.compilers_from is None:
        yield None
        return
    script = cross_fetch_script(spec)
    native = BaseImageSpec(spec.suite, spec.mirror, arch=spec.compilers_from)
    _ensure_rootfs(
        client,
        native,
        cache_dir=cache_dir,
        log=log,
        progress=progress,
        timings=timings,
        foreign=native.arch != host_arch(),
        idle=idle,
    )
    work_root = cache_dir / "tmp"
    work_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="cross-", dir=work_root))
    out = work / NATIVE_CONTEXT
    out.mkdir()
    try:
        progress(
            StepStarted(
                f"cross compilers and venv, natively in {native.rootfs_tag} "
                f"(docker/{CROSS_FETCH_TEMPLATE})"
            )
        )
        start = time.monotonic()
        try:
            with Container(
                client,
                native.rootfs_tag,
                network="host",
                volumes={out: NATIVE_OUT},
                labels={"wheelfactory": "base-image"},
            ) as box:
                box.run(["sh", "-c", script], log=log)
        except CommandFailed as exc:
            raise ImageBuildFailed(
                f"fetching the {spec.suite.name} cross compilers for {spec.arch} from {spec.mirror} "
                f"failed (log: {log}): check that the mirror answers",
                tail=exc.tail,
            ) from exc
        timings.append(("native", round(time.monotonic() - start, 3)))
        progress(StepDone(f"made in {timings[-1][1]:.1f} s ({_size_mb(out)} MB)"))
        yield out
    finally:
        shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def _one_maker(content: str, tag: str, progress: Listener) -> Iterator[None]:
    """One maker of a base on this machine at a time: a second run (another build, `base-image`
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


def _ensure_rootfs(
    client: DockerClient,
    spec: BaseImageSpec,
    *,
    cache_dir: Path,
    log: Path,
    progress: Listener,
    timings: list[tuple[str, float]],
    foreign: bool = False,
    idle: bool = False,
) -> None:
    tag = spec.rootfs_tag
    if _rootfs_exists(client, tag, progress):
        return
    # One maker per rootfs too: a base for another arch makes this machine's (for its cross
    # compilers) while this machine's own base may be making it.
    with _one_maker(content_digest(tag), tag, progress):
        if not _rootfs_exists(client, tag, progress):
            _make_rootfs(
                client,
                spec,
                cache_dir=cache_dir,
                log=log,
                progress=progress,
                timings=timings,
                foreign=foreign,
                idle=idle,
            )


def _rootfs_exists(client: DockerClient, tag: str, progress: Listener) -> bool:
    import docker

    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    progress(StepStarted(f"rootfs {tag}"))
    progress(StepDone(f"exists: reused ({image.id})"))
    return True


def _make_rootfs(
    client: DockerClient,
    spec: BaseImageSpec,
    *,
    cache_dir: Path,
    log: Path,
    progress: Listener,
    timings: list[tuple[str, float]],
    foreign: bool,
    idle: bool,
) -> None:
    import docker

    tag = spec.rootfs_tag
    if shutil.which("debootstrap") is None:
        raise ImageBuildFailed("debootstrap is not installed: apt-get install -y debootstrap")
    if os.geteuid() != 0:
        raise ImageBuildFailed(
            "debootstrap needs root (it creates device nodes and chroots): "
            "run wheelfactory base-image as root"
        )
    work_root = cache_dir / "tmp"
    work_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"rootfs-{spec.suite.name}-", dir=work_root))
    try:
        rootfs = work / "rootfs"
        command = [
            *(IDLE_NICE if idle else []),
            *debootstrap_command(spec, rootfs, foreign=foreign),
        ]
        progress(StepStarted(f"debootstrap {spec.suite.name} (log: {log})"))
        progress(CommandRun(shlex.join(command)))
        start = time.monotonic()
        try:
            run(command, log=log, timeout=DEBOOTSTRAP_TIMEOUT_S)
        except CommandFailed as exc:
            raise ImageBuildFailed(
                f"debootstrap of {spec.suite.name} from {spec.mirror} failed (log: {log}): check that the mirror "
                f"answers ({spec.mirror}/dists/{spec.suite.name}/Release) or pass another with --mirror",
                tail=exc.tail,
            ) from exc
        timings.append(("debootstrap", round(time.monotonic() - start, 3)))
        progress(StepDone(f"rootfs made in {timings[-1][1]:.1f} s ({_size_mb(rootfs)} MB)"))

        progress(StepStarted(f"import rootfs as {tag}"))
        start = time.monotonic()
        repository, name = tag.rsplit(":", 1)
        try:
            if foreign:
                progress(
                    CommandRun(
                        f"docker load  (a one-layer {OCI_ARCH[spec.arch]} image of "
                        f"{shlex.quote(str(rootfs))}, through the SDK)"
                    )
                )
                for line in client.api.load_image(image_archive(rootfs, tag, spec.arch)):  # type: ignore[no-untyped-call]
                    # a refusal after the upload began
                    if isinstance(line, dict) and "error" in line:
                        raise docker.errors.DockerException(str(line["error"]).strip())
            else:
                # The SDK call is `docker import`'s request; the tar is streamed, never written to disk.
                progress(
                    CommandRun(
                        f"tar -C {shlex.quote(str(rootfs))} -c . | docker import - {tag}  "
                        "(through the SDK)"
                    )
                )
                client.api.import_image(
                    src=tar_stream(rootfs), repository=repository, tag=name, stream_src=True
                )
            image = client.images.get(tag)
        except docker.errors.DockerException as exc:
            raise ImageBuildFailed(
                f"importing the {spec.suite.name} rootfs into the engine failed: {exc}; "
                "check the engine's log (e.g. /tmp/dockerd.log) and its free disk"
            ) from exc
        if image.attrs.get("Architecture") != OCI_ARCH[spec.arch]:
            raise ImageBuildFailed(
                f"the engine made {tag} as {image.attrs.get('Architecture')}, not "
                f"{OCI_ARCH[spec.arch]}: remove it (docker image rm {tag}) and report this"
            )
        timings.append(("import", round(time.monotonic() - start, 3)))
        progress(StepDone(f"imported {tag} ({image.id}) in {timings[-1][1]:.1f} s"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if work.exists():
            progress(StepDone(f"warning: could not remove {work}"))


IDLE_NICE = ["nice", "-n", "19"]  # the second stage's emulated children inherit it


def debootstrap_command(spec: BaseImageSpec, rootfs: Path, *, foreign: bool) -> list[str]:
    """debootstrap's command line; for a foreign arch it runs the second stage itself, through the
    arch's binfmt_misc handler (what qemu-debootstrap used to arrange)."""
    arch = [f"--arch={DEBIAN_ARCH[spec.arch]}"] if foreign else []
    return ["debootstrap", *arch, "--variant=minbase", spec.suite.name, str(rootfs), spec.mirror]


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


def _size_mb(root: Path) -> int:
    total = 0
    for path in _entries(root):
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
    return total >> 20
