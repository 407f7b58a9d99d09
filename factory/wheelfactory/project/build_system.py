"""A project's PEP 517 build system as its own files declare it: what the offline build
environment must hold, and what can be told about the wheel before anything compiles.

Read once, at the edge (``read_build_system``); pure afterwards. Three facts come out of it:

* the requirements: ``[build-system] requires`` (setuptools' legacy default where the table is
  absent), less torch (the variant's torch is a prepared environment of its own), plus what the
  backend asks for at build time when the tool is not on the machine (scikit-build-core: cmake and
  ninja; meson-python: ninja): a container has neither, and ``build --no-isolation`` refuses a
  requirement that is not installed;
* whether the project builds abi3 wheels, read from the backend's own setting (setup.cfg /
  ``[tool.distutils.bdist_wheel]`` / setup.py for setuptools, ``wheel.py-api`` for
  scikit-build-core, ``limited-api`` for meson-python), so that a matrix asking for abi3 is told
  before any compile, with the fix in that backend's words;
* which tool, if any, takes the version from git (project/vcs_version.py computes it).
"""

from __future__ import annotations

import configparser
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from wheelfactory.errors import ConfigError

PYPROJECT = "pyproject.toml"
# PEP 518: a project without [build-system] is built by setuptools' legacy backend.
LEGACY_REQUIRES = ("setuptools>=40.8.0",)
LEGACY_BACKEND = "setuptools.build_meta:__legacy__"
Family = Literal["setuptools", "scikit-build-core", "meson-python", "other"]
_FAMILIES: dict[str, Family] = {
    "setuptools": "setuptools",
    "scikit_build_core": "scikit-build-core",
    "mesonpy": "meson-python",
}
# Tools that take a project's version from git, by the requirement that brings them in, and the
# family of tool that computes it (project/vcs_version.py).
VCS_TOOLS = {
    "setuptools-scm": "setuptools-scm",
    "hatch-vcs": "setuptools-scm",
    "versioningit": "versioningit",
    "poetry-dynamic-versioning": "dunamai",
    "uv-dynamic-versioning": "dunamai",
    "dunamai": "dunamai",
}
Abi3 = Literal["yes", "no", "unknown"]


@dataclass(frozen=True)
class BuildSystem:
    """What a project's build runs with. ``requires``: the declared requirements, as written."""

    requires: tuple[str, ...]
    backend: str  # "scikit_build_core.build", "setuptools.build_meta:__legacy__"
    declared_in: str  # "/path/pyproject.toml [build-system]", for messages
    # what the backend asks for at build time (see the docstring)
    dynamic_requires: tuple[str, ...] = ()
    abi3: Abi3 = "unknown"  # whether the project's wheel is tagged abi3 (its own setting says so)
    # the requirement that versions it from git ("setuptools-scm"); None: none
    vcs_tool: str | None = None

    @property
    def family(self) -> Family:
        return family_of(self.backend)

    @property
    def torch_specifier(self) -> str:
        """What the build requirements accept of torch ("" when they name none, or any)."""
        return ",".join(
            str(r.specifier) for r in _parsed(self.requires) if _is_torch(r) and r.specifier
        )

    def environment_requirements(self) -> tuple[str, ...]:
        """The build environment besides torch: declared and dynamic, each once."""
        declared = [r for r in self.requires if not _is_torch(Requirement(r))]
        names = {canonicalize_name(Requirement(r).name) for r in declared}
        return (
            *declared,
            *(
                r
                for r in self.dynamic_requires
                if canonicalize_name(Requirement(r).name) not in names
            ),
        )

    def abi3_fix(self) -> str:
        """How this backend is told to build abi3 wheels."""
        if self.family == "scikit-build-core":
            return (
                'set wheel.py-api = "cp39" under [tool.scikit-build] in pyproject.toml (and build the '
                "extension with the limited API: python_add_library(... USE_SABI 3.9)"
            )
        if self.family == "meson-python":
            return "set limited-api = true under [tool.meson-python] and limited_api: '3.9' on the extension"
        if self.family == "setuptools":
            return (
                "pass py_limited_api=True to its extensions and set py_limited_api = cp39 under "
                "[bdist_wheel] in setup.cfg"
            )
        return f"make its build backend ({self.backend}) tag the wheel abi3"


LEGACY = BuildSystem(
    requires=LEGACY_REQUIRES,
    backend=LEGACY_BACKEND,
    declared_in="setuptools' default",
    dynamic_requires=("wheel",),
)
# Factory-native and kernel-builder projects build from a generated setup.py and this pyproject.toml
# (project/stage.py, project/kernel_builder.py write them).
GENERATED = BuildSystem(
    requires=("setuptools>=70.1", "torch"),
    backend="setuptools.build_meta",
    declared_in="the generated pyproject.toml",
    dynamic_requires=("wheel",),
    abi3="yes",
)
GENERATED_PYPROJECT = (
    '[build-system]\nrequires = ["setuptools>=70.1", "torch"]\n'
    'build-backend = "setuptools.build_meta"\n'
)


def read_build_system(root: Path) -> BuildSystem:
    """``root``'s build system (one-line ConfigError naming the file and key for what is malformed)."""
    path = root / PYPROJECT

    def bad(key: str | None, message: str, hint: str) -> ConfigError:
        return ConfigError(message, file=str(path), key=key, hint=hint)

    data: dict[str, object] = {}
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise bad(
                None,
                f"{path} is not valid TOML: {exc}",
                "fix the file; the build backend reads it too",
            ) from None
    table = data.get("build-system")
    where = f"{path} [build-system]"
    if table is None:
        requires, backend = LEGACY_REQUIRES, LEGACY_BACKEND
        where = f"{path} (no [build-system]: setuptools' default)"
    else:
        if not isinstance(table, dict):
            example = 'e.g. [build-system] requires = ["setuptools", "torch"]'
            raise bad("build-system", "[build-system] is not a table", example)
        raw = table.get("requires")
        if not isinstance(raw, list) or not all(isinstance(r, str) for r in raw):
            raise bad(
                "build-system.requires",
                "[build-system] requires must be a list of requirement strings (PEP 518)",
                'e.g. requires = ["setuptools>=64"]',
            )
        requires = tuple(raw)
        backend = table.get("build-backend", LEGACY_BACKEND)
        if not isinstance(backend, str) or not backend.strip():
            raise bad(
                "build-system.build-backend",
                "[build-system] build-backend must name a module",
                'e.g. build-backend = "setuptools.build_meta"',
            )
    for text in requires:
        try:
            requirement = Requirement(text)
        except InvalidRequirement as exc:
            problem = f"{text!r} is not a requirement: {str(exc).splitlines()[0]}"
            raise bad("build-system.requires", problem, "write PEP 508 requirements") from None
        if requirement.url:
            raise bad(
                "build-system.requires",
                f"{text!r} is a URL requirement: an offline build cannot fetch it",
                "name a package the host's pip index serves as a wheel",
            )
    tool = data.get("tool") if isinstance(data.get("tool"), dict) else {}
    assert isinstance(tool, dict)
    family = family_of(backend)
    return BuildSystem(
        requires=requires,
        backend=backend.strip(),
        declared_in=where,
        dynamic_requires=_dynamic_requires(family, tool),
        abi3=_abi3(family, root, tool),
        vcs_tool=_vcs_tool(requires),
    )


def family_of(backend: str) -> Family:
    """The backend's family, from its module ("scikit_build_core.build" -> scikit-build-core)."""
    return _FAMILIES.get(backend.strip().split(":")[0].split(".")[0], "other")


def _dynamic_requires(family: Family, tool: dict[str, object]) -> tuple[str, ...]:
    """What the backend's get_requires_for_build_wheel asks for on a machine without the tools."""
    if family == "setuptools":
        return ("wheel",)  # setuptools before 70.1 asks for it
    if family == "meson-python":
        return ("ninja",)
    if family == "scikit-build-core":
        settings = tool.get("scikit-build") if isinstance(tool.get("scikit-build"), dict) else {}
        assert isinstance(settings, dict)
        cmake = (
            _nested(settings, "cmake", "version")
            or _nested(settings, "cmake", "minimum-version")
            or ">=3.15"
        )
        ninja = _nested(settings, "ninja", "version") or ">=1.5"
        return (f"cmake{_specifier(cmake)}", f"ninja{_specifier(ninja)}")
    return ()


def _specifier(text: str) -> str:
    # scikit-build-core takes "3.26" as ">=3.26" for cmake.minimum-version.
    return text if text[:1] in "<>=!~" else f">={text}"


def _nested(table: dict[str, object], *keys: str) -> str | None:
    """``wheel.py-api`` written either way: as a dotted key (a nested table) or a quoted one."""
    value: object = table.get(".".join(keys))
    if value is None:
        value = table
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, str) else None


_PY_LIMITED_API = re.compile(r"py_limited_api|py-limited-api")


def _abi3(family: Family, root: Path, tool: dict[str, object]) -> Abi3:
    """The project's own word on abi3 ("unknown" where a script could decide it at build time)."""
    if family == "scikit-build-core":
        settings = tool.get("scikit-build") if isinstance(tool.get("scikit-build"), dict) else {}
        assert isinstance(settings, dict)
        # overrides may set it per platform or Python: not decidable here
        if "overrides" in settings:
            return "unknown"
        api = _nested(settings, "wheel", "py-api") or ""
        return "yes" if api.startswith("cp3") else "no"
    if family == "meson-python":
        settings = tool.get("meson-python") if isinstance(tool.get("meson-python"), dict) else {}
        assert isinstance(settings, dict)
        return "yes" if settings.get("limited-api") is True else "no"
    if family == "setuptools":
        texts = [
            p.read_text(encoding="utf-8", errors="replace")
            for p in (root / "setup.py", root / "setup.cfg")
            if p.is_file()
        ]
        config = configparser.ConfigParser()
        try:
            config.read_string(texts[-1] if (root / "setup.cfg").is_file() else "")
        except configparser.Error:
            pass  # setuptools will say what is wrong with it
        if config.has_option("bdist_wheel", "py_limited_api") or config.has_option(
            "bdist_wheel", "py-limited-api"
        ):
            return "yes"
        distutils = tool.get("distutils") if isinstance(tool.get("distutils"), dict) else {}
        assert isinstance(distutils, dict)
        bdist_wheel = distutils.get("bdist_wheel")
        if isinstance(bdist_wheel, dict) and (
            "py_limited_api" in bdist_wheel or "py-limited-api" in bdist_wheel
        ):
            return "yes"
        # Named anywhere (setup.cfg, a keyword, options={...}): setup.py may decide at build time.
        return "unknown" if any(_PY_LIMITED_API.search(t) for t in texts) else "no"
    return "unknown"


def _vcs_tool(requires: tuple[str, ...]) -> str | None:
    for requirement in _parsed(requires):
        name = canonicalize_name(requirement.name)
        if name in VCS_TOOLS:
            return name
    return None


def _parsed(requires: tuple[str, ...]) -> list[Requirement]:
    return [Requirement(r) for r in requires]


def _is_torch(requirement: Requirement) -> bool:
    return canonicalize_name(requirement.name) == "torch"
