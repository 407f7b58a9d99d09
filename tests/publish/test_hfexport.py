"""export --hf-layout on fake wheels: layout, metadata.json, atomic replacement (the real loader: tests/docker)."""

from __future__ import annotations

import json
from pathlib import Path

from dist_fakes import make_dist
from wheelfactory.publish.hf_layout import export_hf_layout
from wheelfactory.publish.index import collect
from wheelfactory.runner import manifest


def test_layout_and_metadata(tmp_path: Path) -> None:
    make_dist(tmp_path / "dist")
    wheels, _ = collect(tmp_path / "dist", manifest.read(tmp_path / "dist"))
    exported, skipped = export_hf_layout(wheels, tmp_path / "hf")
    assert not skipped and len(exported) == 3
    variant = tmp_path / "hf" / "build" / "torch213-cxx11-cu130-x86_64-linux"
    assert (variant / "tiny" / "__init__.py").read_text() == "VALUE = 1\n"
    metadata = json.loads((variant / "metadata.json").read_text())
    record = json.loads((variant / "tiny" / "_build.json").read_text())
    assert metadata == {"id": record["namespace"], "name": "tiny", "version": 0, "license": "MIT",
                        "python-depends": [], "backend": {"type": "cuda", "archs": ["8.0", "9.0", "12.0+PTX"]}}
    (variant / "stale.txt").write_text("from an older export")
    export_hf_layout(wheels, tmp_path / "hf")  # a re-export replaces each variant directory whole
    assert not (variant / "stale.txt").exists()
    assert not [p for p in (tmp_path / "hf" / "build").iterdir() if p.name.startswith(".")]
