"""`wheelfactory build` on a noarch kernel-builder project (tests/fixtures/kb_noarch): one
pure-Python wheel per backend the matrix and build.toml agree on, no engine; then
`wheelfactory export --hf-layout` lays those wheels out and the real `kernels` loader runs the op."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import wheelfactory as wheelfactory_api
from tests.testkit import REPO, run_cli
from wheelfactory.runner import manifest

FIXTURE = REPO / "tests" / "fixtures" / "kb_noarch"
MATRIX = f'[project]\npath = "{FIXTURE}"\n\n[matrix]\ntorch = ["2.13", "2.14"]\nbackends = ["cpu", "cu130", "rocm6.4"]\n'


def wheelfactory(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wheelfactory", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, check=False)


def test_one_wheel_per_backend_then_the_hub_layout_loads(tmp_path: Path) -> None:
    (tmp_path / "matrix.toml").write_text(MATRIX)
    built = wheelfactory("build", cwd=tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    assert "torch-cpu: built" in built.stdout and "torch-cuda: built" in built.stdout
    wheels = sorted(p.relative_to(tmp_path / "dist").as_posix() for p in (tmp_path / "dist").rglob("*.whl"))
    # rocm is in the matrix but not in build.toml's backends: no wheel for it
    assert wheels == ["torch-cpu/kb_noarch-1+cpu-py3-none-any.whl", "torch-cuda/kb_noarch-1+cuda-py3-none-any.whl"]
    with zipfile.ZipFile(tmp_path / "dist" / wheels[0]) as archive:
        assert "kb_noarch/_ops.py" in archive.namelist()
        assert not any(n.endswith(".so") for n in archive.namelist())
    entries = manifest.read(tmp_path / "dist")  # one manifest for every kind: each wheel a variant
    assert sorted(entries) == ["torch-cpu", "torch-cuda"] and not (tmp_path / "dist" / "noarch.json").exists()
    assert [entries[v].wheel for v in sorted(entries)] == wheels

    # The API builds what the CLI builds: the same wheels, byte for byte, and the same manifest variants.
    result = wheelfactory_api.build(FIXTURE / "matrix.toml", out=tmp_path / "api")
    assert result.engine == "none" and not result.failed and result.not_built == ()
    assert [o.variant.id for o in result.outcomes] == ["torch-cpu", "torch-cuda"]
    from_api = manifest.read(tmp_path / "api")
    assert {v: (e.wheel, e.sha256, e.hub_metadata) for v, e in from_api.items()} == \
        {v: (e.wheel, e.sha256, e.hub_metadata) for v, e in entries.items()}

    layout = tmp_path / "hub"
    exported = wheelfactory("export", "-o", "dist", "--hf-layout", str(layout), cwd=tmp_path)
    assert exported.returncode == 0, exported.stdout + exported.stderr
    assert sorted(p.name for p in (layout / "build").iterdir()) == ["torch-cpu", "torch-cuda"]
    metadata = json.loads((layout / "build" / "torch-cpu" / "metadata.json").read_text())
    assert metadata["python-depends"] == ["einops"] and metadata["backend"] == {"type": "cpu"}

    stubs = tmp_path / "stubs"  # kernels checks each python-depends imports: an empty einops stands in
    (stubs / "einops").mkdir(parents=True)
    (stubs / "einops" / "__init__.py").write_text("")
    code = ("import torch, kernels; from pathlib import Path\n"
            f"m = kernels.get_local_kernel(Path({str(layout)!r}), backend='cpu')\n"
            "print(m.__name__, m.scale_add(torch.arange(3.0), torch.ones(3), 2.0).tolist())")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(stubs)}, check=False)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert loaded.stdout.split() == [metadata["id"], "[2.0,", "3.0,", "4.0]"]  # x + alpha * y


def test_a_damaged_noarch_entry_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "manifest.json").write_text(
        '{"schema": 1, "variants": {"torch-cpu": {"status": "built", "wheel": "../../etc/passwd", "sha256": "00", '
        '"seconds": 0, "key": "", "log": null, "hub_metadata": {}}}}')
    result = wheelfactory("export", "-o", "dist", "--hf-layout", str(tmp_path / "hub"), cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and "manifest.json" in result.stderr, result.stderr


@pytest.mark.parametrize("selection", [("--only", "torch-cpu"), ("--shard", "1/2")])
def test_only_and_shard_are_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                selection: tuple[str, str]) -> None:
    """--only and --shard pick the plan's compiled variants; a pure-Python kernel has none (its
    builds are one wheel per backend, seconds in all): asked for anyway, the build is refused,
    exit 2, before anything is written, never a silent build of everything."""
    (tmp_path / "matrix.toml").write_text(MATRIX)
    assert run_cli("build", "-m", str(tmp_path / "matrix.toml"), *selection) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{selection[0]} selects compiled variants" in err, err
    assert "kb-noarch is a pure-Python kernel" in err and "(torch-cpu, torch-cuda)" in err
    assert not list(tmp_path.rglob("*.whl")) and not (tmp_path / "dist" / "manifest.json").exists()


def test_the_builds_go_through_the_runner_an_unchanged_rerun_is_cached(tmp_path: Path) -> None:
    """Each backend's wheel is a variant of the runner's run like a compiled one: its log, its
    phases, its key; built again with nothing changed, it is cached, the same bytes kept."""
    (tmp_path / "matrix.toml").write_text(MATRIX)
    first = wheelfactory_api.build(tmp_path / "matrix.toml")
    assert [o.entry.status for o in first.outcomes] == ["built", "built"]
    entry = first.outcomes[0].entry
    assert entry.log == "torch-cpu/build.log" and entry.phases is not None and "verify" in entry.phases
    again = wheelfactory_api.build(tmp_path / "matrix.toml")
    assert [o.entry.status for o in again.outcomes] == ["cached", "cached"]
    assert [o.entry.sha256 for o in again.outcomes] == [o.entry.sha256 for o in first.outcomes]
