"""A project's own cibuildwheel test options as the factory's [test] (plan/project_tests.py): the
tests the table declares run against each wheel, offline, as cibuildwheel would run them
(project/cibw_table.py decides every other option)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from wheelfactory.errors import ConfigError
from wheelfactory.plan.project_tests import ProjectTests
from wheelfactory.project.cibw_table import (
    AND,
    PYPROJECT,
    CibwTable,
    pip_install_requirements,
    read_cibw_table,
    shell_words,
    split_steps,
)


def table_tests(table: CibwTable, pyproject: Mapping[str, object] | None) -> ProjectTests | None:
    """The table's test options as the factory's [test] (plan/project_tests.py): test-command,
    after before-test's steps and with test-environment exported; test-requires, the extras'
    requirements (test-extras, from ``pyproject``'s [project.optional-dependencies]) and the
    dependency groups' (test-groups), plus what before-test pip-installs (the wheelhouse serves
    them); test-sources, else the paths the commands name under ``{project}``. None when the
    table has no test-command, or test-skip skips this identifier."""
    from cibuildwheel.projectfiles import resolve_dependency_groups
    from cibuildwheel.selector import TestSelector

    command = (table.get("test-command") or "").strip()
    if not command or not TestSelector(skip_config=table.get("test-skip") or "")(table.identifier):
        return None
    requires = shell_words(table.get("test-requires") or "")
    extras = [
        extra.strip() for extra in (table.get("test-extras") or "").split(",") if extra.strip()
    ]
    project = (pyproject or {}).get("project")
    optional = project.get("optional-dependencies", {}) if isinstance(project, dict) else {}
    for extra in extras:
        if not isinstance(optional, dict) or extra not in optional:
            raise ConfigError(
                f"{table.declared_in}: test-extras names {extra!r}, which pyproject.toml's "
                "[project.optional-dependencies] does not list statically",
                hint="list the extra there, or put its requirements in test-requires",
            )
        requires += list(optional[extra])
    groups = (table.get("test-groups") or "").split()
    if groups:
        try:
            requires += list(
                resolve_dependency_groups(dict(pyproject) if pyproject else None, *groups)
            )
        except (KeyError, FileNotFoundError, ValueError, LookupError) as exc:
            raise ConfigError(
                f"{table.declared_in}: test-groups: {exc}",
                hint="declare the groups in pyproject.toml [dependency-groups]",
            ) from None
    steps: list[str] = []
    for step in split_steps(table.get("before-test") or ""):
        installs = pip_install_requirements(shell_words(step))
        if installs is None:
            steps.append(step)
        elif installs:
            requires += installs
        else:
            raise ConfigError(
                f"{table.declared_in}: before-test `{step}` installs a requirements file the factory "
                "cannot read ahead of the tests",
                hint="list its requirements in test-requires",
            )
    environment = (table.get("test-environment") or "").strip()
    full = AND.join([*([f"export {environment}"] if environment else []), *steps, command])
    sources = shell_words(table.get("test-sources") or "") or _named_under_project(full)
    return ProjectTests(
        command=full,
        requires=tuple(dict.fromkeys(requires)),
        sources=tuple(sources),
        declared_in=table.declared_in,
    )


def _named_under_project(command: str) -> list[str]:
    """The top-level paths a command names as ``{project}/<path>`` (cibuildwheel's tests see the
    whole project; the factory's see the sources it copies)."""
    found: list[str] = []
    for part in command.split("{project}/")[1:]:
        top = part.split("/", 1)[0].split()[0].strip("'\"") if part.strip() else ""
        if top and top not in found and ".." not in top:
            found.append(top)
    return found


def project_table_tests(root: Path, identifier: str) -> ProjectTests | None:
    """The tests the project's own cibuildwheel table declares for ``identifier`` (``table_tests``),
    read from its files; None when it declares none."""
    table = read_cibw_table(root, identifier)
    if table is None:
        return None
    pyproject = None
    if (root / PYPROJECT).is_file():
        # read fine by table_file
        pyproject = tomllib.loads((root / PYPROJECT).read_text(encoding="utf-8"))
    return table_tests(table, pyproject)
