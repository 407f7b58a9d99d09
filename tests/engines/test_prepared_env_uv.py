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
from testkit import make_wheel
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
    uv_platform,
)
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


def test_gc_takes_the_unpacked_wheels_with_the_last_environment(tmp_path: Path) -> None:
    wheels = wheel_set(tmp_path)
    envs = PreparedEnvs(tmp_path / "envs")
    made = envs.ensure(request(wheels), installer(wheels, tmp_path / UNPACKED))
    assert collect_garbage(tmp_path / "envs", unused_for_s=86400) == []  # in use: nothing goes
    old = time.time() - 2 * 86400
    os.utime(made.path / COMPLETE, (old, old))
    removed = {item.path: item.bytes for item in collect_garbage(tmp_path / "envs", unused_for_s=86400)}
    assert set(removed) == {made.path, tmp_path / UNPACKED}
    assert sum(removed.values()) >= len(BIG) and not (tmp_path / UNPACKED).exists()


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
