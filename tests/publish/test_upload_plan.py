"""Planning an upload (publish/upload.py), without a server: which file goes to which index,
what is skipped as already there, what is refused before anything is sent; reading a listing's
hashes from PEP 691 JSON and PEP 503 HTML, and masking passwords out of failures."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import http.server
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.publish.dist_fakes import indexed
from tests.testkit import make_wheel
from wheelfactory.errors import PublishError
from wheelfactory.plan.publish_config import UploadTarget
from wheelfactory.publish.held import listed_hashes, read_held
from wheelfactory.publish.collect import IndexedWheel
from wheelfactory.publish.upload import _masked, held_queries, plan_upload, render_plan

A, B = "torch213-cxx11-cpu-x86_64-linux", "torch26-cxx98-cpu-x86_64-linux"
PER_VARIANT = UploadTarget("http://127.0.0.1:9/me/{variant}/", None, None, True)
ONE_INDEX = UploadTarget("http://127.0.0.1:9/", None, None, True)
NO_LABELS = UploadTarget("http://127.0.0.1:9/", None, None, False)


def wheel(vid: str, version: str = "0.2.0", digest: str = "a" * 64) -> IndexedWheel:
    return indexed(vid, version=version, sha256=digest)


def test_a_per_variant_target_gets_each_variants_wheels_in_its_own_index() -> None:
    plan = plan_upload(PER_VARIANT, [wheel(A), wheel(B)], [], {})
    assert [(i.variant, i.upload_url, i.simple_url, [f.filename for f in i.upload]) for i in plan.indexes] == [
        (A, f"http://127.0.0.1:9/me/{A}/", f"http://127.0.0.1:9/me/{A}/+simple/", [wheel(A).filename]),
        (B, f"http://127.0.0.1:9/me/{B}/", f"http://127.0.0.1:9/me/{B}/+simple/", [wheel(B).filename])]
    assert [q.simple_url for q in held_queries(PER_VARIANT, [wheel(A), wheel(B)], [])] == [
        f"http://127.0.0.1:9/me/{A}/+simple/", f"http://127.0.0.1:9/me/{B}/+simple/"]


def test_a_single_index_gets_every_variant_and_never_the_unlabelled_default(tmp_path: Path) -> None:
    default = make_wheel(tmp_path, "tiny", "0.2.0")
    plan = plan_upload(ONE_INDEX, [wheel(A), wheel(B)], [default], {})
    assert len(plan.indexes) == 1
    assert [f.filename for f in plan.indexes[0].upload] == sorted([wheel(A).filename, wheel(B).filename])


def test_a_target_refusing_labels_gets_only_the_unlabelled_default(tmp_path: Path) -> None:
    default = make_wheel(tmp_path, "tiny", "0.2.0")
    plan = plan_upload(NO_LABELS, [wheel(A), wheel(B)], [default], {})
    assert [(f.filename, f.sha256, f.variant) for i in plan.indexes for f in i.upload] == [
        (default.name, hashlib.sha256(default.read_bytes()).hexdigest(), None)]
    with pytest.raises(PublishError, match=r"local_labels = false.*set \[publish\] pypi_default = true"):
        plan_upload(NO_LABELS, [wheel(A)], [], {})
    with pytest.raises(PublishError, match="one index"):
        plan_upload(UploadTarget("http://127.0.0.1:9/me/{variant}/", None, None, False), [wheel(A)], [default], {})


def test_held_with_the_same_bytes_is_skipped_and_with_other_bytes_refuses_everything() -> None:
    held = {f"http://127.0.0.1:9/me/{A}/+simple/": {wheel(A, "0.1.0").filename: "a" * 64}}
    plan = plan_upload(PER_VARIANT, [wheel(A, "0.1.0"), wheel(B, "0.1.0")], [], held)
    assert (plan.present, plan.to_upload) == (1, 1)
    assert render_plan(plan) == [
        f"skip {wheel(A, '0.1.0').filename}: http://127.0.0.1:9/me/{A}/ already holds these bytes",
        f"upload {wheel(B, '0.1.0').filename} -> http://127.0.0.1:9/me/{B}/"]
    held = {f"http://127.0.0.1:9/me/{A}/+simple/": {wheel(A).filename: "b" * 64}}
    with pytest.raises(PublishError) as refused:
        plan_upload(PER_VARIANT, [wheel(A), wheel(B)], [], held)
    message = str(refused.value)
    assert wheel(A).filename in message and "a" * 64 in message and "b" * 64 in message
    assert f"http://127.0.0.1:9/me/{A}/" in message and "nothing was uploaded" in message
    assert refused.value.exit_code == 7 and "\n" not in message


def test_two_files_of_one_name_with_other_bytes_for_one_index_are_refused() -> None:
    with pytest.raises(PublishError, match="two files of that name"):
        plan_upload(ONE_INDEX, [wheel(A), wheel(A, digest="c" * 64)], [], {})


def test_a_twine_alias_without_index_url_is_not_read_and_the_dry_run_says_so() -> None:
    alias = UploadTarget(None, "private", None, True)
    assert held_queries(alias, [wheel(A)], []) == []
    plan = plan_upload(alias, [wheel(A)], [], {})
    lines = render_plan(plan)
    assert lines[0] == f"upload {wheel(A).filename} -> repository private"
    assert "not read" in lines[1] and "index_url" in lines[1]


def test_variant_in_only_one_of_url_and_index_url_is_refused() -> None:
    mixed = UploadTarget("http://127.0.0.1:9/me/{variant}/", None, "http://127.0.0.1:9/simple/", True)
    with pytest.raises(PublishError, match="both name"):
        plan_upload(mixed, [wheel(A)], [], {})
    assert render_plan(plan_upload(ONE_INDEX, [], [], {})) == ["nothing to upload to http://127.0.0.1:9/"]


def test_listed_hashes_reads_pep_691_json_and_pep_503_html() -> None:
    body = (b'{"meta": {"api-version": "1.0"}, "name": "tiny", "files": [{"filename": "tiny-1.whl", '
            b'"url": "../../+f/1/tiny-1.whl", "hashes": {"sha256": "' + b"A" * 64 + b'"}}, '
            b'{"filename": "tiny-2.whl", "url": "tiny-2.whl", "hashes": {"md5": "00"}}]}')
    assert listed_hashes(body, "application/vnd.pypi.simple.v1+json", "http://h/u/i/+simple/tiny/") == [
        ("tiny-1.whl", "a" * 64, "http://h/u/i/+f/1/tiny-1.whl"), ("tiny-2.whl", None, "http://h/u/i/+simple/tiny/tiny-2.whl")]
    page = (b'<html><body><a href="/packages/tiny-1%2Bcpu.whl#sha256=' + b"b" * 64 + b'">x</a>'
            b'<a href="../tiny-2.whl#md5=0123">y</a></body></html>')
    assert listed_hashes(page, "text/html", "http://h/simple/tiny/") == [
        ("tiny-1+cpu.whl", "b" * 64, "http://h/packages/tiny-1%2Bcpu.whl"), ("tiny-2.whl", None, "http://h/simple/tiny-2.whl")]
    with pytest.raises(ValueError):
        listed_hashes(b'{"files": 3}', "application/vnd.pypi.simple.v1+json", "http://h/")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture()
def static_index(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A static PEP 503 tree served by the standard library's HTTP server on 127.0.0.1."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(tmp_path)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/", tmp_path
    finally:
        server.shutdown()
        server.server_close()


def test_a_file_listed_without_sha256_is_downloaded_and_hashed_where_it_is_planned(
        static_index: tuple[str, Path]) -> None:
    simple, root = static_index
    held = make_wheel(root / "files", "tiny", "0.1.0+cputorch2.13")
    (root / "simple" / "tiny").mkdir(parents=True)
    (root / "simple" / "tiny" / "index.html").write_text(
        f'<a href="../../files/{held.name}#md5=0123">{held.name}</a>\n')
    assert read_held(simple, "tiny") == {held.name: hashlib.sha256(held.read_bytes()).hexdigest()}
    assert read_held(simple, "tiny", only={"other.whl"}) == {}
    assert read_held(simple, "absent") == {}  # 404: nothing held
    (root / "simple" / "tiny" / "index.html").write_text('<a href="../../files/gone.whl">gone.whl</a>\n')
    with pytest.raises(PublishError, match="gone.whl: listed without a sha256 and cannot be read"):
        read_held(simple, "tiny")


def test_an_unreachable_index_is_one_line_with_the_password_masked() -> None:
    from tests.index_servers import free_port

    with pytest.raises(PublishError) as refused:
        read_held(f"http://127.0.0.1:{free_port()}/simple/", "tiny")
    assert "cannot read what http://127.0.0.1:" in str(refused.value) and "\n" not in str(refused.value)
    with pytest.raises(PublishError) as refused:
        read_held("http://someone:hunter2@127.0.0.1:1/simple/", "tiny")
    assert "hunter2" not in str(refused.value) and "someone:***@127.0.0.1:1" in str(refused.value)


def test_masking_hides_the_password_and_url_userinfo() -> None:
    text = "403 from https://me:hunter2@127.0.0.1/up/ (password hunter2)"
    assert _masked(text, "hunter2") == "403 from https://me:***@127.0.0.1/up/ (password ***)"


def test_without_twine_an_upload_is_one_line_saying_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from wheelfactory.errors import EnvironmentProblem
    from wheelfactory.publish.upload import upload_index

    monkeypatch.setitem(sys.modules, "twine", None)  # as where the publish extra is not installed
    plan = plan_upload(ONE_INDEX, [wheel(A)], [], {})
    with pytest.raises(EnvironmentProblem, match=r"needs twine.*wheelfactory\[publish\]"):
        upload_index(plan.indexes[0], say=lambda line: None)


def test_a_wheel_without_a_file_in_the_dist_is_not_planned() -> None:
    with pytest.raises(PublishError, match="no file of it in this dist"):
        plan_upload(ONE_INDEX, [dataclasses.replace(wheel(A), source=None)], [], {})


def test_an_alias_twine_cannot_resolve_is_refused_before_anything_is_read(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from wheelfactory.publish.upload import read_plan

    monkeypatch.setenv("TWINE_CONFIG_FILE", str(tmp_path / "pypirc"))  # no such file: only twine's own aliases
    wheel = indexed("torch213-cxx11-cpu-x86_64-linux")
    with pytest.raises(PublishError, match=r"alias 'site' is not in .*pypirc: add a \[site\] section.*\./site"):
        read_plan(UploadTarget(None, "site", None, True), [wheel], [])
    (tmp_path / "pypirc").write_text("[distutils]\nindex-servers = site\n[site]\nrepository = http://127.0.0.1:9/\n")
    from wheelfactory.publish.upload import check_alias
    check_alias("site")  # resolvable now
    check_alias("pypi")  # twine's own
