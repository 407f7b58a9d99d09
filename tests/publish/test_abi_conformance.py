"""The Hub's ABI rules through the real kernel-abi-check, on libraries compiled here; and
``export --hf-layout`` refusing a variant whose library fails them (the checker is never mocked)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version
from tests.testkit import make_wheel, write_provenance
from wheelfactory.errors import PublishError
from wheelfactory.plan.identity import VariantId
from wheelfactory.publish.abi_conformance import (
    MANYLINUX_POLICY,
    PYTHON_ABI,
    AbiFinding,
    check_hub_conformance,
    check_package,
)
from wheelfactory.publish.hf_layout import export_hf_layout
from wheelfactory.publish.collect import collect
from wheelfactory.runner import manifest

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")

CONFORMING = "int add(int a, int b) { return a + b; }\n"
# __libc_single_threaded (sys/single_threaded.h) arrived in glibc 2.32, after manylinux_2_28's 2.28.
NEEDS_GLIBC_2_32 = "#include <sys/single_threaded.h>\nint alone(void) { return __libc_single_threaded; }\n"
# What a torch extension built with GCC >= 11 on glibc >= 2.32 (Debian bookworm) does: libstdc++'s
# shared_ptr refcounting reads __libc_single_threaded, so the library needs GLIBC_2.32.
SHARED_PTR_COPY = ("#include <memory>\n"
                   "std::shared_ptr<int> copy(const std::shared_ptr<int>& p) { std::shared_ptr<int> q = p; "
                   "return q; }\n")
# Python symbols outside the 3.9 stable ABI (declared here: linking a shared object leaves them undefined).
NOT_ABI3 = ("extern void *PyObject_Vectorcall(void *, void *const *, unsigned long, void *);\n"
            "extern void **_PyObject_GetDictPtr(void *);\n"
            "void *call(void *f) { return PyObject_Vectorcall(f, 0, 0, 0); }\n"
            "void **dict(void *o) { return _PyObject_GetDictPtr(o); }\n")

GLIBC = Version(os.confstr("CS_GNU_LIBC_VERSION").split()[-1]) if hasattr(os, "confstr") else Version("0")
needs_new_glibc = pytest.mark.skipif(GLIBC < Version("2.32"), reason=f"this host's glibc {GLIBC} predates "
                                     "__libc_single_threaded (2.32): it cannot make a library that needs it")


def compile_library(directory: Path, name: str, source: str, *, cxx: bool = False) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    src = directory / (name + (".cpp" if cxx else ".c"))
    src.write_text(source)
    out = directory / f"{name}.so"
    subprocess.run(["c++" if cxx else "cc", "-shared", "-fPIC", "-O2", "-o", str(out), str(src)], check=True)
    return out


def test_the_policy_is_the_hubs() -> None:
    assert (MANYLINUX_POLICY, PYTHON_ABI) == ("manylinux_2_28", "3.9")


def test_a_plain_c_library_conforms(tmp_path: Path) -> None:
    assert check_hub_conformance(compile_library(tmp_path, "ok", CONFORMING)) == []


@needs_new_glibc
def test_a_symbol_newer_than_glibc_2_28_fails_manylinux_2_28(tmp_path: Path) -> None:
    library = compile_library(tmp_path, "new", NEEDS_GLIBC_2_32)
    assert check_hub_conformance(library) == ["manylinux_2_28: __libc_single_threaded needs GLIBC_2.32"]
    assert check_hub_conformance(library, manylinux="manylinux_2_34") == []  # a newer policy allows it


@needs_new_glibc
@pytest.mark.skipif(shutil.which("c++") is None, reason="needs a C++ compiler")
def test_a_cxx_library_built_with_a_new_libstdcxx_fails_like_bookworms(tmp_path: Path) -> None:
    gcc = subprocess.run(["c++", "-dumpversion"], capture_output=True, text=True, check=True).stdout.strip()
    if Version(gcc.split("-")[0]) < Version("11"):
        pytest.skip(f"GCC {gcc}'s libstdc++ does not use __libc_single_threaded (GCC >= 11 does)")
    library = compile_library(tmp_path, "shared_ptr", SHARED_PTR_COPY, cxx=True)
    findings = check_hub_conformance(library)
    assert "manylinux_2_28: __libc_single_threaded needs GLIBC_2.32" in findings, findings


def test_python_symbols_outside_the_39_stable_abi_fail(tmp_path: Path) -> None:
    library = compile_library(tmp_path, "py", NOT_ABI3)
    assert check_hub_conformance(library) == [
        "Python 3.9 abi3: PyObject_Vectorcall is in the stable ABI from 3.12 only",
        "Python 3.9 abi3: _PyObject_GetDictPtr is not in the stable ABI"]
    assert check_hub_conformance(library, python_abi="3.12") == [
        "Python 3.12 abi3: _PyObject_GetDictPtr is not in the stable ABI"]


def test_a_file_that_is_not_elf_is_a_finding_not_a_traceback(tmp_path: Path) -> None:
    fake = tmp_path / "_C.abi3.so"
    fake.write_bytes(b"not an ELF file")
    (finding,) = check_hub_conformance(fake)
    assert finding.startswith("not a library kernel-abi-check can read (") and "file magic" in finding, finding
    assert str(tmp_path) not in finding  # the caller names the library; the message stays short


@needs_new_glibc
def test_check_package_names_each_failing_library_inside_the_package(tmp_path: Path) -> None:
    compile_library(tmp_path / "tiny", "_C.abi3", NEEDS_GLIBC_2_32)
    compile_library(tmp_path / "tiny" / "sub", "_ok", CONFORMING)
    (tmp_path / "tiny" / "sub" / "_broken.so").write_text("text")
    findings = check_package(tmp_path, "tiny")
    assert [f.library for f in findings] == ["tiny/_C.abi3.so", "tiny/sub/_broken.so"]
    assert str(findings[0]) == "tiny/_C.abi3.so: manylinux_2_28: __libc_single_threaded needs GLIBC_2.32"
    assert {findings[0]} == {AbiFinding("tiny/_C.abi3.so",
                                        ("manylinux_2_28: __libc_single_threaded needs GLIBC_2.32",))}


def test_without_the_checker_installed_it_is_a_publish_error(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "kernel_abi_check", None)  # what an import finds when it is absent
    with pytest.raises(PublishError, match="kernel-abi-check .*is not installed.*pip install") as raised:
        check_hub_conformance(tmp_path / "x.so")
    assert raised.value.exit_code == 7 and "\n" not in str(raised.value)
    with pytest.raises(PublishError):  # before anything is written
        export_hf_layout([], tmp_path / "hf")
    assert not (tmp_path / "hf").exists()
    assert export_hf_layout([], tmp_path / "hf", abi_check=False).exported == ()


# --- export --hf-layout with real libraries -------------------------------------------------------

GOOD, BAD, JUNK = ("torch213-cxx11-cpu-x86_64-linux", "torch26-cxx98-cpu-x86_64-linux",
                   "torch213-cxx11-cu130-x86_64-linux")


def dist_with_libraries(dist: Path, libraries: dict[str, bytes]) -> None:
    """dist/ with one tiny cp39-abi3 wheel per variant, each holding ``tiny/_C.abi3.so``."""
    entries = {}
    for vid, library in libraries.items():
        torch = "2.6.0" if vid.startswith("torch26") else "2.13.0"
        wheel = make_wheel(dist / vid, "tiny", f"0.1.0+{VariantId.parse(vid).local_label}",
                           tag="cp39-abi3-manylinux_2_28_x86_64",
                           files={"tiny/__init__.py": "VALUE = 1\n", "tiny/_C.abi3.so": library},
                           build_record={"namespace": f"_tiny_cpu_{hashlib.sha256(vid.encode()).hexdigest()[:8]}"},
                           metadata="Requires-Python: >=3.9\nLicense-Expression: MIT\n")
        write_provenance(wheel, vid)
        entries[vid] = manifest.Entry(status="built", wheel=f"{vid}/{wheel.name}",
                                      sha256=hashlib.sha256(wheel.read_bytes()).hexdigest(), seconds=1.0, key="k",
                                      log=f"{vid}/build.log", error=None, engine="docker", image=None,
                                      torch_version=torch, toolkit="13.0" if "cu130" in vid else None)
    manifest.write(dist, entries)


@pytest.fixture
def libraries(tmp_path: Path) -> dict[str, bytes]:
    if GLIBC < Version("2.32"):
        pytest.skip(f"this host's glibc {GLIBC} predates __libc_single_threaded (2.32)")
    return {GOOD: compile_library(tmp_path / "libs", "good", CONFORMING).read_bytes(),
            BAD: compile_library(tmp_path / "libs", "bad", NEEDS_GLIBC_2_32).read_bytes(),
            JUNK: b"this is not an ELF library\n"}


def test_export_refuses_the_failing_variants_and_writes_the_others(tmp_path: Path,
                                                                   libraries: dict[str, bytes]) -> None:
    dist_with_libraries(tmp_path / "dist", libraries)
    wheels, skipped = collect(tmp_path / "dist", manifest.read(tmp_path / "dist"))
    # a .so that is no ELF file is refused before kernel-abi-check sees it: by the wheel's identity
    # check (its libraries must be ELF files for the variant's machine)
    (junk,) = skipped
    assert junk.variant_id == JUNK and junk.refused
    assert "tiny/_C.abi3.so is named as a shared library and is not an ELF file" in junk.reason
    result = export_hf_layout(wheels, tmp_path / "hf")
    build = tmp_path / "hf" / "build"
    assert [e.variant_id for e in result.exported] == [GOOD] and not result.skipped
    refused = {r.variant_id: r.reason for r in result.refused}
    assert refused == {BAD: "fails kernel-abi-check: tiny/_C.abi3.so: manylinux_2_28: __libc_single_threaded "
                            "needs GLIBC_2.32"}
    assert sorted(p.name for p in build.iterdir()) == [GOOD]  # nothing of the refused, no temp directories
    assert (build / GOOD / "tiny" / "_C.abi3.so").read_bytes() == libraries[GOOD]


def test_a_refused_variant_leaves_an_earlier_export_as_it_was(tmp_path: Path,
                                                              libraries: dict[str, bytes]) -> None:
    dist_with_libraries(tmp_path / "dist", {BAD: libraries[GOOD]})
    wheels, _ = collect(tmp_path / "dist", manifest.read(tmp_path / "dist"))
    assert [e.variant_id for e in export_hf_layout(wheels, tmp_path / "hf").exported] == [BAD]
    before = {p.relative_to(tmp_path): p.read_bytes() for p in (tmp_path / "hf").rglob("*") if p.is_file()}
    shutil.rmtree(tmp_path / "dist")
    dist_with_libraries(tmp_path / "dist", {BAD: libraries[BAD]})  # a rebuild that fails the check
    wheels, _ = collect(tmp_path / "dist", manifest.read(tmp_path / "dist"))
    result = export_hf_layout(wheels, tmp_path / "hf")
    assert not result.exported and [r.variant_id for r in result.refused] == [BAD]
    after = {p.relative_to(tmp_path): p.read_bytes() for p in (tmp_path / "hf").rglob("*") if p.is_file()}
    assert after == before


def test_without_the_abi_check_every_variant_is_exported(tmp_path: Path, libraries: dict[str, bytes]) -> None:
    libraries = {vid: library for vid, library in libraries.items() if vid != JUNK}  # JUNK fails the identity check
    dist_with_libraries(tmp_path / "dist", libraries)
    wheels, _ = collect(tmp_path / "dist", manifest.read(tmp_path / "dist"))
    result = export_hf_layout(wheels, tmp_path / "hf", abi_check=False)
    assert sorted(e.variant_id for e in result.exported) == sorted(libraries) and not result.refused
    assert (tmp_path / "hf" / "build" / BAD / "tiny" / "_C.abi3.so").read_bytes() == libraries[BAD]


def run_export(dist: Path, layout: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wheelfactory", "export", "-o", str(dist), "--hf-layout",
                           str(layout), *more], check=False, capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "FORCE_COLOR"})  # piped: plain lines


def test_the_cli_prints_each_refusal_and_exits_7_after_writing_the_others(tmp_path: Path,
                                                                          libraries: dict[str, bytes]) -> None:
    dist_with_libraries(tmp_path / "dist", libraries)
    done = run_export(tmp_path / "dist", tmp_path / "hf")
    assert done.returncode == 7, done.stdout + done.stderr
    assert f"{GOOD}: {tmp_path / 'hf' / 'build' / GOOD}" in done.stdout
    assert (f"refused {BAD}: fails kernel-abi-check: tiny/_C.abi3.so: manylinux_2_28: __libc_single_threaded "
            "needs GLIBC_2.32") in done.stdout
    assert "tiny/_C.abi3.so is named as a shared library and is not an ELF file" in done.stdout + done.stderr
    assert "2 variant(s) refused" in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in (tmp_path / "hf" / "build").iterdir()) == [GOOD]

    shutil.rmtree(tmp_path / "dist")
    dist_with_libraries(tmp_path / "dist", {GOOD: libraries[GOOD], BAD: libraries[BAD]})
    forced = run_export(tmp_path / "dist", tmp_path / "hf", "--skip-abi-check")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert "warning --skip-abi-check" in forced.stderr and "refused" not in forced.stdout
    assert sorted(p.name for p in (tmp_path / "hf" / "build").iterdir()) == [GOOD, BAD]
