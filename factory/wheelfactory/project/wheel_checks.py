"""What a project's built wheel is checked against, beyond the factory's own checks: the ops a
factory-native kernel declares (and its sample inputs), and the project's own tests ([test]).

Pure data here, plus the one side effect the tests need from the project: copying the test
sources into a directory the test container mounts, with the project's own package hidden so the
tests import the installed wheel.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from wheelfactory.errors import ConfigError
from wheelfactory.plan.project_tests import ProjectTests
from wheelfactory.project.keys import tree_digest
from wheelfactory.support.project_copy import copy_project_tree, project_files

# Left out of the tests' copy (never read): caches and built libraries of a local run.
COPY_IGNORED = shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.so")


@dataclass(frozen=True)
class WheelChecks:
    root: Path  # the project's directory: test sources are relative to it
    package: str  # the import name the wheel provides
    declared_ops: tuple[str, ...] = ()  # kernel.toml [kernel].ops (factory-native only)
    sample_inputs: tuple[str, str] | None = None  # (module, function) in the package
    tests: ProjectTests | None = None
    # Files the factory adds to the tests' copy (name -> text): a kernel-builder project's offline
    # Hub loader (project/hub_offline_plugin.py) and its settings.
    support_files: tuple[tuple[str, str], ...] = ()
    # The op namespace the library registers under (a kernel-builder build's ``_ops.ops``); left out
    # of key_material: the build record, part of every stage's key, holds it.
    op_namespace: str | None = None
    # Said in each variant's warnings (project/op_checks.py coverage_warnings): declared ops that
    # neither the sample inputs nor the tests name. Left out of key_material: the sources are in it.
    coverage_warnings: tuple[str, ...] = ()

    def tests_for(self, variant_id: str) -> ProjectTests | None:
        return self.tests if self.tests is not None and self.tests.runs_for(variant_id) else None

    def key_material(self) -> object:
        """A change of the tests or of their sources re-verifies the wheel (the cache key)."""
        if self.tests is None:
            return None
        files = [
            p.relative_to(self.root)
            for source in self.tests.sources
            for p in _files(self.root, source)
        ]
        return [
            self.tests.command,
            self.tests.requires,
            self.tests.skip,
            tree_digest(self.root, files),
            list(self.support_files),
            *([list(self.tests.find_links)] if self.tests.find_links else []),
        ]


def check_sources(tests: ProjectTests, root: Path) -> None:
    """Every [test] source exists inside the project (a symlink may not lead out of it)."""
    real_root = root.resolve()
    for source in tests.sources:
        path = root / source
        if not path.exists():
            raise ConfigError(
                f"{source!r} does not exist under {root}",
                file=tests.declared_in,
                key="test.sources",
                hint="list files or directories of the project",
            )
        if not path.resolve().is_relative_to(real_root):
            raise ConfigError(
                f"{source!r} leads outside the project {root}",
                file=tests.declared_in,
                key="test.sources",
                hint="list files or directories under the project root",
            )
        # nothing in it leads out
        project_files(root, source, ignore=COPY_IGNORED, declared_in=tests.declared_in)


def copy_test_sources(checks: WheelChecks, tests: ProjectTests, dest: Path) -> list[str]:
    """Copy ``tests.sources`` into ``dest`` (made fresh) at their relative paths; then remove any
    copy of the project's own package from it (a directory named as the package holding an
    ``__init__.py``, or a ``<package>.py``), so that what the tests import is the installed wheel.
    Returns the paths hidden, relative to ``dest``."""
    check_sources(tests, checks.root)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for source in tests.sources:  # inside symlinks as what they point to: the copy is mounted alone
        copy_project_tree(
            checks.root, source, dest / source, ignore=COPY_IGNORED, declared_in=tests.declared_in
        )
    for name, text in checks.support_files:
        (dest / name).write_text(text, encoding="utf-8")
    top = checks.package.split(".")[0]
    hidden: list[str] = []
    for base, dirs, files in os.walk(dest):
        for name in list(dirs):
            if name == top and (Path(base) / name / "__init__.py").is_file():
                shutil.rmtree(Path(base) / name)
                dirs.remove(name)
                hidden.append(str((Path(base) / name).relative_to(dest)))
        if f"{top}.py" in files:
            (Path(base) / f"{top}.py").unlink()
            hidden.append(str((Path(base) / f"{top}.py").relative_to(dest)))
    return sorted(hidden)


def _files(root: Path, source: str) -> list[Path]:
    if not (root / source).exists():
        return []
    return [
        root / p for p in project_files(root, source, ignore=shutil.ignore_patterns("__pycache__"))
    ]
