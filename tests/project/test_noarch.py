"""Noarch (pure-Python) kernel-builder projects: the plan (one build per declared backend), the
py3-none-any wheel (installed by pip for real, imported, its op run, its RECORD checked) and the
Hugging Face layout (loaded by the real `kernels` package), plus each refusal as a ConfigError.

torch runs in subprocesses: each build registers ops in its own namespace, and a fresh
interpreter per build keeps the wheel's package and the layout's module apart."""

from __future__ import annotations

import base64
import csv
import dataclasses
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath

import pytest
from packaging.requirements import Requirement
from packaging.utils import parse_wheel_filename
from packaging.version import Version
from tests.testkit import REPO, pip_install
from wheelfactory.errors import ConfigError
from wheelfactory.project.build_toml import KernelBuilderSpec
from wheelfactory.project.build_toml_reader import load_build_toml
from wheelfactory.project.noarch import (
    NoarchBuild,
    export_noarch_layout,
    layout_metadata,
    plan_noarch,
    variant_name_for,
    write_noarch_wheel,
)

FIXTURE = REPO / "tests" / "fixtures" / "kb_noarch"
TIMEOUT = 300


def _copy_fixture(tmp_path: Path, build_toml: str | None = None) -> Path:
    root = tmp_path / "kb_noarch"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("__pycache__"))
    if build_toml is not None:
        (root / "build.toml").write_text(textwrap.dedent(build_toml))
    return root


def _python(code: str, *, path: list[Path], env: dict[str, str] | None = None) -> str:
    """Run ``code`` in a fresh interpreter with ``path`` first on sys.path; its stdout."""
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in path), **(env or {})}
    result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                            env=environ, timeout=TIMEOUT, cwd=path[0])
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout


@pytest.fixture(scope="module")
def spec() -> KernelBuilderSpec:
    return load_build_toml(FIXTURE)


@pytest.fixture(scope="module")
def builds(spec: KernelBuilderSpec) -> tuple[NoarchBuild, ...]:
    return plan_noarch(spec, ["cuda", "cpu", "rocm", "cpu"])


# ---- planning ---------------------------------------------------------------------------------


def test_plan_gives_one_build_per_declared_backend(builds: tuple[NoarchBuild, ...]) -> None:
    assert [b.backend for b in builds] == ["cpu", "cuda"]  # rocm is not declared: left out
    assert [b.variant_name for b in builds] == ["torch-cpu", "torch-cuda"]
    assert [b.version for b in builds] == ["1+cpu", "1+cuda"]
    assert [b.wheel_name for b in builds] == ["kb_noarch-1+cpu-py3-none-any.whl",
                                              "kb_noarch-1+cuda-py3-none-any.whl"]
    assert len({b.ops_name for b in builds}) == 2
    for build in builds:
        assert build.ops_name.startswith("_kb_noarch_")
        assert build.ops_name.isidentifier()
        assert build.requires == ("torch", "einops")
        assert build.python_depends == ("einops",)
        assert build.files == (PurePosixPath("__init__.py"), PurePosixPath("_ops.py"),
                               PurePosixPath("layers.py"))


def test_plan_is_stable_and_keyed_by_name_version_backend(spec: KernelBuilderSpec,
                                                          builds: tuple[NoarchBuild, ...]) -> None:
    assert plan_noarch(spec, ["cpu", "cuda"]) == builds
    (cpu,) = plan_noarch(spec, ["cpu"])
    assert cpu == builds[0]
    assert plan_noarch(spec, ["metal"]) == ()
    bumped = dataclasses.replace(spec, general=dataclasses.replace(spec.general, version=2))
    assert plan_noarch(bumped, ["cpu"])[0].ops_name != cpu.ops_name


def test_version_absent_is_zero(spec: KernelBuilderSpec) -> None:
    unversioned = dataclasses.replace(spec, general=dataclasses.replace(spec.general, version=None))
    (build,) = plan_noarch(unversioned, ["cpu"])
    assert build.version == "0+cpu"
    assert layout_metadata(build, unversioned)["version"] == 0


def test_backend_depends_and_torch_bounds_and_archs(tmp_path: Path) -> None:
    root = _copy_fixture(tmp_path, """\
        [general]
        name = "kb-noarch"
        edition = 5
        version = 3
        license = "mit"
        backends = ["cpu", "cuda", "xpu"]
        python-depends = ["einops"]

        [general.cuda]
        python-depends = ["nvidia-cutlass-dsl"]

        [general.xpu]
        python-depends = ["onednn"]

        [torch-noarch]
        pyext = ["py", "json"]
        cuda_capabilities = ["8.0", "9.0"]
        """)
    (root / "torch-ext" / "kb_noarch" / "configs").mkdir()
    (root / "torch-ext" / "kb_noarch" / "configs" / "tuned.json").write_text("{}")
    (root / "torch-ext" / "kb_noarch" / "notes.txt").write_text("not shipped")
    (root / "torch-ext" / "kb_noarch" / "__pycache__").mkdir()
    (root / "torch-ext" / "kb_noarch" / "__pycache__" / "stale.py").write_text("")
    spec = load_build_toml(root)
    cpu, cuda, xpu = plan_noarch(spec, ["cpu", "cuda", "xpu"])
    assert cpu.requires == ("torch", "einops")
    assert cuda.requires == ("torch", "einops", "nvidia-cutlass-dsl")
    assert xpu.requires == ("torch", "einops", "onednn-devel")  # the PyPI name of kernel-builder's onednn
    assert xpu.python_depends == ("einops", "onednn")  # metadata.json keeps kernel-builder's names
    assert PurePosixPath("configs/tuned.json") in cpu.files
    assert all(f.name != "notes.txt" and "__pycache__" not in f.parts for f in cpu.files)
    assert (cpu.archs, cuda.archs, xpu.archs) == ((), ("8.0", "9.0"), ())
    assert layout_metadata(cuda, spec)["backend"] == {"type": "cuda", "archs": ["8.0", "9.0"]}
    assert layout_metadata(cpu, spec)["backend"] == {"type": "cpu"}


def test_universal_kernel_gets_one_torch_universal_build(tmp_path: Path) -> None:
    root = _copy_fixture(tmp_path, """\
        [general]
        name = "kb_noarch"

        [torch]
        universal = true
        """)
    spec = load_build_toml(root)
    assert spec.edition == 1 and spec.general.universal
    (build,) = plan_noarch(spec, ["cuda", "rocm"])
    assert (build.backend, build.variant_name, build.version) == ("universal", "torch-universal", "0+universal")
    metadata = layout_metadata(build, spec)
    assert metadata["name"] == "kb-noarch" and metadata["backend"] == {"type": "cpu"}
    assert metadata["license"] == "unknown"


def test_variant_names_follow_the_loader() -> None:
    assert [variant_name_for(b) for b in ("cpu", "cuda", "rocm", "xpu", "metal", "cann")] == \
        ["torch-cpu", "torch-cuda", "torch-rocm", "torch-xpu", "torch-metal", "torch-npu"]


# ---- refusals ---------------------------------------------------------------------------------


def test_invalid_python_depends_is_a_config_error(tmp_path: Path) -> None:
    root = _copy_fixture(tmp_path, """\
        [general]
        name = "kb-noarch"
        edition = 5
        version = 1
        license = "apache-2.0"
        backends = ["cpu"]
        python-depends = ["einops-"]

        [torch-noarch]
        """)
    spec = load_build_toml(root)
    with pytest.raises(ConfigError) as raised:
        plan_noarch(spec, ["cpu"])
    error = raised.value
    assert error.file == str(root / "build.toml")
    assert error.key == "general.python-depends"
    assert "'einops-'" in str(error) and error.hint
    assert "\n" not in str(error)


def test_invalid_backend_python_depends_names_its_table(tmp_path: Path) -> None:
    root = _copy_fixture(tmp_path, """\
        [general]
        name = "kb-noarch"
        edition = 5
        version = 1
        license = "apache-2.0"
        backends = ["cpu", "cuda"]
        python-depends = ["einops"]

        [general.cuda]
        python-depends = ["einops", "cutlass."]

        [torch-noarch]
        """)
    spec = load_build_toml(root)
    (cpu,) = plan_noarch(spec, ["cpu"])  # the cpu build does not read [general.cuda]
    assert cpu.requires == ("torch", "einops")
    with pytest.raises(ConfigError) as raised:
        plan_noarch(spec, ["cuda"])
    assert raised.value.key == "general.cuda.python-depends" and "'cutlass.'" in str(raised.value)


def test_symlink_escaping_the_project_is_refused(tmp_path: Path) -> None:
    root = _copy_fixture(tmp_path)
    outside = tmp_path / "outside.py"
    outside.write_text("SECRET = 1\n")
    (root / "torch-ext" / "kb_noarch" / "leak.py").symlink_to(outside)
    spec = load_build_toml(root)
    with pytest.raises(ConfigError, match="leak.py is a symlink that leads outside the project") as raised:
        plan_noarch(spec, ["cpu"])
    assert raised.value.file == str(root / "build.toml")


def test_symlinked_directory_escaping_the_project_is_refused(tmp_path: Path) -> None:
    root = _copy_fixture(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    (root / "torch-ext" / "kb_noarch" / "vendored").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ConfigError, match="vendored is a symlink"):
        plan_noarch(load_build_toml(root), ["cpu"])


def test_symlink_inside_the_project_is_shipped(tmp_path: Path) -> None:
    root = _copy_fixture(tmp_path)
    (root / "shared").mkdir()
    (root / "shared" / "helpers.py").write_text("HELPER = 42\n")
    (root / "torch-ext" / "kb_noarch" / "helpers.py").symlink_to(root / "shared" / "helpers.py")
    spec = load_build_toml(root)
    (build,) = plan_noarch(spec, ["cpu"])
    assert PurePosixPath("helpers.py") in build.files
    wheel = write_noarch_wheel(build, spec, tmp_path / "dist")
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read("kb_noarch/helpers.py") == b"HELPER = 42\n"


def test_a_compiled_kernel_is_not_noarch() -> None:
    spec = load_build_toml(REPO / "tests" / "fixtures" / "kb_relu")
    with pytest.raises(ConfigError, match=r"not a noarch kernel: it compiles \[kernel.relu_cpu\]"):
        plan_noarch(spec, ["cpu"])


# ---- the wheel --------------------------------------------------------------------------------


def _check_record(wheel: Path) -> dict[str, str]:
    """Every member's RECORD line matches its bytes, and RECORD lists every member; METADATA."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/RECORD"))
        rows = list(csv.reader(io.StringIO(archive.read(f"{info}/RECORD").decode())))
        assert sorted(row[0] for row in rows) == sorted(names)
        for path, digest, size in rows:
            if path == f"{info}/RECORD":
                assert (digest, size) == ("", "")
                continue
            data = archive.read(path)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={expected}" and int(size) == len(data), path
        assert names[-1] == f"{info}/RECORD"
        assert all(archive.getinfo(n).date_time == (1980, 1, 1, 0, 0, 0) for n in names)
        wheel_file = archive.read(f"{info}/WHEEL").decode()
        assert "Root-Is-Purelib: true" in wheel_file and "Tag: py3-none-any" in wheel_file
        return dict(HeaderParser().parsestr(archive.read(f"{info}/METADATA").decode()).items())


@pytest.mark.parametrize("index", [0, 1], ids=["cpu", "cuda"])
def test_wheel_installs_imports_and_runs(index: int, spec: KernelBuilderSpec,
                                         builds: tuple[NoarchBuild, ...], tmp_path: Path) -> None:
    build = builds[index]
    wheel = write_noarch_wheel(build, spec, tmp_path / "dist")
    assert wheel == tmp_path / "dist" / build.wheel_name
    name, version, _, tags = parse_wheel_filename(wheel.name)
    assert (name, version, {str(t) for t in tags}) == ("kb-noarch", Version(build.version), {"py3-none-any"})

    with zipfile.ZipFile(wheel) as archive:
        ops = archive.read("kb_noarch/_ops.py").decode()
    assert f"ops = torch.ops.{build.ops_name}\n" in ops
    assert f'return f"{build.ops_name}::{{op_name}}"' in ops
    assert "_kb_noarch_dev" not in ops  # the tree's own _ops.py was replaced

    with zipfile.ZipFile(wheel) as archive:
        metadata_text = archive.read(f"{build.dist_info}/METADATA").decode()
    headers = HeaderParser().parsestr(metadata_text)
    assert headers["Metadata-Version"] == "2.1"
    assert (headers["Name"], headers["Version"]) == ("kb-noarch", build.version)
    assert headers["Requires-Python"] == ">=3.9" and headers["License"] == "apache-2.0"
    assert {Requirement(r).name for r in headers.get_all("Requires-Dist")} == {"torch", "einops"}
    _check_record(wheel)

    again = write_noarch_wheel(build, spec, tmp_path / "again")
    assert again.read_bytes() == wheel.read_bytes()  # reproducible
    assert [p.name for p in (tmp_path / "dist").iterdir()] == [build.wheel_name]  # no temp file left

    target = tmp_path / "site"
    pip_install(sys.executable, "--no-deps", "--no-index", "--disable-pip-version-check", "--target", str(target),
                str(wheel), timeout=TIMEOUT)
    assert (target / build.dist_info / "RECORD").is_file()
    out = _python(textwrap.dedent(f"""\
        import json, torch, kb_noarch
        from kb_noarch import _ops, layers
        x, y = torch.arange(4.0), torch.ones(4)
        print(json.dumps({{
            "file": kb_noarch.__file__,
            "namespace": _ops.ops.name,
            "direct": torch.ops.{build.ops_name}.scale_add(x, y, 3.0).tolist(),
            "wrapped": kb_noarch.scale_add(x, y, 2.0).tolist(),
            "layer": layers.ScaleAdd()(x, y).tolist(),
        }}))
        """), path=[target])
    result = json.loads(out)
    assert Path(result["file"]).is_relative_to(target)
    assert result["namespace"] == build.ops_name
    assert result["direct"] == [3.0, 4.0, 5.0, 6.0]
    assert result["wrapped"] == result["layer"] == [2.0, 3.0, 4.0, 5.0]


# ---- the Hugging Face layout ------------------------------------------------------------------


def test_layout_loads_with_the_kernels_package(spec: KernelBuilderSpec, builds: tuple[NoarchBuild, ...],
                                               tmp_path: Path) -> None:
    layout = tmp_path / "layout"
    for build in builds:
        variant = export_noarch_layout(build, spec, layout)
        assert variant == layout / "build" / build.variant_name
        assert sorted(p.relative_to(variant).as_posix() for p in variant.rglob("*") if p.is_file()) == \
            ["kb_noarch/__init__.py", "kb_noarch/_ops.py", "kb_noarch/layers.py", "metadata.json"]
        assert json.loads((variant / "metadata.json").read_text()) == {
            "id": build.ops_name, "name": "kb-noarch", "version": 1, "license": "apache-2.0",
            "python-depends": ["einops"], "backend": {"type": build.backend}}
    export_noarch_layout(builds[0], spec, layout)  # again: replaced whole, nothing left beside it
    assert sorted(p.name for p in (layout / "build").iterdir()) == ["torch-cpu", "torch-cuda"]

    universal_root = _copy_fixture(tmp_path / "universal", """\
        [general]
        name = "kb_noarch"

        [torch]
        universal = true
        """)
    universal_spec = load_build_toml(universal_root)
    (universal,) = plan_noarch(universal_spec, ["cpu"])
    universal_layout = tmp_path / "universal-layout"
    export_noarch_layout(universal, universal_spec, universal_layout)

    # kernels checks that each python-depends is importable: an empty einops stands in for it.
    stubs = tmp_path / "stubs"
    (stubs / "einops").mkdir(parents=True)
    (stubs / "einops" / "__init__.py").write_text("")
    out = _python(textwrap.dedent(f"""\
        import json
        from pathlib import Path
        import torch
        import kernels
        from kernels._rust import Metadata
        from kernels.variants import get_variants_local, parse_variant
        layout, universal = Path({str(layout)!r}), Path({str(universal_layout)!r})
        found = sorted(v.variant_str for v in get_variants_local(layout / "build"))
        found += [v.variant_str for v in get_variants_local(universal / "build")]
        kinds = [type(parse_variant(name)).__name__ for name in found]
        ids = [Metadata.read_from_file(layout / "build" / n / "metadata.json").id for n in found[:2]]
        x, y = torch.arange(4.0), torch.ones(4)
        module = kernels.get_local_kernel(layout, backend="cpu")
        loaded = kernels.get_local_kernel(universal)
        print(json.dumps({{
            "found": found, "kinds": kinds, "ids": ids,
            "module": module.__name__, "op": module.scale_add(x, y, 2.0).tolist(),
            "layer": module.layers.ScaleAdd()(x, y).tolist(),
            "universal": loaded.__name__, "universal_op": loaded.scale_add(x, y, 1.0).tolist(),
        }}))
        """), path=[tmp_path, stubs], env={"HF_HUB_OFFLINE": "1"})
    result = json.loads(out.strip().splitlines()[-1])
    assert result["found"] == ["torch-cpu", "torch-cuda", "torch-universal"]
    assert result["kinds"] == ["NoarchVariant"] * 3
    assert result["ids"] == [b.ops_name for b in builds]
    assert result["module"] == builds[0].ops_name  # the CPU torch here picks torch-cpu
    assert result["op"] == result["layer"] == [2.0, 3.0, 4.0, 5.0]
    assert result["universal"] == universal.ops_name
    assert result["universal_op"] == [1.0, 2.0, 3.0, 4.0]
