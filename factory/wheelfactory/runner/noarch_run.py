"""The build of a pure-Python (noarch) kernel-builder project: no engine, no compiler.

One ``py3-none-any`` wheel per backend the plan keeps (project/noarch.py writes it), checked by a
real ``pip install`` into a scratch directory, each recorded in dist/manifest.json as a variant
like any other (its id the layout directory, ``torch-cpu``), with the Hub layout metadata, so that
``wheelfactory export --hf-layout`` lays the same wheels out.
"""

from __future__ import annotations

import sys
import tempfile
import time
import zipfile
from pathlib import Path

from wheelfactory import __version__
from wheelfactory.errors import ConfigError, VariantBuildError
from wheelfactory.project.keys import file_sha256, json_digest
from wheelfactory.project.kinds import PurePythonBuilds
from wheelfactory.project.noarch import NoarchBuild, layout_metadata, write_noarch_wheel
from wheelfactory.runner import manifest
from wheelfactory.runner.run import Outcome
from wheelfactory.support import paths
from wheelfactory.support.paths import safe_member
from wheelfactory.support.proc import call
from wheelfactory.support.progress import Listener, VariantPhase, ignore


def build_noarch(
    project: PurePythonBuilds, out: Path, progress: Listener = ignore
) -> list[Outcome]:
    """Write and check each build's wheel under ``out/<variant>/``; each one's manifest entry is
    written as it finishes. A wheel that does not install fails its variant, not the others."""
    out = out.resolve()
    with manifest.locked(out):
        recorder = manifest.ManifestRecorder(out)
        outcomes = []
        for build in project.builds:
            outcome = _build_one(project, build, out, progress)
            recorder.record(build.id, outcome.entry)
            outcomes.append(outcome)
        return outcomes


def _build_one(
    project: PurePythonBuilds, build: NoarchBuild, out: Path, progress: Listener
) -> Outcome:
    spec = project.spec
    start = time.monotonic()
    # a failed entry has it too: it says the entry is pure Python
    metadata = layout_metadata(build, spec)
    progress(VariantPhase(build.id, "building", ""))
    try:
        wheel = write_noarch_wheel(build, spec, out / build.variant_name)
        _check_installs(wheel, spec.general.python_name)
    except (VariantBuildError, OSError) as exc:
        progress(VariantPhase(build.id, "failed", str(exc)))
        return Outcome(
            build,
            manifest.Entry(
                status="failed",
                wheel=None,
                sha256=None,
                seconds=round(time.monotonic() - start, 1),
                key="",
                log=None,
                error=str(exc),
                hub_metadata=metadata,
            ),
        )
    sha256 = file_sha256(wheel)
    relative = str(wheel.relative_to(out))
    progress(VariantPhase(build.id, "built", relative))
    # Rebuilt every run (it takes no compiler, and the wheel is reproducible): the key is its content.
    key = json_digest({"factory": __version__, "variant": build.id, "wheel": sha256})
    return Outcome(
        build,
        manifest.Entry(
            status="built",
            wheel=relative,
            sha256=sha256,
            seconds=round(time.monotonic() - start, 1),
            key=key,
            log=None,
            size=wheel.stat().st_size,
            hub_metadata=metadata,
        ),
    )


def _check_installs(wheel: Path, package: str) -> None:
    """pip itself installs it (the wheel format, RECORD's hashes) and the package is there."""
    with tempfile.TemporaryDirectory(prefix="wheelfactory-noarch-") as target:
        result = call(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--no-index",
                "--disable-pip-version-check",
                "--target",
                target,
                str(wheel),
            ]
        )
        if result.returncode != 0 or not (Path(target) / package / "__init__.py").is_file():
            tail = (result.stderr or result.stdout).strip().splitlines()
            raise VariantBuildError(
                f"{wheel.name} does not install: {tail[-1] if tail else 'no package'}"
            )


def unpack_package(wheel: Path, package: str, dest: Path) -> None:
    """The wheel's ``package/`` files into ``dest/package/``; a wheel with a member name that would
    leave ``dest`` (support/paths.py) is refused whole, before anything is written."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        unsafe = [name for name in names if safe_member(name) is None]
        if unsafe:
            raise ConfigError(
                f"member {unsafe[0]!r} is not a path inside the wheel",
                file=str(wheel),
                hint="rebuild it with `wheelfactory build`",
            )
        for member in names:
            relative = safe_member(member)
            if (
                relative is None
                or relative.parts[0] != package
                or member.endswith("/")
                or len(relative.parts) < 2
            ):
                continue
            path = paths.inside(dest, str(relative), what="the member", file=str(wheel))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(archive.read(member))
