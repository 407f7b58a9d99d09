"""cuobjdump's view of a CUDA library vs the arch list (parsing and comparison; the real tool runs
on a real wheel in tests/docker/test_docker_cuda.py)."""

from __future__ import annotations

import pytest
from tests.testkit import REPO
from wheelfactory.engines.docker_run import DockerOptions, DockerRun, RunCaches
from wheelfactory.engines.wheelhouse import Wheelhouse
from wheelfactory.images.dockerfiles import ImageRef
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.expand import expand
from wheelfactory.plan.matrix import parse_matrix
from wheelfactory.plan.tomlsource import TomlDocument
from wheelfactory.verify import cuda_binary as cudacheck


def test_expected_contents_of_an_arch_list() -> None:
    wanted = cudacheck.expected(("8.0", "9.0a", "12.0+PTX"))
    assert wanted.sass == {"80", "90a", "120"} and wanted.ptx == {"120"}
    assert wanted.describe() == "sm_80, sm_90a, sm_120 + PTX compute_120"


@pytest.mark.parametrize("sass, ptx, words", [
    ({"80", "120"}, {"120"}, None),
    ({"80"}, {"120"}, "asks for ['80', '120']"),
    ({"80", "90", "120"}, {"120"}, "holds SASS for ['80', '90', '120']"),
    ({"80", "120"}, set(), "PTX for ['120'] is missing"),
])
def test_problems(sass: set[str], ptx: set[str], words: str | None) -> None:
    found = cudacheck.CudaContents(frozenset(sass), frozenset(ptx))
    problems = cudacheck.problems(found, cudacheck.expected(("8.0", "12.0+PTX")))
    assert (not problems) if words is None else any(words in p for p in problems), problems


def test_cuda13_variants_get_nvcc_from_wheels_and_cuda12_ones_need_an_image() -> None:
    table = load_table()
    text = '[matrix]\ntorch = ["2.6", "2.14"]\nbackends = ["cu124", "cu130"]\ncxx11_abi = "both"\n'
    plan = expand(parse_matrix(TomlDocument.from_text(text, "m.toml"), table, base_dir=REPO), table)
    by_id = {v.id: v for v in plan.variants}
    cu130 = by_id["torch214-cxx11-cu130-x86_64-linux"]
    assert "nvidia-cuda-nvcc==13.0.*" in cu130.toolkit_wheels and cu130.toolkit_wheels_home == "cu13"
    assert by_id["torch26-cxx98-cu124-x86_64-linux"].toolkit_wheels == ()
    engine = DockerRun(None, Wheelhouse(REPO / "nowhere"),  # type: ignore[arg-type]
                       DockerOptions(base_images={"x86_64": "base"}, image_log=REPO / "nowhere.log"), RunCaches())
    env = engine.cibuildwheel.settings(cu130, ImageRef("t", "sha256:x", False), "cp311-cp311", REPO, {})
    torch_env, tools_env = engine.environments.requests(cu130, "sha256:x", "cp311-cp311", ())
    assert "nvidia-cuda-nvcc==13.0.*" in torch_env.requirements  # beside torch's own nvidia-* wheels
    assert not any(r.startswith("nvidia") for r in tools_env.requirements)
    assert "TORCH_CUDA_ARCH_LIST=" in env["CIBW_ENVIRONMENT"]


def test_a_listing_back_into_the_arch_list_that_asks_for_it() -> None:
    from wheelfactory.verify.cuda_binary import CudaContents, expected

    for arch_list in ("8.0;9.0", "8.0;9.0a;12.0+PTX", "7.5;10.0+PTX"):
        assert expected(tuple(arch_list.split(";"))).arch_list() == arch_list
    assert CudaContents(frozenset({"86"}), frozenset({"90"})).arch_list() == "8.6;9.0+PTX"
