"""Wheel sets for another arch hold what that arch's markers select, and a dependency published
only as a source distribution gets a wheel built on the host when it is pure Python.

Real pip, real uv, a local folder of packages and no index (PIP_NO_INDEX): what torch 2.5.1's
``nvidia-*; platform_machine == "x86_64"`` requirements and ColossalAI's ``contexttimer`` (an sdist
with no wheel) do to a set, in miniature."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from wheelfactory.engines.target_resolution import uv_index_args
from wheelfactory.engines.wheelhouse import ContainerPython, Wheelhouse, WheelhouseRequest, local_wheels
from wheelfactory.errors import WheelhouseError


def wheel(directory: Path, name: str, *requires: str, tag: str = "py3-none-any") -> Path:
    path = directory / f"{name}-1.0-{tag}.whl"
    info = f"{name}-1.0.dist-info"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}/__init__.py", "")
        archive.writestr(f"{info}/METADATA", "".join([f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
                                                      *(f"Requires-Dist: {r}\n" for r in requires)]))
        archive.writestr(f"{info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n")
        archive.writestr(f"{info}/RECORD", "")
    return path


# A PEP 517 backend in the source tree (backend-path): the sdist builds with nothing from an index.
BACKEND = '''
import zipfile

NAME, TAG = {name!r}, {tag!r}


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    filename = f"{{NAME}}-1.0-{{TAG}}.whl"
    info = f"{{NAME}}-1.0.dist-info"
    with zipfile.ZipFile(f"{{wheel_directory}}/{{filename}}", "w") as archive:
        archive.writestr(f"{{NAME}}/__init__.py", "")
        archive.writestr(f"{{info}}/METADATA", f"Metadata-Version: 2.1\\nName: {{NAME}}\\nVersion: 1.0\\n")
        archive.writestr(f"{{info}}/WHEEL", f"Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: false\\nTag: {{TAG}}\\n")
        archive.writestr(f"{{info}}/RECORD", "")
    return filename


def build_sdist(sdist_directory, config_settings=None):
    raise NotImplementedError
'''


def sdist(directory: Path, name: str, *, tag: str = "py3-none-any") -> Path:
    path = directory / f"{name}-1.0.tar.gz"
    files = {"PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
             "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n',
             "backend.py": BACKEND.format(name=name, tag=tag)}
    with tarfile.open(path, "w:gz") as archive:
        for member, text in files.items():
            data = text.encode()
            entry = tarfile.TarInfo(f"{name}-1.0/{member}")
            entry.size = len(data)
            archive.addfile(entry, io.BytesIO(data))
    return path


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # only the folder below serves: pip and uv alike


def packages(tmp_path: Path) -> Path:
    folder = tmp_path / "packages"
    folder.mkdir()
    wheel(folder, "app", 'depx86; platform_machine == "x86_64"', 'deparm; platform_machine == "aarch64"',
          "puredep")
    wheel(folder, "depx86")
    wheel(folder, "deparm")
    sdist(folder, "puredep")
    return folder


@pytest.mark.parametrize("arch, wanted, unwanted", [("aarch64", "deparm", "depx86"), ("x86_64", "depx86", "deparm")])
def test_a_set_holds_what_the_targets_markers_select_and_a_pure_sdists_wheel(
        offline: None, tmp_path: Path, arch: str, wanted: str, unwanted: str) -> None:
    folder = packages(tmp_path)
    log = tmp_path / "set.log"
    request = WheelhouseRequest(("app",), (), ContainerPython("3.11", arch, "2.28"),
                                find_links=local_wheels((str(folder),)))
    found = Wheelhouse(tmp_path / "wheelhouse").ensure(request, log=log)
    names = {name.split("-")[0] for name, _ in found.wheels}
    assert names == {"app", wanted, "puredep"}, (names, log.read_text()[-3000:])
    assert unwanted not in names
    assert "puredep is published only as a source distribution: built puredep-1.0-py3-none-any.whl" in log.read_text()


def test_an_sdist_that_compiles_code_is_refused_naming_it_and_the_fix(offline: None, tmp_path: Path) -> None:
    folder = tmp_path / "packages"
    folder.mkdir()
    wheel(folder, "app", "cdep")
    sdist(folder, "cdep", tag="cp311-cp311-linux_x86_64")
    request = WheelhouseRequest(("app",), (), ContainerPython("3.11", "x86_64", "2.28"),
                                find_links=local_wheels((str(folder),)))
    with pytest.raises(WheelhouseError) as refused:
        Wheelhouse(tmp_path / "wheelhouse").ensure(request, log=tmp_path / "set.log")
    message = str(refused.value)
    assert "cdep is published only as a source distribution, and it compiles code" in message
    assert "[build] find_links or [test] find_links" in message
    assert not list((tmp_path / "wheelhouse").glob("sets/*")), "no set may look complete"


def test_uv_is_told_the_hosts_pip_settings() -> None:
    args, env = uv_index_args({"PIP_INDEX_URL": "http://mirror.invalid/simple",
                               "PIP_EXTRA_INDEX_URL": "http://a.invalid/simple http://b.invalid/simple",
                               "PIP_FIND_LINKS": "/opt/wheels", "PIP_TRUSTED_HOST": "mirror.invalid",
                               "PIP_CERT": "/etc/ssl/mirror.pem", "PIP_TIMEOUT": "60"})
    assert args == ["--no-config", "--index-url", "http://mirror.invalid/simple",
                    "--extra-index-url", "http://a.invalid/simple", "--extra-index-url", "http://b.invalid/simple",
                    "--find-links", "/opt/wheels", "--allow-insecure-host", "mirror.invalid"]
    assert env == {"SSL_CERT_FILE": "/etc/ssl/mirror.pem", "UV_HTTP_TIMEOUT": "60"}
    assert uv_index_args({"PIP_DEFAULT_TIMEOUT": "180"})[1] == {"UV_HTTP_TIMEOUT": "180"}  # our machines' spelling
    assert uv_index_args({"PIP_NO_INDEX": "true", "PIP_INDEX_URL": "http://mirror.invalid/simple"})[0] == [
        "--no-config", "--no-index"]
