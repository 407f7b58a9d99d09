"""The project kinds are one table (project/kinds.py, with the facts in project/kind_facts.py):
nothing else in the factory compares a kind's name or type, and the table covers every kind
matrix.toml can name and every smoke program a kind asks for."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest
from tests.testkit import REPO
from wheelfactory.plan.matrix import ProjectConfig
from wheelfactory.plan.kind_names import OLD_PROJECT_KINDS, PROJECT_KINDS, KindName
from wheelfactory.project.kinds import KINDS, resolve_kind
from wheelfactory.verify.checks import SMOKES

SOURCE = REPO / "factory" / "wheelfactory"
TABLE = {"project/kinds.py", "project/kind_facts.py"}
# Where "noarch" is build.toml's own word (the parser) or the noarch kind's own wheel writer.
NOARCH_DEFINED = {"project/build_toml.py", "project/build_toml_schema.py", "project/build_toml_reader.py",
                  "project/noarch.py"}
NAMES = "|".join(re.escape(name) for name in get_args(KindName))
KIND_EXPRESSION = r"(?:\bproject_kind|\bkind_name|\b(?:config|project)\.kind|\.facts\.name|\.kind\.name)"
# Each rule: a way code outside the table would ask which kind a project is.
RULES = {
    "compares a kind name": re.compile(rf"(?:==|!=)\s*[\"'](?:{NAMES})[\"']|[\"'](?:{NAMES})[\"']\s*(?:==|!=)"
                                       rf"|{KIND_EXPRESSION}\s*(?:==|!=|\bin\b|\bnot in\b)"
                                       # "setuptools" is also a build backend (BuildSystem.family): only as a kind
                                       r"|\w*kind\w*\s*(?:==|!=)\s*[\"']setuptools[\"']"),
    "tests a kind's type": re.compile(r"isinstance\([^)]*\b(?:KernelBuilderStage|ByoStage|StagePlan|NoarchBuild|"
                                      r"PurePythonBuilds|ProjectKind|KindFacts)\b"),
    "reads Stage.native": re.compile(r"\.native\b"),
}
NOARCH_BRANCH = re.compile(r"\b(?:if|elif|while)\b[^#\n]*\bnoarch\b|\bnoarch\b[^#\n]*\bif\b[^#\n]*\belse\b")


def violations(relative: str, text: str) -> list[str]:
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        code = line.split("#", 1)[0]
        for what, rule in RULES.items():
            if rule.search(code):
                found.append(f"{relative}:{number}: {what}: {line.strip()}")
        if relative not in NOARCH_DEFINED and NOARCH_BRANCH.search(code):
            found.append(f"{relative}:{number}: branches on noarch: {line.strip()}")
    return found


def factory_modules() -> list[Path]:
    return [path for path in sorted(SOURCE.rglob("*.py"))
            if path.relative_to(SOURCE).parts[0] not in ("_runtime", "_docker")
            and path.relative_to(SOURCE).as_posix() not in TABLE]


def test_nothing_outside_the_table_asks_which_kind_a_project_is() -> None:
    modules = factory_modules()
    assert len(modules) > 50 and SOURCE / "verify" / "checks.py" in modules
    found = [v for path in modules for v in violations(path.relative_to(SOURCE).as_posix(), path.read_text())]
    assert found == [], "\n".join(found)


@pytest.mark.parametrize("line", [
    'if stage.project_kind != "setuptools":',
    'own_archs=stage.project_kind == "setuptools"',
    'if kind == "kernel-builder":',
    'native=kind != "setuptools",',
    'if config.kind == "native" or config.kind == "auto":',
    'if isinstance(stage, KernelBuilderStage):',
    'if not stage.native:',
    'if kernel.noarch:  # nothing to compile',
    'backends = spec.declared_backends() if spec.noarch else spec.compiled_backends()',
    'if resolve_kind(matrix.project).name == "kernel-builder-noarch":',
])
def test_the_rules_catch_the_shapes_the_table_replaced(line: str) -> None:
    assert violations("runner/session.py", line)


@pytest.mark.parametrize("line", [
    'if variant.key.backend.kind == "cuda":',  # a backend's kind, not a project's
    'if family == "setuptools":',  # the setuptools build backend, not the bring-your-own kind
    'check_wheel(wheel, package=stage.package, native=stage.kind.factory_layout)',
])
def test_the_rules_leave_other_kinds_of_kind_alone(line: str) -> None:
    assert violations("verify/checks.py", line) == []


def test_one_row_per_kind_and_one_name_each() -> None:
    names = [kind.name for kind in KINDS]
    assert sorted(names) == sorted(get_args(KindName))
    assert KINDS[-1].name == "bring-your-own"  # "auto" looks at it last: any other project is one


def test_every_kind_matrix_toml_names_has_a_row() -> None:
    for named in (*PROJECT_KINDS, *OLD_PROJECT_KINDS):
        if named != "auto":
            assert any(named in kind.named for kind in KINDS), named


def test_every_smoke_program_a_kind_asks_for_exists() -> None:
    asked = {kind.facts.smoke for kind in KINDS if kind.facts.smoke is not None}
    assert asked == set(SMOKES)
    compiled_nothing = [kind.name for kind in KINDS if kind.facts.smoke is None]
    assert compiled_nothing == ["kernel-builder-noarch"]


def test_explicit_kinds_take_their_row_even_without_their_file(tmp_path: Path) -> None:
    """A kind matrix.toml names is taken even where its file is missing: loading it says what is."""
    assert resolve_kind(ProjectConfig(tmp_path, kind="native")).name == "native"
    assert resolve_kind(ProjectConfig(tmp_path, kind="bring-your-own")).name == "bring-your-own"
    assert resolve_kind(ProjectConfig(tmp_path)).name == "bring-your-own"
