"""The Docker engine's cibuildwheel settings and run bookkeeping, computed without an engine."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.testkit import REPO
from wheelfactory.engines.choose import owner_of
from wheelfactory.engines.compile_cache import SHIMS, read_stats, wiring
from wheelfactory.engines.docker import DockerEngine
from wheelfactory.engines.docker_run import DockerOptions, DockerRun, RunCaches
from wheelfactory.engines.image_facts import ImageFacts
from wheelfactory.engines.prepared_env import PreparedEnv
from wheelfactory.engines.wheelhouse import Wheelhouse
from wheelfactory.images.dockerfiles import ImageRef
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.compile_cache_settings import CompileCache, parse_redis
from wheelfactory.plan.expand import expand
from wheelfactory.plan.identity import Variant
from wheelfactory.plan.matrix import parse_matrix
from wheelfactory.plan.tomlsource import TomlDocument

IMAGE = ImageRef("wheelfactory/build:0123456789ab", "sha256:feed", built=False)


@pytest.fixture(scope="module")
def variant() -> Variant:
    table = load_table()
    matrix = parse_matrix(TomlDocument.from_text('[matrix]\ntorch = "2.13"\ncxx11_abi = true\n', "m.toml"), table,
                          base_dir=REPO)
    (only,) = expand(matrix, table).variants
    return only


def engine(tmp_path: Path, client: object = None, **kw: object) -> DockerRun:
    return DockerRun(client, Wheelhouse(tmp_path / "wh"),  # type: ignore[arg-type]
                     DockerOptions(base_images={"x86_64": "base"}, image_log=tmp_path / "images.log",
                                   owner="0123abcd", **kw), RunCaches())


def test_containers_are_offline_and_labelled_with_the_run_owner(tmp_path: Path, variant: Variant) -> None:
    env = engine(tmp_path).cibuildwheel.settings(variant, IMAGE, "cp311-cp311", tmp_path / "set", {})
    create = env["CIBW_CONTAINER_ENGINE"]
    assert create.startswith("docker; create_args: --network none ")
    assert f"-v {tmp_path / 'set'}:/wheelhouse:ro" in create and "--label wheelfactory.owner=0123abcd" in create
    assert "CCACHE" not in env["CIBW_ENVIRONMENT"] and SHIMS not in env["CIBW_BEFORE_BUILD"]
    assert "sccache" not in env["CIBW_BEFORE_BUILD"] and "pip install" not in env["CIBW_BEFORE_BUILD"]
    assert env["CIBW_REPAIR_WHEEL_COMMAND"].split("; ")[-1].startswith("auditwheel repair")
    assert env["CIBW_MANYLINUX_X86_64_IMAGE"] == "sha256:feed" and env["CIBW_BUILD"] == "cp311-manylinux_x86_64"


def test_prepared_environments_are_mounted_read_only_on_pythonpath_with_tools_first(tmp_path: Path,
                                                                                 variant: Variant) -> None:
    envs = (PreparedEnv(tmp_path / "tools-1", "/opt/wheelfactory/tools", "tools-1", False),
            PreparedEnv(tmp_path / "torch-1", "/opt/wheelfactory/torch", "torch-1", False))
    env = engine(tmp_path).cibuildwheel.settings(variant, IMAGE, "cp311-cp311", tmp_path / "set", {}, envs=envs)
    create = env["CIBW_CONTAINER_ENGINE"]
    assert f"-v {tmp_path / 'tools-1'}:/opt/wheelfactory/tools:ro" in create
    assert f"-v {tmp_path / 'torch-1'}:/opt/wheelfactory/torch:ro" in create
    assert "PYTHONPATH=/opt/wheelfactory/tools:/opt/wheelfactory/torch" in env["CIBW_ENVIRONMENT"]
    # cibuildwheel's own interpreter stays first among pythons: the environments add no python
    assert env["CIBW_ENVIRONMENT"].endswith('PATH="/opt/wheelfactory/tools/bin:/opt/wheelfactory/torch/bin:$PATH"')
    # no install in the container: only the marker where the compile starts
    assert env["CIBW_BEFORE_BUILD"] == 'echo "wheelfactory-phase compile $(date +%s.%N)"'


def test_ccache_is_mounted_and_masquerades_as_the_compilers(tmp_path: Path, variant: Variant) -> None:
    cache = CompileCache("ccache", tmp_path / "ccache")
    wired = wiring(cache, variant.id, stats_dir=tmp_path / "stats", relay_dir=None)
    env = engine(tmp_path, compile_cache=cache).cibuildwheel.settings(variant, IMAGE, "cp311-cp311", tmp_path, {}, wired)
    assert f"-v {tmp_path / 'ccache'}:/wf-cache/store" in env["CIBW_CONTAINER_ENGINE"]
    assert f"-v {tmp_path / 'stats'}:/wf-cache/stats" in env["CIBW_CONTAINER_ENGINE"]
    assert "CCACHE_DIR=/wf-cache/store" in env["CIBW_ENVIRONMENT"]
    assert f"CCACHE_STATSLOG=/wf-cache/stats/{variant.id}.log" in env["CIBW_ENVIRONMENT"]
    assert env["CIBW_ENVIRONMENT"].endswith(f'PATH="{SHIMS}:$PATH"')  # expanded by cibuildwheel
    assert env["CIBW_BEFORE_BUILD"].startswith("sh /wf-cache/stats/cache-setup.sh && ")
    assert 'names="cc c++ gcc g++"' in wired.setup and "ln -sf \"$C\"" in wired.setup
    assert "sccache" not in wired.setup


def test_sccache_comes_from_the_wheelhouse_and_fronts_the_compilers_and_nvcc(tmp_path: Path, variant: Variant) -> None:
    cache = CompileCache("sccache", tmp_path / "sccache")
    wired = wiring(cache, variant.id, stats_dir=tmp_path / "stats", relay_dir=None)
    env = engine(tmp_path, compile_cache=cache).cibuildwheel.settings(variant, IMAGE, "cp311-cp311", tmp_path, {}, wired)
    assert env["CIBW_BEFORE_BUILD"].startswith("sh /wf-cache/stats/cache-setup.sh && ")
    setup = wired.setup
    assert setup.index("command -v sccache") < setup.index("--start-server")  # sccache from the tools env
    assert f"-v {tmp_path / 'sccache'}:/wf-cache/store" in env["CIBW_CONTAINER_ENGINE"]
    for setting in ("SCCACHE_DIR=/wf-cache/store", "TORCH_NO_COMPILER_WRAPPER=1", "SCCACHE_IDLE_TIMEOUT=0"):
        assert setting in env["CIBW_ENVIRONMENT"]
    assert f"PYTORCH_NVCC='{SHIMS}/sccache nvcc'" in env["CIBW_ENVIRONMENT"]
    assert 'names="cc c++ gcc g++"' in setup  # a CPU variant: every compiler name is fronted
    cuda = wiring(cache, variant.id, stats_dir=tmp_path / "stats", relay_dir=None, nvcc=True)
    assert 'names="cc c++"' in cuda.setup and 'case " gcc g++ " in' in cuda.setup  # nvcc's host compiler stays real
    repair = env["CIBW_REPAIR_WHEEL_COMMAND"]
    assert repair.index("--show-stats") < repair.index("--stop-server") < repair.index("auditwheel repair")
    assert f"> /wf-cache/stats/{variant.id}.json" in repair


def test_sccache_on_redis_goes_through_the_relay_socket(tmp_path: Path, variant: Variant) -> None:
    cache = CompileCache("sccache", tmp_path / "unused", parse_redis("redis://127.0.0.1:6390/2"))
    wired = wiring(cache, variant.id, stats_dir=tmp_path / "stats", relay_dir=tmp_path / "relay")
    assert (tmp_path / "relay", "/wf-cache/redis") in wired.mounts
    assert all(host != tmp_path / "unused" for host, _ in wired.mounts)  # no local store
    assert wired.env["SCCACHE_REDIS_ENDPOINT"] == "redis://127.0.0.1:6379"  # the in-container half of the relay
    assert "/wf-cache/redis/socketpipe.py --listen tcp:127.0.0.1:6379 --to unix:/wf-cache/redis/redis.sock" \
        in wired.setup
    env = engine(tmp_path, compile_cache=cache).cibuildwheel.settings(variant, IMAGE, "cp311-cp311", tmp_path, {}, wired)
    assert env["CIBW_CONTAINER_ENGINE"].startswith("docker; create_args: --network none ")  # still offline


def test_cache_statistics(tmp_path: Path) -> None:
    log = tmp_path / "stats.log"
    log.write_text("# /project/a.cpp\ndirect_cache_hit\n# /project/b.cpp\npreprocessed_cache_hit\n"
                   "# /project/c.cpp\ncache_miss\n")
    found = read_stats("ccache", log)
    assert found is not None and found.describe() == "2 hits, 1 miss (hit rate 67%)"
    assert read_stats("ccache", tmp_path / "absent.log") is None
    sccache = tmp_path / "s.json"
    sccache.write_text('{"stats": {"cache_hits": {"counts": {"C/C++": 9, "CUDA": 2}}, '
                       '"cache_misses": {"counts": {"CUDA": 1}}, "cache_errors": {"counts": {}}}}')
    found = read_stats("sccache", sccache)
    assert found is not None and (found.hits, found.misses, found.hit_rate) == (11, 1, 11 / 12)
    assert found.describe() == "11 hits, 1 miss (hit rate 92%); C/C++ 9/9, CUDA 2/3"
    sccache.write_text("not json")
    assert read_stats("sccache", sccache) is None


@pytest.mark.parametrize(("url", "expected"), [
    ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"), ("redis://cache.internal", "redis://cache.internal:6379/0"),
    ("tcp://10.0.0.5:7000/3", "redis://10.0.0.5:7000/3"), ("unix:///run/redis/redis.sock", "unix:///run/redis/redis.sock"),
    ("redis://:secret@host:6379", None), ("http://host", None), ("unix://relative", None)])
def test_redis_urls(url: str, expected: str | None) -> None:
    parsed = parse_redis(url)
    assert (str(parsed) if parsed else None) == expected


def test_python_for_abi3_takes_the_newest_python_torch_supports(variant: Variant) -> None:
    facts = ImageFacts("2.36", ("cp311-cp311", "cp39-cp39"), None)
    assert facts.python_for(variant, ("3.10", "3.11", "3.12")) == ("3.11", "cp311-cp311")


def test_owner_is_per_output_directory(tmp_path: Path) -> None:
    assert owner_of(tmp_path / "a") == owner_of(tmp_path / "x" / ".." / "a") != owner_of(tmp_path / "b")


class ListingApi:
    """The engine's low-level API as reclaim sees it: one container ends (--rm) between the
    listing and the removal."""

    def __init__(self) -> None:
        self.listed = [{"Id": "a1", "Names": ["/cibuildwheel-left"]}, {"Id": "b2", "Names": ["/ended-meanwhile"]},
                       {"Id": "c3", "Names": ["/being-removed"]}]
        self.removed: list[str] = []
        self.filters: object = None

    def containers(self, all: bool, filters: dict[str, str]) -> list[dict[str, object]]:
        assert all
        self.filters = filters
        return self.listed

    def remove_container(self, container_id: str, force: bool) -> None:
        import docker.errors

        if container_id == "b2":
            raise docker.errors.NotFound("No such container: b2")
        if container_id == "c3":  # its --rm (or the cancel's other sweep) got there first: what the CI machine saw
            response = type("Response", (), {"status_code": 409, "reason": "Conflict"})()
            raise docker.errors.APIError("removal of container c3 is already in progress", response=response)
        self.removed.append(container_id)


def test_reclaim_removes_the_owners_containers_and_tolerates_one_that_ended_meanwhile(tmp_path: Path) -> None:
    """One ended before its removal (404), one whose removal was already under way (409)."""
    api = ListingApi()
    eng = DockerEngine(engine(tmp_path, client=type("Client", (), {"api": api})()))  # the client is handed in, not patched
    assert eng.reclaim() == ["cibuildwheel-left"]
    assert api.removed == ["a1"]
    assert api.filters == {"label": "wheelfactory.owner=0123abcd"}


def test_a_cuda_variant_sees_its_toolkit_from_the_first_build_hook(tmp_path: Path, variant: Variant) -> None:
    """CUDA_HOME, CUDACXX and nvcc on PATH for every project kind: a bring-your-own setup.py that
    calls CUDAExtension reads CUDA_HOME while `build` asks it for its build requirements."""
    from wheelfactory.engines.image_facts import cuda_home

    table = load_table()
    matrix = parse_matrix(TomlDocument.from_text('[matrix]\ntorch = "2.15"\nbackends = ["cu132"]\n', "m.toml"), table,
                          base_dir=REPO)
    (cuda,) = expand(matrix, table).variants
    torch_env = PreparedEnv(tmp_path / "torch-1", "/opt/wheelfactory/torch", "torch-1", False)
    facts = ImageFacts("2.36", ("cp311-cp311",))
    home = cuda_home(cuda, facts, torch_env)
    assert home == f"/opt/wheelfactory/torch/nvidia/{cuda.toolkit_wheels_home}"
    env = engine(tmp_path).cibuildwheel.settings(cuda, IMAGE, "cp311-cp311", tmp_path / "set", {}, envs=(torch_env,),
                                             cuda_home=home)["CIBW_ENVIRONMENT"]
    assert f"CUDA_HOME={home}" in env and f"CUDACXX={home}/bin/nvcc" in env and f"{home}/bin:$PATH" in env
    # a toolkit in the image (CUDA 12 on a Debian or NVIDIA base) when there are no toolkit wheels
    no_wheels = Variant(**{**cuda.__dict__, "toolkit_wheels": (), "toolkit_wheels_home": ""})
    assert cuda_home(no_wheels, ImageFacts("2.41", ("cp313-cp313",), nvcc="/usr/bin/nvcc"), torch_env) == "/usr"
    assert cuda_home(no_wheels, facts, torch_env) is None
    assert cuda_home(variant, facts, torch_env) is None  # the CPU variant


def test_the_project_build_system_comes_first_on_pythonpath(tmp_path: Path, variant: Variant) -> None:
    envs = tuple(PreparedEnv(tmp_path / f"{role}-1", f"/opt/wheelfactory/{role}", f"{role}-1", False)
                 for role in ("build", "tools", "torch"))
    env = engine(tmp_path).cibuildwheel.settings(variant, IMAGE, "cp311-cp311", tmp_path / "set", {}, envs=envs)
    assert "PYTHONPATH=/opt/wheelfactory/build:/opt/wheelfactory/tools:/opt/wheelfactory/torch" in env["CIBW_ENVIRONMENT"]


def test_a_build_requirement_no_wheel_serves_fails_the_variant_naming_it(tmp_path: Path, variant: Variant,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The project's build system is downloaded with the variant's torch as a constraint; when the
    host's index has no wheel for a requirement, the variant fails before anything else, saying
    which file declared it and what pip could not find."""
    from wheelfactory.engines.docker_steps import build_system_set
    from wheelfactory.engines.wheelhouse import ContainerPython, WheelhouseRequest
    from wheelfactory.errors import DockerBuildError, WheelhouseError
    from wheelfactory.project.bring_your_own import ByoProject, ByoStage
    from wheelfactory.project.build_system import BuildSystem

    asked: list[WheelhouseRequest] = []

    def ensure(request: WheelhouseRequest, **_: object) -> object:
        asked.append(request)
        raise WheelhouseError("downloading scikit-build-core>=99 from the host's pip index failed: "
                              "ERROR: No matching distribution found for scikit-build-core>=99")

    built = engine(tmp_path)
    monkeypatch.setattr(built.wheelhouse, "ensure", ensure)
    system = BuildSystem(("scikit-build-core>=99", "torch"), "scikit_build_core.build", "p/pyproject.toml [build-system]",
                         dynamic_requires=("cmake>=3.15", "ninja>=1.5"))
    stage = ByoStage(ByoProject(tmp_path, "mylib", (), (), (), system), variant)
    with pytest.raises(DockerBuildError) as info:
        build_system_set(built, stage, ContainerPython("3.11"), tmp_path / "log")
    message = str(info.value)
    assert "p/pyproject.toml [build-system]" in message and "No matching distribution found for scikit-build-core>=99" in message
    (request,) = asked
    assert request.requirements == ("scikit-build-core>=99", "cmake>=3.15", "ninja>=1.5")
    assert request.constraints == (variant.torch_requirement,)  # a dependency on torch gets the variant's


def test_an_image_whose_code_is_another_arch_than_the_variants_fails_before_anything_builds(
        tmp_path: Path, variant: Variant, monkeypatch: pytest.MonkeyPatch) -> None:
    """An x86-64 image named in [build] base_image for aarch64 would make an aarch64-named wheel of
    x86-64 code: the image's own platform.machine() (the engine's probe) is checked first."""
    from dataclasses import replace

    from wheelfactory.engines import docker
    from wheelfactory.errors import DockerBuildError
    from wheelfactory.support.timeline import Timeline

    aarch64 = replace(variant, key=replace(variant.key, arch="aarch64"))
    eng = DockerEngine(engine(tmp_path))
    monkeypatch.setattr(docker, "image_for", lambda run, v: IMAGE)
    monkeypatch.setattr(docker, "image_facts", lambda run, image: ImageFacts("2.36", ("cp311-cp311",), machine="x86_64"))
    stage = type("Stage", (), {"variant": aarch64})()
    with pytest.raises(DockerBuildError, match="the build image wheelfactory/build:0123456789ab runs as x86_64, not "
                                               "aarch64: name an aarch64 image for it in \\[build\\] base_image"):
        eng.build(stage, tmp_path / "work", tmp_path / "build.log", Timeline(tmp_path / "build.log"))  # type: ignore[arg-type]
    assert not (tmp_path / "work").exists()


def test_an_emulated_arch_compiles_with_the_images_cross_compilers_when_they_run_here(
        tmp_path: Path, variant: Variant) -> None:
    """Compiling under QEMU is ~10x slower than native: an aarch64 variant on an x86-64 machine
    compiles with the image's x86-64-hosted cross compilers, put after the compile cache's shims
    (which resolve through PATH to them) and before everything else; a native variant, or an image
    whose cross compilers run on another machine, compiles with the image's own."""
    from dataclasses import replace

    from wheelfactory.engines.image_facts import compile_note, cross_compilers

    aarch64 = replace(variant, key=replace(variant.key, arch="aarch64"))
    crossed = ImageFacts("2.36", ("cp311-cp311",), machine="aarch64", cross_runs_on="x86_64")
    assert cross_compilers(aarch64, crossed, "x86_64") == "/opt/wheelfactory/cross/bin"
    assert cross_compilers(aarch64, crossed, "aarch64") is None  # an arm64 machine: its own compilers
    assert cross_compilers(aarch64, replace(crossed, cross_runs_on=""), "x86_64") is None  # e.g. manylinux_2_28_aarch64
    assert cross_compilers(variant, replace(crossed, machine="x86_64"), "x86_64") is None
    assert "cross compilers" in compile_note(aarch64, crossed, "x86_64")
    assert "under emulation (~10x slower" in compile_note(aarch64, replace(crossed, cross_runs_on=""), "x86_64")
    assert compile_note(variant, crossed, "x86_64") == ""

    cache = CompileCache("ccache", tmp_path / "ccache")
    wired = wiring(cache, aarch64.id, stats_dir=tmp_path / "stats", relay_dir=None)
    env = engine(tmp_path, compile_cache=cache).cibuildwheel.settings(
        aarch64, IMAGE, "cp311-cp311", tmp_path, {}, wired, cross_bin=cross_compilers(aarch64, crossed, "x86_64"))
    assert env["CIBW_ENVIRONMENT"].endswith(f'PATH="{SHIMS}:/opt/wheelfactory/cross/bin:$PATH"')
    assert env["CIBW_BUILD"] == "cp311-manylinux_aarch64"
