"""The switches a bring-your-own build gets: GPU variants turn on what projects that build their GPU
code only with a GPU present read (build machines have none); [project] env and cuda_env win."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.testkit import REPO
from wheelfactory.engines.docker_run import DockerOptions, DockerRun, RunCaches
from wheelfactory.engines.wheelhouse import Wheelhouse
from wheelfactory.images.dockerfiles import ImageRef
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.expand import expand
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.matrix import parse_matrix
from wheelfactory.plan.tomlsource import TomlDocument
from wheelfactory.project.bring_your_own import ByoProject, ByoStage

Env = tuple[tuple[str, str], ...]


def variant(backend: str) -> Variant:
    table = load_table()
    text = f'[matrix]\ntorch = ["2.6"]\nbackends = ["{backend}"]\ncxx11_abi = false\npython = ["3.11"]\n'
    return expand(parse_matrix(TomlDocument.from_text(text, "m.toml"), table, base_dir=REPO), table).variants[0]


def stage(backend: str, env: Env = (), cpu_env: Env = (), cuda_env: Env = ()) -> ByoStage:
    return ByoStage(ByoProject(Path("/nowhere"), "multi_ext", env, cpu_env, cuda_env), variant(backend))


@pytest.mark.parametrize("backend, switches", [
    ("cu124", {"FORCE_CUDA": "1", "WITH_CUDA": "1", "USE_CUDA": "1"}),
    ("rocm6.2.4", {"FORCE_CUDA": "1", "WITH_CUDA": "1", "USE_ROCM": "1"}),
])
def test_gpu_variants_get_the_usual_switches(backend: str, switches: dict[str, str]) -> None:
    assert stage(backend).build_env() == switches


def test_cpu_variants_get_none() -> None:
    """Not even "0": a project that tests only whether FORCE_CUDA is set would read it as on."""
    assert stage("cpu").build_env() == {}
    assert stage("cpu", cpu_env=(("FORCE_CUDA", "0"),)).build_env() == {"FORCE_CUDA": "0"}


def test_env_and_cuda_env_override_the_switches() -> None:
    env = stage("cu124", env=(("WITH_CUDA", "0"), ("MY_FLAG", "x")), cuda_env=(("FORCE_CUDA", "0"),)).build_env()
    assert env == {"FORCE_CUDA": "0", "WITH_CUDA": "0", "USE_CUDA": "1", "MY_FLAG": "x"}
    both = stage("cu124", env=(("FORCE_CUDA", "2"),), cuda_env=(("FORCE_CUDA", "3"),)).build_env()
    assert both["FORCE_CUDA"] == "3"  # cuda_env is the more specific


def test_the_switches_reach_the_docker_build_and_change_the_key() -> None:
    cuda = stage("cu124")
    engine = DockerRun(None, Wheelhouse(REPO / "nowhere"),  # type: ignore[arg-type]
                       DockerOptions(base_images={"x86_64": "base"}, image_log=REPO / "nowhere.log"), RunCaches())
    env = engine.cibuildwheel.settings(cuda.variant, ImageRef("t", "sha256:x", False), "cp311-cp311", REPO,
                                   cuda.build_env())
    for switch in ("FORCE_CUDA=1", "WITH_CUDA=1", "USE_CUDA=1"):
        assert switch in env["CIBW_ENVIRONMENT"].split()
    assert stage("cu124", cuda_env=(("FORCE_CUDA", "0"),)).key_material() != cuda.key_material()
