"""Publishing to real upload-API servers on 127.0.0.1 with real twine (publish/upload.py):
devpi-server with one index per variant, pypiserver with one index. Two releases accumulate, a
rerun uploads nothing, a file name reused with other bytes is refused before anything is sent,
PyPI's default variant goes without its label where labels are refused, and real pip and uv
install what was published, hash-pinned."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.publish.dist_fakes import make_dist
from tests.index_servers import DevpiServer, PypiServer, tree
from tests.testkit import pip_install, run_cli, uv_pip
from wheelfactory.errors import PublishError
from wheelfactory.plan.compat import load_table
from wheelfactory.plan.publish_config import UploadTarget
from wheelfactory.publish.held import read_held
from wheelfactory.publish.collect import IndexedWheel, collect
from wheelfactory.publish.pypi_default import default_wheels
from wheelfactory.publish.upload import UploadResult, execute_plan, read_plan, render_plan

VARIANTS = ("torch213-cxx11-cpu-x86_64-linux", "torch26-cxx98-cpu-x86_64-linux")


@pytest.fixture(autouse=True)
def no_keyring(monkeypatch: pytest.MonkeyPatch) -> None:
    """twine asks keyring only where the environment gives no password: never a desktop keyring here."""
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")


def release(tmp_path: Path, version: str, project: str, variants: tuple[str, ...] = VARIANTS,
            rebuilt: str | None = None) -> tuple[Path, list[IndexedWheel]]:
    dist = tmp_path / f"dist-{project}-{version}-{len(variants)}{'-rebuilt' if rebuilt else ''}"
    wheels, skipped = collect(dist, make_dist(dist, version=version, project=project, variants=variants,
                                              rebuilt=rebuilt))
    assert not skipped and len(wheels) == len(variants)
    return dist, wheels


def publish(target: UploadTarget, wheels: list[IndexedWheel], defaults: list[Path] | None = None, *,
            dry_run: bool = False, said: list[str] | None = None) -> UploadResult:
    """As `wheelfactory publish` sends to an upload target: the plan read first (a conflict
    refuses the whole publish before anything is sent), then executed; dry_run: its lines said."""
    sink: Callable[[str], None] = (said.append if said is not None else lambda line: None)
    plan = read_plan(target, wheels, defaults or [])
    if dry_run:
        for line in render_plan(plan):
            sink(line)
        return UploadResult(0, plan.present, plan, dry_run=True)
    return execute_plan(plan, say=sink)


def of(wheels: list[IndexedWheel], variant: str) -> IndexedWheel:
    return next(w for w in wheels if w.variant_id == variant)


def install(tool: str, index: str, requirement: str, target: Path) -> subprocess.CompletedProcess[str]:
    """``requirement`` from ``index`` alone into ``target`` by real pip or uv (no user or host
    configuration: the host's own index must not answer instead)."""
    requirements = target.parent / (target.name + ".txt")
    requirements.write_text(requirement + "\n")
    asked = ("--no-deps", "--target", str(target), "--index-url", index, "-r", str(requirements))
    if tool == "pip":
        return pip_install(sys.executable, "--disable-pip-version-check", "--no-cache-dir", *asked,
                           host_sources=False, check=False, timeout=300)
    return uv_pip("install", "--python", sys.executable, *asked, cache=None, host_sources=False, check=False,
                  timeout=300)


def installed(target: Path) -> list[str]:
    return sorted(p.name for p in target.glob("*.dist-info"))


def pinned(wheel: IndexedWheel) -> str:
    return f"{wheel.project}=={wheel.version} --hash=sha256:{wheel.sha256}"


def check_installs(index: str, wheel: IndexedWheel, tool: str, tmp_path: Path) -> None:
    target = tmp_path / f"site-{tool}-{wheel.variant_id}-{wheel.version}"
    result = install(tool, index, pinned(wheel), target)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert installed(target) == [f"{wheel.project}-{wheel.version}.dist-info"]
    assert (target / wheel.project / "_build.json").read_text().count(wheel.variant_id) == 1


def test_two_releases_accumulate_in_devpi_per_variant_indexes(devpi: DevpiServer, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    devpi.user_with_indexes("releases", "releases-pw", list(VARIANTS))
    monkeypatch.setenv("TWINE_USERNAME", "releases")
    monkeypatch.setenv("TWINE_PASSWORD", "releases-pw")
    target = UploadTarget(f"{devpi.url}/releases/{{variant}}/", None, None, True)
    _, first = release(tmp_path, "0.1.0", "tiny")
    _, second = release(tmp_path, "0.2.0", "tiny")
    said: list[str] = []
    assert (publish(target, first, said=said).uploaded, publish(target, second).uploaded) == (2, 2)
    assert said == [f"uploading {w.filename} -> {devpi.url}/releases/{w.variant_id}/" for w in first]
    for variant in VARIANTS:
        index = target.simple_url(variant)
        assert index == f"{devpi.url}/releases/{variant}/+simple/"
        # each variant's index lists both releases, and only that variant's files
        assert read_held(index, "tiny") == {w.filename: w.sha256 for w in (of(first, variant), of(second, variant))}
        check_installs(index, of(first, variant), "pip", tmp_path)
        check_installs(index, of(second, variant), "uv", tmp_path)
    again = publish(target, second)
    assert (again.uploaded, again.skipped) == (0, 2)
    assert str(again) == "uploaded 0 file(s), 2 already there"


def test_two_releases_accumulate_in_one_pypiserver_index(pypiserver: PypiServer, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TWINE_USERNAME", pypiserver.username)
    monkeypatch.setenv("TWINE_PASSWORD", pypiserver.password)
    target = UploadTarget(f"{pypiserver.url}/", None, None, True)
    _, first = release(tmp_path, "0.1.0", "tinyone")
    _, second = release(tmp_path, "0.2.0", "tinyone")
    capfd.readouterr()
    assert (publish(target, first).uploaded, publish(target, second).uploaded) == (2, 2)
    assert capfd.readouterr() == ("", "")  # twine's own prints and log lines stay out of the caller's output
    index = f"{pypiserver.url}/simple/"
    assert read_held(index, "tinyone") == {w.filename: w.sha256 for w in first + second}
    for variant in VARIANTS:
        check_installs(index, of(first, variant), "pip", tmp_path)
        check_installs(index, of(second, variant), "uv", tmp_path)
    said: list[str] = []
    again = publish(target, first + second, said=said)
    assert (again.uploaded, again.skipped) == (0, 4)
    assert all(line.startswith("skip ") and "already holds these bytes" in line for line in said)


@pytest.mark.parametrize("server", ["devpi", "pypiserver"])
def test_a_file_name_reused_with_other_bytes_refuses_the_whole_publish(server: str, request: pytest.FixtureRequest,
                                                                       tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    if server == "devpi":
        devpi: DevpiServer = request.getfixturevalue("devpi")
        devpi.user_with_indexes("conflicts", "conflicts-pw", list(VARIANTS))
        monkeypatch.setenv("TWINE_USERNAME", "conflicts")
        monkeypatch.setenv("TWINE_PASSWORD", "conflicts-pw")
        target = UploadTarget(f"{devpi.url}/conflicts/{{variant}}/", None, None, True)
    else:
        pypi: PypiServer = request.getfixturevalue("pypiserver")
        monkeypatch.setenv("TWINE_USERNAME", pypi.username)
        monkeypatch.setenv("TWINE_PASSWORD", pypi.password)
        target = UploadTarget(f"{pypi.url}/", None, None, True)
    project = "tinyconflict"
    _, published = release(tmp_path, "0.2.0", project, variants=VARIANTS[:1])
    assert publish(target, published).uploaded == 1
    indexes = sorted({target.simple_url(v) or "" for v in VARIANTS})
    before = {index: read_held(index, project) for index in indexes}
    # 0.2.0 again: the first variant's wheel rebuilt to other bytes, the second variant's new
    _, rebuilt = release(tmp_path, "0.2.0", project, rebuilt=VARIANTS[0])
    changed, fresh = of(rebuilt, VARIANTS[0]), of(rebuilt, VARIANTS[1])
    assert changed.filename == published[0].filename and changed.sha256 != published[0].sha256
    with pytest.raises(PublishError) as refused:
        publish(target, rebuilt)
    message = str(refused.value)
    assert refused.value.exit_code == 7 and "\n" not in message
    assert changed.filename in message and changed.sha256 in message and published[0].sha256 in message
    assert str(target.upload_url(VARIANTS[0])) in message
    # nothing was uploaded: not even the other variant's new file
    assert {index: read_held(index, project) for index in indexes} == before
    assert all(fresh.filename not in held for held in before.values())


def test_an_index_that_is_not_there_stops_the_publish_before_any_target_is_written(
        devpi: DevpiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A devpi index never created (or a mistyped user) answers 404 for a project page, as an index
    holding nothing of the project does; its root tells them apart, so the publish stops while
    planning, before the directory target beside it is written, instead of failing at the upload."""
    devpi.user_with_indexes("halfmade", "halfmade-pw", [VARIANTS[0]])  # the other variant's index is missing
    monkeypatch.setenv("TWINE_USERNAME", "halfmade")
    monkeypatch.setenv("TWINE_PASSWORD", "halfmade-pw")
    dist, _ = release(tmp_path, "0.1.0", "tinymissing")
    site = tmp_path / "site"
    capsys.readouterr()
    assert run_cli("publish", "-o", str(dist), "--to", str(site), "--to", f"{devpi.url}/halfmade/{{variant}}/") == 7
    err = capsys.readouterr().err
    assert f"{devpi.url}/halfmade/{VARIANTS[1]}/+simple/: no such index (HTTP 404)" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not site.exists() or tree(site) == {}
    assert read_held(f"{devpi.url}/halfmade/{VARIANTS[0]}/+simple/", "tinymissing") == {}


def test_pypi_default_goes_unlabelled_where_labels_are_refused_and_pip_gets_it(
        pypiserver: PypiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TWINE_USERNAME", pypiserver.username)
    monkeypatch.setenv("TWINE_PASSWORD", pypiserver.password)
    target = UploadTarget(f"{pypiserver.url}/", None, None, False)  # as [publish] local_labels = false
    table = load_table()
    names = []
    for version in ("0.1.0", "0.2.0"):
        dist, wheels = release(tmp_path, version, "tinydefault")
        defaults = default_wheels(wheels, table, True, dist)
        assert [p.name for p in defaults] == [f"tinydefault-{version}-cp39-abi3-manylinux_2_28_x86_64.whl"]
        assert publish(target, wheels, defaults).uploaded == 1
        names.append(defaults[0].name)
    # only the unlabelled default wheels are there, none of the labelled ones
    assert sorted(read_held(f"{pypiserver.url}/simple/", "tinydefault")) == names
    site = tmp_path / "site-default"
    result = install("pip", f"{pypiserver.url}/simple/", "tinydefault", site)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert installed(site) == ["tinydefault-0.2.0.dist-info"]
    # torch 2.13 is the newest; PyPI's build of it is cu130, which this CPU-only project lacks
    assert "torch213-cxx11-cpu-x86_64-linux" in (site / "tinydefault" / "_build.json").read_text()
    # a rerun relabels the same wheels to the same bytes: nothing new to upload
    rerun = publish(target, wheels, default_wheels(wheels, table, True, dist))
    assert (rerun.uploaded, rerun.skipped) == (0, 1)


def test_the_dry_run_says_what_would_go_where_and_sends_nothing(pypiserver: PypiServer, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TWINE_USERNAME", pypiserver.username)
    monkeypatch.setenv("TWINE_PASSWORD", pypiserver.password)
    target = UploadTarget(f"{pypiserver.url}/", None, None, True)
    _, first = release(tmp_path, "0.1.0", "tinydry")
    publish(target, first[:1])
    said: list[str] = []
    result = publish(target, first, dry_run=True, said=said)
    assert (result.uploaded, result.skipped, result.plan.to_upload) == (0, 1, 1)
    assert str(result) == "would upload 1 file(s), 1 already there"
    assert said == [f"upload {first[1].filename} -> {pypiserver.url}/",
                    f"skip {first[0].filename}: {pypiserver.url}/ already holds these bytes"]
    assert read_held(f"{pypiserver.url}/simple/", "tinydry") == {first[0].filename: first[0].sha256}


@pytest.mark.parametrize("server", ["devpi", "pypiserver"])
def test_a_wrong_password_is_one_line_without_the_password(server: str, request: pytest.FixtureRequest,
                                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capfd: pytest.CaptureFixture[str]) -> None:
    secret = "Not-The-Password-9f3a"
    if server == "devpi":
        devpi: DevpiServer = request.getfixturevalue("devpi")
        devpi.user_with_indexes("locked", "locked-pw", list(VARIANTS))
        monkeypatch.setenv("TWINE_USERNAME", "locked")
        target = UploadTarget(f"{devpi.url}/locked/{{variant}}/", None, None, True)
    else:
        pypi: PypiServer = request.getfixturevalue("pypiserver")
        monkeypatch.setenv("TWINE_USERNAME", pypi.username)
        target = UploadTarget(f"{pypi.url}/", None, None, True)
    monkeypatch.setenv("TWINE_PASSWORD", secret)
    _, wheels = release(tmp_path, "0.1.0", "tinylocked")
    capfd.readouterr()
    with pytest.raises(PublishError) as refused:
        publish(target, wheels)
    message = str(refused.value)
    assert secret not in message and "\n" not in message
    assert capfd.readouterr() == ("", "")  # nor in what twine printed or logged
    assert "refused: HTTP 40" in message and "TWINE_PASSWORD" in message
    assert all(read_held(target.simple_url(v) or "", "tinylocked") == {} for v in VARIANTS)


def test_missing_credentials_are_one_line_and_never_a_prompt(pypiserver: PypiServer, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TWINE_USERNAME", raising=False)
    monkeypatch.delenv("TWINE_PASSWORD", raising=False)
    _, wheels = release(tmp_path, "0.1.0", "tinynocreds")
    with pytest.raises(PublishError) as refused:
        publish(UploadTarget(f"{pypiserver.url}/", None, None, True), wheels)
    assert "Credential not found" in str(refused.value) and "\n" not in str(refused.value)


def test_a_twine_alias_is_resolved_by_twine_and_read_only_with_index_url(pypiserver: PypiServer, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".pypirc").write_text(f"[distutils]\nindex-servers = inhouse\n\n[inhouse]\nrepository = {pypiserver.url}/\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TWINE_REPOSITORY_URL", "http://127.0.0.1:9/not-this/")  # the alias wins over it
    monkeypatch.setenv("TWINE_USERNAME", pypiserver.username)
    monkeypatch.setenv("TWINE_PASSWORD", pypiserver.password)
    _, wheels = release(tmp_path, "0.1.0", "tinyalias")
    blind = UploadTarget(None, "inhouse", None, True)
    said: list[str] = []
    assert publish(blind, wheels[:1], said=said).uploaded == 1
    assert said == [f"uploading {wheels[0].filename} -> repository inhouse"]
    assert read_held(f"{pypiserver.url}/simple/", "tinyalias") == {wheels[0].filename: wheels[0].sha256}
    # what it holds is not read: the server refuses the file it has (pypiserver: 400 or 409)
    with pytest.raises(PublishError, match=r"repository inhouse refused: HTTP 4\d\d .*may hold a file"):
        publish(blind, wheels)
    # with index_url it is read: the file there is skipped, the other uploaded
    seeing = UploadTarget(None, "inhouse", f"{pypiserver.url}/simple/", True)
    result = publish(seeing, wheels)
    assert (result.uploaded, result.skipped) == (1, 1)
