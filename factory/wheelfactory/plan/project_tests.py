"""``[test]``: the project's own tests, run against every built wheel (matrix.toml, or a
factory-native kernel's kernel.toml). The keys follow cibuildwheel's test-command / test-requires /
test-sources, so a project that has them can copy them over.

The tests run in a fresh container from the variant's image with only torch, the wheel and
``requires`` installed (offline, from the wheelhouse), from a directory holding a copy of
``sources``: the installed wheel is what the tests import, never the project's source package.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from wheelfactory.plan.toml_model import NONBLANK, Key, Section, Text, TextList
from wheelfactory.plan.tomlsource import Table

# [test] as matrix.toml and kernel.toml declare it (plan/toml_model.py): the parser's keys, the schema's.
TEST_SECTION = Section(
    description="the project's own tests, run against every built wheel",
    may_be_empty=True,
    keys=(
        Key(
            "command",
            Text(pattern=NONBLANK, examples=("python -m pytest -q {project}/tests",)),
            "a shell command run from a copy of the test sources; {project} and {package} become its path",
            required=True,
        ),
        Key(
            "requires",
            TextList(item=Text(examples=("pytest",))),
            "what the tests need besides torch and the wheel, as pip requirements",
        ),
        Key(
            "sources",
            TextList(item=Text(examples=("tests",))),
            "files and directories of the project the tests need, relative to the project",
        ),
        Key(
            "skip",
            TextList(item=Text(examples=("*-cu*",))),
            "variant id patterns (fnmatch) whose wheels are not tested",
        ),
        Key(
            "find_links",
            TextList(item=Text(examples=(".",))),
            "directories of wheels the tests' requirements may also come from (ones no index has), "
            "relative to the file",
        ),
    ),
)
TEST_KEYS = TEST_SECTION.names()
# cibuildwheel's placeholders: {project} is the project's copy in the container (here, the
# directory holding ``sources``), {package} the same (a project is its own package here). Only
# these two are filled in; any other braces (a shell's ${VAR}) are left as written.
_PLACEHOLDER = re.compile(r"\{(?:project|package)\}")


@dataclass(frozen=True)
class ProjectTests:
    command: str
    requires: tuple[str, ...] = ()  # pip requirements, downloaded into the wheelhouse
    sources: tuple[str, ...] = ()  # files or directories, relative to the project root
    skip: tuple[str, ...] = ()  # variant id patterns (fnmatch) that do not run the tests
    declared_in: str = "matrix.toml"  # or "kernel.toml": for messages
    find_links: tuple[str, ...] = ()  # absolute directories of wheels, beside the host's pip index

    def runs_for(self, variant_id: str) -> bool:
        return not any(fnmatch.fnmatchcase(variant_id, pattern) for pattern in self.skip)

    def render(self, project: str) -> str:
        """The command with its placeholders filled in (``project``: where the sources are)."""
        return _PLACEHOLDER.sub(lambda _: project, self.command)


def parse_test_table(
    table: Table, *, declared_in: str, base_dir: Path | None = None
) -> ProjectTests | None:
    """The [test] table, or None when there is none (or it has no command). ``base_dir``: what
    ``find_links`` is relative to (the file's directory)."""
    if not table.data:
        return None
    table.reject_unknown(TEST_KEYS)
    command = table.string("command")
    if command is None or not command.strip():
        table.error("command", "is missing or empty", 'e.g. command = "pytest -q {project}/tests"')
    sources = table.string_list("sources", ())
    for source in sources:
        path = PurePosixPath(source)
        if (
            not source.strip()
            or path.is_absolute()
            or ".." in path.parts
            or "\\" in source
            or "\0" in source
        ):
            table.error(
                "sources",
                f"{source!r} is not a relative path inside the project",
                'list files or directories under the project root, e.g. sources = ["tests"]',
            )
    for requirement in table.string_list("requires", ()):
        _check_requirement(table, requirement)
    return ProjectTests(
        command=command,
        requires=table.string_list("requires", ()),
        sources=sources,
        skip=table.string_list("skip", ()),
        declared_in=declared_in,
        find_links=wheel_directories(table, "find_links", base_dir),
    )


def wheel_directories(table: Table, key: str, base_dir: Path | None) -> tuple[str, ...]:
    """``key``'s directories of wheels (``find_links``), absolute, each an existing directory."""
    found = []
    for text in table.string_list(key, ()):
        path = Path(text).expanduser()
        if not path.is_absolute():
            path = (base_dir or Path.cwd()) / path
        if not text.strip() or "\0" in text or not path.is_dir():
            table.error(
                key,
                f"{text!r} is not a directory",
                'name directories of wheels, relative to the file, e.g. find_links = ["wheels"]',
            )
        found.append(str(path.resolve()))
    return tuple(found)


def _check_requirement(table: Table, requirement: str) -> None:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        parsed = Requirement(requirement)
    except InvalidRequirement as exc:
        table.error(
            "requires",
            f"{requirement!r} is not a requirement: {str(exc).splitlines()[0]}",
            'e.g. requires = ["pytest"]',
        )
    if parsed.url:
        table.error(
            "requires",
            f"{requirement!r} is a URL requirement",
            "name a package the wheelhouse can download from the host's pip index",
        )
