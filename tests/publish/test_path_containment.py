"""No path read from dist input escapes its root (issue 16): hostile wheels and manifests, through the CLI.

Real files in tmp_path: a wheel whose members climb out of (or sit above) the export directory, and a
manifest whose ``wheel`` or ``torch_version`` points outside dist/. Each command refuses with one line,
and the tree around it is byte for byte what it was.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from tests.testkit import make_wheel, write_provenance
from wheelfactory.runner import manifest

VID = "torch213-cxx11-cpu-x86_64-linux"
VERSION = "0.1.0+cputorch2.13"


def wheelfactory(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wheelfactory", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)


def tree(root: Path) -> dict[str, bytes | str]:
    """Every path under ``root`` (symlinks as their target), with its bytes; the output lock left out."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        if path.name == manifest.LOCK:
            continue
        key = path.relative_to(root).as_posix()
        found[key] = f"-> {path.readlink()}" if path.is_symlink() else path.read_bytes() if path.is_file() else "dir"
    return found


def make_one(dist: Path, *, files: dict[str, str | bytes] | None = None, wheel: str | None = None,
             torch_version: str = "2.13.0", toolkit: str | None = None) -> Path:
    """dist/ with one built variant (a small valid wheel) and its manifest; ``wheel`` overrides the
    path the manifest names for it. Returns the wheel."""
    made = make_wheel(dist / VID, "tiny", VERSION, files={"tiny/__init__.py": "VALUE = 1\n", **(files or {})},
                      build_record={"namespace": "_tiny_cpu_12345678", "arch_list": []},
                      metadata="Requires-Python: >=3.9\nLicense-Expression: MIT\n")
    write_provenance(made, VID)  # as a build writes it (runner/provenance.py)
    digest = hashlib.sha256(made.read_bytes()).hexdigest()
    manifest.write(dist, {VID: manifest.Entry(status="built", wheel=wheel or f"{VID}/{made.name}", sha256=digest,
                                              seconds=1.0, key="k", log=f"{VID}/build.log", error=None,
                                              engine="docker", image=None, torch_version=torch_version,
                                              toolkit=toolkit)})
    return made


def assert_one_line(result: subprocess.CompletedProcess[str], code: int, *texts: str) -> None:
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("wheelfactory: ")
    for text in texts:
        assert text in result.stderr, result.stderr


@pytest.mark.parametrize("member", ["tiny/../../../x", "/abs/x"])
def test_export_refuses_a_wheel_whose_members_leave_the_layout(tmp_path: Path, member: str) -> None:
    work = tmp_path / "a" / "b" / "c"  # deep enough that ../../../x lands inside tmp_path, where we look
    dist = work / "dist"
    made = make_one(dist, files={member: "written outside\n"})
    assert member in zipfile.ZipFile(made).namelist()  # the hostile name is really in the wheel
    hub = work / "hub"
    before = tree(tmp_path)
    result = wheelfactory("export", "-o", "dist", "--hf-layout", str(hub), cwd=work)
    assert_one_line(result, 2, repr(member), made.name)
    after = tree(tmp_path)
    outside = {k: v for k, v in after.items() if not (tmp_path / k).is_relative_to(hub)}
    assert outside == before  # nothing written outside the layout directory (nor moved, nor changed)
    assert not Path("/abs/x").exists()
    assert [p.relative_to(hub).as_posix() for p in hub.rglob("*")] == ["build"]  # no variant, no temp directory


def elsewhere_wheel(tmp_path: Path) -> Path:
    """A real wheel outside dist/, which a careless publisher would take."""
    return make_wheel(tmp_path / "elsewhere", "tiny", VERSION, files={"tiny/__init__.py": "STOLEN = 1\n"})


@pytest.mark.parametrize("how", ["relative", "absolute"])
@pytest.mark.parametrize("command", ["index", "export", "report"])
def test_a_manifest_wheel_outside_dist_is_refused(tmp_path: Path, how: str, command: str) -> None:
    work = tmp_path / "work"
    dist = work / "dist"
    stolen = elsewhere_wheel(tmp_path)
    name = f"../../elsewhere/{stolen.name}" if how == "relative" else str(stolen)
    make_one(dist, wheel=name)
    (work / "dist" / VID / "build.log").write_text("built\n")
    before = tree(tmp_path)
    args = {"index": ["index", "-o", "dist"], "export": ["export", "-o", "dist", "--hf-layout", str(work / "hub")],
            "report": ["report", "-o", "dist"]}[command]
    result = wheelfactory(*args, cwd=work)
    assert_one_line(result, 2, str(dist / "manifest.json"), repr(name))
    after = tree(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("work/hub")} == before  # nothing published
    assert not any(p.is_file() for p in (work / "hub").rglob("*"))


@pytest.mark.parametrize("field, value", [
    *[("torch_version", v) for v in ("/../../../../elsewhere/x", "2.13.0/../../x", "../x", "2.13.0\n")],
    # index.json carries the toolkit to select.py, which would refuse the whole listing: refused before
    *[("toolkit", v) for v in ("", "thirteen", "13", "13.0/../x")],
])
def test_index_refuses_a_release_field_that_is_not_a_release(tmp_path: Path, field: str, value: str) -> None:
    work = tmp_path / "work"
    dist = work / "dist"
    make_one(dist, **{field: value})
    before = tree(tmp_path)
    result = wheelfactory("index", "-o", "dist", cwd=work)
    assert_one_line(result, 2, str(dist / "manifest.json"), field, repr(value))
    assert tree(tmp_path) == before  # no generation, no page anywhere
    assert not (dist / "index").exists() and not (tmp_path / "elsewhere").exists()


def test_a_plain_dist_still_indexes_exports_and_reports(tmp_path: Path) -> None:
    """The same dist, untouched: every command works (the checks refuse only what leaves dist/)."""
    work = tmp_path / "work"
    make_one(work / "dist")
    (work / "dist" / VID / "build.log").write_text("built\n")
    for args in (["index", "-o", "dist"], ["export", "-o", "dist", "--hf-layout", "hub"], ["report", "-o", "dist"]):
        result = wheelfactory(*args, cwd=work)
        assert result.returncode == 0, result.stdout + result.stderr
    assert (work / "dist" / "index" / "whl" / "torch-2.13.0+cpu.html").is_file()
    assert (work / "hub" / "build" / VID / "tiny" / "__init__.py").read_text() == "VALUE = 1\n"


@pytest.mark.parametrize("member", ["tiny/../../x", "/tiny/x", "tiny\\..\\..\\x"])
def test_noarch_unpack_refuses_a_wheel_whose_members_leave_dest(tmp_path: Path, member: str) -> None:
    from wheelfactory.errors import ConfigError
    from wheelfactory.project.noarch import unpack_package

    made = make_wheel(tmp_path / "dist", "tiny", "0.1.0", files={member: "written outside\n"})
    dest = tmp_path / "deep" / "dest"
    before = tree(tmp_path)
    with pytest.raises(ConfigError, match="is not a path inside the wheel") as caught:
        unpack_package(made, "tiny", dest)
    assert "\n" not in str(caught.value) and made.name in str(caught.value)
    assert tree(tmp_path) == before  # refused whole: not even the safe members were written


@pytest.mark.parametrize(("field", "value"), [("wheel", "../../elsewhere/x.whl"), ("wheel", "/abs/x.whl"),
                                              ("variant", "../../elsewhere"), ("variant", "a/b")])
def test_a_noarch_entry_naming_paths_outside_dist_is_refused(tmp_path: Path, field: str, value: str) -> None:
    """A pure-Python (noarch) build's manifest entry: its wheel and its variant id (the layout
    directory) must stay inside dist/ and the layout."""
    from wheelfactory.runner import manifest

    dist = tmp_path / "work" / "dist"
    dist.mkdir(parents=True)
    record = {"variant": "torch-cpu", "wheel": "torch-cpu/tiny-0.1.0-py3-none-any.whl", field: value}
    manifest.write(dist, {record["variant"]: manifest.Entry(
        status="built", wheel=record["wheel"], sha256="0" * 64, seconds=0.1, key="k", log=None,
        hub_metadata={"id": "_tiny_0", "backend": {"type": "cpu"}})})
    before = tree(tmp_path)
    result = wheelfactory("export", "-o", "dist", "--hf-layout", "hub", cwd=tmp_path / "work")
    assert_one_line(result, 2, str(dist / "manifest.json"), repr(value))
    assert tree(tmp_path) == before
