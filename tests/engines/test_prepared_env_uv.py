"""Prepared environments made on the host by the real uv, for a container's interpreter of another
arch: what the container's pip would have installed, from the wheel set alone, with scripts that
name the container's interpreter, each wheel unpacked once and hard-linked into every environment
that holds it, bytecode from this interpreter when it is the container's Python, and the unpacked
wheels collected with the last environment that used them."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from tests.testkit import make_wheel
from wheelfactory.engines.prepared_env import (
    COMPLETE,
    UNPACKED,
    EnvRequest,
    PreparedEnvs,
    collect_garbage,
    compile_bytecode_here,
    install_from_set,
    link_unversioned_cudart,
    point_scripts_at,
)
from wheelfactory.engines.target_resolution import uv_platform
from wheelfactory.engines.wheelhouse import ContainerPython
from wheelfactory.errors import WheelhouseError

AARCH64 = ContainerPython("3.11", "aarch64", "2.36")
HOST_VERSION = f"{sys.version_info[0]}.{sys.version_info[1]}"
INTERPRETER = "/opt/python/cp311-cp311/bin/python"
BIG = os.urandom(300_000)


def wheel_set(root: Path) -> Path:
    """An aarch64 wheel with a library, a console script, a .data script and a dependency whose own
    requirement is marked for x86_64 only (absent from the set: only the target's markers count)."""
    wheels = root / "set"
    make_wheel(wheels, "fakelib", "1.0", tag="cp311-cp311-manylinux_2_28_aarch64",
               files={"fakelib/lib/libbig.so": BIG, "fakelib/core.py": "VALUE = 42\n",
                      "fakelib-1.0.dist-info/entry_points.txt": "[console_scripts]\nfakelib-tool = fakelib.core:main\n",
                      "fakelib-1.0.data/scripts/fakelib-run": "#!python\nprint('run')\n",
                      "nvidia/cu13/lib/libcudart.so.13": b"\x7fELF not really"},
               metadata="Requires-Dist: helper>=2\n")
    make_wheel(wheels, "helper", "2.1", tag="py3-none-any", files={"helper/util.py": "def f():\n    return 1\n"},
               metadata='Requires-Dist: x86-only; platform_machine == "x86_64"\n')
    return wheels


def request(wheels: Path, role: str = "torch", requirements: tuple[str, ...] = ("fakelib==1.0",)) -> EnvRequest:
    return EnvRequest(role, "sha256:image", "cp311-cp311", requirements,  # type: ignore[arg-type]
                      tuple((p.name, "0" * 64) for p in sorted(wheels.glob("*.whl"))))


def installer(wheels: Path, unpacked: Path):  # type: ignore[no-untyped-def]
    def install(req: EnvRequest, target: Path) -> None:
        install_from_set(req, target, wheels=wheels, python=AARCH64, unpacked=unpacked)
        point_scripts_at(target, INTERPRETER)
        link_unversioned_cudart(target)
    return install


def test_an_aarch64_environment_is_made_here_with_the_containers_interpreter_in_its_scripts(tmp_path: Path) -> None:
    wheels = wheel_set(tmp_path)
    target = tmp_path / "env"
    installer(wheels, tmp_path / UNPACKED)(request(wheels), target)
    assert (target / "fakelib" / "lib" / "libbig.so").read_bytes() == BIG
    assert (target / "helper" / "util.py").is_file()  # the dependency, resolved from the set
    assert not list(target.glob("x86_only*"))  # its x86-only requirement is not the target's
    for script in ("fakelib-tool", "fakelib-run"):
        assert (target / "bin" / script).read_text().splitlines()[0] == f"#!{INTERPRETER}", script
    assert os.readlink(target / "nvidia" / "cu13" / "lib" / "libcudart.so") == "libcudart.so.13"
    # linked from the unpacked wheel, not copied
    assert (target / "fakelib" / "lib" / "libbig.so").stat().st_nlink == 2


def test_a_second_environment_links_the_same_unpacked_files(tmp_path: Path) -> None:
    wheels = wheel_set(tmp_path)
    envs = PreparedEnvs(tmp_path / "envs")
    install = installer(wheels, tmp_path / UNPACKED)
    first = envs.ensure(request(wheels), install)
    second = envs.ensure(request(wheels, role="deps", requirements=(f"/wheelhouse/{next(wheels.glob('helper-*')).name}",
                                                                     f"/wheelhouse/{next(wheels.glob('fakelib-*')).name}")),
                         install)
    lib1, lib2 = (env.path / "fakelib" / "lib" / "libbig.so" for env in (first, second))
    assert lib1.stat().st_ino == lib2.stat().st_ino
    assert first.shared_bytes < len(BIG) <= second.shared_bytes


def test_bytecode_is_compiled_here_for_this_python_and_left_to_the_image_for_another(tmp_path: Path) -> None:
    wheels = wheel_set(tmp_path)
    target = tmp_path / "env"
    installer(wheels, tmp_path / UNPACKED)(request(wheels), target)
    assert compile_bytecode_here(target, "/opt/wheelfactory/torch", HOST_VERSION)
    compiled = list((target / "fakelib" / "__pycache__").glob("core.*.pyc"))
    assert compiled and b"/opt/wheelfactory/torch/fakelib/core.py" in compiled[0].read_bytes()
    other = "3.9" if HOST_VERSION != "3.9" else "3.10"
    assert not compile_bytecode_here(target, "/opt/wheelfactory/torch", other)


def unpacked_packages(unpacked: Path) -> set[str]:
    return {info.name.partition("-")[0] for info in unpacked.glob("archive-v*/*/*.dist-info")}


def test_gc_takes_the_unpacked_wheels_with_the_last_environment(tmp_path: Path) -> None:
    wheels = wheel_set(tmp_path)
    envs = PreparedEnvs(tmp_path / "envs")
    made = envs.ensure(request(wheels), installer(wheels, tmp_path / UNPACKED))
    assert unpacked_packages(tmp_path / UNPACKED) == {"fakelib", "helper"}
    assert collect_garbage(tmp_path / "envs", unused_for_s=86400) == []  # in use: nothing goes
    old = time.time() - 2 * 86400
    os.utime(made.path / COMPLETE, (old, old))
    removed = {item.path: item.bytes for item in collect_garbage(tmp_path / "envs", unused_for_s=86400)}
    assert set(removed) == {made.path, tmp_path / UNPACKED}
    assert sum(removed.values()) >= len(BIG) and unpacked_packages(tmp_path / UNPACKED) == set()


def stored_sets(root: Path, count: int) -> tuple[Path, list[Path]]:
    """A wheelhouse's shape: the wheels once in ``store``, each set a folder of hard links to them."""
    store = wheel_set(root).rename(root / "store")
    sets = []
    for index in range(count):
        folder = root / f"set{index}"
        folder.mkdir()
        for wheel in store.glob("*.whl"):
            os.link(wheel, folder / wheel.name)
        sets.append(folder)
    return store, sets


def store_installer(store: Path, wheels: Path, unpacked: Path):  # type: ignore[no-untyped-def]
    def install(req: EnvRequest, target: Path) -> None:
        install_from_set(req, target, wheels=wheels, python=AARCH64, unpacked=unpacked, store=store)
    return install


def test_environments_of_two_sets_share_the_wheels_the_store_holds_once(tmp_path: Path) -> None:
    # Two sets (two Pythons' sets hold the same nvidia-* wheels): uv keys an unpacked wheel by the
    # folder it found it in, so each set's folder would be unpacked apart; the store is one folder.
    store, (first_set, second_set) = stored_sets(tmp_path, 2)
    envs = PreparedEnvs(tmp_path / "envs")
    first = envs.ensure(request(first_set), store_installer(store, first_set, tmp_path / UNPACKED))
    second = envs.ensure(request(second_set, role="test"), store_installer(store, second_set, tmp_path / UNPACKED))
    lib1, lib2 = (env.path / "fakelib" / "lib" / "libbig.so" for env in (first, second))
    assert lib1.stat().st_ino == lib2.stat().st_ino and second.shared_bytes >= len(BIG)
    # gc of the first keeps what the second still links: a third environment shares it too
    old = time.time() - 2 * 86400
    os.utime(first.path / COMPLETE, (old, old))
    collect_garbage(tmp_path / "envs", unused_for_s=86400)
    assert not first.path.exists() and unpacked_packages(tmp_path / UNPACKED) == {"fakelib", "helper"}
    third = envs.ensure(request(first_set, role="tools"), store_installer(store, first_set, tmp_path / UNPACKED))
    assert (third.path / "fakelib" / "lib" / "libbig.so").stat().st_ino == lib2.stat().st_ino


def test_what_the_store_holds_beyond_the_set_is_never_installed(tmp_path: Path) -> None:
    store, (wheels,) = stored_sets(tmp_path, 1)
    make_wheel(store, "helper", "2.5", tag="py3-none-any", files={"helper/util.py": "def f():\n    return 2\n"})
    target = tmp_path / "env"
    install_from_set(request(wheels), target, wheels=wheels, python=AARCH64, unpacked=tmp_path / UNPACKED, store=store)
    assert [p.name for p in target.glob("helper-*.dist-info")] == ["helper-2.1.dist-info"]  # the set's, not the newer
    # a set without what its torch requires: uv would find it in the store; the set's gap is named
    next(wheels.glob("helper-*")).unlink()
    with pytest.raises(WheelhouseError) as raised:
        install_from_set(request(wheels), tmp_path / "env2", wheels=wheels, python=AARCH64,
                         unpacked=tmp_path / UNPACKED, store=store)
    assert "helper" in str(raised.value) and "\n" not in str(raised.value)


def test_a_set_that_cannot_serve_the_request_is_one_line_naming_the_environment(tmp_path: Path) -> None:
    wheels = wheel_set(tmp_path)
    with pytest.raises(WheelhouseError) as raised:
        install_from_set(request(wheels, requirements=("fakelib==9.9",)), tmp_path / "env", wheels=wheels,
                         python=AARCH64, unpacked=tmp_path / UNPACKED)
    message = str(raised.value)
    assert "preparing the torch environment (fakelib==9.9)" in message and str(wheels) in message
    assert "\n" not in message


@pytest.mark.parametrize(("glibc", "platform"), [("2.36", "aarch64-manylinux_2_36"), ("2.41", "aarch64-manylinux_2_40"),
                                                 ("2.17", "aarch64-manylinux_2_17")])
def test_the_platform_is_the_images_glibc_capped_at_what_uv_names(glibc: str, platform: str) -> None:
    assert uv_platform(ContainerPython("3.11", "aarch64", glibc)) == platform


def test_a_glibc_no_torch_supports_is_refused() -> None:
    with pytest.raises(WheelhouseError, match="older than 2.17"):
        uv_platform(ContainerPython("3.11", "x86_64", "2.12"))


def test_gc_removes_the_unpacked_wheel_of_a_removed_environment_and_keeps_another_release_of_it(tmp_path: Path) -> None:
    # Two torches (here: two fakelib releases) in two environments; the first goes. uv's own
    # `cache clean fakelib` would drop both releases, and a later environment of the second would
    # hold a second copy of it.
    store, (wheels,) = stored_sets(tmp_path, 1)
    other = os.urandom(200_000)
    make_wheel(store, "fakelib", "2.0", tag="cp311-cp311-manylinux_2_28_aarch64", files={"fakelib/lib/libbig.so": other},
               metadata="Requires-Dist: helper>=2\n")
    os.link(next(store.glob("fakelib-2.0-*")), wheels / next(store.glob("fakelib-2.0-*")).name)
    envs = PreparedEnvs(tmp_path / "envs")
    install = store_installer(store, wheels, tmp_path / UNPACKED)
    first = envs.ensure(request(wheels), install)
    second = envs.ensure(request(wheels, requirements=("fakelib==2.0",)), install)
    old = time.time() - 2 * 86400
    os.utime(first.path / COMPLETE, (old, old))
    removed = {item.path: item.bytes for item in collect_garbage(tmp_path / "envs", unused_for_s=86400)}
    assert removed[tmp_path / UNPACKED] >= len(BIG)  # fakelib 1.0's unpacked copy went
    archives = {info.name for info in (tmp_path / UNPACKED).glob("archive-v*/*/*.dist-info")}
    assert archives == {"fakelib-2.0.dist-info", "helper-2.1.dist-info"}
    third = envs.ensure(request(wheels, role="tools", requirements=("fakelib==2.0",)), install)
    assert (third.path / "fakelib" / "lib" / "libbig.so").stat().st_ino == \
        (second.path / "fakelib" / "lib" / "libbig.so").stat().st_ino
    again = envs.ensure(request(wheels, role="test"), install)  # fakelib 1.0 is unpacked again
    assert (again.path / "fakelib" / "lib" / "libbig.so").read_bytes() == BIG
