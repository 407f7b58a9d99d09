"""README.md's paragraph on PyPI's default variant: the build it names for torch 2.13 is the one
pypi_default chooses from a dist holding every backend, and the unlabelled wheel keeps the
variant's pinned torch requirement (so pip brings torch's 2.13 line with it)."""

from __future__ import annotations

import re
import zipfile
from email.parser import HeaderParser
from pathlib import Path

from tests.publish.dist_fakes import indexed
from tests.testkit import REPO, make_wheel
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.identity import VariantId
from wheelfactory.plan.torch_pin import torch_requires_dist
from wheelfactory.publish.pypi_default import choose_default, relabel


def readme() -> str:
    return " ".join((REPO / "README.md").read_text().split())


def test_the_build_readme_names_is_the_one_chosen() -> None:
    found = re.search(r"\(for torch (\d+)\.(\d+), CUDA (\d+)\.(\d+) with the (cxx11|cxx98) ABI\)", readme())
    assert found, "README.md no longer names PyPI's default build"
    major, minor, cuda_major, cuda_minor, abi = found.groups()
    torch = f"torch{major}{minor}"
    dist = [indexed(f"{torch}-{abi}-cpu-x86_64-linux"), indexed(f"{torch}-cxx11-cu129-x86_64-linux"),
            indexed(f"{torch}-{abi}-cu{cuda_major}{cuda_minor}-x86_64-linux"),
            indexed(f"{torch}-cxx98-cu{cuda_major}{cuda_minor}-x86_64-linux"),
            indexed(f"torch{major}{int(minor) - 1}-cxx11-cu{cuda_major}{cuda_minor}-x86_64-linux")]
    chosen = [w.variant_id for w in choose_default(dist, load_table(), True)]
    assert chosen == [f"{torch}-{abi}-cu{cuda_major}{cuda_minor}-x86_64-linux"]


def test_the_unlabelled_wheel_requires_torchs_line(tmp_path: Path) -> None:
    found = re.search(r"as it requires torch's (\d+\.\d+) line, torch (\d+\.\d+) with it", readme())
    assert found and found.group(1) == found.group(2)
    vid = f"torch{found.group(1).replace('.', '')}-cxx11-cu130-x86_64-linux"
    key = VariantId.parse(vid)
    from wheelfactory import load_plan
    variant = next(v for v in load_plan(REPO / "matrix.toml").variants if v.id == vid)
    requirement = torch_requires_dist(variant)
    assert requirement == f"torch>={found.group(1)},<{found.group(1).split('.')[0]}.{int(found.group(1).split('.')[1]) + 1}"
    source = make_wheel(tmp_path / "dist", "mykernels", f"0.1.0+{key.local_label}",
                        metadata=f"Requires-Dist: {requirement}\n")
    listed = indexed(vid, project="mykernels", version="0.1.0", source=source)
    out = relabel(listed, tmp_path / "pypi")
    assert out.name.startswith("mykernels-0.1.0-")  # plain 0.1.0, as the README says
    with zipfile.ZipFile(out) as archive:
        metadata = next(n for n in archive.namelist() if n.endswith("METADATA"))
        headers = HeaderParser().parsestr(archive.read(metadata).decode())
    assert headers["Version"] == "0.1.0" and headers.get_all("Requires-Dist") == [requirement]
