"""``wheelfactory bake``: the plan's build images as a ``docker buildx bake`` file (pure, then one write).

One target per distinct image the selected variants build in (``imagespec.image_spec``, the
mapping the Docker engine uses), tagged by content like ``images.render_image`` does
(``wheelfactory/build:<12 hex of sha256 of the Dockerfile>``), so that BuildKit with any driver
(a remote builder, Kubernetes) can make them ahead of a build. The file is JSON, which buildx
reads as it reads HCL (https://docs.docker.com/build/bake/reference/).

Each target carries its Dockerfile inline (``dockerfile-inline``): the templates COPY nothing
(``images._context`` sends only the Dockerfile), so the file is the whole build definition, it can
go to stdout, and a target's tag can be checked against its own text. ``context`` is "." only
because a target needs one; nothing is read from it.

The tags are not the engine's: ``DockerEngine.image_for`` adds the base image's id as a label (a
re-pulled base then gives a new image), which only an engine knows. Bake renders the same spec
without that label, so its tags name the same Dockerfile minus that one line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from wheelfactory.errors import ConfigError, UsageError
from wheelfactory.images.base_image import BaseImageSpec, parse_suite, render_base
from wheelfactory.images.dockerfiles import CONTENT_LABEL, RenderedImage
from wheelfactory.images.spec import ImageSpec, image_spec
from wheelfactory.plan.expand import select
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.indexes import debian_mirror
from wheelfactory.plan.matrix import Matrix
from wheelfactory.plan.read import read_matrix
from wheelfactory.project.kinds import project_plan
from wheelfactory.support import atomic
from wheelfactory.support.outputs import check_outputs, is_stdout
from wheelfactory.support.paths import StrPath

PLATFORMS = {"x86_64": "linux/amd64", "aarch64": "linux/arm64"}
# The ids of the variants (of this selection) that build in the image, comma-separated. Like
# CONTENT_LABEL it is a build-time label, not in the Dockerfile: the tag does not depend on it.
VARIANTS_LABEL = "wheelfactory.variants"
DEFAULT_GROUP = "default"


@dataclass(frozen=True)
class OfflineBase:
    """A FROM image BuildKit cannot make: the offline Debian base (debootstrap + docker import)."""

    tag: str
    suite: str
    mirror: str
    arch: str = "x86_64"

    @property
    def command(self) -> str:
        # The mirror and arch are part of the base's tag: name them, so that another machine makes the same tag.
        return f"wheelfactory base-image --suite {self.suite} --mirror {self.mirror} --arch {self.arch}"


@dataclass(frozen=True)
class BakeTarget:
    name: str
    image: RenderedImage
    base: str  # the image it starts FROM
    platforms: tuple[str, ...]
    variants: tuple[str, ...]  # plan order

    def as_dict(self) -> dict[str, object]:
        return {
            "context": ".",
            "dockerfile-inline": self.image.dockerfile,
            "tags": [self.image.tag],
            "platforms": list(self.platforms),
            "labels": {CONTENT_LABEL: self.image.content, VARIANTS_LABEL: ",".join(self.variants)},
            "network": self.image.network,
        }


@dataclass(frozen=True)
class BakePlan:
    targets: tuple[BakeTarget, ...]  # sorted by name
    # (base, names of targets FROM it)
    offline_bases: tuple[tuple[OfflineBase, tuple[str, ...]], ...]

    def as_dict(self) -> dict[str, object]:
        return {
            "group": {DEFAULT_GROUP: {"targets": [t.name for t in self.targets]}},
            "target": {t.name: t.as_dict() for t in self.targets},
        }

    def dumps(self) -> str:
        """The bake file: same plan, same bytes."""
        return json.dumps(self.as_dict(), indent=2, sort_keys=True) + "\n"

    def notes(self, file: str) -> list[str]:
        """What a person must know before running ``docker buildx bake -f file``."""
        out = []
        if not self.targets:
            out.append("the selection has no variants: the bake file has no targets")
        for base, names in self.offline_bases:
            out.append(
                f"{', '.join(names)} {_verb('build', names)} FROM {base.tag}, the offline Debian base, which BuildKit "
                f"cannot make (debootstrap + docker import): make it first on that builder's engine "
                f"with `{base.command}`"
            )
        online = [t.name for t in self.targets if t.image.network == "host"]
        if online:
            out.append(
                f"{', '.join(online)} {_verb('need', online)} the network for apt (network = host): "
                f"`docker buildx bake --allow network.host -f {file}`"
            )
        return out


def _verb(verb: str, subjects: Sequence[str]) -> str:
    return verb + "s" * (len(subjects) == 1)


def _target_name(spec: ImageSpec, image: RenderedImage, archs: Sequence[str]) -> str:
    """``x86_64-cuda12-4-<12 hex>``: bake names allow letters, digits, ``_`` and ``-`` only."""
    layer = (spec.toolkit_layer or "cpu").replace(".", "-")
    return f"{'-'.join(archs)}-{layer}-{image.tag.rsplit(':', 1)[-1]}"


def plan_bake(
    matrix: Matrix, variants: Sequence[Variant], *, matrix_file: str, host_mirror: str | None = None
) -> BakePlan:
    """The bake targets of ``variants`` (already selected from the plan), one per distinct image."""
    build = matrix.build
    # as engines.choose gives the engine: [build] debian_mirror, else the host's apt mirror (the
    # caller reads it: plan/indexes.debian_mirror), needed only with debian_base
    mirror = (build.debian_mirror or host_mirror or "").rstrip("/")
    if build.debian_base and not mirror:
        raise ConfigError(
            "debian_base needs a Debian mirror and none is known",
            file=matrix_file,
            key="build.debian_mirror",
            hint="set [build] debian_mirror",
        )
    offline: dict[str, OfflineBase] = {}

    def debian_base(suite: str, arch: str) -> str:
        base = OfflineBase(
            render_base(BaseImageSpec(parse_suite(suite), mirror, arch=arch)).tag,
            suite,
            mirror,
            arch,
        )
        offline[base.tag] = base
        return base.tag

    archs = sorted({v.key.arch for v in variants})  # matrix.py admits only the archs PLATFORMS maps
    base_images = dict(build.base_images)
    if build.debian_base:
        # the bake file names no platforms: each arch bakes on a machine of its own
        if len(archs) > 1:
            raise ConfigError(
                f"debian_base makes one base image per arch, on the machine that bakes it, "
                f"and the selection has {' and '.join(archs)} variants",
                file=matrix_file,
                key="build.debian_base",
                hint="bake one arch at a time (--only '*-x86_64-*'), or "
                "name per-arch images in base_image instead",
            )
        base_images = {arch: debian_base(build.debian_base, arch) for arch in archs}
    chosen: dict[str, tuple[ImageSpec, RenderedImage, list[Variant]]] = {}
    for variant in variants:
        spec = image_spec(
            variant,
            base_images,
            debian_base=debian_base if build.debian_base else None,
            debian_mirror=mirror,
        )
        image = spec.render()  # no base-id label: see the module docstring
        chosen.setdefault(image.tag, (spec, image, []))[2].append(variant)
    targets = []
    for spec, image, users in chosen.values():
        target_archs = sorted({v.key.arch for v in users})
        targets.append(
            BakeTarget(
                _target_name(spec, image, target_archs),
                image,
                spec.base,
                tuple(sorted(PLATFORMS[a] for a in target_archs)),
                tuple(v.id for v in users),
            )
        )
    targets.sort(key=lambda t: t.name)
    users_of = {tag: tuple(t.name for t in targets if t.base == tag) for tag in sorted(offline)}
    return BakePlan(
        tuple(targets), tuple((offline[tag], names) for tag, names in users_of.items() if names)
    )


def write_bake(text: str, path: Path) -> None:
    """Write the bake file atomically (support/atomic.py). A path that cannot name a file is a
    UsageError (exit 2); a failed write (no space, a read-only directory) is WriteFailed (exit 9),
    one line, the old file kept and no temp file left."""
    # os.path.isdir, not Path.is_dir: it answers False for a name too long rather than raising.
    if os.path.isdir(path):
        raise UsageError(
            f"cannot write the bake file {path}: it is a directory; name a file, "
            f"e.g. {path / 'docker-bake.json'}"
        )
    parent = path.parent
    if not os.path.isdir(parent):
        state = "is not a directory" if os.path.lexists(parent) else "does not exist"
        raise UsageError(f"cannot write the bake file {path}: directory {parent} {state}")
    atomic.write_text(path, text, what="the bake file")


@dataclass(frozen=True)
class Baked:
    """What ``bake`` made: the plan of the selected variants, and the file it went to (None: the
    caller prints ``plan.dumps()``, standard output)."""

    plan: BakePlan
    variants: tuple[Variant, ...]
    file: Path | None


def bake(
    matrix: StrPath = "matrix.toml",
    *,
    compat: StrPath | None = None,
    file: StrPath | None = None,
    only: Sequence[str] = (),
    shard: tuple[int, int] | None = None,
) -> Baked:
    """``wheelfactory bake``: the bake file of the variants ``only`` (fnmatch patterns) and
    ``shard`` (i, n) select from ``matrix``'s plan, written to ``file`` atomically (None or -:
    not written, for standard output). The output is checked before anything is read."""
    matrix_path = Path(matrix)
    compat_path = Path(compat) if compat is not None else None
    target = Path(file) if file is not None else None
    to_stdout = target is None or is_stdout(target)
    check_outputs(
        {"--file": target},
        {"the matrix": matrix_path, "the compatibility table": compat_path},
        writes="the bake file",
    )
    spec, table = read_matrix(matrix_path, compat_path)
    variants = select(project_plan(spec, table), only, shard)
    mirror = debian_mirror(spec.build.debian_mirror) if spec.build.debian_base else None
    baked = plan_bake(spec, variants, matrix_file=str(matrix_path), host_mirror=mirror)
    if target is not None and not to_stdout:
        write_bake(baked.dumps(), target)
        return Baked(baked, tuple(variants), target)
    return Baked(baked, tuple(variants), None)
