"""A fake dist/ with small but valid wheels and a manifest, for the index tests (no build needed)."""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from pathlib import Path

from tests.fake_wheels import make_wheel, write_provenance
from wheelfactory.plan.identity import VariantId
from wheelfactory.publish.collect import IndexedWheel
from wheelfactory.runner import manifest

WHEELS = {
    "torch213-cxx11-cpu-x86_64-linux": ("0.1.0+cputorch2.13", "2.13.0", None, []),
    "torch26-cxx98-cpu-x86_64-linux": ("0.1.0+cputorch2.6cxx98", "2.6.0", None, []),
    "torch213-cxx11-cu130-x86_64-linux": ("0.1.0+cu130torch2.13", "2.13.0", "13.0", ["8.0", "9.0", "12.0+PTX"]),
}
# Made only when ``variants`` names it (benchmarks/publish.py's 4-variant release): the default
# dist, which the tests count on, stays the three above.
MORE_WHEELS = {
    "torch213-cxx11-cu126-x86_64-linux": ("0.1.0+cu126torch2.13", "2.13.0", "12.6", ["8.0", "9.0+PTX"]),
}


def make_dist(dist: Path, *, failed: str | None = None, version: str = "0.1.0", project: str = "tiny",
              variants: Collection[str] | None = None, rebuilt: str | None = None, payload: bytes = b""
              ) -> dict[str, manifest.Entry]:
    """``dist`` holding a wheel of ``project`` ``version`` (plus each variant's label) for each of
    ``variants`` (default: every one in WHEELS; MORE_WHEELS only by name), a provenance record each and the manifest;
    ``failed``: that variant's build failed; ``rebuilt``: that variant's wheel holds other code
    (VALUE = 2), as a rebuild from changed sources would; ``payload``: each wheel carries it as
    <project>/_payload.bin (a wheel of a realistic size)."""
    entries = {}
    for vid, (labelled, torch, toolkit, archs) in {**WHEELS, **MORE_WHEELS}.items():
        if vid not in (WHEELS if variants is None else variants):
            continue
        full_version = f"{version}+{labelled.split('+', 1)[1]}"
        if vid == failed:
            entries[vid] = manifest.Entry(status="failed", wheel=None, sha256=None, seconds=1.0, key="k",
                                          log=f"{vid}/build.log", error="boom", engine="docker", image=None,
                                          torch_version=torch, toolkit=toolkit)
            continue
        key = VariantId.parse(vid)
        # What a build writes (runtime/_record.py's fields that name the variant; runner/provenance.py)
        record = {"namespace": f"_tiny_{'cuda' if toolkit else 'cpu'}_{hashlib.sha256(vid.encode()).hexdigest()[:8]}",
                  "arch_list": archs, "variant": vid, "torch": key.torch, "built_with_torch": torch,
                  "backend": key.backend.kind, "toolkit": toolkit, "cxx11_abi": key.cxx11_abi,
                  "python": key.python, "arch": key.arch, "stable_abi": key.stable_abi}
        files: dict[str, str | bytes] = {f"{project}/__init__.py": "VALUE = 2\n" if vid == rebuilt else "VALUE = 1\n"}
        if payload:
            files[f"{project}/_payload.bin"] = payload
        wheel = make_wheel(dist / vid, project, full_version, files=files,
                           build_record=record, metadata="Requires-Python: >=3.9\nLicense-Expression: MIT\n",
                           metadata_version="2.4")  # License-Expression is a 2.4 field (PEP 639)
        write_provenance(wheel, vid)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        entries[vid] = manifest.Entry(status="built", wheel=f"{vid}/{wheel.name}", sha256=digest, seconds=1.0,
                                      key="k", log=f"{vid}/build.log", error=None, engine="docker", image=None,
                                      torch_version=torch, toolkit=toolkit)
    manifest.write(dist, entries)
    return entries


def indexed(vid: str, *, project: str = "tiny", version: str = "0.2.0", sha256: str = "a" * 64,
            source: Path | None = None) -> IndexedWheel:
    """A wheel of ``vid`` as collect() lists it, without a file behind it (``source`` aside): for
    tests of what is chosen and planned, which read only the listing."""
    key = VariantId.parse(vid)
    python = "cp39-abi3" if key.python == "abi3" else "cp{0}-cp{0}".format(key.python.replace(".", ""))
    filename = f"{project}-{version}+{key.local_label}-{python}-manylinux_2_28_{key.arch}.whl"
    return IndexedWheel(key, project, f"{version}+{key.local_label}", filename, sha256,
                        source or Path("/dist") / vid / filename, f"{key.torch}.0", None, ">=3.9",
                        core_metadata_sha256=None, size=0)
