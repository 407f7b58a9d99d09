"""Every project kind stages through one rule (support/project_copy.py): a random entry planted in
a real project of each kind (native, kernel-builder, noarch, bring-your-own, [test] sources) is
refused iff it leads outside the project or is special, and what is staged holds no byte of the
outside file."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.testkit import REPO
from wheelfactory.errors import ConfigError
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.expand import expand
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.matrix import parse_matrix
from wheelfactory.plan.project_tests import ProjectTests
from wheelfactory.plan.tomlsource import TomlDocument
from wheelfactory.project import kernel_builder
from wheelfactory.project.bring_your_own import ByoProject, plan_byo_stage
from wheelfactory.project.build_toml_reader import load_build_toml
from wheelfactory.project.kernel_toml import load_kernel
from wheelfactory.project.noarch import plan_noarch, write_noarch_wheel
from wheelfactory.project.scaffold import plan_scaffold, write_scaffold
from wheelfactory.project.native import check_inputs, plan_stage
from wheelfactory.project.wheel_checks import WheelChecks, copy_test_sources

SECRET = b"SECRET-5be1-outside-never-staged"
TABLE = load_table()
FIXTURES = REPO / "tests" / "fixtures"


def _variant(project: Path, text: str) -> Variant:
    matrix = parse_matrix(TomlDocument.from_text(f'[project]\npath = "{project}"\n{text}', "matrix.toml"), TABLE,
                          base_dir=project)
    return expand(matrix, TABLE).variants[0]


CPU_213 = '[matrix]\ntorch = ["2.13"]\nbackends = ["cpu"]\npython = ["abi3"]\n'


def _native(root: Path, dest: Path) -> None:
    kernel = load_kernel(root)
    check_inputs(kernel)
    plan_stage(kernel, _variant(root, CPU_213), table=TABLE).write(dest)


def _kernel_builder(root: Path, dest: Path) -> None:
    spec = kernel_builder.buildable(load_build_toml(root))
    kernel_builder.project_files(root)
    stage = kernel_builder.plan_kernel_builder_stage(spec, _variant(root, CPU_213.replace("2.13", "2.6")),
                                                     table=TABLE)
    stage.write(dest)


def _noarch(root: Path, dest: Path) -> None:
    spec = load_build_toml(root)
    for build in plan_noarch(spec, ["cpu"]):
        write_noarch_wheel(build, spec, dest)


def _byo(root: Path, dest: Path) -> None:
    project = ByoProject(root, "byo_ext", (), (), ())
    project.files()
    plan_byo_stage(project, _variant(root, CPU_213)).write(dest)


def _tests(root: Path, dest: Path) -> None:
    tests = ProjectTests("pytest", sources=("tests",))
    copy_test_sources(WheelChecks(root, "byo_ext", tests=tests), tests, dest)


# (what is staged, the project to copy (None: `wheelfactory new`), where entries are planted)
KINDS: dict[str, tuple[Callable[[Path, Path], None], str | None, tuple[str, ...]]] = {
    "native": (_native, None, ("csrc", "csrc/cpu", "python/demo")),
    "kernel-builder": (_kernel_builder, "kb_relu", ("relu_cpu", "torch-ext", "torch-ext/kb_relu")),
    "noarch": (_noarch, "kb_noarch", ("torch-ext/kb_noarch",)),
    "bring-your-own": (_byo, "byo_ext", ("csrc", "byo_ext", "")),
    "test-sources": (_tests, "byo_ext", ("tests",)),
}
GOOD = ("inside_link", "file")
BAD = ("outside_link", "outside_dir_link", "relative_out", "dev_zero", "fifo", "control_name")


def _plant(root: Path, secret: Path, where: str, kind: str, name: str) -> None:
    directory = root / where
    path = directory / name
    depth = len(path.relative_to(root).parts) - 1
    if kind == "file":
        path.write_text("# regular\n")
    elif kind == "inside_link":
        (root / "shared.py").write_text("# shared\n")
        path.symlink_to(Path(*[".."] * depth, "shared.py"))
    elif kind == "outside_link":
        path.symlink_to(secret)
    elif kind == "outside_dir_link":
        path.symlink_to(secret.parent, target_is_directory=True)
    elif kind == "relative_out":
        path.symlink_to(Path(*[".."] * (depth + 1), "outside", secret.name))
    elif kind == "dev_zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        (directory / f"{name}\x1b").write_text("# odd name\n")


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(sorted(KINDS)), plants=st.lists(
    st.tuples(st.integers(0, 2), st.sampled_from(GOOD + BAD), st.sampled_from(("leak.h", "leak.py", "leak.txt"))),
    min_size=1, max_size=3))
def test_every_kind_refuses_iff_an_entry_leaves_or_is_special(kind: str, plants: list[tuple[int, str, str]]) -> None:
    stage, fixture, places = KINDS[kind]
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        root = base / "project"
        if fixture is None:
            write_scaffold(plan_scaffold("demo"), root)
        else:
            shutil.copytree(FIXTURES / fixture, root, ignore=shutil.ignore_patterns("__pycache__"))
        (base / "outside").mkdir()
        secret = base / "outside" / "secret.h"
        secret.write_bytes(SECRET)
        for index, (place, what, name) in enumerate(plants):
            _plant(root, secret, places[place % len(places)], what, f"e{index}_{name}")
        bad = any(what in BAD for _, what, _ in plants)
        dest = base / "dest"
        try:
            stage(root, dest)
        except ConfigError as exc:
            assert bad, f"{kind}: refused a clean project: {exc}"
            assert "\n" not in str(exc)
        else:
            assert not bad, f"{kind}: staged a project holding {plants}"
        for path in dest.rglob("*") if dest.exists() else ():
            assert not path.is_file() or SECRET not in path.read_bytes(), path
