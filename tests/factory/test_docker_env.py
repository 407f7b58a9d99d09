"""The Docker engine's cibuildwheel settings and run bookkeeping, computed without an engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from factory.compat import load_table
from factory.engines.choose import owner_of
from factory.engines.docker import CCACHE_SHIMS, DockerEngine, ImageFacts, ccache_summary
from factory.images import ImageRef
from factory.matrix import parse_matrix
from factory.plan import expand
from factory.tomlsource import TomlDocument
from factory.variant import Variant
from factory.wheelhouse import Wheelhouse

REPO = Path(__file__).resolve().parents[2]
IMAGE = ImageRef("wheelfactory/build:0123456789ab", "sha256:feed", built=False)


@pytest.fixture(scope="module")
def variant() -> Variant:
    table = load_table()
    matrix = parse_matrix(TomlDocument.from_text('[matrix]\ntorch = "2.13"\ncxx11_abi = true\n', "m.toml"), table,
                          base_dir=REPO)
    (only,) = expand(matrix, table).variants
    return only


def engine(tmp_path: Path, **kw: object) -> DockerEngine:
    return DockerEngine(None, {"x86_64": "base"}, Wheelhouse(tmp_path / "wh"), tmp_path / "images.log",
                        owner="0123abcd", **kw)  # type: ignore[arg-type]


def test_containers_are_offline_and_labelled_with_the_run_owner(tmp_path: Path, variant: Variant) -> None:
    env = engine(tmp_path)._cibuildwheel_env(variant, IMAGE, "cp311-cp311", tmp_path / "set", {})
    create = env["CIBW_CONTAINER_ENGINE"]
    assert create.startswith("docker; create_args: --network none ")
    assert f"-v {tmp_path / 'set'}:/wheelhouse:ro" in create and "--label wheelfactory.owner=0123abcd" in create
    assert "CCACHE" not in env["CIBW_ENVIRONMENT"] and CCACHE_SHIMS not in env["CIBW_BEFORE_BUILD"]
    assert env["CIBW_MANYLINUX_X86_64_IMAGE"] == "sha256:feed" and env["CIBW_BUILD"] == "cp311-manylinux_x86_64"


def test_compile_cache_is_mounted_and_masquerades_as_the_compilers(tmp_path: Path, variant: Variant) -> None:
    cache = tmp_path / "ccache"
    env = engine(tmp_path, compile_cache=cache)._cibuildwheel_env(variant, IMAGE, "cp311-cp311", tmp_path, {},
                                                                   cache)
    assert f"-v {cache}:/ccache" in env["CIBW_CONTAINER_ENGINE"]
    assert "CCACHE_DIR=/ccache" in env["CIBW_ENVIRONMENT"]
    assert f"CCACHE_STATSLOG=/ccache/stats/{variant.id}.log" in env["CIBW_ENVIRONMENT"]
    assert env["CIBW_ENVIRONMENT"].endswith(f'PATH="{CCACHE_SHIMS}:$PATH"')  # expanded by cibuildwheel
    assert env["CIBW_BEFORE_BUILD"].startswith(f"mkdir -p {CCACHE_SHIMS} && for c in cc c++ gcc g++;")


def test_ccache_summary_counts_results(tmp_path: Path) -> None:
    log = tmp_path / "stats.log"
    log.write_text("# /project/a.cpp\ndirect_cache_hit\n# /project/b.cpp\npreprocessed_cache_hit\n"
                   "# /project/c.cpp\ncache_miss\n")
    assert ccache_summary(log) == "2 hits, 1 miss"
    assert ccache_summary(tmp_path / "absent.log").startswith("no statistics")


def test_python_for_abi3_takes_the_newest_python_torch_supports(variant: Variant) -> None:
    facts = ImageFacts("2.36", ("cp311-cp311", "cp39-cp39"), None)
    assert facts.python_for(variant, ("3.10", "3.11", "3.12")) == ("3.11", "cp311-cp311")


def test_owner_is_per_output_directory(tmp_path: Path) -> None:
    assert owner_of(tmp_path / "a") == owner_of(tmp_path / "x" / ".." / "a") != owner_of(tmp_path / "b")
