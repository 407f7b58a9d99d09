"""`wheelfactory compat refresh` against real HTTP indexes served here: a PEP 503 HTML one and a PEP
691 JSON one, whose torch pages list fake torch 2.16.0 wheels (two Pythons, PyPI's unlabelled build
and a +cu132 build). The table is behind: exit 1 and a [torch."2.16"] fragment; --write gives a
table that `plan --compat` plans torch 2.16 with; a table that knows it all: exit 0."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from tests.testkit import REPO
from tests.ci.torch_index_kit import FILES, write_index
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.index_pages import listed_files
from wheelfactory.plan.table_refresh import compare
from wheelfactory.plan.torch_releases import build_of_metadata, release_facts, torch_files


def refresh(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wheelfactory", "compat", "refresh", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("kind", ["html", "json"])
def test_a_new_release_is_reported_written_and_planned(http_index: tuple[Path, str], kind: str) -> None:
    root, base = http_index
    write_index(root / kind, kind, FILES)
    index = f"{base}/{kind}/simple"
    table = root / "refreshed.toml"
    result = refresh("--index", index, "--write", str(table), cwd=root)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    out = result.stdout
    assert "# - 2.16 release: torch 2.16.0 is not in the table" in out
    fragment = out[out.index('[torch."2.16"]'):]
    assert 'build_version = "2.16.0"' in fragment and 'python = ["3.12", "3.13"]' in fragment
    assert 'cuda = ["13.2"]' in fragment and 'wheel_platform = "manylinux_2_28"' in fragment
    assert f"compat refresh: {index}" in fragment and "unverified" in fragment
    plan = subprocess.run([sys.executable, "-m", "wheelfactory", "plan", "--format", "json", "--compat", str(table),
                           "-m", str(matrix(root))], capture_output=True, text=True, timeout=300, check=False)
    assert plan.returncode == 0, plan.stderr
    ids = {v["id"] for v in json.loads(plan.stdout)["variants"]}
    assert {"torch216-cxx11-cpu-x86_64-linux", "torch216-cxx11-cu132-x86_64-linux"} <= ids, ids
    again = refresh("--index", index, "--compat", str(table), cwd=root)  # a table that knows everything listed
    assert again.returncode == 0 and again.stdout == "", again.stdout + again.stderr
    assert "knows every torch release" in again.stderr


def matrix(root: Path) -> Path:
    path = root / "matrix.toml"
    path.write_text(f'[project]\npath = "{REPO / "kernels" / "fusedops"}"\n\n[matrix]\ntorch = ["2.16"]\n'
                    'backends = ["cpu", "cuda"]\n')
    return path


def test_known_releases_report_patches_builds_pythons_and_floors() -> None:
    table = load_table()
    newest = table.releases[-1]
    major, minor = newest.minor.split(".")
    later = f"{newest.minor}.{int(newest.build_version.split('.')[2]) + 1}"
    names = [f"torch-{later}-cp399-cp399-manylinux_2_34_x86_64.whl",
             f"torch-{newest.build_version}+rocm9.9-cp312-cp312-manylinux_2_34_x86_64.whl",
             f"torch-{newest.build_version}+cu990-cp312-cp312-manylinux_2_34_x86_64.whl"]
    result = compare(table, release_facts(torch_files(names, "http://x/simple")))
    kinds = {(f.minor, f.what) for f in result.findings}
    assert kinds == {(newest.minor, "patch"), (newest.minor, "build"), (newest.minor, "python"),
                     (newest.minor, "platform"), (newest.minor, "toolkit")}, result.findings
    assert not result.fragments  # known release: for a person to edit
    (stub_version, stub), = result.toolkits
    assert stub_version == "99.0" and "copied from CUDA" in stub and "unverified" in stub
    assert major and minor


PAGE_URL = "http://index.example/simple/torch/"
HTML_PAGE = (b'<a href="../../f/torch-2.9.0-cp312-none-any.whl#sha256=00" data-core-metadata="sha256=11">a</a>'
             b'<a href="torch-2.9.0%2Bcpu-cp312-none-any.whl" data-dist-info-metadata>b</a>'
             b'<a href="torch-2.8.0-cp312-none-any.whl" data-core-metadata="false">c</a><a>no href</a>')
JSON_PAGE = json.dumps({"files": [
    {"filename": "torch-2.9.0-cp312-none-any.whl", "url": "../../f/torch-2.9.0-cp312-none-any.whl#sha256=00",
     "core-metadata": {"sha256": "11"}},
    {"filename": "torch-2.9.0+cpu-cp312-none-any.whl", "url": "torch-2.9.0%2Bcpu-cp312-none-any.whl",
     "dist-info-metadata": True},
    {"filename": "torch-2.8.0-cp312-none-any.whl", "url": "torch-2.8.0-cp312-none-any.whl", "core-metadata": False},
    {"url": "no-filename.whl"}]}).encode()


@pytest.mark.parametrize("body, content_type", [(HTML_PAGE, "text/html"),
                                                (JSON_PAGE, "application/vnd.pypi.simple.v1+json")])
def test_one_parse_gives_the_files_and_where_their_metadata_is_served(body: bytes, content_type: str) -> None:
    from wheelfactory.plan.index_pages import ListedFile

    found = listed_files(body, content_type, PAGE_URL)
    assert [dataclasses.replace(f, url="") for f in found] == [
        ListedFile("torch-2.9.0-cp312-none-any.whl", "http://index.example/f/torch-2.9.0-cp312-none-any.whl.metadata"),
        ListedFile("torch-2.9.0+cpu-cp312-none-any.whl",
                   "http://index.example/simple/torch/torch-2.9.0%2Bcpu-cp312-none-any.whl.metadata"),
        ListedFile("torch-2.8.0-cp312-none-any.whl", None)]
    assert [f.url for f in found] == [
        "http://index.example/f/torch-2.9.0-cp312-none-any.whl",
        "http://index.example/simple/torch/torch-2.9.0%2Bcpu-cp312-none-any.whl",
        "http://index.example/simple/torch/torch-2.8.0-cp312-none-any.whl"]


@pytest.mark.parametrize("body, content_type", [
    (b"\xff\xfe", "text/html"), (b"plain text", "text/plain"), (b'{"files": 3}', "application/vnd.pypi.simple.v1+json"),
    (b"{", "application/vnd.pypi.simple.v1+json"),
])
def test_a_page_that_is_not_an_index_is_refused(body: bytes, content_type: str) -> None:
    from wheelfactory.plan.index_pages import InvalidPage

    with pytest.raises(InvalidPage):
        listed_files(body, content_type, PAGE_URL)


def test_bad_input_is_one_line_exit_2(http_index: tuple[Path, str]) -> None:
    root, base = http_index
    (root / "junk" / "simple" / "torch").mkdir(parents=True)
    (root / "junk" / "simple" / "torch" / "index.html").write_bytes(b"\xff\xfe\x00")
    write_index(root / "empty", "html", ["numpy-2.0.0-cp312-cp312-manylinux_2_28_x86_64.whl"])
    table = root / "table.toml"
    table.write_text((REPO / "factory" / "wheelfactory" / "data" / "compat.toml").read_text())
    write_index(root / "new", "html", FILES)
    cases = {
        "missing": ("--index", f"{base}/nowhere/simple"),
        "unreachable": ("--index", "http://127.0.0.1:9/simple"),
        "not a page": ("--index", f"{base}/junk/simple"),
        "no torch": ("--index", f"{base}/empty/simple"),
        "scheme": ("--index", "ftp://x/simple"),
        "write onto the table read": ("--index", f"{base}/new/simple", "--compat", str(table), "--write", str(table)),
    }
    for name, args in cases.items():
        result = refresh(*args, cwd=root)
        assert result.returncode == 2, (name, result.stdout, result.stderr)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("wheelfactory: ") and "Traceback" not in result.stderr, \
            (name, result.stderr)
    assert table.read_text() == (REPO / "factory" / "wheelfactory" / "data" / "compat.toml").read_text()  # untouched


METADATA = "Metadata-Version: 2.1\nName: torch\nVersion: 2.16.0\nRequires-Dist: filelock\n" \
           "Requires-Dist: cuda-toolkit[cublas,cudart]==13.0.3; platform_system == \"Linux\"\n"


@pytest.mark.parametrize("kind", ["html", "json"])
def test_the_default_build_is_read_from_the_wheels_metadata_where_the_index_serves_it(
        http_index: tuple[Path, str], kind: str) -> None:
    """PyPI's own wheel has no label in its name; its METADATA (PEP 658) says which CUDA it is."""
    root, base = http_index
    write_index(root / kind, kind, FILES, metadata={FILES[0]: METADATA})
    result = refresh("--index", f"{base}/{kind}/simple", cwd=root)
    assert result.returncode == 1, result.stderr
    fragment = result.stdout[result.stdout.index('[torch."2.16"]'):]
    assert 'pypi_default = "cu130"' in fragment and 'cuda = ["13.0", "13.2"]' in fragment, fragment
    assert f"pypi_default from the unlabelled wheel's METADATA ({FILES[0]}: cuda-toolkit==13.0.3)" in fragment
    assert "unverified: pypi_default" not in fragment


@pytest.mark.parametrize("text, expected", [
    (METADATA, ("cu130", "cuda-toolkit==13.0.3")),
    ("Name: torch\nVersion: 2.8.0\nRequires-Dist: nvidia-cuda-runtime-cu12==12.8.90; platform_system == \"Linux\"\n",
     ("cu128", "nvidia-cuda-runtime-cu12==12.8.90")),
    ("Name: torch\nVersion: 2.16.0\nRequires-Dist: filelock\n", ("cpu", "no CUDA requirement")),
    ("<html>not metadata</html>", None),
])
def test_build_of_metadata(text: str, expected: tuple[str, str] | None) -> None:
    assert build_of_metadata(text) == expected


def test_pips_index_is_asked_from_pip_through_the_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without PIP_INDEX_URL: pip's configuration first, else pip's own default, else a one-line
    error; a fake runner stands for pip (its stderr noise comes before what it prints)."""
    from wheelfactory.ci.compat_refresh import pip_index_url
    from wheelfactory.errors import ConfigError
    from wheelfactory.support.proc import CommandFailed

    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    answers: dict[str, str | None] = {}

    def pip(command: Sequence[str], **_: object) -> str:
        answer = answers["config" if "config" in command else "default"]
        if answer is None:
            raise CommandFailed(command, 1, "", None)
        return answer

    answers.update(config="global.timeout='60'\nglobal.index-url='http://mirror.example.invalid/simple'\n",
                   default="http://default.example.invalid/simple\n")
    assert pip_index_url("python", runner=pip) == "http://mirror.example.invalid/simple"
    answers.update(config=None, default="WARNING: a deprecation\nhttp://default.example.invalid/simple\n")
    assert pip_index_url("python", runner=pip) == "http://default.example.invalid/simple"
    answers.update(default=None)
    with pytest.raises(ConfigError, match="no package index is configured for pip"):
        pip_index_url("python", runner=pip)


AARCH64_CPU_METADATA = ("Name: torch\nVersion: 2.16.0\nRequires-Dist: filelock\nRequires-Dist: "
                        "nvidia-cuda-runtime-cu12==12.8.90; platform_system == \"Linux\" and platform_machine == \"x86_64\"\n")


def test_an_aarch64_wheel_whose_cuda_requirements_are_marked_x86_64_is_a_cpu_build() -> None:
    """torch 2.4-2.10 ship one METADATA text for both arches: its nvidia-* requirements carry
    `platform_machine == "x86_64"`, so on aarch64 the wheel is the CPU build (~100 MB)."""
    assert build_of_metadata(AARCH64_CPU_METADATA) == ("cu128", "nvidia-cuda-runtime-cu12==12.8.90")
    assert build_of_metadata(AARCH64_CPU_METADATA, "aarch64") == ("cpu", "no CUDA requirement")
    assert build_of_metadata(METADATA, "aarch64") == ("cu130", "cuda-toolkit==13.0.3")


def test_a_new_releases_fragment_says_which_build_pypis_aarch64_wheel_is(tmp_path: Path) -> None:
    from wheelfactory.plan.compat import load_table
    from wheelfactory.plan.table_refresh import compare
    from wheelfactory.plan.torch_releases import release_facts, torch_files

    table = load_table()
    names = ["torch-2.16.0-cp312-cp312-manylinux_2_28_x86_64.whl", "torch-2.16.0-cp312-cp312-manylinux_2_28_aarch64.whl"]
    facts = release_facts(torch_files(names, "pypi"))
    text = dict(compare(table, facts, {"2.16": ("cu132", "x86 wheel: cuda-toolkit==13.2.2")},
                        {"2.16": ("cpu", "arm wheel: no CUDA requirement")}).fragments)["2.16"]
    assert 'pypi_aarch64 = "cpu"' in text and 'aarch64 = ["cpu"]' in text
    assert "pypi_aarch64 from the unlabelled aarch64 wheel's METADATA (arm wheel: no CUDA requirement)" in text
    carried = dict(compare(table, facts, {"2.16": ("cu132", "x")}).fragments)["2.16"]
    assert 'pypi_aarch64 = "cu132"' in carried and "pypi_aarch64 (carried over from 2.15)" in carried
    # the fragment, appended to the table, loads: pypi_aarch64 is one of its aarch64 builds
    merged = tmp_path / "compat.toml"
    merged.write_text((REPO / "factory" / "wheelfactory" / "data" / "compat.toml").read_text() + "\n" + text)
    release = load_table(merged).release("2.16")
    assert release is not None and release.pypi_build("aarch64") == "cpu" and release.pypi_build("x86_64") == "cu132"
