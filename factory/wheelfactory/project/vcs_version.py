"""The version a project's git checkout gives, for projects whose build takes it from git.

A build runs on a copy of the project without ``.git`` (the staged copy; in Docker, a container
that has no view of the repository), where setuptools-scm falls back to ``0.0.0``. So the
project's own version tool (the requirement its ``[build-system]`` names, installed on the host)
computes the version on the checkout first, and the copy's build is told it the tool's
documented way:

* setuptools-scm, and hatch-vcs (which runs setuptools-scm): ``SETUPTOOLS_SCM_PRETEND_VERSION``;
* versioningit: a ``PKG-INFO`` in the copy, what it reads in an sdist.

Tools built on dunamai (poetry-dynamic-versioning, uv-dynamic-versioning) are refused with the
variable the user can set instead. ``plan_version_probe`` is pure; ``vcs_version`` runs the
probe through the given runner (the host's tool environments, support/host_env.py).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from wheelfactory.errors import ConfigError
from wheelfactory.project.build_system import PYPROJECT, VCS_TOOLS, BuildSystem

# setuptools-scm settings that only say how to compute the version; the ones that write files
# (version_file, write_to) are left to the real build in the copy.
_SCM_OPTIONS = {
    "root",
    "version_scheme",
    "local_scheme",
    "tag_regex",
    "parentdir_prefix_version",
    "fallback_version",
    "git_describe_command",
    "normalize",
    "search_parent_directories",
}
_SCM_PROGRAM = "import json, sys\nfrom setuptools_scm import get_version\nprint(get_version(**json.loads(sys.argv[1])))\n"
_VERSIONINGIT_PROGRAM = (
    "import sys\nimport versioningit\nprint(versioningit.get_version(sys.argv[1]))\n"
)
_BYPASS = {
    "poetry-dynamic-versioning": "POETRY_DYNAMIC_VERSIONING_BYPASS",
    "uv-dynamic-versioning": "UV_DYNAMIC_VERSIONING_BYPASS",
}


@dataclass(frozen=True)
class VersionProbe:
    """How to compute the version on the host: install ``requirement``, run ``program`` with ``args``."""

    tool: str  # the requirement's name, "setuptools-scm"
    requirement: str  # as [build-system] writes it, "setuptools_scm>=8"
    program: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class VcsVersion:
    """The version the checkout gives, and how the staged copy's build is told it."""

    tool: str
    version: str

    def build_env(self) -> dict[str, str]:
        if VCS_TOOLS[self.tool] == "setuptools-scm":
            return {"SETUPTOOLS_SCM_PRETEND_VERSION": self.version}
        return {}

    def staged_files(self, name: str) -> dict[str, str]:
        """Files to write into the copy (relative path -> text)."""
        if VCS_TOOLS[self.tool] == "versioningit":
            return {"PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {self.version}\n"}
        return {}


def plan_version_probe(root: Path, system: BuildSystem) -> VersionProbe | None:
    """The probe for ``root``'s version tool; None when its build does not read git."""
    if system.vcs_tool is None:
        return None
    requirement = next(
        r for r in system.requires if canonicalize_name(Requirement(r).name) == system.vcs_tool
    )
    family = VCS_TOOLS[system.vcs_tool]
    if family == "dunamai":
        variable = _BYPASS.get(system.vcs_tool, "the tool's bypass variable")
        raise ConfigError(
            f"{system.vcs_tool} computes the version from git, which the build's copy of the project "
            "lacks, and wheelfactory cannot compute it for that tool",
            file=system.declared_in,
            key="build-system.requires",
            hint=f'give the version in matrix.toml [project] env, e.g. env = {{{variable} = "1.2.3"}}',
        )
    if family == "versioningit":
        return VersionProbe(system.vcs_tool, requirement, _VERSIONINGIT_PROGRAM, (str(root),))
    options = {k: v for k, v in _scm_settings(root, system.vcs_tool).items() if k in _SCM_OPTIONS}
    options["root"] = str(options.get("root", "."))
    # "root" is relative to pyproject.toml's directory
    options["relative_to"] = str(root / PYPROJECT)
    return VersionProbe(
        system.vcs_tool, requirement, _SCM_PROGRAM, (json.dumps(options, sort_keys=True),)
    )


def _scm_settings(root: Path, tool: str) -> dict[str, object]:
    """[tool.setuptools_scm], or for hatch-vcs [tool.hatch.version] raw-options (and the two keys
    hatch-vcs translates itself)."""
    path = root / PYPROJECT
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}  # read_build_system has refused a broken file already
    tables = data.get("tool", {})
    if tool == "hatch-vcs":
        version = (
            tables.get("hatch", {}).get("version", {})
            if isinstance(tables.get("hatch"), dict)
            else {}
        )
        settings = dict(version.get("raw-options", {})) if isinstance(version, dict) else {}
        if isinstance(version, dict) and "tag-pattern" in version:
            settings.setdefault("tag_regex", version["tag-pattern"])
        if isinstance(version, dict) and "fallback-version" in version:
            settings.setdefault("fallback_version", version["fallback-version"])
        return settings
    settings = tables.get("setuptools_scm", {})
    return dict(settings) if isinstance(settings, dict) else {}


# Runs ``program`` with ``args`` under an interpreter that has ``requirement`` importable; returns
# its standard output. Raises WheelfactoryError (one line) when the tool cannot be installed.
ProbeRunner = Callable[[VersionProbe], str]


def vcs_version(root: Path, system: BuildSystem, run_probe: ProbeRunner) -> VcsVersion | None:
    probe = plan_version_probe(root, system)
    if probe is None:
        return None
    output = run_probe(probe).strip()
    text = output.splitlines()[-1].strip() if output else ""
    try:
        Version(text)
    except InvalidVersion:
        raise ConfigError(
            f"{probe.tool} gave {text!r} for {root}, which is not a PEP 440 version",
            file=system.declared_in,
            key="build-system.requires",
            hint="build from a git checkout with a version tag, or set the tool's fallback version",
        ) from None
    return VcsVersion(probe.tool, text)
