"""PyPI's default variant (publish/pypi_default.py): which wheels go where local labels are
refused, chosen against the bundled compatibility table, and their rewrite without the label."""

from __future__ import annotations

import dataclasses
import hashlib
import zipfile
from email.parser import HeaderParser
from pathlib import Path

import pytest
from tests.publish.dist_fakes import indexed
from tests.testkit import make_wheel
from wheelfactory.errors import PublishError
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.identity import VariantId
from wheelfactory.publish.collect import IndexedWheel
from wheelfactory.publish.pypi_default import (
    PYPI_DIR,
    choose_default,
    default_wheels,
    relabel,
    unlabelled_version,
)
from wheelfactory.verify.wheel_identity import record_problems

TABLE = load_table()


def wheel(vid: str, project: str = "tiny") -> IndexedWheel:
    return indexed(vid, project=project)


def ids(chosen: list[IndexedWheel]) -> list[str]:
    return [w.variant_id for w in chosen]


def test_pypis_own_build_of_the_newest_torch_is_chosen() -> None:
    # torch 2.13 on PyPI is cu130 with the cxx11 ABI (compat.toml)
    dist = [wheel("torch213-cxx11-cpu-x86_64-linux"), wheel("torch213-cxx11-cu130-x86_64-linux"),
            wheel("torch213-cxx11-cu129-x86_64-linux"), wheel("torch212-cxx11-cu130-x86_64-linux")]
    assert ids(choose_default(dist, TABLE, True)) == ["torch213-cxx11-cu130-x86_64-linux"]


def test_a_project_without_pypis_backend_gets_its_cpu_variant_of_the_newest_torch() -> None:
    dist = [wheel("torch213-cxx11-cpu-x86_64-linux"), wheel("torch26-cxx98-cpu-x86_64-linux")]
    assert ids(choose_default(dist, TABLE, True)) == ["torch213-cxx11-cpu-x86_64-linux"]


def test_the_cpu_fallback_takes_the_abi_of_pypis_build() -> None:
    # torch 2.6 on PyPI: cu124, pre-cxx11 ABI; its CPU wheel there shares that ABI
    dist = [wheel("torch26-cxx11-cpu-x86_64-linux"), wheel("torch26-cxx98-cpu-x86_64-linux")]
    assert ids(choose_default(dist, TABLE, True)) == ["torch26-cxx98-cpu-x86_64-linux"]


def test_one_wheel_per_python_tag_and_arch_a_torch_specific_build_first() -> None:
    dist = [wheel("torch213-cxx11-cu130-x86_64-linux"), wheel("torch213-cxx11-cu130-aarch64-linux"),
            wheel("torch213-cxx11-cu130-x86_64-linux-cp311"), wheel("torch-stable-abi213-cu130-x86_64-linux")]
    assert sorted(ids(choose_default(dist, TABLE, True))) == [
        "torch213-cxx11-cu130-aarch64-linux", "torch213-cxx11-cu130-x86_64-linux",
        "torch213-cxx11-cu130-x86_64-linux-cp311"]


def test_each_project_gets_its_own_default() -> None:
    dist = [wheel("torch213-cxx11-cu130-x86_64-linux", "alpha"), wheel("torch213-cxx11-cpu-x86_64-linux", "beta"),
            wheel("torch212-cxx11-cu130-x86_64-linux", "beta")]
    assert [(w.project, w.variant_id) for w in choose_default(dist, TABLE, True)] == [
        ("alpha", "torch213-cxx11-cu130-x86_64-linux"), ("beta", "torch213-cxx11-cpu-x86_64-linux")]


def test_a_named_variant_is_taken_as_it_is() -> None:
    dist = [wheel("torch213-cxx11-cpu-x86_64-linux"), wheel("torch26-cxx98-cpu-x86_64-linux")]
    chosen = choose_default(dist, TABLE, VariantId.parse("torch26-cxx98-cpu-x86_64-linux"))
    assert ids(chosen) == ["torch26-cxx98-cpu-x86_64-linux"]
    assert choose_default(dist, TABLE, False) == []


def test_a_named_variant_the_dist_lacks_is_one_line_naming_it() -> None:
    dist = [wheel("torch213-cxx11-cpu-x86_64-linux")]
    with pytest.raises(PublishError) as refused:
        choose_default(dist, TABLE, VariantId.parse("torch213-cxx11-cu130-x86_64-linux"))
    message = str(refused.value)
    assert "torch213-cxx11-cu130-x86_64-linux" in message and "torch213-cxx11-cpu-x86_64-linux" in message
    assert "\n" not in message and refused.value.exit_code == 7


def test_nothing_matching_pypis_build_nor_cpu_is_refused_with_what_to_write() -> None:
    with pytest.raises(PublishError) as refused:
        choose_default([wheel("torch213-cxx11-cu129-x86_64-linux")], TABLE, True)
    message = str(refused.value)
    assert "cu130" in message and "torch213-cxx11-cu129-x86_64-linux" in message and "pypi_default" in message
    with pytest.raises(PublishError, match="no wheel"):
        choose_default([], TABLE, True)


def test_a_torch_the_table_does_not_know_is_refused() -> None:
    with pytest.raises(PublishError, match=r"torch 9\.9 .* not in the compatibility table"):
        choose_default([wheel("torch99-cxx11-cpu-x86_64-linux")], TABLE, True)


def test_unlabelled_versions_drop_the_whole_local_part() -> None:
    assert str(unlabelled_version("0.2.0+cputorch2.13")) == "0.2.0"
    assert str(unlabelled_version("0.3.2.dev2+gb4153ae.cu130torch2.13")) == "0.3.2.dev2"


def test_relabel_writes_a_consistent_wheel_without_the_label_with_the_same_bytes_each_time(tmp_path: Path) -> None:
    source = make_wheel(tmp_path / "torch213-cxx11-cpu-x86_64-linux", "tiny", "0.2.0+cputorch2.13",
                        files={"tiny/__init__.py": "VALUE = 1\n"},
                        metadata="Requires-Python: >=3.9\nRequires-Dist: torch==2.13.*\nRequires-Dist: numpy\n")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    listed = indexed("torch213-cxx11-cpu-x86_64-linux", sha256=digest, source=source)
    assert listed.filename == source.name
    out = relabel(listed, tmp_path / "dist" / PYPI_DIR)
    assert out == tmp_path / "dist" / PYPI_DIR / "tiny-0.2.0-cp39-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(out) as archive:
        names = archive.namelist()
        assert not [n for n in names if "cputorch" in n]
        assert "tiny-0.2.0.dist-info/METADATA" in names
        metadata = HeaderParser().parsestr(archive.read("tiny-0.2.0.dist-info/METADATA").decode())
        assert metadata["Version"] == "0.2.0"
        assert metadata.get_all("Requires-Dist") == ["torch==2.13.*", "numpy"]  # the wheel's own requirements
        assert archive.read("tiny/__init__.py") == b"VALUE = 1\n"
        assert record_problems(archive) == []
    again = relabel(listed, tmp_path / "elsewhere")
    assert again.read_bytes() == out.read_bytes()
    assert not list((tmp_path / "dist" / PYPI_DIR).glob(".*"))  # no partial file left beside it


def test_default_wheels_chooses_and_relabels_into_dist_pypi(tmp_path: Path) -> None:
    made = {}
    for vid in ("torch213-cxx11-cpu-x86_64-linux", "torch26-cxx98-cpu-x86_64-linux"):
        key = VariantId.parse(vid)
        path = make_wheel(tmp_path / "dist" / vid, "tiny", f"0.2.0+{key.local_label}")
        made[vid] = indexed(vid, sha256=hashlib.sha256(path.read_bytes()).hexdigest(), source=path)
    paths = default_wheels(list(made.values()), TABLE, True, tmp_path / "dist")
    assert paths == [tmp_path / "dist" / "pypi" / "tiny-0.2.0-cp39-abi3-manylinux_2_28_x86_64.whl"]


def test_a_wheel_without_a_file_in_the_dist_cannot_be_relabelled(tmp_path: Path) -> None:
    held_elsewhere = dataclasses.replace(indexed("torch213-cxx11-cpu-x86_64-linux"), source=None)
    with pytest.raises(PublishError, match="no file of it in this dist"):
        relabel(held_elsewhere, tmp_path)
