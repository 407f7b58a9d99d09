"""`wheelfactory build` for a noarch (pure-Python) kernel-builder project: no engine, no compiler.

One ``py3-none-any`` wheel per backend the plan keeps (project/noarch.py writes it), checked by a
real ``pip install`` into a scratch directory, and ``dist/noarch.json``: what was built, with the
Hub layout metadata, so that ``wheelfactory export --hf-layout`` lays the same wheels out.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

from wheelfactory.errors import ConfigError, VariantBuildError
from wheelfactory.plan.compat import CompatTable
from wheelfactory.plan.matrix import Matrix
from wheelfactory.project.build_toml import KernelBuilderSpec
from wheelfactory.project.kernel_builder import load_kernel_builder
from wheelfactory.project.keys import file_sha256
from wheelfactory.project.kinds import project_plan, resolve_kind
from wheelfactory.project.noarch import layout_metadata, plan_noarch, write_noarch_wheel
from wheelfactory.support import atomic, paths
from wheelfactory.support.paths import safe_member
from wheelfactory.support.proc import call

RECORD = "noarch.json"
SCHEMA = 1


@dataclass(frozen=True)
class NoarchWheel:
    variant: str  # the layout directory: torch-cpu, torch-universal
    backend: str
    wheel: str  # relative to the output directory
    sha256: str
    package: str  # the import name
    metadata: dict[str, object]  # the layout's metadata.json


def noarch_project(matrix: Matrix) -> KernelBuilderSpec | None:
    """The project's build.toml when it is a noarch kernel-builder project; None otherwise."""
    if resolve_kind(matrix.project) != "kernel-builder":
        return None
    spec = load_kernel_builder(matrix.project.path)
    return spec if spec.noarch else None


def build_noarch(spec: KernelBuilderSpec, matrix: Matrix, table: CompatTable, out: Path) -> tuple[NoarchWheel, ...]:
    """One wheel per backend kind the plan keeps (build.toml's backends, the matrix's choice)."""
    backends = sorted({v.key.backend.kind for v in project_plan(matrix, table).variants})
    builds = plan_noarch(spec, backends)
    if not builds:
        raise ConfigError(f"the matrix selects no backend {spec.root / 'build.toml'} declares "
                          f"({', '.join(spec.general.backends)})", key="matrix.backends",
                          hint="add one of them to [matrix] backends")
    made = []
    for build in builds:
        wheel = write_noarch_wheel(build, spec, out / build.variant_name)
        _check_installs(wheel, spec.general.python_name)
        made.append(NoarchWheel(build.variant_name, build.backend, str(wheel.relative_to(out)), file_sha256(wheel),
                                spec.general.python_name, layout_metadata(build, spec)))
    atomic.write_text(out / RECORD, json.dumps({"schema": SCHEMA, "wheels": [asdict(w) for w in made]}, indent=2)
                      + "\n", what="the noarch build record")
    return tuple(made)


def _check_installs(wheel: Path, package: str) -> None:
    """pip itself installs it (the wheel format, RECORD's hashes) and the package is there."""
    with tempfile.TemporaryDirectory(prefix="wheelfactory-noarch-") as target:
        result = call([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                       "--disable-pip-version-check", "--target", target, str(wheel)])
        if result.returncode != 0 or not (Path(target) / package / "__init__.py").is_file():
            tail = (result.stderr or result.stdout).strip().splitlines()
            raise VariantBuildError(f"{wheel.name} does not install: {tail[-1] if tail else 'no package'}")


VARIANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # a layout directory: torch-cpu, torch-universal


def read_record(out: Path) -> tuple[NoarchWheel, ...]:
    """``dist/noarch.json``; () when there is none. Each wheel must lie inside ``out`` and each
    variant be one plain directory name (a ConfigError, exit 2, otherwise)."""
    path = out / RECORD
    if not path.exists():
        return ()
    try:
        data = json.loads(path.read_text())
        wheels = tuple(NoarchWheel(**entry) for entry in data["wheels"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"not a noarch build record ({exc})", file=str(path),
                          hint="rebuild with `wheelfactory build`") from None
    for w in wheels:
        if not isinstance(w.wheel, str):
            raise ConfigError(f"wheel {w.wheel!r} is not a path", file=str(path),
                              hint="rebuild with `wheelfactory build`")
        paths.inside(out, w.wheel, what="the wheel", file=str(path))
        if not isinstance(w.variant, str) or not VARIANT_NAME.fullmatch(w.variant):
            raise ConfigError(f"variant {w.variant!r} is not a layout directory name (e.g. torch-cpu)", file=str(path),
                              hint="rebuild with `wheelfactory build`")
    return wheels


def unpack_package(wheel: Path, package: str, dest: Path) -> None:
    """The wheel's ``package/`` files into ``dest/package/``; a wheel with a member name that would
    leave ``dest`` (support/paths.py) is refused whole, before anything is written."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        unsafe = [name for name in names if safe_member(name) is None]
        if unsafe:
            raise ConfigError(f"member {unsafe[0]!r} is not a path inside the wheel", file=str(wheel),
                              hint="rebuild it with `wheelfactory build`")
        for member in names:
            relative = safe_member(member)
            if relative is None or relative.parts[0] != package or member.endswith("/") or len(relative.parts) < 2:
                continue
            path = paths.inside(dest, str(relative), what="the member", file=str(wheel))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(archive.read(member))
