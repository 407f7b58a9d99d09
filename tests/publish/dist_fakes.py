"""A fake dist/ with small but valid wheels and a manifest, for the index tests (no build needed)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from testkit import make_wheel, write_provenance
from wheelfactory.plan.identity import VariantId
from wheelfactory.runner import manifest

WHEELS = {
    "torch213-cxx11-cpu-x86_64-linux": ("0.1.0+cputorch2.13", "2.13.0", None, []),
    "torch26-cxx98-cpu-x86_64-linux": ("0.1.0+cputorch2.6cxx98", "2.6.0", None, []),
    "torch213-cxx11-cu130-x86_64-linux": ("0.1.0+cu130torch2.13", "2.13.0", "13.0", ["8.0", "9.0", "12.0+PTX"]),
}


def make_dist(dist: Path, *, failed: str | None = None, version: str = "0.1.0", payload: bytes = b"",
              variants: tuple[str, ...] = tuple(WHEELS)) -> dict[str, manifest.Entry]:
    """``variants`` of WHEELS built as ``version`` (their local labels kept), each wheel carrying
    ``payload`` as tiny/_payload.bin when given (a wheel of a realistic size)."""
    entries = {}
    for vid in variants:
        labelled, torch, toolkit, archs = WHEELS[vid]
        full = version + labelled[labelled.index("+"):]
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
        files: dict[str, str | bytes] = {"tiny/__init__.py": "VALUE = 1\n"}
        if payload:
            files["tiny/_payload.bin"] = payload
        wheel = make_wheel(dist / vid, "tiny", full, files=files,
                           build_record=record, metadata="Requires-Python: >=3.9\nLicense-Expression: MIT\n")
        write_provenance(wheel, vid)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        entries[vid] = manifest.Entry(status="built", wheel=f"{vid}/{wheel.name}", sha256=digest, seconds=1.0,
                                      key="k", log=f"{vid}/build.log", error=None, engine="docker", image=None,
                                      torch_version=torch, toolkit=toolkit)
    manifest.write(dist, entries)
    return entries
