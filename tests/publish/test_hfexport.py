"""export --hf-layout on fake wheels: layout, metadata.json, atomic replacement (the real loader: tests/docker;
the ABI check on compiled libraries: test_abi_conformance.py)."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from email.parser import HeaderParser
from pathlib import Path

import pytest
from tests.publish.dist_fakes import make_dist
from kernels._rust import Digest, DigestAlgorithm, DigestValidationError, Metadata
from tests.testkit import REPO, make_wheel
from wheelfactory import __version__
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.expand import expand
from wheelfactory.plan.identity import VariantId
from wheelfactory.plan.matrix import parse_matrix
from wheelfactory.plan.tomlsource import TomlDocument
from wheelfactory.project.keys import GitState
from wheelfactory.project.kind_facts import NATIVE
from wheelfactory.publish.hf_layout import export_hf_layout, python_depends
from wheelfactory.publish.collect import IndexedWheel, collect
from wheelfactory.runner import manifest, provenance


def test_layout_and_metadata(tmp_path: Path) -> None:
    make_dist(tmp_path / "dist")
    wheels, _ = collect(tmp_path / "dist", manifest.read(tmp_path / "dist"))
    # These wheels hold no compiled library: the real checker runs and has nothing to refuse.
    result = export_hf_layout(wheels, tmp_path / "hf")
    assert not result.skipped and not result.refused and len(result.exported) == 3
    variant = tmp_path / "hf" / "build" / "torch213-cxx11-cu130-x86_64-linux"
    assert (variant / "tiny" / "__init__.py").read_text() == "VALUE = 1\n"
    metadata = json.loads((variant / "metadata.json").read_text())
    record = json.loads((variant / "tiny" / "_build.json").read_text())
    digest = metadata.pop("digest")
    assert metadata == {"id": record["namespace"], "name": "tiny", "version": 0, "license": "MIT",
                        "python-depends": [], "backend": {"type": "cuda", "archs": ["8.0", "9.0", "12.0+PTX"]}}
    assert digest == {"algorithm": "sha256", "files": recomputed(variant)}
    (variant / "stale.txt").write_text("from an older export")
    export_hf_layout(wheels, tmp_path / "hf")  # a re-export replaces each variant directory whole
    assert not (variant / "stale.txt").exists()
    assert not [p for p in (tmp_path / "hf" / "build").iterdir() if p.name.startswith(".")]


def recomputed(variant: Path) -> dict[str, str]:
    """Every file of an exported variant but metadata.json, with the base64 of its sha256."""
    return {p.relative_to(variant).as_posix(): base64.b64encode(hashlib.sha256(p.read_bytes()).digest()).decode()
            for p in variant.rglob("*") if p.is_file() and p.name != "metadata.json"}


def one_wheel(tmp_path: Path, metadata: str, files: dict[str, str | bytes] | None = None) -> IndexedWheel:
    vid = "torch213-cxx11-cpu-x86_64-linux"
    wheel = make_wheel(tmp_path / "dist", "tiny", "0.1.0+cputorch2.13", files=files,
                       build_record={"namespace": "_tiny_cpu_0123abcd"}, metadata=metadata)
    return IndexedWheel(VariantId.parse(vid), "tiny", "0.1.0+cputorch2.13", wheel.name,
                        hashlib.sha256(wheel.read_bytes()).hexdigest(), wheel, "2.13.0", None, None,
                        core_metadata_sha256=None, size=wheel.stat().st_size)


def test_python_depends_are_the_requires_dist_names_other_than_torch(tmp_path: Path) -> None:
    wheel = one_wheel(tmp_path, "License-Expression: MIT\n"
                                "Requires-Dist: torch==2.13.*\n"
                                "Requires-Dist: einops>=0.8\n"
                                "Requires-Dist: nvidia-cutlass-dsl; platform_machine == \"x86_64\"\n"
                                "Requires-Dist: Einops\n"
                                "Requires-Dist: pytest; extra == \"test\"\n")
    result = export_hf_layout([wheel], tmp_path / "hf")
    (exported,) = result.exported
    metadata = json.loads((exported.path / "metadata.json").read_text())
    assert metadata["python-depends"] == ["einops", "nvidia-cutlass-dsl"]


def test_python_depends_without_requirements_or_metadata() -> None:
    assert python_depends(None) == []
    assert python_depends(HeaderParser().parsestr("Name: tiny\nRequires-Dist: Torch>=2.6\n")) == []
    assert python_depends(HeaderParser().parsestr("Requires-Dist: not a requirement !!\n"
                                                  "Requires-Dist: numpy\n")) == ["numpy"]


def test_a_library_that_is_not_elf_is_refused_not_raised(tmp_path: Path) -> None:
    """A fake ``.so`` (text, as fakes elsewhere are) given to the real checker: a clear refusal."""
    wheel = one_wheel(tmp_path, "", files={"tiny/_C.abi3.so": "not a library\n"})
    result = export_hf_layout([wheel], tmp_path / "hf")
    (refused,) = result.refused
    assert not result.exported and refused.variant_id == "torch213-cxx11-cpu-x86_64-linux"
    assert refused.reason.startswith("fails kernel-abi-check: tiny/_C.abi3.so: not a library kernel-abi-check "
                                     "can read (Cannot parse object file `_C.abi3.so`"), refused.reason
    assert not list((tmp_path / "hf" / "build").iterdir())
    # Without the check (local use) the same wheel is exported as it is.
    assert [e.variant_id for e in export_hf_layout([wheel], tmp_path / "hf", abi_check=False).exported] == \
        ["torch213-cxx11-cpu-x86_64-linux"]


def test_python_depends_use_the_loaders_names() -> None:
    """kernel-builder's tvm-ffi is apache-tvm-ffi on PyPI (the wheel's Requires-Dist); the loader's
    python-depends wants the kernel-builder name back."""
    headers = HeaderParser().parsestr("Name: k\nRequires-Dist: apache-tvm-ffi>=0.1\nRequires-Dist: einops\n")
    assert python_depends(headers) == ["tvm-ffi", "einops"]


def test_a_part_of_a_split_build_is_not_exported_and_says_why(tmp_path: Path) -> None:
    vid = "torch213-cxx11-cu130-sm90-x86_64-linux"
    wheel = make_wheel(tmp_path / "dist", "tiny", "0.1.0+cu130torch2.13sm90",
                       build_record={"namespace": "_tiny_cuda_0123abcd", "arch_list": ["9.0"]})
    indexed = IndexedWheel(VariantId.parse(vid), "tiny", "0.1.0+cu130torch2.13sm90", wheel.name,
                           hashlib.sha256(wheel.read_bytes()).hexdigest(), wheel, "2.13.0", "13.0", None,
                           core_metadata_sha256=None, size=wheel.stat().st_size)
    result = export_hf_layout([indexed], tmp_path / "hf", abi_check=False)
    assert result.exported == () and not list((tmp_path / "hf" / "build").iterdir())
    (skipped,) = result.skipped
    assert skipped.variant_id == vid and "one directory per build (torch213-cxx11-cu130-x86_64-linux)" in skipped.reason
    assert "[cuda] split_archs = false" in skipped.reason


def test_the_digest_and_provenance_are_what_the_kernels_package_reads_and_checks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A wheel with the provenance record a build writes (runner/provenance.py, git states
    included): its export's metadata.json carries a digest of every file, which `kernels` (the
    Hub's loader, 0.17+) recomputes and validates, and the provenance it reads."""
    table = load_table()
    (variant,) = expand(parse_matrix(TomlDocument.from_text('[matrix]\ntorch = ["2.13"]\n', "m.toml"), table,
                                     base_dir=REPO), table).variants
    wheel = make_wheel(tmp_path / "dist", "tiny", "0.1.0+cputorch2.13", files={"tiny/ops.py": "def f(): pass\n"},
                       build_record={"namespace": "_tiny_cpu_0123abcd"}, metadata="License-Expression: MIT\n")
    sha256 = hashlib.sha256(wheel.read_bytes()).hexdigest()
    monkeypatch.setattr(provenance, "factory_git_state", lambda: GitState("b" * 40, False))  # a checkout's
    record = provenance.write_provenance(
        provenance.BuiltWheel(variant, wheel, sha256, NATIVE.name, "tiny", "c" * 64, 315532800, "key", time.time(),
                              time.time(), GitState("a" * 40, True)), None)
    indexed = IndexedWheel(VariantId.parse(variant.id), "tiny", "0.1.0+cputorch2.13", wheel.name, sha256, wheel,
                           "2.13.0", None, None, record, core_metadata_sha256=None, size=wheel.stat().st_size)
    (exported,) = export_hf_layout([indexed], tmp_path / "hf", abi_check=False).exported
    written = json.loads((exported.path / "metadata.json").read_text())
    assert written["digest"]["files"] == recomputed(exported.path)
    assert set(written["digest"]["files"]) == {"tiny/__init__.py", "tiny/ops.py", "tiny/_build.json"}
    assert written["provenance"] == {"builder": "wheelfactory",
                                     "kernel-builder": {"version": __version__, "commit": "b" * 40, "dirty": False},
                                     "kernel": {"commit": "a" * 40, "dirty": True}}
    theirs = Metadata.read_from_file(exported.path / "metadata.json")
    assert theirs.digest is not None
    theirs.digest.validate(Digest.hash_variant(DigestAlgorithm.SHA256, exported.path))  # raises on any mismatch
    assert theirs.provenance is not None and theirs.provenance.dirty
    assert theirs.provenance.kernel is not None and theirs.provenance.kernel.commit == "a" * 40
    (exported.path / "tiny" / "ops.py").write_text("def f(): return 1\n")  # an edit after the export
    with pytest.raises(DigestValidationError):
        theirs.digest.validate(Digest.hash_variant(DigestAlgorithm.SHA256, exported.path))


def test_the_kernel_depends_a_build_recorded_reach_metadata_json(tmp_path: Path) -> None:
    """A kernel-builder project's kernel-depends travel in the wheel's provenance record
    (externalParameters.project) to export's metadata.json."""
    table = load_table()
    (variant,) = expand(parse_matrix(TomlDocument.from_text('[matrix]\ntorch = ["2.13"]\n', "m.toml"), table,
                                     base_dir=REPO), table).variants
    wheel = make_wheel(tmp_path / "dist", "tiny", "0.1.0+cputorch2.13", build_record={"namespace": "_tiny_cpu_01"},
                       metadata="License-Expression: MIT\n")
    sha256 = hashlib.sha256(wheel.read_bytes()).hexdigest()
    depends = ({"repo-id": "kernels-community/deep-gemm", "revision": "34fa"},)
    record = provenance.write_provenance(
        provenance.BuiltWheel(variant, wheel, sha256, NATIVE.name, "tiny", "c" * 64, 315532800, "key", time.time(),
                              time.time(), None, depends), None)
    indexed = IndexedWheel(VariantId.parse(variant.id), "tiny", "0.1.0+cputorch2.13", wheel.name, sha256, wheel,
                           "2.13.0", None, None, record, core_metadata_sha256=None, size=wheel.stat().st_size)
    (exported,) = export_hf_layout([indexed], tmp_path / "hf", abi_check=False).exported
    written = json.loads((exported.path / "metadata.json").read_text())
    assert written["kernel-depends"] == list(depends)
    assert [d.repo_id for d in Metadata.read_from_file(exported.path / "metadata.json").kernel_depends] == [
        "kernels-community/deep-gemm"]
