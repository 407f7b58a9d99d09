"""What has one home in the code: every subprocess of the factory runs through support/proc.py
(the runtime, vendored into kernel packages, keeps its own), the build record's file name is
written once, at the runtime's BUILD_RECORD_FILE, and each fact of issue 40's item 4 is spelled in
its home only (``FACTS``: a grep for its second spelling, which a planted one shows it finds;
tests/publish/test_publish_homes.py holds publishing's)."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.testkit import REPO

PACKAGE = REPO / "factory" / "wheelfactory"
PROC = PACKAGE / "support" / "proc.py"
RECORD_PATH = re.compile(r"(^|/)_build\.json$")
SUBPROCESS = re.compile(r"\bsubprocess\.|^\s*import subprocess\b|^\s*from subprocess import\b")


def python_files(root: Path) -> Iterator[Path]:
    """The modules under ``root``: the .py files of its packages, not through links (_runtime and
    _docker link other folders in), nor in folders that are no package (the templates of
    `wheelfactory new`, package data whose .py files have placeholders)."""
    for folder, folders, files in os.walk(root, followlinks=False):
        folders[:] = [name for name in folders if (Path(folder) / name / "__init__.py").is_file()]
        yield from sorted(Path(folder) / name for name in files if name.endswith(".py"))


def test_every_subprocess_of_the_factory_goes_through_support_proc() -> None:
    found = [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
             for path in python_files(PACKAGE) if path != PROC
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if SUBPROCESS.search(line)]
    assert not found, "run these through wheelfactory.support.proc:\n" + "\n".join(found)


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def test_the_build_record_file_name_is_written_once() -> None:
    """As a path in code (a string literal or f-string part that is or ends with it), not in prose:
    docstrings and the scaffold's templates may name it."""
    found = []
    for path in [*python_files(PACKAGE), *python_files(REPO / "runtime")]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        prose = _docstrings(tree)
        found += [f"{path.relative_to(REPO)}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and RECORD_PATH.search(node.value)
                  and id(node) not in prose]
    assert found == ["runtime/__init__.py:22"], "use the runtime's BUILD_RECORD_FILE (or record_member):\n" + \
        "\n".join(found)


# ---- one home per fact (issue 40, item 4): a grep for each fact's second spelling ----------------


def _blanked(text: str) -> str:
    """``text`` with its comments and docstrings blanked, line numbers kept: prose may name a fact's
    second spelling (to say where its home is); code may not."""
    docstrings = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                docstrings.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    lines = []
    for number, line in enumerate(text.splitlines(), 1):
        if number in docstrings or line.lstrip().startswith("#"):
            line = ""
        lines.append(re.sub(r"\s+#\s[^\"']*$", "", line))  # a trailing comment with no quote in it
    return "\n".join(lines)


def _calls(tree: ast.AST, names: set[str]) -> list[int]:
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
            and (getattr(node.func, "id", None) in names or getattr(node.func, "attr", None) in names)]


def _kind_name_literals(tree: ast.AST) -> list[tuple[int, str]]:
    from wheelfactory.plan import kind_names
    names = {kind_names.NATIVE, kind_names.KERNEL_BUILDER, kind_names.KERNEL_BUILDER_NOARCH,
             kind_names.BRING_YOUR_OWN}
    prose = _docstrings(tree)
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in names and id(node) not in prose]


def _left_out_records(tree: ast.AST) -> list[int]:
    """Classes that hold a variant id and why it was left out: a second ``LeftOut``."""
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
            and {"variant_id", "reason"} <= {item.target.id for item in node.body
                                             if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)}]


def _key_type_tables(tree: ast.AST) -> list[int]:
    """Dict literals mapping index.json's variant keys to JSON types: a second copy of VARIANT_KEYS."""
    from wheelfactory.publish.index_json import VARIANT_KEYS

    def types(value: ast.expr) -> bool:
        return isinstance(value, ast.Tuple) and bool(value.elts) and all(
            isinstance(e, (ast.Name, ast.Call)) for e in value.elts)

    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Dict)
            and sum(isinstance(k, ast.Constant) and k.value in VARIANT_KEYS and types(v)
                    for k, v in zip(node.keys, node.values)) >= 3]


_SPLIT_DOT = r"\.split\(\s*[\"']\.[\"']\s*\)"
# fact -> (what finds a second spelling in a module's text, as (line, what) pairs; its homes,
# relative to the repository; why a home is one where that is not plain)
FACTS: dict[str, tuple[Callable[[str], list[tuple[int, str]]], dict[str, str]]] = {}


def _regex(*patterns: str) -> Callable[[str], list[tuple[int, str]]]:
    compiled = [re.compile(p) for p in patterns]

    def find(text: str) -> list[tuple[int, str]]:
        return [(number, line.strip()) for number, line in enumerate(_blanked(text).splitlines(), 1)
                if any(p.search(line) for p in compiled)]
    return find


def _tree(finder: Callable[[ast.AST], list[Any]]) -> Callable[[str], list[tuple[int, str]]]:
    def find(text: str) -> list[tuple[int, str]]:
        return [found if isinstance(found, tuple) else (found, "") for found in finder(ast.parse(text))]
    return find


FACTS.update({
    # runtime/_fit.py's normalize_machine: platform.machine()'s other names for an arch. The
    # canonical name -> Debian/OCI/Docker names (images/emulation.py, ci/bake.py PLATFORMS) are
    # other facts, and go the other way.
    "machine-name aliases": (
        _regex(r"[\"'](amd64|AMD64|x64|arm64|ARM64)[\"']\s*:\s*[\"'](x86_64|aarch64)[\"']"),
        {"runtime/_fit.py": "the fit rule, which select.py embeds"}),
    # plan/versions.py (packaging) and the runtime's MajorMinor / _fit.parse_major_minor.
    "major.minor parsed by hand": (
        _regex(_SPLIT_DOT + r"\s*\[\s*:\s*2\s*\]",
               r"int\(\s*\w+\s*\)\s+for\s+\w+\s+in\s+[^\n]*" + _SPLIT_DOT,
               r"map\(\s*int\s*,[^\n]*" + _SPLIT_DOT,
               r"\b(major|minor)\w*\s*,\s*\w+\s*=\s*[^\n]*" + _SPLIT_DOT),
        {"factory/wheelfactory/plan/versions.py": "the home",
         "factory/wheelfactory/publish/index_json.py":
             "version_key: a whole PEP 440 release, standard library only (select.py carries it)"}),
    # verify/wheel_identity.read_build_record: capped, each field by the runtime's rule (the
    # runtime, which defines these, reads its own installed record).
    "a build record read by hand": (
        _regex(r"\b(record_member|load_record_json|partial_record)\("),
        {"factory/wheelfactory/verify/wheel_identity.py": "read_build_record",
         "runtime/": "the record's reader, which these are"}),
    # support/digests.stream_sha256 (project/keys.py file_sha256 and file_digest go through it);
    # the runtime, vendored and standard library only, keeps its own.
    "a file's sha256 by hand": (
        _regex(r"sha256\([^\n]*\.read(_bytes)?\(", r"while \w+ := \w+\.read\("),
        {"factory/wheelfactory/support/digests.py": "the home",
         "runtime/": "vendored into kernel packages, standard library only: its own"}),
    # plan/kind_names.py; the same words naming other things are listed with what they name.
    "a kind's name spelled out": (
        _tree(_kind_name_literals),
        {"factory/wheelfactory/plan/kind_names.py": "the home",
         "runtime/": '"native": code for the machine it runs on',
         "factory/wheelfactory/images/base_image.py": '"native": a base image made for this machine',
         "factory/wheelfactory/publish/hf_layout.py": '"kernel-builder": the Hub\'s provenance key',
         "factory/wheelfactory/project/kernel_builder_setup.py": "the templates' folder",
         "factory/wheelfactory/project/scaffold.py": "the templates' folder"}),
    # runner/manifest.locked holds the output directory's lock for a block.
    "the manifest's lock taken by hand": (
        _regex(r"FileLock\([^\n]*\b(LOCK|manifest)\b", r"[\"']\.wheelfactory\.lock[\"']"),
        {"factory/wheelfactory/runner/manifest.py": "locked"}),
    # runner/manifest.read_listed refuses a manifest that lists nothing.
    "a manifest that lists nothing refused by hand": (
        _regex(r"lists nothing"),
        {"factory/wheelfactory/runner/manifest.py": "read_listed"}),
    # project/build_toml_reader.load_build_toml, called once per run: project/kinds.py's
    # Project.build_toml (a cached property), which the plan's constraints and the load share.
    "build.toml parsed again": (
        _tree(lambda tree: _calls(tree, {"load_build_toml", "parse_build_toml"})),
        {"factory/wheelfactory/project/build_toml_reader.py": "load_build_toml parses",
         "factory/wheelfactory/project/kinds.py": "Project.build_toml"}),
    # runner/refusals.is_pure_python: a manifest entry with hub_metadata is a noarch build.
    "noarch told apart from hub_metadata": (
        _regex(r"hub_metadata is (not )?None", r"\b(if|not|and|or|bool\()\s*[\w.]+\.hub_metadata\b(?!\s*or\b)"),
        {"factory/wheelfactory/runner/refusals.py": "is_pure_python"}),
    # runner/refusals.LeftOut: a variant a command (index, export, publish, merge) left out, and
    # why. engines/choose.py's NotBuilt is another thing: a selected variant no engine here can
    # build, with the action that makes it buildable (`build` exits 5); it holds the Variant.
    "a record of a variant left out": (
        _tree(_left_out_records),
        {"factory/wheelfactory/runner/refusals.py": "LeftOut",
         "factory/wheelfactory/publish/report.py": "Unplaced: a manifest entry the grid has no cell for"}),
    # publish/index_json.VARIANT_KEYS: what `index` writes into index.json (publish/pages.py,
    # checked below), what select.py and a publish target's read-back (publish/listing.py) check.
    "index.json's variant keys": (
        _tree(_key_type_tables),
        {"factory/wheelfactory/publish/index_json.py": "VARIANT_KEYS"}),
})
SCANNED = sorted({*python_files(PACKAGE), *python_files(REPO / "runtime"), *(REPO / "benchmarks").glob("*.py")})


@pytest.mark.parametrize("fact", sorted(FACTS))
def test_each_fact_has_one_home(fact: str) -> None:
    find, homes = FACTS[fact]
    found = [f"{path.relative_to(REPO)}:{line}: {what}" for path in SCANNED
             if not any(str(path.relative_to(REPO)).startswith(home) for home in homes)
             for line, what in find(path.read_text(encoding="utf-8"))]
    assert not found, f"{fact}: its home is {', '.join(homes)}:\n" + "\n".join(found)


# A second spelling of each fact, planted: the same matcher finds it.
PLANTED = {
    "machine-name aliases": 'MACHINES = {"arm64": "aarch64", "x86_64": "x86_64"}\n',
    "major.minor parsed by hand": 'major, minor = (int(x) for x in glibc.split("."))\n',
    "a build record read by hand": "raw = archive.read(record_member(package))\n",
    "a file's sha256 by hand": "digest.update(hashlib.sha256((root / rel).read_bytes()).digest())\n",
    "a kind's name spelled out": 'if kind == "bring-your-own":\n    pass\n',
    "the manifest's lock taken by hand": "lock = FileLock(str(out / manifest.LOCK))\n",
    "a manifest that lists nothing refused by hand": 'raise UsageError(f"{out} lists nothing: build first")\n',
    "build.toml parsed again": "spec = load_build_toml(root)\n",
    "noarch told apart from hub_metadata": "if entry.hub_metadata:\n    pass\n",
    "a record of a variant left out": "class Skipped:\n    variant_id: str\n    reason: str\n",
    "index.json's variant keys": '_KEYS = {"id": (str,), "torch": (str,), "toolkit": (str, type(None))}\n',
}
MORE_PLANTED = {
    "major.minor parsed by hand": ['release = ".".join(torch.split(".")[:2])\n',
                                   'numbers = [int(n) for n in maxver.split(".")]\n',
                                   'major, minor = pruned.torch.split(".")\n',
                                   'key = tuple(map(int, version.split(".")))\n'],
    "noarch told apart from hub_metadata": ["pure = entry.hub_metadata is not None\n"],
}


@pytest.mark.parametrize("fact", sorted(FACTS))
def test_a_planted_second_spelling_is_found(fact: str) -> None:
    find, _ = FACTS[fact]
    for text in (PLANTED[fact], *MORE_PLANTED.get(fact, ())):
        assert find(text), (fact, text)
    assert not find(f'"""Prose may say it: {PLANTED[fact].strip()!r}."""\n'), fact


def test_the_homes_are_where_the_facts_live() -> None:
    """A grep that finds nothing checks nothing: each pattern finds its home's own spelling."""
    for fact in ("machine-name aliases", "a build record read by hand", "a file's sha256 by hand",
                 "a kind's name spelled out", "a manifest that lists nothing refused by hand",
                 "build.toml parsed again", "noarch told apart from hub_metadata",
                 "a record of a variant left out", "index.json's variant keys"):
        find, homes = FACTS[fact]
        home = REPO / next(iter(homes))
        assert find(home.read_text(encoding="utf-8")), (fact, home)
    kinds = PACKAGE / "project" / "kinds.py"
    assert len(_calls(ast.parse(kinds.read_text(encoding="utf-8")), {"load_build_toml"})) == 1


def test_index_writes_exactly_the_keys_its_readers_check() -> None:
    """publish/pages.py's entry for each wheel in index.json has VARIANT_KEYS' keys, in its order."""
    from wheelfactory.publish.index_json import VARIANT_KEYS

    tree = ast.parse((PACKAGE / "publish" / "pages.py").read_text(encoding="utf-8"))
    writer = next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "_index_json")
    entry = next(node.elt for node in ast.walk(writer) if isinstance(node, ast.ListComp))
    assert isinstance(entry, ast.Dict)
    assert [k.value for k in entry.keys if isinstance(k, ast.Constant)] == list(VARIANT_KEYS)
