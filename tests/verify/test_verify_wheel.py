"""check_wheel on real ELF libraries compiled here: glibc floor and op namespace checks."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.version import Version
from tests.testkit import REPO, make_wheel
from wheelfactory.verify.repair import check_wheel, required_glibc, tag_glibc

NAMESPACE = "_tiny_cpu_0123abcd"
pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")


def compile_library(tmp_path: Path, body: str) -> bytes:
    source = tmp_path / "lib.c"
    source.write_text(body)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(tmp_path / "lib.so"), str(source)], check=True)
    return (tmp_path / "lib.so").read_bytes()


# getrandom() arrived in glibc 2.25: a library calling it needs GLIBC_2.25.
NEEDS_2_25 = f"""#include <sys/random.h>
const char *ns = "{NAMESPACE}";
int draw(void) {{ char b; return (int)getrandom(&b, 1, 0); }}
"""


def tiny_wheel(tmp_path: Path, platform: str, library: bytes, namespace: str = NAMESPACE) -> Path:
    return make_wheel(tmp_path, "tiny", "0.1", tag=f"cp39-abi3-{platform}", files={"tiny/_C.abi3.so": library},
                      build_record={"namespace": namespace, "library": "_C.abi3.so"})


def test_required_glibc_reads_the_version_needs(tmp_path: Path) -> None:
    assert required_glibc(compile_library(tmp_path, NEEDS_2_25)) >= Version("2.25")  # type: ignore[operator]
    assert tag_glibc("manylinux_2_28_x86_64") == Version("2.28")
    assert tag_glibc("manylinux2014_x86_64") == Version("2.17") and tag_glibc("linux_x86_64") is None


def test_a_library_newer_than_its_tag_or_the_floor_fails(tmp_path: Path) -> None:
    library = compile_library(tmp_path, NEEDS_2_25)
    need = required_glibc(library)
    fine = tiny_wheel(tmp_path, f"manylinux_{str(need).replace('.', '_')}_x86_64", library)
    assert check_wheel(fine, package="tiny", abi3=True) == []
    lying = tiny_wheel(tmp_path, "manylinux_2_17_x86_64", library)
    assert any(f"needs GLIBC_{need} but the wheel is tagged for glibc 2.17" in p
               for p in check_wheel(lying, package="tiny", abi3=True))
    floor = check_wheel(fine, package="tiny", abi3=True, glibc_floor="2.17")
    assert any("newer than [build] glibc_floor 2.17" in p for p in floor), floor


def test_op_namespace_must_be_the_packages_own_and_registered(tmp_path: Path) -> None:
    library = compile_library(tmp_path, NEEDS_2_25)
    platform = f"manylinux_{str(required_glibc(library)).replace('.', '_')}_x86_64"
    shared = tiny_wheel(tmp_path, platform, library, namespace="tiny")
    assert any("is not _tiny_<backend>_<8 hex>" in p for p in check_wheel(shared, package="tiny", abi3=True))
    other = tiny_wheel(tmp_path, platform, library, namespace="_tiny_cpu_ffffffff")
    assert any("does not register ops under _tiny_cpu_ffffffff" in p
               for p in check_wheel(other, package="tiny", abi3=True))


def test_every_planned_variant_has_its_own_namespace() -> None:
    from wheelfactory.plan.compat import load_table
    from wheelfactory.plan.expand import expand
    from wheelfactory.plan.matrix import parse_matrix
    from wheelfactory.plan.tomlsource import TomlDocument
    from wheelfactory.project.kernel_toml import load_kernel
    from wheelfactory.project.native import namespace_for

    table = load_table()
    text = '[matrix]\nbackends = ["cpu", "cuda", "rocm"]\npython = ["abi3", "3.11"]\narch = ["x86_64", "aarch64"]\n'
    variants = expand(parse_matrix(TomlDocument.from_text(text, "m.toml"), table, base_dir=REPO), table).variants
    kernel = load_kernel(REPO / "kernels" / "fusedops")
    namespaces = {namespace_for(kernel, v) for v in variants}
    assert len(variants) > 100 and len(namespaces) == len(variants)


def test_a_build_record_that_is_not_json_is_a_problem_not_a_traceback(tmp_path: Path) -> None:
    library = compile_library(tmp_path, NEEDS_2_25)
    platform = f"manylinux_{str(required_glibc(library)).replace('.', '_')}_x86_64"
    broken = make_wheel(tmp_path, "tiny", "0.1", tag=f"cp39-abi3-{platform}",
                        files={"tiny/_C.abi3.so": library, "tiny/_build.json": "{not json"})
    assert any("the build record is unusable: tiny/_build.json is not JSON" in p
               for p in check_wheel(broken, package="tiny", abi3=True))
    missing = make_wheel(tmp_path, "tiny", "0.1", tag=f"cp39-abi3-{platform}", files={"tiny/_C.abi3.so": library})
    assert "the build record _build.json is missing" in check_wheel(missing, package="tiny", abi3=True)
