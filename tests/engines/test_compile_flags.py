"""The compiler flags every engine adds: -g0 after Python's -g unless [build] debug_info = true.
The real builds: tests/integration/test_host_byo.py and tests/docker/test_docker_byo_shapes.py
read the DWARF sections of wheels built each way."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.testkit import REPO
from wheelfactory.engines.compile_flags import NO_DEBUG_INFO, with_compile_flags
from wheelfactory.engines.docker_run import DockerOptions, DockerRun, RunCaches
from wheelfactory.engines.wheelhouse import Wheelhouse
from wheelfactory.errors import ConfigError
from wheelfactory.images.dockerfiles import ImageRef
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.expand import expand
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.matrix import parse_matrix
from wheelfactory.plan.tomlsource import TomlDocument


def planned(text: str) -> tuple[Variant, ...]:
    table = load_table()
    matrix = parse_matrix(TomlDocument.from_text(text, "matrix.toml"), table, base_dir=REPO)
    return expand(matrix, table).variants


MATRIX = '[matrix]\ntorch = "2.13"\ncxx11_abi = true\n'
INCLUDED = '\n[[include]]\ntorch = "2.13"\nbackend = "cpu"\nenv = {CPPFLAGS = "-DFROM_INCLUDE"}\n'


def test_by_default_every_variant_compiles_without_debug_info() -> None:
    (variant,) = planned(MATRIX)
    assert variant.settings.debug_info is False and variant.as_dict()["debug_info"] is False
    assert with_compile_flags(variant, {"MAX_JOBS": "2"}) == {"MAX_JOBS": "2", "CPPFLAGS": NO_DEBUG_INFO}


def test_the_flag_goes_after_the_projects_own_cppflags() -> None:
    (variant,) = planned(MATRIX + INCLUDED)
    assert with_compile_flags(variant, {"CPPFLAGS": "-DMINE"})["CPPFLAGS"] == "-DMINE -g0"


def test_debug_info_true_leaves_the_flags_alone_and_changes_the_key() -> None:
    (variant,) = planned(MATRIX + "[build]\ndebug_info = true\n")
    (included,) = planned(MATRIX + INCLUDED + "[build]\ndebug_info = true\n")
    assert variant.settings.debug_info and included.settings.debug_info  # an [[include]] keeps the run's
    assert with_compile_flags(variant, {"CPPFLAGS": "-DMINE"}) == {"CPPFLAGS": "-DMINE"}
    # the plan (and so the build cache key, runner/run.py cache_key) tells the two apart
    assert variant.as_dict() != planned(MATRIX)[0].as_dict()


def test_a_debug_info_that_is_not_a_boolean_is_one_line_naming_the_key() -> None:
    with pytest.raises(ConfigError) as raised:
        planned(MATRIX + '[build]\ndebug_info = "yes"\n')
    assert "debug_info" in str(raised.value) and "\n" not in str(raised.value)


def test_the_docker_engine_passes_it_into_the_container(tmp_path: Path) -> None:
    (variant,) = planned(MATRIX + INCLUDED)
    engine = DockerRun(None, Wheelhouse(tmp_path / "wh"),  # type: ignore[arg-type]
                       DockerOptions(base_images={"x86_64": "base"}, image_log=tmp_path / "images.log", owner="0"),
                       RunCaches())
    env = engine.cibuildwheel.settings(variant, ImageRef("wheelfactory/build:0", "sha256:feed", built=False),
                                   "cp311-cp311", tmp_path / "set", {})
    assert "CPPFLAGS='-DFROM_INCLUDE -g0'" in env["CIBW_ENVIRONMENT"].split(" PATH=")[0]
