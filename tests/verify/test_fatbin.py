"""verify/fatbin.py on a real ELF library (built here by gcc) whose ``.nv_fatbin`` section holds
fat binaries laid out as nvcc lays them out: keeping one part rewrites each fat binary in place
(header, the part's entries, zeros to its old end), nothing else in the file moves, and a part
the library does not hold is a one-line error. The same on a real nvcc library, read back by
cuobjdump: tests/docker/test_docker_cuda.py."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zipfile
from pathlib import Path

import pytest
from tests.testkit import make_wheel
from wheelfactory.plan.identity import GpuSlice
from wheelfactory.support.wheel_rewrite import record_hash
from wheelfactory.verify.fatbin import (
    MAGIC,
    FatbinError,
    device_code_sizes,
    fat_binaries,
    keep_part,
    keep_part_of_wheel,
)


def entry(kind: int, arch: int, payload: bytes) -> bytes:
    """An entry as nvcc writes one: kind, version 0x0101, a 64-byte header, the payload size, then
    3 u32, the arch number at byte 28, and more header fields (zero here)."""
    header = struct.pack("<HHIQIIII", kind, 0x0101, 64, len(payload), 0, 0, 0x10008, arch)
    return header + bytes(64 - len(header)) + payload


def fat_binary(*entries: bytes) -> bytes:
    body = b"".join(entries)
    blob = struct.pack("<IHHQ", MAGIC, 1, 16, len(body)) + body
    return blob + bytes(-len(blob) % 8)  # the linker aligns each to 8


SECTION = (fat_binary(entry(2, 80, b"A" * 100), entry(2, 90, b"B" * 56), entry(1, 90, b"P" * 40))
           + fat_binary(entry(2, 80, b"C" * 24)))


def library(tmp_path: Path, section: bytes = SECTION) -> bytes:
    if shutil.which("gcc") is None:
        pytest.skip("gcc builds the test library")
    source = tmp_path / "lib.c"
    values = ",".join(str(b) for b in section)
    source.write_text('__attribute__((section(".nv_fatbin"), used, aligned(8))) '
                      f"const unsigned char fatbin[{len(section)}] = {{{values}}};\n"
                      "int host_function(void) { return 42; }\n")
    out = tmp_path / "lib.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(source)], check=True, capture_output=True)
    return out.read_bytes()


def test_keeping_one_sass_arch_rewrites_each_fat_binary_in_place(tmp_path: Path) -> None:
    data = library(tmp_path)
    start = data.index(SECTION)
    kept = keep_part(data, GpuSlice.parse("sm90"))
    assert len(kept.library) == len(data) and kept.library[:start] == data[:start]  # nothing moved
    assert kept.library[start + len(SECTION):] == data[start + len(SECTION):]
    rewritten = kept.library[start:start + len(SECTION)]
    found = list(fat_binaries(rewritten))
    assert [[(e.kind, e.arch) for e in entries] for _, _, entries in found] == [[("sass", 90)], []]
    assert b"A" * 100 not in rewritten and b"C" * 24 not in rewritten and b"P" * 40 not in rewritten
    assert b"B" * 56 in rewritten
    assert (kept.kept, kept.removed) == (1, (64 + 100) + (64 + 40) + (64 + 24))
    assert found[1][0] == len(SECTION) - len(fat_binary(entry(2, 80, b"C" * 24)))  # the second stays where it was


def test_keeping_the_ptx_keeps_no_sass(tmp_path: Path) -> None:
    kept = keep_part(library(tmp_path), GpuSlice.parse("ptx90"))
    start = kept.library.index(struct.pack("<IHH", MAGIC, 1, 16))
    entries = [e for _, _, found in fat_binaries(kept.library[start:start + len(SECTION)]) for e in found]
    assert [(e.kind, e.arch) for e in entries] == [("ptx", 90)]


def test_a_part_the_library_does_not_hold_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FatbinError, match=r"holds no SASS of sm_120: the build did not compile that arch"):
        keep_part(library(tmp_path), GpuSlice.parse("sm120"), name="pkg/_C.so")


def test_an_entry_kind_this_reader_does_not_know_is_refused(tmp_path: Path) -> None:
    odd = fat_binary(entry(2, 90, b"B" * 8), entry(8, 90, b"?" * 8))
    with pytest.raises(FatbinError, match="kind 8"):
        keep_part(library(tmp_path, odd), GpuSlice.parse("sm90"))


def test_a_size_past_the_section_is_refused(tmp_path: Path) -> None:
    broken = bytearray(fat_binary(entry(2, 90, b"B" * 8)))
    struct.pack_into("<Q", broken, 8, 10_000)
    with pytest.raises(FatbinError, match="runs past its section"):
        keep_part(library(tmp_path, bytes(broken)), GpuSlice.parse("sm90"))


def test_a_library_without_device_code_is_left_as_it_is() -> None:
    host_only = Path(shutil.which("true") or "/bin/true").read_bytes()
    assert keep_part(host_only, GpuSlice.parse("sm90")).library == host_only


def test_the_wheel_of_a_part_is_smaller_and_its_record_is_true(tmp_path: Path) -> None:
    payload = bytes(range(256)) * 400  # device code that deflate cannot shrink much
    big = fat_binary(entry(2, 80, payload), entry(2, 90, b"B" * 56))
    wheel = make_wheel(tmp_path / "in", files={"tiny/_C.abi3.so": library(tmp_path, big)})
    split = keep_part_of_wheel(wheel, GpuSlice.parse("sm90"), tmp_path / "out")
    assert split.libraries == ("tiny/_C.abi3.so",) and split.removed == 64 + len(payload)
    assert split.wheel.stat().st_size < wheel.stat().st_size - 50_000
    with zipfile.ZipFile(split.wheel) as archive:
        record = archive.read("tiny-0.1.0.dist-info/RECORD").decode()
        library_bytes = archive.read("tiny/_C.abi3.so")
    assert f"tiny/_C.abi3.so,{record_hash(library_bytes)},{len(library_bytes)}" in record
    with pytest.raises(FatbinError, match="holds no SASS of sm_120"):
        keep_part_of_wheel(wheel, GpuSlice.parse("sm120"), tmp_path / "none")
    assert not list((tmp_path / "none").glob("*.whl"))  # no part wheel is left behind


def compressed_entry(arch: int, payload: bytes, unpacked: int) -> bytes:
    """An entry as nvcc --compress-mode=size writes one: flag 0x8000 and the unpacked size."""
    header = bytearray(entry(2, arch, b""))[:64]
    struct.pack_into("<Q", header, 40, 0x8011)
    struct.pack_into("<Q", header, 56, unpacked)
    struct.pack_into("<Q", header, 8, len(payload))
    return bytes(header) + payload


def test_the_device_code_sizes_say_what_compression_saved(tmp_path: Path) -> None:
    packed = fat_binary(compressed_entry(80, b"z" * 40, 400), entry(1, 80, b"P" * 24))
    assert device_code_sizes(library(tmp_path, packed)) == (40 + 24, 400 + 24)
    assert device_code_sizes(library(tmp_path, SECTION)) == (100 + 56 + 40 + 24,) * 2  # nothing compressed
    assert device_code_sizes(b"not an ELF file") == (0, 0)
