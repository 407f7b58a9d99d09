"""The Docker tier's fixtures and hooks (a pytest plugin, loaded by tests/conftest.py): a real
engine (start one with .ci/start-docker), for any module marked ``docker``, whatever its folder.

Where CI=true (or WHEELFACTORY_REQUIRE_DOCKER=1, which .ci/run exports) a missing engine FAILS
the tests that need it: CI never skips Docker silently. Elsewhere they skip, saying why.

The bookworm base image is made once (debootstrap, import, apt layer: 1-2 min) and then reused
across runs: its tag is its content hash. Logs go under WHEELFACTORY_TEST_CACHE (.cache/tests).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from wheelfactory.errors import DockerUnavailable
from wheelfactory.images.base_image import BaseImage, BaseImageSpec, ensure_base_image, parse_suite
from wheelfactory.plan.indexes import debian_mirror

from tests.docker.docker_helpers import LEAN, REQUIRED, free_torches, free_venvs
from tests.testkit import TEST_CACHE

CACHE = TEST_CACHE


def _uses_venvs(item: pytest.Item | None) -> bool:
    """A module that installs into the torch venvs of docker_helpers.pristine_venv (torch 2.6's is
    a 5 GB CUDA build, ~80 s to make; torch 2.13's ~35 s) says so: ``TORCH_VENVS = True``."""
    return bool(getattr(getattr(item, "module", None), "TORCH_VENVS", False))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The venv modules run one after the other (from where the first would run), so that a LEAN
    run makes the venvs once and frees them once, after the last."""
    users = [item for item in items if _uses_venvs(item)]
    if users:
        first = items.index(users[0])
        others = [item for item in items if not _uses_venvs(item)]
        items[:] = others[:first] + users + others[first:]


@pytest.fixture(scope="module", autouse=True)
def lean_wheelhouse(request: pytest.FixtureRequest) -> Iterator[None]:
    """LEAN (CI): the torches no later module needs (a module's ``MODULE_TORCHES``, (torch,
    Python) pairs: the last module of its lane that builds with them) leave the wheelhouse with it.
    A CUDA torch is ~3 GB of wheels and ~5 GB installed; kept, every module's added up past the disk
    a CI machine has. Never one the other lane builds with: it may be building with it right now."""
    yield
    own = getattr(request.module, "MODULE_TORCHES", frozenset())
    if LEAN and own:
        for path in free_torches(CACHE / "wheelhouse", own):
            print(f"lean: removed {path}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """LEAN (CI): after the venv modules' last test their venvs go (they are in two folders, so no
    package scope holds them: a hook on the item that leaves them)."""
    result = yield
    if LEAN and _uses_venvs(item) and not _uses_venvs(nextitem):
        free_venvs()
    return result


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    from wheelfactory.images.containers import docker_client as connect

    try:
        client = connect()
    except DockerUnavailable as exc:
        reason = str(exc)
    else:
        yield client
        client.close()
        return
    if REQUIRED:
        pytest.fail(f"the Docker tier must run in CI: {reason}", pytrace=False)
    pytest.skip(f"Docker tier skipped: {reason}")


@pytest.fixture(scope="session")
def bookworm_base(docker_client: docker.DockerClient) -> BaseImage:
    """wheelfactory/base:bookworm-<hash>, made on the first run, reused after."""
    spec = BaseImageSpec(parse_suite("bookworm"), debian_mirror(None))  # the host's apt mirror
    return ensure_base_image(docker_client, spec, cache_dir=CACHE / "docker")


@pytest.fixture(scope="session")
def offline_build_tables(bookworm_base: BaseImage) -> str:
    """The part of a test matrix.toml that makes a docker build work on our machines: torch 2.6
    without the cxx11 ABI (PyTorch's cxx11 CPU index is unreachable) and torch from PyPI (the
    PyTorch index is unreachable; PyPI's 2.6.0 is the pre-cxx11 build), the offline base image
    and the tests' shared wheelhouse."""
    return f"""
[[exclude]]
torch = "2.6"
cxx11_abi = true

[build]
engine = "docker"
base_image = "{bookworm_base.tag}"
torch_index = "pypi"
wheelhouse = "{CACHE / 'wheelhouse'}"
compile_cache_dir = "{CACHE / 'sccache'}"
"""


@pytest.fixture(scope="session")
def docker_build(offline_build_tables: str) -> Path:
    """The sample kernels for torch 2.6 (pre-cxx11) and 2.13 (cxx11) built in Docker (SAMPLE).
    Persistent: a rerun with nothing changed finds everything cached (CI starts empty)."""
    from tests.docker.docker_helpers import SAMPLE, make_shared

    return make_shared(SAMPLE, offline_build_tables)
