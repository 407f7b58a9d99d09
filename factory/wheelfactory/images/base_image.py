"""An offline manylinux-layout base image made from Debian packages, for engines that reach no
container registry (``wheelfactory base-image``).

Two steps, each skipped when its result exists:
1. the suite's rootfs, made by debootstrap from the mirror and tagged
   ``wheelfactory/rootfs:<suite>-<hash of suite and mirror>`` (images/rootfs.py);
2. ``docker/debian-manylinux.Dockerfile`` built on it (apt: compiler, Python, ninja, git; the
   ``/opt/python/cpXY-cpXY`` layout), tagged ``wheelfactory/base:<suite>-<12 hex>`` by the sha256 of
   the rendered Dockerfile, the suite and the mirror. An existing tag is reused: nothing runs.

A base for another arch than the host's (``BaseImageSpec.arch``; needs QEMU user emulation,
images/emulation.py) is made the same way from that arch's rootfs. It also gets the suite's cross
compilers for this machine (``BaseImageSpec.compilers_from``, docker/cross-toolchain.Dockerfile):
emulated, a compile is ~10x slower than native. What apt fetches and unpacks for them, and the
Python layout's venv, are made natively first, in a container of the suite's rootfs for this
machine (docker/cross-toolchain-fetch.sh), and reach the build as its context: emulated, those
steps took ~80 of the base's ~390 s.

Rendering (``render_base``) is pure; ``ensure_base_image`` has the side effects.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from wheelfactory.errors import ImageBuildFailed, UsageError
from wheelfactory.images.containers import Container
from wheelfactory.images.dockerfiles import (
    RenderedImage,
    content_digest,
    ensure_image,
    find_image,
    label_block,
    load_template,
)
from wheelfactory.images.emulation import DEBIAN_ARCH, arch_support, host_arch
from wheelfactory.images.rootfs import (
    Rootfs,
    Timings,
    Workshop,
    arch_naming,
    ensure_rootfs,
    one_maker,
    scratch,
    seconds_since,
    size_mb,
)
from wheelfactory.support.proc import CommandFailed
from wheelfactory.support.progress import Listener, StepDone, StepStarted, ToolOutput, ignore

if TYPE_CHECKING:
    from wheelfactory.images.containers import DockerClient

BASE_REPOSITORY = "wheelfactory/base"
TEMPLATE = "debian-manylinux.Dockerfile"
CROSS_TEMPLATE = "cross-toolchain.Dockerfile"
CROSS_FETCH_TEMPLATE = "cross-toolchain-fetch.sh"
NATIVE_CONTEXT = "wheelfactory-native"  # the build context's directory of what was made natively
NATIVE_OUT = "/wheelfactory-out"  # where the native container writes it
# bin/ holds cc, c++, gcc, g++; runs-on names their machine
CROSS_PREFIX = "/opt/wheelfactory/cross"


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
    for s in (  # name, python, glibc, manylinux_max, manylinux_cxx
        Suite("bullseye", "3.9", "2.31", "manylinux_2_31", "manylinux_2_24"),
        Suite("bookworm", "3.11", "2.36", "manylinux_2_36", "manylinux_2_34"),
        Suite("trixie", "3.13", "2.41", "manylinux_2_41", "manylinux_2_34"),
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
    def rootfs(self) -> Rootfs:
        return Rootfs(self.suite.name, self.mirror, self.arch)

    @property
    def rootfs_tag(self) -> str:
        return self.rootfs.tag


@dataclass(frozen=True)
class BaseImage:
    tag: str
    id: str
    suite: Suite
    reused: bool  # the tag existed: nothing ran
    log: Path
    timings: Timings = ()  # (step, seconds) of the steps that ran


def base_spec(
    suite: Suite, mirror: str, arch: str, *, tag: str | None = None, host: str | None = None
) -> BaseImageSpec:
    """The base a build on this machine (``host``, default: its arch) uses for ``arch``: with the
    cross compilers that run here when ``arch`` is another one."""
    return BaseImageSpec(suite, mirror, tag, arch=arch, compilers_from=host or host_arch())


def _cross_values(spec: BaseImageSpec, host: str) -> dict[str, str]:
    # the GNU triplets Debian names an arch's compilers and library directories by
    return {
        "host": host,
        "host_debian": DEBIAN_ARCH[host],
        "host_triplet": f"{host}-linux-gnu",
        "target": f"{spec.arch}-linux-gnu",
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
    name, extra = arch_naming(spec.arch)
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
    if spec.arch != host_arch():
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
        with one_maker(rendered.content, rendered.tag, progress):
            found = find_image(client, rendered)  # made meanwhile by the run we waited for
            if found is None:
                try:
                    return _make_base(
                        spec, rendered, Workshop(client, cache_dir, log, progress, idle)
                    )
                except ImageBuildFailed as exc:
                    if exc.tail:  # the failed tool's own words, for the progress channel to show
                        progress(ToolOutput(exc.tail))
                    raise
    progress(StepDone(f"exists: reused ({found.id})"))
    return BaseImage(found.tag, found.id, spec.suite, True, log)


def _make_base(spec: BaseImageSpec, rendered: RenderedImage, shop: Workshop) -> BaseImage:
    timings = list(ensure_rootfs(spec.rootfs, shop))
    with _natively_made(spec, shop, timings) as context:
        shop.progress(StepStarted(f"apt layer and manylinux layout (docker/{rendered.template})"))
        ref = ensure_image(
            shop.client,
            rendered,
            log=shop.log,
            progress=shop.progress,
            arch=spec.arch,
            idle=shop.idle,
            context=context,
        )
    timings.append(("build", ref.seconds))
    return BaseImage(ref.tag, ref.id, spec.suite, False, shop.log, tuple(timings))


@contextlib.contextmanager
def _natively_made(
    spec: BaseImageSpec, shop: Workshop, timings: list[tuple[str, float]]
) -> Iterator[Path | None]:
    """The directory (NATIVE_CONTEXT) of what the cross steps COPY, made by cross_fetch_script in
    a container of the suite's rootfs for the machine the compilers run on; None for a base
    without cross compilers. Removed when the build is done."""
    if spec.compilers_from is None:
        yield None
        return
    native = Rootfs(spec.suite.name, spec.mirror, spec.compilers_from)
    timings.extend(ensure_rootfs(native, shop))
    with scratch(shop, "cross-") as work:
        out = work / NATIVE_CONTEXT
        out.mkdir()
        shop.progress(
            StepStarted(
                f"cross compilers and venv, natively in {native.tag} "
                f"(docker/{CROSS_FETCH_TEMPLATE})"
            )
        )
        start = time.monotonic()
        try:
            with Container(
                shop.client,
                native.tag,
                network="host",
                volumes={out: NATIVE_OUT},
                labels={"wheelfactory": "base-image"},
            ) as box:
                box.run(["sh", "-c", cross_fetch_script(spec)], log=shop.log)
        except CommandFailed as exc:
            raise ImageBuildFailed(
                f"fetching the {spec.suite.name} cross compilers for {spec.arch} from {spec.mirror} "
                f"failed (log: {shop.log}): check that the mirror answers",
                tail=exc.tail,
            ) from exc
        timings.append(("native", seconds_since(start)))
        shop.progress(StepDone(f"made in {timings[-1][1]:.1f} s ({size_mb(out)} MB)"))
        yield out
