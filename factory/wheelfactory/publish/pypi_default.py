"""PyPI's default variant: the wheels a plain ``pip install <project>`` from an index that refuses
local version labels (PyPI) should get, and those wheels rewritten without their label.

PyPI serves one torch build per release (``pypi_default`` in the compatibility table: cu130 with
the cxx11 ABI for torch 2.13). A kernel wheel only loads with the torch it was built against, so
the default variant is the one built for that torch build: a user who ran ``pip install torch``
and then ``pip install <project>`` gets the matching kernel.

Choosing (``choose_default``), with ``[publish] pypi_default = true``, per project in the dist:

1. the newest torch the project has a variant for (a stable-ABI variant counts with the oldest
   torch it serves, the torch in its id);
2. its variants whose backend and C++ ABI are what PyPI serves for that torch
   (``TorchRelease.on_pypi``);
3. where it has none (a CPU-only project, or one without PyPI's CUDA), its CPU variants of that
   torch with the ABI PyPI's build has: torch's CPU wheel and PyPI's default share an ABI, and
   a CPU kernel runs with a CUDA torch;
4. one wheel per python tag and arch: a torch-specific build before a stable-ABI one.

``pypi_default = "<variant id>"`` takes that variant's wheels as they are.

``relabel`` writes a chosen wheel without its local label (``0.2.0+cputorch2.13`` -> ``0.2.0``)
into ``dist/pypi/``: same files, same requirements (its torch requirement included), METADATA,
the .dist-info name and RECORD rewritten together (support/wheel_rewrite.py). The bytes depend
only on the input wheel's, so a rerun writes the same file and a publish that already uploaded it
uploads nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from packaging.version import Version

from wheelfactory.errors import PublishError
from wheelfactory.plan.compat import CompatTable
from wheelfactory.plan.identity import VariantId
from wheelfactory.publish.collect import IndexedWheel
from wheelfactory.support.wheel_rewrite import rewrite_wheel

# dist/pypi/: the relabelled wheels (never a variant id, which starts with "torch")
PYPI_DIR = "pypi"


def choose_default(
    wheels: Sequence[IndexedWheel], table: CompatTable, choice: bool | VariantId
) -> list[IndexedWheel]:
    """The wheels that go, without their label, where labels are refused (the module docstring
    says how they are chosen); [] for ``choice`` False. PublishError, one line, when the named
    variant is not in the dist or no variant fits."""
    if choice is False:
        return []
    if isinstance(choice, VariantId):
        chosen = [w for w in wheels if w.variant == choice]
        if not chosen:
            built = ", ".join(sorted({w.variant_id for w in wheels})) or "none"
            raise PublishError(
                f"[publish] pypi_default names {choice}, which this dist has no wheel of (built: "
                f"{built}); build it, or name a built one, or write pypi_default = true"
            )
        return sorted(chosen, key=lambda w: w.filename)
    if not wheels:
        raise PublishError(
            "[publish] pypi_default = true, but this dist has no wheel to publish; "
            "run `wheelfactory build` first"
        )
    chosen = []
    for project in sorted({w.project for w in wheels}):
        chosen += _project_default([w for w in wheels if w.project == project], table)
    return chosen


def _project_default(wheels: list[IndexedWheel], table: CompatTable) -> list[IndexedWheel]:
    newest = max(wheels, key=lambda w: Version(w.variant.torch)).variant.torch
    project = wheels[0].project
    release = table.release(newest)
    if release is None:
        raise PublishError(
            f"[publish] pypi_default = true: torch {newest} (the newest {project} is built for) is "
            f"not in the compatibility table {table.file}, so PyPI's build of it is unknown; "
            'update wheelfactory, or name the variant: pypi_default = "<variant id>"'
        )
    of_torch = [w for w in wheels if w.variant.torch == newest]
    candidates = [w for w in of_torch if release.on_pypi(w.variant.backend, w.variant.cxx11_abi)]
    if not candidates:
        candidates = [
            w
            for w in of_torch
            if w.variant.backend.kind == "cpu" and w.variant.cxx11_abi == release.pypi_cxx11_abi
        ]
    if not candidates:
        abi = "cxx11" if release.pypi_cxx11_abi else "cxx98"
        built = ", ".join(sorted(w.variant_id for w in of_torch))
        raise PublishError(
            f"[publish] pypi_default = true: {project} has no torch {newest} variant PyPI's build "
            f"matches ({release.pypi_default}, {abi} ABI) nor a CPU one with that ABI (built: {built}); "
            'build one, or name the variant: pypi_default = "<variant id>"'
        )
    # A torch-specific build first: it is made for exactly PyPI's torch; then by file name (stable)
    candidates.sort(key=lambda w: (w.variant.stable_abi, w.filename))
    seen: set[tuple[str, str]] = set()
    chosen = []
    for wheel in candidates:
        slot = (wheel.variant.python, wheel.variant.arch)
        if slot not in seen:
            seen.add(slot)
            chosen.append(wheel)
    return chosen


def unlabelled_version(version: str) -> Version:
    """``0.2.0+cputorch2.13`` -> ``0.2.0``; the whole local part goes (PyPI refuses any), a VCS
    part before the variant's label included (``0.3.2.dev2+gb4153ae.cputorch2.13`` -> ``0.3.2.dev2``)."""
    return Version(Version(version).public)


def relabel(wheel: IndexedWheel, out_dir: Path) -> Path:
    """``wheel`` without its local label, written atomically into ``out_dir`` (``dist/pypi/``);
    its path. The same input bytes give the same output bytes (the archive keeps the input's
    member times and order)."""
    source: Path | None = wheel.source
    if source is None:
        raise PublishError(
            f"{wheel.filename}: no file of it in this dist to relabel (it was read from a target)"
        )
    return rewrite_wheel(source, out_dir, version=unlabelled_version(wheel.version))


def default_wheels(
    wheels: Sequence[IndexedWheel], table: CompatTable, choice: bool | VariantId, dist: Path
) -> list[Path]:
    """``choose_default`` then ``relabel`` each into ``dist/pypi/``: what ``upload.read_plan``
    takes as ``default_wheels``. The chosen wheels differ in python tag or arch, so their
    unlabelled names differ too."""
    return [relabel(wheel, dist / PYPI_DIR) for wheel in choose_default(wheels, table, choice)]
