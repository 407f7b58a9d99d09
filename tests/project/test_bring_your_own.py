from __future__ import annotations

import base64
import csv
import hashlib
import io
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.testkit import make_wheel
from wheelfactory.plan.expand import Plan
from wheelfactory.plan.torch_pin import TORCH_REQUIREMENTS, TorchRequirement
from wheelfactory.project.bring_your_own import ByoProject, ByoStage, set_local_version


def byo_wheel(directory: Path, version: str = "0.3.0") -> Path:
    """A bring-your-own project's wheel: its own tag, no local label yet, a RECORD to be rewritten."""
    return make_wheel(directory, "byo_ext", version, tag="cp311-cp311-manylinux_2_34_x86_64",
                      files={"byo_ext/__init__.py": "x = 1\n"}, record="stale\n")


def test_set_local_version_rewrites_metadata_name_and_record(tmp_path: Path) -> None:
    out = set_local_version(byo_wheel(tmp_path), "cputorch2.6cxx98", tmp_path / "out")
    assert out.name == "byo_ext-0.3.0+cputorch2.6cxx98-cp311-cp311-manylinux_2_34_x86_64.whl"
    with zipfile.ZipFile(out) as archive:
        names = archive.namelist()
        info = "byo_ext-0.3.0+cputorch2.6cxx98.dist-info"
        assert f"{info}/METADATA" in names and not any(n.startswith("byo_ext-0.3.0.dist-info") for n in names)
        assert "Version: 0.3.0+cputorch2.6cxx98" in archive.read(f"{info}/METADATA").decode()
        rows = list(csv.reader(io.StringIO(archive.read(f"{info}/RECORD").decode())))
        for name, digest, size in rows:
            if name.endswith("RECORD"):
                assert digest == "" and size == ""
                continue
            data = archive.read(name)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={expected}" and int(size) == len(data)
        assert {row[0] for row in rows} == set(names)
    assert not list((tmp_path / "out").glob(".*partial")) and not list((tmp_path / "out").glob(".*.tmp"))


@pytest.mark.parametrize(("built", "merged"), [
    ("0.9.3.dev12+g9e9fa53", "0.9.3.dev12+g9e9fa53.cputorch2.6"),  # setuptools-scm, an untagged commit
    ("0.9.3.dev12+g9e9fa53.d20261125", "0.9.3.dev12+g9e9fa53.d20261125.cputorch2.6"),  # ... and a dirty tree
    ("1.0", "1.0+cputorch2.6"),
])
def test_a_local_label_the_version_has_is_kept_before_the_variants(tmp_path: Path, built: str, merged: str) -> None:
    out = set_local_version(byo_wheel(tmp_path, built), "cputorch2.6", tmp_path / "out")
    assert out.name == f"byo_ext-{merged}-cp311-cp311-manylinux_2_34_x86_64.whl"
    with zipfile.ZipFile(out) as archive:
        assert f"Version: {merged}\n" in archive.read(f"byo_ext-{merged}.dist-info/METADATA").decode()


def finished_metadata(tmp_path: Path, plan_of: Callable[[str], Plan], torch_requirement: TorchRequirement,
                      metadata: str) -> str:
    """The METADATA of a bring-your-own wheel after ByoStage.finish, for the torch 2.13 CPU variant."""
    variant = plan_of('[matrix]\ntorch = "2.13"\ncxx11_abi = true\n').variants[0]
    project = ByoProject(root=tmp_path, import_name="byo_ext", env=(), cpu_env=(), cuda_env=())
    wheel = make_wheel(tmp_path / "built", "byo_ext", "0.3.0", tag="cp311-cp311-manylinux_2_34_x86_64",
                       metadata=metadata)
    out = ByoStage(project, variant, torch_requirement=torch_requirement).finish(wheel, tmp_path / "out")
    with zipfile.ZipFile(out) as archive:
        return archive.read("byo_ext-0.3.0+cputorch2.13.dist-info/METADATA").decode()


def test_a_finished_wheel_requires_its_torch_line(tmp_path: Path, plan_of: Callable[[str], Plan]) -> None:
    requires = 'Requires-Dist: numpy; extra == "np"\nRequires-Dist: torch\n'
    text = finished_metadata(tmp_path, plan_of, "pinned", requires)
    assert 'Requires-Dist: numpy; extra == "np"\nRequires-Dist: torch<2.14,>=2.13\n' in text
    assert "Version: 0.3.0+cputorch2.13\n" in text


def test_a_project_without_a_torch_requirement_gets_the_pin(tmp_path: Path, plan_of: Callable[[str], Plan]) -> None:
    assert "Requires-Dist: torch<2.14,>=2.13\n" in finished_metadata(tmp_path, plan_of, "pinned", "")


def test_unpinned_keeps_the_projects_own_torch_requirement(tmp_path: Path, plan_of: Callable[[str], Plan]) -> None:
    text = finished_metadata(tmp_path, plan_of, "unpinned", "Requires-Dist: torch>=2.0\n")
    assert [line for line in text.splitlines() if line.startswith("Requires-Dist")] == ["Requires-Dist: torch>=2.0"]


def test_the_setting_is_part_of_the_cache_key(tmp_path: Path, plan_of: Callable[[str], Plan]) -> None:
    variant = plan_of('[matrix]\ntorch = "2.13"\ncxx11_abi = true\n').variants[0]
    project = ByoProject(root=tmp_path, import_name="byo_ext", env=(), cpu_env=(), cuda_env=())
    keys = [ByoStage(project, variant, torch_requirement=t).key_material() for t in TORCH_REQUIREMENTS]
    assert keys[0] != keys[1]
