"""KernelPackage in-process: lazy, once, thread-safe, the auto-mode safety net, the report."""

from __future__ import annotations

import itertools
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from wheelfactory._runtime import _loader
from wheelfactory._runtime._decision import Decision
from wheelfactory._runtime._errors import KernelLoadError, ReferenceFallbackWarning, SettingsError
from wheelfactory._runtime._loader import LoadResult
from wheelfactory._runtime._package import KernelPackage
from wheelfactory._runtime._report import Row, render_report

_names = itertools.count()

REFERENCE = """
import torch
def silu_and_mul(out, input):
    d = input.shape[-1] // 2
    out.copy_(torch.nn.functional.silu(input[..., :d]) * input[..., d:])
"""


@pytest.fixture
def fake_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """An importable package with only a reference module (no sources, no record)."""
    name = f"fakepkg{next(_names)}"
    package = tmp_path / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_reference.py").write_text(REFERENCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name, package


def kernel_package(name: str, package: Path, tmp_path: Path, load: str = "auto") -> KernelPackage:
    environ = {f"{name.upper()}_LOAD": load, f"{name.upper()}_CACHE_DIR": str(tmp_path / "cache"), "PATH": ""}
    return KernelPackage(name, package, ops=("silu_and_mul",), environ=environ)


def test_constructing_does_no_io() -> None:
    pkg = KernelPackage("nothere", "/nonexistent/dir", ops=("op",), environ={"NOTHERE_LOAD": "bogus"})
    assert pkg._loaded is None  # nothing read, not even the (invalid) settings


def test_invalid_load_mode_raises_at_first_use(fake_package: tuple[str, Path], tmp_path: Path) -> None:
    name, package = fake_package
    pkg = kernel_package(name, package, tmp_path, load="turbo")
    with pytest.raises(SettingsError, match=f"{name.upper()}_LOAD='turbo'"):
        pkg.backend_info()


def test_reference_mode_is_quiet(fake_package: tuple[str, Path], tmp_path: Path) -> None:
    name, package = fake_package
    pkg = kernel_package(name, package, tmp_path, load="reference")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = torch.randn(3, 8)
        out = torch.empty(3, 4)
        pkg.op("silu_and_mul")(out, x)
        info = pkg.backend_info()
    assert torch.allclose(out, torch.nn.functional.silu(x[:, :4]) * x[:, 4:])
    assert info["mode"] == "reference" and info["ops"] == {"silu_and_mul": "reference"}
    assert not (tmp_path / "cache").exists()


def test_unknown_op_is_an_attribute_error(fake_package: tuple[str, Path], tmp_path: Path) -> None:
    name, package = fake_package
    with pytest.raises(AttributeError, match="has no op 'nope'"):
        kernel_package(name, package, tmp_path, load="reference").op("nope")


def test_auto_without_anything_falls_back_with_one_warning(
    fake_package: tuple[str, Path], tmp_path: Path
) -> None:
    name, package = fake_package
    pkg = kernel_package(name, package, tmp_path)

    def silu_and_mul(x: torch.Tensor) -> torch.Tensor:  # what a kernel package's public op looks like
        out = x.new_empty((*x.shape[:-1], x.shape[-1] // 2))
        pkg.op("silu_and_mul")(out, x)
        return out

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            silu_and_mul(torch.randn(2, 4))
        info = pkg.backend_info()
    fallbacks = [w for w in caught if issubclass(w.category, ReferenceFallbackWarning)]
    assert len(fallbacks) == 1
    assert fallbacks[0].filename == __file__  # points at the caller's line
    assert info["mode"] == "reference"
    assert [d["candidate"] for d in info["decisions"]] == ["prebuilt", "jit", "reference"]  # type: ignore[index, union-attr]
    assert "source-only install" in str(info["reason"]) and "no JIT spec" in str(info["reason"])


@pytest.mark.parametrize(
    ("mode", "record"),
    [
        ("prebuilt", r"\[rejected\] prebuilt: no build record \(_build.json\): a source-only install$"),
        (
            "jit",
            (
                r"\[rejected\] prebuilt: skipped: \w+_LOAD=jit\n"
                r"  \[rejected\] jit: no JIT spec at .*the sources were not shipped$"
            ),
        ),
    ],
)
def test_forced_modes_raise_with_the_decision_record(
    fake_package: tuple[str, Path], tmp_path: Path, mode: str, record: str
) -> None:
    name, package = fake_package
    pkg = kernel_package(name, package, tmp_path, load=mode)
    with pytest.raises(
        KernelLoadError,
        match=rf"(?s){name.upper()}_LOAD={mode} cannot be satisfied.*Decision record:\n  {record}",
    ):
        pkg.op("silu_and_mul")


def test_load_happens_once_across_threads(
    fake_package: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, package = fake_package
    calls = []

    def slow_load(*args: object) -> LoadResult:
        calls.append(threading.get_ident())
        time.sleep(0.2)
        return LoadResult(
            package=name, mode="reference", reason="test", decisions=(Decision("reference", True, "test"),)
        )

    monkeypatch.setattr(_loader, "load_package", slow_load)
    pkg = kernel_package(name, package, tmp_path)
    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(pkg.op("silu_and_mul"))) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert len(results) == 16 and len({id(r) for r in results}) == 1


def test_auto_mode_safety_net_turns_surprises_into_one_warning(
    fake_package: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, package = fake_package

    def broken(*args: object) -> LoadResult:
        raise OSError("disk on fire")

    monkeypatch.setattr(_loader, "load_package", broken)
    with pytest.warns(ReferenceFallbackWarning, match="unexpected OSError: disk on fire"):
        info = kernel_package(name, package, tmp_path).backend_info()
    assert info["mode"] == "reference"
    with pytest.raises(OSError, match="disk on fire"):
        kernel_package(name, package, tmp_path, load="jit").backend_info()


def test_render_report_aligns_labels_and_statuses() -> None:
    text = render_report(
        "demo report", [("", (Row("torch", "2.13.0"),)), ("tools", (Row("ninja", "1.11", "[OKAY]", 1),))]
    )
    lines = text.splitlines()
    assert lines[1] == "demo report"
    assert "torch ................... 2.13.0" in lines
    assert "  ninja ................. [OKAY] 1.11" in lines


def test_cpu_library_in_a_gpu_torch_routes_other_devices_to_reference() -> None:
    calls: list[str] = []

    def kernel(*args: object) -> None:
        calls.append("kernel")

    def reference(*args: object) -> None:
        calls.append("reference")

    op = _loader._cpu_or_reference(kernel, reference)
    op(torch.empty(2), torch.empty(4))
    op(torch.empty(2, device="meta"), torch.empty(4, device="meta"))  # stands in for a CUDA tensor
    op(None, torch.empty(4, device="meta"))  # the first tensor argument decides
    assert calls == ["kernel", "reference", "reference"]


def test_without_ops_the_names_come_from_the_build_record_then_the_jit_spec(
        fake_package: tuple[str, Path], tmp_path: Path) -> None:
    """kernel.toml is the one declaration: a package made without ``ops=`` reads them from what
    the factory staged (``_build.json``, else ``_sources/jit.json``); with neither it has none."""
    import json

    name, package = fake_package
    environ = {f"{name.upper()}_LOAD": "reference"}
    assert KernelPackage(name, package, environ=environ).op_names == ()
    (package / "_sources").mkdir()
    (package / "_sources" / "jit.json").write_text(json.dumps({"ops": ["silu_and_mul"]}))
    assert KernelPackage(name, package, environ=environ).op_names == ("silu_and_mul",)
    (package / "_build.json").write_text(json.dumps({"ops": ["silu_and_mul", "other"]}))
    pkg = KernelPackage(name, package, environ=environ)
    assert pkg.op_names == ("silu_and_mul", "other")
    assert KernelPackage(name, package, ops=("given",), environ=environ).op_names == ("given",)
    (package / "_build.json").write_text('{"ops": ["not an identifier"]}')
    assert KernelPackage(name, package, environ=environ).op_names == ("silu_and_mul",)  # a bad record: the spec
