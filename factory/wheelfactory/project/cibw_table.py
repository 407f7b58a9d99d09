"""A project's own cibuildwheel configuration, decided option by option.

Most released torch extensions built their wheels with cibuildwheel before they met the factory,
and ship its table (``[tool.cibuildwheel]`` in pyproject.toml, or a ``cibuildwheel.toml``). The
factory runs cibuildwheel too, but offline, in its own image, with its own torch: left alone, the
project's table would reach that run in part (a ``test-command`` makes cibuildwheel pip-install
virtualenv, which the offline wheelhouse cannot serve), silently.

So the table is read here as cibuildwheel reads it (its own ``OptionsReader``: the table, the
``linux`` subtable, the ``overrides`` that select the build identifier; its defaults left out:
only what the project set counts), and each option gets one fate:

- *honoured*: the factory does what it asks (environment, environment-pass, config-settings, the
  build frontend's args, the test options (as project/cibw_tests.py reads them), the repair
  command's ``--exclude``/``--plat`` flags, before-build/before-all steps that need no network);
- *replaced*: the plan decides instead, said in one line (build/skip/archs, the images, a step
  that only pip-installs what the build has already, ...);
- *refused*: it needs what an offline build cannot have; the build stops, naming the option and
  the fix.

``read_cibw_table`` is the one read of the files; ``decide`` is pure. The Docker engine then runs
cibuildwheel with an empty config file and every decided option in its ``CIBW_*`` variables
(``cibw_settings``), so nothing of the project's table reaches the build undecided.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from packaging.requirements import InvalidRequirement, Requirement

from wheelfactory.errors import ConfigError

if TYPE_CHECKING:
    from cibuildwheel.options import OptionFormat

PYPROJECT = "pyproject.toml"
CONFIG_FILE = "cibuildwheel.toml"  # what a project passes with --config-file, at its root
Fate = Literal["honoured", "replaced", "refused"]

# How cibuildwheel itself joins each option's list or table into one string (its options.py).
AND = " && "


@dataclass(frozen=True)
class CibwTable:
    """The options a project's cibuildwheel configuration sets for one build identifier, each as
    cibuildwheel reads it (a list or table joined into its string form), defaults left out."""

    declared_in: str  # "pyproject.toml [tool.cibuildwheel]", for messages
    identifier: str  # "cp311-manylinux_x86_64": the overrides that select it are in
    options: tuple[tuple[str, str], ...]  # (option name, value), in cibuildwheel's order

    def get(self, name: str) -> str | None:
        return next((value for option, value in self.options if option == name), None)


@dataclass(frozen=True)
class OptionFate:
    option: str
    value: str
    fate: Fate
    note: str  # what the factory does instead, or why and how to fix it (refused)

    def line(self) -> str:
        value = self.value if len(self.value) <= 80 else self.value[:77] + "..."
        return f"{self.option} = {value!r}: {self.fate}, {self.note}"


@dataclass(frozen=True)
class CibwDecision:
    """Every option's fate, and what the honoured ones add to the factory's cibuildwheel run."""

    table: CibwTable
    fates: tuple[OptionFate, ...]
    # (name, the assignment as written) before the factory's own
    environment: tuple[tuple[str, str], ...] = ()
    environment_pass: tuple[str, ...] = ()  # names set in the factory's environment
    config_settings: str = ""
    frontend_args: tuple[str, ...] = ()  # after --no-isolation
    repair_excludes: tuple[str, ...] = ()  # --exclude patterns beside the factory's
    repair_plat: str | None = None
    before_all: tuple[str, ...] = ()  # shell steps run as written
    before_build: tuple[str, ...] = ()

    @property
    def refused(self) -> tuple[OptionFate, ...]:
        return tuple(fate for fate in self.fates if fate.fate == "refused")

    def log_lines(self) -> list[str]:
        return [
            f"cibuildwheel options of {self.table.declared_in} for {self.table.identifier}, option by option:",
            *(f"  {fate.line()}" for fate in self.fates),
        ]


def table_file(root: Path) -> tuple[Path, str] | None:
    """Where the project keeps its cibuildwheel configuration, and how messages name it; None when
    it has none. pyproject.toml's table first (cibuildwheel's default), then cibuildwheel.toml."""
    pyproject = root / PYPROJECT
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(
                f"cannot read {pyproject}: {exc}", hint="fix the file's TOML"
            ) from None
        if isinstance(data.get("tool"), dict) and "cibuildwheel" in data["tool"]:
            return pyproject, f"{PYPROJECT} [tool.cibuildwheel]"
    config = root / CONFIG_FILE
    if config.is_file() and not config.is_symlink():
        return config, CONFIG_FILE
    return None


def read_cibw_table(root: Path, identifier: str) -> CibwTable | None:
    """The options the project at ``root`` sets for ``identifier`` on Linux, read by cibuildwheel's
    own reader; None when it has no cibuildwheel configuration. ConfigError naming the file when
    cibuildwheel cannot read it."""
    from cibuildwheel.options import OptionsReader, OptionsReaderError
    from cibuildwheel.typing import PLATFORMS

    found = table_file(root)
    if found is None:
        return None
    path, declared_in = found
    try:
        reader = OptionsReader(path, platform="linux", env={})
        # the option names (the defaults' table also holds the platforms' subtables)
        known = list(
            dict.fromkeys(
                name
                for name in (*reader.default_options, *reader.default_platform_options)
                if name not in PLATFORMS
            )
        )
        with reader.identifier(identifier):
            chosen = {
                *reader.config_options,
                *reader.config_platform_options,
                *(name for override in reader.active_config_overrides for name in override.options),
            }
            options = tuple(
                (name, reader.get(name, option_format=_format(name)))
                for name in known
                if name in chosen
            )
    except (OptionsReaderError, ValueError, TypeError) as exc:
        raise ConfigError(
            f"{declared_in}: cibuildwheel cannot read it: {exc}",
            file=str(path),
            hint="fix the table as cibuildwheel's documentation says",
        ) from None
    return CibwTable(declared_in, identifier, options)


def _format(name: str) -> OptionFormat | None:
    """The format cibuildwheel reads ``name`` with (its options.py): lists joined, tables rendered."""
    from cibuildwheel.options import EnvironmentFormat, ListFormat, ShlexTableFormat

    if name in ("environment", "test-environment"):
        return EnvironmentFormat()
    steps = ("before-all", "before-build", "before-test", "test-command", "audit-command")
    if name in (*steps, "repair-wheel-command"):
        return ListFormat(sep=AND)
    if name in ("environment-pass", "test-groups", "archs", "build", "skip", "test-skip", "enable"):
        return ListFormat(sep=" ")
    if name in ("test-requires", "test-sources", "audit-requires", "xbuild-tools"):
        return ListFormat(sep=" ", quote=shlex.quote)
    if name == "test-extras":
        return ListFormat(sep=",")
    if name == "config-settings":
        return ShlexTableFormat(sep=" ", pair_sep="=")
    if name in ("build-frontend", "dependency-versions", "container-engine", "test-runtime"):
        return ShlexTableFormat(sep="; ", pair_sep=":", allow_merge=False)
    return None


# What the plan decides in place of these, said in the build log.
_REPLACED = {
    "build": "the matrix selects the variants (and the build Python for each)",
    "skip": "the matrix selects the variants ([[exclude]] leaves some out)",
    "archs": "the matrix's arch list decides",
    "container-engine": "the factory runs its own engine, offline (--network none)",
    "dependency-versions": "the build tools come from the variant's offline wheel set",
    "build-verbosity": "the factory builds verbosely into build.log",
    "audit-requires": "abi3audit runs on the host for abi3 wheels",
    "audit-command": "abi3audit --strict runs on the host for abi3 wheels",
    "enable": "the factory builds CPython only",
    "pyodide-version": "not a Linux build",
    "xbuild-tools": "not a Linux build",
    "test-runtime": "the tests run natively in the build image",
}
_TEST_OPTIONS = tuple(
    "test-command before-test test-requires test-extras test-groups test-sources test-skip "
    "test-environment".split()
)
# Package managers of an image: the factory's build containers have no network, and its images
# are Debian (a manylinux image's yum would not be there either).
_SYSTEM_INSTALLERS = tuple("yum dnf microdnf apt-get apt apk zypper conda mamba micromamba".split())
_NETWORK_TOOLS = ("curl", "wget", "git")
# pip options that take a value (the value is not a requirement).
_PIP_VALUED = frozenset(
    "-i --index-url --extra-index-url -f --find-links -c --constraint -r --requirement -t --target "
    "--prefix --root --trusted-host --platform --python-version --implementation --abi --cache-dir "
    "--src -e --editable --config-settings -C --upgrade-strategy --progress-bar --python".split()
)


def decide(
    table: CibwTable,
    *,
    has_tests: bool,
    installed: Callable[[str], bool],
    factory_env: frozenset[str],
    host_env: Mapping[str, str] = os.environ,
) -> CibwDecision:
    """Each option of ``table`` with its fate. ``has_tests``: matrix.toml has its own [test],
    which wins over the table's test options; ``installed(name)``: whether the build already
    has a distribution (torch, the build system, the factory's tools), so that a step
    pip-installing only those is replaced; ``factory_env``: the variables the factory sets for
    the build (the plan's, which win over the table's); ``host_env``: where environment-pass
    takes values from."""
    fates: list[OptionFate] = []
    environment: list[tuple[str, str]] = []
    passed: list[str] = []
    config_settings, plat = "", None
    frontend_args: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    steps: dict[str, tuple[str, ...]] = {"before-all": (), "before-build": ()}

    for option, value in table.options:
        fate: Fate = "honoured"
        if option in _REPLACED:
            fate, note = "replaced", _REPLACED[option]
        elif option.startswith(("manylinux-", "musllinux-")):
            fate = "replaced"
            note = "the factory's base image ([build] base_image) builds every variant"
        elif option == "environment":
            environment, note = _environment(value, factory_env)
        elif option == "environment-pass":
            names = value.split()
            passed = [name for name in names if name in host_env]
            unset = [name for name in names if name not in host_env]
            note = (f"passes {', '.join(passed)}" if passed else "passes nothing") + (
                f" ({', '.join(unset)} not set here)" if unset else ""
            )
        elif option == "config-settings":
            config_settings, note = value, "given to the build frontend"
        elif option == "build-frontend":
            frontend_args, fate, note = _frontend(value)
        elif option == "repair-wheel-command":
            excludes, plat, fate, note = _repair(value)
        elif option in ("before-all", "before-build"):
            steps[option], fate, note = _steps(option, value, installed)
        elif option in _TEST_OPTIONS and has_tests:
            fate, note = "replaced", "matrix.toml [test] is set: the factory runs that instead"
        elif option in _TEST_OPTIONS:
            note = "the factory runs the project's tests against each wheel, offline"
        else:  # an option cibuildwheel knows and this module does not: said, never silently dropped
            fate, note = "replaced", "not used by the factory's build"
        fates.append(OptionFate(option, value, fate, note))
    return CibwDecision(
        table,
        tuple(fates),
        tuple(environment),
        tuple(passed),
        config_settings,
        tuple(frontend_args),
        tuple(excludes),
        plat,
        steps["before-all"],
        steps["before-build"],
    )


def _environment(value: str, factory_env: frozenset[str]) -> tuple[list[tuple[str, str]], str]:
    from cibuildwheel.environment import parse_environment

    kept, replaced = [], []
    for assignment in parse_environment(value).assignments:
        if assignment.name in factory_env:
            replaced.append(assignment.name)
        else:
            kept.append((assignment.name, str(assignment)))
    note = f"sets {', '.join(name for name, _ in kept)} for the build" if kept else "sets nothing"
    if replaced:
        note += f"; {', '.join(replaced)} replaced by the plan's"
    return kept, note


def _frontend(value: str) -> tuple[tuple[str, ...], Fate, str]:
    from cibuildwheel.frontend import BuildFrontendConfig

    config = BuildFrontendConfig.from_config_string(value)
    args = tuple(arg for arg in config.args if arg not in ("--no-isolation", "-n"))
    if config.name in ("build", "default"):
        return (
            args,
            "honoured",
            (
                "the factory builds with build --no-isolation"
                + (f", plus {shlex.join(args)}" if args else "")
            ),
        )
    return (
        (),
        "replaced",
        (
            f"the factory builds with build --no-isolation, not {config.name}"
            + (f" (its args {shlex.join(config.args)} not passed)" if config.args else "")
        ),
    )


def _repair(value: str) -> tuple[tuple[str, ...], str | None, Fate, str]:
    """The project's auditwheel flags the factory's own repair keeps."""
    excludes: list[str] = []
    plat = None
    for step in split_steps(value):
        words = shell_words(step)
        if words[:2] != ["auditwheel", "repair"]:
            continue
        for flag, argument in zip(words, [*words[1:], ""]):
            name, equals, inline = flag.partition("=")
            given = inline if equals else argument
            if name == "--exclude" and given:
                excludes.append(given)
            elif name == "--plat" and given:
                plat = given
    if not excludes and plat is None:
        return (
            (),
            None,
            "replaced",
            "the factory repairs with auditwheel, torch's libraries excluded",
        )
    kept = [
        *(f"--exclude {pattern}" for pattern in excludes),
        *([f"--plat {plat}"] if plat else []),
    ]
    return (
        tuple(excludes),
        plat,
        "honoured",
        f"the factory's auditwheel repair keeps {' '.join(kept)}",
    )


def _steps(
    option: str, value: str, installed: Callable[[str], bool]
) -> tuple[tuple[str, ...], Fate, str]:
    """A before-all/before-build value, step by step: pip installs of what the build has are
    dropped; one of anything else, and any step that needs the network, refuses the option."""
    kept: list[str] = []
    dropped: list[str] = []
    for step in split_steps(value):
        words = shell_words(step)
        requirements = pip_install_requirements(words)
        if requirements is not None:
            missing = [r for r in requirements if not _installed(r, installed)]
            if missing or not requirements:  # (none named: a requirements file)
                what = ", ".join(missing) or "a requirements file"
                return (
                    (),
                    "refused",
                    (
                        f"`{step}` installs {what} from an index, which the offline build cannot "
                        "reach: declare it in [build-system] requires (the factory installs those "
                        "from its wheelhouse)"
                    ),
                )
            dropped.extend(requirements)
        elif words and words[0] in _SYSTEM_INSTALLERS:
            return (
                (),
                "refused",
                (
                    f"`{step}` installs system packages, and the build container has no network: "
                    "use a base image that has them ([build] base_image)"
                ),
            )
        elif words and words[0] in _NETWORK_TOOLS:
            return (
                (),
                "refused",
                (
                    f"`{step}` downloads, and the build container has no network: vendor what it "
                    "fetches into the project"
                ),
            )
        elif step.strip():
            kept.append(step)
    if not kept:
        return (
            (),
            "replaced",
            f"the build has {', '.join(dropped)} already, from the offline wheelhouse",
        )
    note = f"runs {AND.join(kept)} in the build container, offline"
    return (
        tuple(kept),
        "honoured",
        note + (f"; {', '.join(dropped)} already installed" if dropped else ""),
    )


def pip_install_requirements(words: list[str]) -> list[str] | None:
    """The requirements a pip (or uv pip) install command names ([] for a requirements file,
    which is not known here); None when it is not one."""
    rest = words
    if (
        rest[:1]
        and rest[0].rsplit("/", 1)[-1].startswith(("python", "{python}"))
        and rest[1:3] == ["-m", "pip"]
    ):
        rest = rest[2:]
    elif rest[:2] == ["uv", "pip"]:
        rest = rest[1:]
    if rest[:1] not in (["pip"], ["pip3"]) or rest[1:2] != ["install"]:
        return None
    requirements: list[str] = []
    arguments = iter(rest[2:])
    for word in arguments:
        if word in ("-r", "--requirement") or word.startswith(("--requirement=", "-r")):
            return []
        if word in _PIP_VALUED:
            next(arguments, None)
        elif not word.startswith("-"):
            requirements.append(word)
    return requirements


def _installed(requirement: str, installed: Callable[[str], bool]) -> bool:
    try:
        return installed(Requirement(requirement).name)
    except InvalidRequirement:
        return False  # a path or URL: not something the build has


def split_steps(value: str) -> list[str]:
    """A shell value split into its steps at ``&&``, ``;`` and new lines (cibuildwheel joins a
    list with ``&&``)."""
    steps: list[str] = []
    for line in value.replace("\\\n", " ").splitlines():
        for part in line.replace("&&", ";").split(";"):
            if part.strip():
                steps.append(part.strip())
    return steps


def shell_words(step: str) -> list[str]:
    try:
        return shlex.split(step)
    except ValueError:
        return step.split()


def identifier_for(python: str, arch: str) -> str:
    """cibuildwheel's build identifier of a variant's build (``cp311-manylinux_x86_64``). An abi3
    variant builds with its image's Python, known only at build time: before that (which tests run)
    it is read as CPython 3.11's, the Python of the factory's default base."""
    digits = "311" if python == "abi3" else python.replace(".", "")
    return f"cp{digits}-manylinux_{arch}"


def refusal_before_build(root: Path, identifier: str, *, has_tests: bool) -> str | None:
    """What refuses the project's table for ``identifier`` whatever the build will hold (a step
    installing system packages, downloading, or pip-installing a requirements file), as the
    variant's error; None when nothing does. Said before the image, the wheelhouse and the
    compile: a step pip-installing named packages waits for the build's environments, which may
    hold them."""
    table = read_cibw_table(root, identifier)
    if table is None:
        return None
    refused = decide(
        table, has_tests=has_tests, installed=lambda _: True, factory_env=frozenset()
    ).refused
    return (
        f"{table.declared_in} {refused[0].option}: refused: {refused[0].note}" if refused else None
    )
