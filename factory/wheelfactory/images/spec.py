"""Which build image a variant builds in (pure: no engine, no network).

The arch's base image as it is, or, for a CUDA variant whose toolkit NVIDIA publishes no wheels
for, on the Debian base of the suite that packages that toolkit plus Debian's toolkit layer
(docker/build-cuda.Dockerfile). The Docker engine builds what this names
(``DockerEngine.image_for``); ``wheelfactory bake`` writes it as buildx bake targets.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from wheelfactory.images.dockerfiles import RenderedImage, render_image
from wheelfactory.plan.identity import Variant


@dataclass(frozen=True)
class ImageSpec:
    """``render_image``'s arguments for one build image, less the labels its caller adds."""

    base: str  # the FROM image
    toolkit_layer: str | None = None  # None: the base as it is; "cuda12.4": Debian's toolkit on it
    values: tuple[tuple[str, str], ...] = ()  # the template's other placeholders, sorted

    def render(
        self, labels: Mapping[str, str] | None = None, *, templates: Path | None = None
    ) -> RenderedImage:
        return render_image(
            self.base,
            self.toolkit_layer,
            labels=labels,
            values=dict(self.values),
            templates=templates,
        )


def debian_toolkit(variant: Variant) -> str | None:
    """The Debian suite whose packages give this variant its CUDA toolkit, when NVIDIA's wheels
    do not (CUDA 12.x); None when the variant needs no toolkit layer."""
    if variant.key.backend.kind == "cuda" and not variant.toolkit_wheels and variant.toolkit_debian:
        return variant.toolkit_debian
    return None


def image_spec(
    variant: Variant,
    base_images: Mapping[str, str],
    *,
    debian_base: Callable[[str, str], str] | None = None,
    debian_mirror: str | None = None,
) -> ImageSpec:
    """The image ``variant`` builds in. ``base_images``: arch -> base image; ``debian_base``: (suite,
    arch) -> the tag of its offline Debian base ([build] debian_base), None when the matrix has none
    (then a CUDA 12 variant gets the arch's base and needs a toolkit in it); ``debian_mirror``: where
    the toolkit layer's apt gets Debian's packages, required with ``debian_base``."""
    suite = debian_toolkit(variant)
    if suite is not None and debian_base is not None:
        if not debian_mirror:
            raise ValueError(f"{variant.id}: a Debian toolkit layer needs debian_mirror")
        return ImageSpec(
            debian_base(suite, variant.key.arch),
            f"cuda{variant.toolkit}",
            (("debian_mirror", debian_mirror), ("debian_suite", suite)),
        )
    return ImageSpec(base_images[variant.key.arch])
